"""Fail closed is declared on the probe, and the declarations are whole.

A check that reads a GPU or NIC tool does not write the fail-closed rules itself: its
:class:`~nvtest.session.probe.Probe` declares what hardware it ``expects``, how its output
is read (``parse``) and what ships the tool (``package``), and the ``read`` and ``measure``
fixtures apply the rules (:func:`nvtest.checks.hardware.read_declared`). These walkers check
every declaration instead of trusting each call site:

- every Probe object the suites and ``nvtest.checks`` hold: its expected kinds are known; a
  tool it runs with ``expects`` has a ``parse`` and a ``package``, and a tool that is not the
  driver's is one the inventory looks for on PATH (else a missing tool could not be told);
  a GPU-only probe script (``device="gpu"``) expects the GPUs;
- every Probe of a suite file that runs a GPU or NIC tool declares ``expects`` and ``parse``,
  and no suite reads such a probe with ``raw`` (per suite file, so a failure names it);
- no suite file calls ``require(``, ``require_tool(``, ``read_tool(`` or ``expected_*(``.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path, PurePosixPath

import pytest

import nvtest.checks
from nvtest.checks.hardware import EXPECTED
from nvtest.config.resources import suites_dir
from nvtest.probes.inventory_probe import TOOLS
from nvtest.session.probe import DRIVER, EXPECTS, Probe
from tests.checks.test_probe_needs import _load, _probes_of

SUITE_FILES = sorted(suites_dir().rglob("test_*.py"))
_SHELLS = {"sh", "bash", "dash", "env", "timeout"}

#: Tools that report on the node's GPUs, NVSwitches or RDMA NICs (a check reading one judges them).
GPU_NIC_TOOLS = frozenset(
    {
        "nvidia-smi",
        "dcgmi",
        "nvbandwidth",
        "ibstat",
        "ibv_devinfo",
        "ibv_devices",
        "ibstatus",
        "mlxlink",
        "mlxconfig",
        "ib_write_bw",
        "ib_read_bw",
        "all_reduce_perf",
    }
)

#: Calls a suite never makes: the fixtures apply the fail-closed rules.
BANNED_CALLS = frozenset({"require", "require_tool", "read_tool"})


def _tool(probe: Probe) -> str | None:
    if not probe.command:
        return None
    name = PurePosixPath(probe.command[0]).name
    return None if name in _SHELLS else name


def _check_probes() -> list[Probe]:
    probes: list[Probe] = []
    for info in pkgutil.walk_packages(nvtest.checks.__path__, "nvtest.checks."):
        probes += _probes_of(importlib.import_module(info.name))
    return probes


def _all_probes() -> list[Probe]:
    found = _check_probes()
    for path in SUITE_FILES:
        found += _probes_of(_load(path))
    unique: dict[tuple[str, int], Probe] = {}
    for p in found:
        unique.setdefault((p.name, id(p)), p)
    return list(unique.values())


ALL = _all_probes()


def _rel(path: Path) -> str:
    return str(path.relative_to(suites_dir()))


def test_every_kind_of_hardware_is_counted() -> None:
    assert tuple(EXPECTED) == EXPECTS


@pytest.mark.parametrize("expects", ["gpus", ("gpu", "nic"), "GPU"])
def test_a_kind_of_hardware_misspelt_is_refused_where_the_probe_is_declared(expects: str | tuple[str, ...]) -> None:
    """expects="gpus" was a KeyError at the first node's read ("check raised KeyError: 'gpus'");
    the declaration itself now says what is wrong and what is known."""
    with pytest.raises(ValueError, match=r"is not a kind of hardware; known: gpu, nvswitch, hca"):
        Probe("site-smi", command=("nvidia-smi", "-q", "-x"), expects=expects, package=DRIVER)
    assert Probe("site-smi", command=("nvidia-smi", "-q", "-x"), expects=("gpu", "hca"), package=DRIVER)


def test_the_walk_finds_declared_probes() -> None:
    declared = [p for p in ALL if p.expects]
    assert len(declared) >= 8, [p.name for p in declared]


@pytest.mark.parametrize("probe", ALL, ids=lambda p: p.name)
def test_each_declaration_is_whole(probe: Probe) -> None:
    kinds = probe.expected_kinds()
    unknown = [k for k in kinds if k not in EXPECTS]
    assert not unknown, f"{probe.name}: expects unknown kinds {unknown} (known: {EXPECTS})"
    if probe.device == "gpu":
        assert "gpu" in kinds, f"{probe.name}: a GPU-only probe script must declare expects='gpu'"
    if not kinds:
        assert probe.parse is None and probe.package is None and probe.skip_if is None, (
            f"{probe.name}: parse/package/skip_if without expects= (nothing to require)"
        )
        return
    if probe.script:
        return  # the measure fixture reads a probe script's JSON document
    assert callable(probe.parse), f"{probe.name}: expects= without parse= (the read fixture reads it)"
    tool = _tool(probe)
    if tool is None:
        return  # a shell script reads sysfs or several tools: no one package ships it
    assert probe.package, f"{probe.name}: {tool} without package= (named when it is missing)"
    if probe.package != DRIVER:
        assert tool in TOOLS, (
            f"{probe.name}: the inventory does not look for {tool} on PATH "
            "(nvtest/probes/inventory_probe.py TOOLS): a missing tool could not be told"
        )


def _module_probes(path: Path) -> dict[str, Probe]:
    module = _load(path)
    return {name: v for name, v in vars(module).items() if isinstance(v, Probe)}


def _reads_gpu_or_nic(probe: Probe) -> bool:
    return _tool(probe) in GPU_NIC_TOOLS


@pytest.mark.parametrize("path", SUITE_FILES, ids=_rel)
def test_a_suite_reads_gpu_and_nic_tools_through_declared_probes(path: Path) -> None:
    probes = _module_probes(path)
    undeclared = [n for n, p in probes.items() if _reads_gpu_or_nic(p) and not (p.expects and p.parse is not None)]
    assert not undeclared, f"{_rel(path)}: GPU/NIC tool probes without expects= and parse=: {undeclared}"
    raw_reads = [
        f"line {n.lineno}: raw({n.args[0].id})"
        for n in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(n, ast.Call)
        and isinstance(n.func, ast.Name)
        and n.func.id == "raw"
        and n.args
        and isinstance(n.args[0], ast.Name)
        and n.args[0].id in probes
        and _reads_gpu_or_nic(probes[n.args[0].id])
    ]
    assert not raw_reads, f"{_rel(path)}: read a GPU/NIC tool with read(PROBE), not raw: {raw_reads}"


@pytest.mark.parametrize("path", SUITE_FILES, ids=_rel)
def test_no_suite_writes_the_fail_closed_rules_itself(path: Path) -> None:
    bad = []
    for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(n, ast.Call):
            name = (
                n.func.id if isinstance(n.func, ast.Name) else n.func.attr if isinstance(n.func, ast.Attribute) else ""
            )
            if name in BANNED_CALLS or name.startswith("expected_"):
                bad.append(f"line {n.lineno}: {name}(")
    assert not bad, f"{_rel(path)}: declare expects= on the probe and use read/measure instead of {bad}"


def test_the_ban_sees_a_hand_written_rule() -> None:
    tree = ast.parse("exp = require(expected_gpus(facts, sku))\nq = read_tool(exp, 't', raw(P), parse)\n")
    calls = [n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)]
    assert {c for c in calls if c in BANNED_CALLS or c.startswith("expected_")} == {
        "require",
        "expected_gpus",
        "read_tool",
    }
