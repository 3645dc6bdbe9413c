"""Every probe of every check says what it needs, so a hung tool blocks the right checks.

Walks all of ``suites/`` and ``nvtest/checks/`` twice: by source (every ``Probe(...)``
call, a function's own included) and by import (every Probe object the modules hold).
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import pkgutil
import re
from pathlib import Path
from types import ModuleType

import pytest

from nvtest.config.resources import suites_dir
from nvtest.session.probe import DEVICES, Probe

REPO = Path(__file__).resolve().parents[2]
SOURCES = sorted(suites_dir().rglob("*.py")) + sorted((REPO / "nvtest" / "checks").rglob("*.py"))
_TOOL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$")
_SHELLS = {"sh", "bash", "dash", "env", "timeout"}


def _probe_calls(path: Path) -> list[ast.Call]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "Probe"
    ]


def _declares_needs(call: ast.Call) -> bool:
    """``needs=`` given, or a ``command=`` whose first word is a tool (not a shell)."""
    kw = {k.arg: k.value for k in call.keywords}
    if "needs" in kw:
        return not (isinstance(kw["needs"], ast.Tuple) and not kw["needs"].elts)
    cmd = kw.get("command")
    if isinstance(cmd, ast.Tuple) and cmd.elts and isinstance(cmd.elts[0], ast.Constant):
        return str(cmd.elts[0].value) not in _SHELLS
    return False


def test_every_launch_of_the_suites_says_what_it_needs() -> None:
    """The checks that launch jobs themselves (``run_commands``) declare needs too."""
    missing = []
    for path in SOURCES:
        for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "run_commands":
                if not any(k.arg == "needs" for k in n.keywords):
                    missing.append(f"{path.name}:{n.lineno}")
    assert missing == [], f"run_commands(...) without needs=: {missing}"


def test_the_walk_finds_the_probes() -> None:
    calls = [c for p in SOURCES for c in _probe_calls(p)]
    assert len(calls) >= 20, "the source walk lost the suites' probes"


def test_every_probe_call_declares_what_it_needs() -> None:
    missing = [
        f"{path.relative_to(REPO) if path.is_relative_to(REPO) else path}:{call.lineno}"
        for path in SOURCES
        for call in _probe_calls(path)
        if not _declares_needs(call)
    ]
    assert missing == [], f"Probe(...) without needs= (a script or shell command): {missing}"


def _load(path: Path) -> ModuleType:
    name = "nvtest_walk_" + "_".join(path.relative_to(path.parents[1]).with_suffix("").parts)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _probes_of(module: ModuleType) -> list[Probe]:
    found: list[Probe] = []
    for value in vars(module).values():
        items = value.values() if isinstance(value, dict) else [value]
        found += [v for v in items if isinstance(v, Probe)]
    return found


def _module_probes() -> list[Probe]:
    """The probes the suites declare, and those of the check modules they call (nvtest/checks/)."""
    import nvtest.checks

    probes: list[Probe] = []
    for info in pkgutil.walk_packages(nvtest.checks.__path__, "nvtest.checks."):
        probes += [p for p in _probes_of(importlib.import_module(info.name)) if p not in probes]
    for path in sorted(suites_dir().rglob("test_*.py")):
        probes += [p for p in _probes_of(_load(path)) if p not in probes]
    return probes


@pytest.mark.parametrize("probe", _module_probes(), ids=lambda p: p.name)
def test_each_probe_needs_known_tools_or_devices(probe: Probe) -> None:
    needs = probe.all_needs()
    assert needs, f"{probe.name}: needs nothing, so a hang of it blocks nothing"
    for need in needs:
        assert need in DEVICES or (_TOOL.match(need) and need not in _SHELLS), (probe.name, need)


def test_needs_are_derived_from_a_tool_command() -> None:
    assert Probe("x", command=("/usr/bin/nvidia-smi", "-q")).all_needs() == ("nvidia-smi",)
    assert Probe("x", command=("sh", "-c", "nvidia-smi")).all_needs() == ()
    assert Probe("x", script="gemm_probe.py").all_needs() == ()
    assert Probe("x", script="gemm_probe.py", needs=("gpu",)).all_needs() == ("gpu",)
