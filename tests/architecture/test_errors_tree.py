"""One exception tree: every exception class of the package is in ``nvtest.errors``, drawn
in its docstring, and maps to one exit code."""

from __future__ import annotations

import ast
import inspect

import pytest

from nvtest import errors
from tests.architecture.layers import all_modules, module_name


def _stray_classes(mod: str, source: str) -> list[str]:
    """Classes in ``source`` (module ``mod``) whose bases name an exception."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.ClassDef):
            continue
        names = [ast.unparse(b) for b in node.bases]
        if any(n.endswith(("Error", "Exception", "Exit", "Interrupt")) or n in ("BaseException",) for n in names):
            found.append(f"{mod}.{node.name}({', '.join(names)})")
    return found


def _exception_classes_outside_errors() -> list[str]:
    """Classes defined outside nvtest.errors whose bases name an exception (probes apart)."""
    found = []
    for path in all_modules():
        mod = module_name(path)
        if mod.startswith("nvtest.probes") or mod == "nvtest.errors":
            continue
        found += _stray_classes(mod, path.read_text(encoding="utf-8"))
    return found


def test_no_exception_class_outside_the_tree() -> None:
    assert _exception_classes_outside_errors() == []


def _tree_classes() -> list[type[BaseException]]:
    return [
        obj
        for _, obj in inspect.getmembers(errors, inspect.isclass)
        if issubclass(obj, BaseException) and obj.__module__ == "nvtest.errors"
    ]


@pytest.mark.parametrize("cls", _tree_classes(), ids=lambda c: c.__name__)
def test_each_class_is_drawn_and_has_one_exit_code(cls: type[BaseException]) -> None:
    doc = errors.__doc__ or ""
    assert f"── {cls.__name__} " in doc or doc.rstrip().endswith(cls.__name__), f"{cls.__name__} not drawn"
    exc = cls.__new__(cls)
    code = errors.exit_code_of(exc)
    assert code in (errors.EXIT_OK, errors.EXIT_CHECK_FAILED, errors.EXIT_CONFIG, errors.EXIT_HARNESS)
    assert cls.__doc__, f"{cls.__name__} has no docstring"


def test_the_branches_map_to_their_codes() -> None:
    assert errors.exit_code_of(errors.ConfigError("x")) == 2
    assert errors.exit_code_of(errors.HostKeyRejected("x")) == 3
    assert errors.exit_code_of(errors.ProbeSkip("x")) == 0
    assert errors.exit_code_of(errors.CheckFailed("x")) == 1
    assert errors.exit_code_of(KeyboardInterrupt()) == 130
    assert errors.exit_code_of(ValueError("a bug")) == 3
    assert not issubclass(errors.ProbeSkip, errors.NvtestError), "a skip is not a harness error"


def test_the_checker_sees_a_stray_class() -> None:
    src = "class StrayError(ValueError):\n    pass\n\nclass Fine:\n    pass\n"
    assert _stray_classes("nvtest.config.x", src) == ["nvtest.config.x.StrayError(ValueError)"]
