"""Suite definitions: ``configs/suites/<name>.yaml`` lists the check modules a suite runs.

::

    name: delivery
    description: Full acceptance of delivered nodes.
    checks:
      - inventory/test_inventory.py
      - memory/test_stream.py
      - compute/test_gemm.py::test_gemm

Paths are relative to the suites directory (``suites/`` in a checkout).
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from nvtest.config.loader import load_model
from nvtest.config.resources import configs_dir, suites_dir
from nvtest.errors import ConfigError

__all__ = [
    "INTERNAL",
    "SuiteSpec",
    "allowed_import",
    "check_mark_name",
    "check_names",
    "list_suites",
    "load_suite",
    "nvtest_imports",
    "suite_targets",
]

#: Modules of nvtest.checks that a check module does not import: the fail-closed machinery the
#: ``read`` and ``measure`` fixtures apply (``hardware``), and the re-judging of recorded output
#: for ``nvtest evaluate`` / ``nvtest parse`` (``offline``, ``standalone``).
INTERNAL = frozenset({"nvtest.checks.hardware", "nvtest.checks.offline", "nvtest.checks.standalone"})


def allowed_import(module: str) -> bool:
    """Whether a check module (bundled or a site's) may import the nvtest module ``module``:
    ``nvtest.checks.api``, ``nvtest.checks.<area>`` (not :data:`INTERNAL`), ``nvtest.parsers``
    and ``nvtest.errors``; everything else may move under a site that copies a check."""
    if module in INTERNAL or any(module.startswith(m + ".") for m in INTERNAL):
        return False
    if module == "nvtest.checks.api" or module.startswith("nvtest.checks."):
        return True
    return module in ("nvtest.parsers", "nvtest.errors") or module.startswith("nvtest.parsers.")


def nvtest_imports(source: str) -> list[tuple[int, str]]:
    """(line, module) of every nvtest module ``source`` imports (``from nvtest.parsers import
    dcgmi`` names ``nvtest.parsers`` only: the package itself is what is imported).

    Raises:
        SyntaxError: ``source`` does not parse."""
    return _imports_of(ast.parse(source))


def _imports_of(tree: ast.Module) -> list[tuple[int, str]]:
    out: list[tuple[int, str]] = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Import):
            out += [(n.lineno, a.name) for a in n.names if a.name == "nvtest" or a.name.startswith("nvtest.")]
        elif isinstance(n, ast.ImportFrom) and n.level == 0 and n.module:
            if n.module == "nvtest":
                out += [(n.lineno, f"nvtest.{a.name}") for a in n.names]
            elif n.module.startswith("nvtest."):
                out.append((n.lineno, n.module))
    return out


class SuiteSpec(BaseModel):
    """One suite file."""

    model_config = ConfigDict(extra="forbid")

    name: str
    description: str
    checks: list[str]


def list_suites() -> dict[str, SuiteSpec]:
    """All bundled suites by name.

    Raises:
        ConfigError: a suite file is invalid.
    """
    return {p.stem: load_suite(p.stem) for p in sorted((configs_dir() / "suites").glob("*.yaml"))}


def load_suite(name_or_path: str) -> SuiteSpec:
    """A suite by name (bundled) or by path to a YAML file.

    Raises:
        ConfigError: unknown suite, invalid file, no check listed, or a listed check module
            (relative to the suites directory, or absolute) or ``module::function`` that does
            not exist.
    """
    path = Path(name_or_path)
    if not (path.suffix in (".yaml", ".yml") and path.is_file()):
        path = configs_dir() / "suites" / f"{name_or_path}.yaml"
        if not path.is_file():
            known = ", ".join(p.stem for p in sorted((configs_dir() / "suites").glob("*.yaml")))
            raise ConfigError(f"unknown suite {name_or_path!r}; known: {known}", field="suite")
    spec = load_model(SuiteSpec, path)
    if not spec.checks:
        # pytest given no target collects the working directory: never a run of nothing listed
        raise ConfigError("no check module listed: a suite runs at least one", path=str(path), field="checks")
    for i, entry in enumerate(spec.checks):
        module, _, func = entry.partition("::")
        file = suites_dir() / module  # a site's own module may be given by its absolute path
        if not (file.suffix == ".py" and file.is_file()):
            raise ConfigError(
                f"check module {module!r} not found in {suites_dir()}", path=str(path), field=f"checks.{i}"
            )
        tree = _module_tree(file)
        if tree is None:
            continue  # its import error is told, with the file and Python's words, when the run imports it
        bad = [(line, m) for line, m in _imports_of(tree) if not allowed_import(m)]
        if bad:
            line, mod = bad[0]
            raise ConfigError(
                f"{module}:{line} imports {mod}: a check module imports only nvtest.checks.api, "
                "nvtest.checks.<area>, nvtest.parsers and nvtest.errors (docs/writing-checks.md)",
                path=str(path),
                field=f"checks.{i}",
            )
        names = {fn.name for fn in tree.body if isinstance(fn, _DEFINITIONS)}
        if func and func.split("::", 1)[0] not in names:
            raise ConfigError(f"{module} defines no function {func!r}", path=str(path), field=f"checks.{i}")
    return spec


#: The top-level definitions a ``module.py::name`` entry may name.
_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _module_tree(file: Path) -> ast.Module | None:
    """A Python source file read and parsed (not imported) once; None for one that does not
    parse or decode."""
    try:
        return ast.parse(file.read_text(encoding="utf-8"))
    except (SyntaxError, ValueError, UnicodeDecodeError):
        return None


def check_mark_name(decorator: Any) -> str | None:
    """The NAME of a ``@pytest.mark.check(NAME, ...)`` decorator (an :mod:`ast` node of a
    function's ``decorator_list``), or None for any other decorator."""
    dec = decorator
    if (
        isinstance(dec, ast.Call)
        and isinstance(dec.func, ast.Attribute)
        and dec.func.attr == "check"
        and dec.args
        and isinstance(dec.args[0], ast.Constant)
    ):
        return str(dec.args[0].value)
    return None


def check_names(module: str) -> list[str]:
    """The check names a suite module defines (its ``@pytest.mark.check("name")`` or,
    without one, ``test_<name>``), read from its source without importing it."""
    tree = ast.parse((suites_dir() / module.split("::", 1)[0]).read_text(encoding="utf-8"))
    names: list[str] = []
    for fn in tree.body:
        if not isinstance(fn, ast.FunctionDef) or not fn.name.startswith("test_"):
            continue
        name = fn.name.removeprefix("test_")
        for dec in fn.decorator_list:
            name = check_mark_name(dec) or name
        if "::" not in module or module.endswith(f"::{fn.name}"):
            names.append(name)
    return names


def suite_targets(spec: SuiteSpec) -> list[str]:
    """The pytest arguments (absolute node ids) for a suite's checks."""
    base = suites_dir()
    out = []
    for entry in spec.checks:
        module, _, func = entry.partition("::")
        target = str(base / module)
        out.append(f"{target}::{func}" if func else target)
    return out
