"""No automation of nvtest acts on a systemic finding or on an error/unknown of ours
(issue 24, class 5): each one is walked with the same findings.

The automations that change something on the strength of a finding: ``nvtest run
--drain-failed`` (:func:`nvtest.analysis.acting.drain_plan`), ``nvtest sweep --drain``
(``_drain``), ``nvtest gate --drain`` (``_slurm``) and the gate's exit status (a Prolog or
HealthCheckProgram exiting non-zero makes Slurm drain the node and requeue the job).
:func:`test_every_drain_call_site_is_walked` finds every place the source calls Slurm's
drain, so a new automation cannot skip this walk. No Slurm here: a refused action never
calls scontrol (an allowed one would, and come back ``error`` without a cluster).
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from nvtest.analysis.acting import DRAIN_MAX_FRACTION, drain_limit, drain_plan, why_not_act
from nvtest.analysis.postprocess import post_process
from nvtest.config.site import SiteConfig
from nvtest.config.skus import load_catalog
from nvtest.ops.gate.budget import Budget
from nvtest.ops.gate.config import gate_exit_code
from nvtest.ops.gate.document import GateCheck
from nvtest.ops.gate.engine import GateOptions, _slurm
from nvtest.ops.sweep import SweepOptions, _drain
from tests.conftest import REPO


def _result(node: str, check: str, verdict: str, reason: str = "", **extra: Any) -> dict[str, Any]:
    return {"check": check, "node": node, "verdict": verdict, "reason": reason, "metrics": [], **extra}


def _doc(results: list[dict[str, Any]], sku: str | None = "h100-sxm-80gb") -> dict[str, Any]:
    nodes = sorted({r["node"] for r in results})
    doc = {
        "run": {"run_id": "t"},
        "nodes": {n: {"name": n, "sku": sku} for n in nodes},
        "skus": {},
        "checks": {},
        "results": results,
    }
    return post_process(doc, policies={})


#: Findings no automation may act on, each a run of its own (results.json, analysed).
FINDINGS: dict[str, Callable[[], dict[str, Any]]] = {
    # gpus failed on every node of the SKU: post_process flags it systemic
    "systemic": lambda: _doc([_result(f"n{i}", "gpus", "fail", "7 of 8 GPUs") for i in range(3)]),
    "error of ours": lambda: _doc([_result("n0", "gemm", "error", "ParseError: gemm probe printed no JSON")]),
    "no answer": lambda: _doc([_result("n0", "xid_scan", "error", "TimeoutError: did not answer within 120 s")]),
    "storage": lambda: _diagnosed(
        _doc([_result("n0", "checkpoint", "fail", "write stalled")]),
        {"rule": "storage_stall", "cause": "the shared filesystem (NFS) stopped answering"},
    ),
}


def _diagnosed(doc: dict[str, Any], diagnosis: dict[str, str]) -> dict[str, Any]:
    """``doc`` with its failure diagnosed as ``diagnosis`` (a cause outside the node)."""
    for r in doc["results"]:
        r["diagnosis"] = diagnosis
    return doc


def _run_drain(doc: Mapping[str, Any]) -> list[str]:
    return [d.node for d in drain_plan(doc) if d.drain]


def _sweep_drain(doc: Mapping[str, Any]) -> list[str]:
    drained = []
    for node in doc["nodes"]:
        act = _drain(
            SweepOptions(drain=True), node, {**doc, "results": [r for r in doc["results"] if r["node"] == node]}
        )
        assert act["action"] == "none", act  # "drain" or "error" would mean scontrol was called
        drained += [node] if act["action"] == "drain" else []
    return drained


_GATE_VERDICT = {"fail": "fail", "error": "unknown", "unknown": "unknown"}


def _gate_checks(doc: Mapping[str, Any], node: str) -> list[GateCheck]:
    out = []
    for r in doc["results"]:
        if r["node"] == node:
            c = GateCheck(r["check"])
            c.add(_GATE_VERDICT.get(r["verdict"], r["verdict"]), r["check"], r["reason"])
            out.append(c)
    return out


def _gate_drain(doc: Mapping[str, Any]) -> list[str]:
    """The gate judges one node alone: a systemic pattern is invisible to it (the fleet's
    failure is each node's), so only the error/unknown findings apply to it."""
    drained = []
    for node in doc["nodes"]:
        checks = _gate_checks(doc, node)
        verdict = "fail" if any(c.verdict == "fail" for c in checks) else "unknown"
        if verdict == "fail":
            continue  # a proven failure on the node: the gate's to drain (not one of ours)
        out = _slurm(GateOptions(drain=True), node, verdict, checks, Budget(5.0))
        drained += [node] if out["drain"] is not None else []
    return drained


def _gate_exit(doc: Mapping[str, Any]) -> list[str]:
    site = SiteConfig(catalog=load_catalog())
    out = []
    for node in doc["nodes"]:
        checks = _gate_checks(doc, node)
        if any(c.verdict == "fail" for c in checks):
            continue
        code = gate_exit_code(checks, strict=False, mode="prolog", site=site, sku=None)
        out += [node] if code != 0 else []
    return out


#: Every automation that acts on findings -> what it acted on (nodes), given a run's findings.
AUTOMATIONS: dict[str, Callable[[Mapping[str, Any]], list[str]]] = {
    "run --drain-failed": _run_drain,
    "sweep --drain": _sweep_drain,
    "gate --drain": _gate_drain,
    "gate exit status (Prolog: drain + requeue)": _gate_exit,
}


@pytest.mark.parametrize("finding", sorted(FINDINGS))
@pytest.mark.parametrize("automation", sorted(AUTOMATIONS))
def test_no_automation_acts_on_systemic_or_our_errors(automation: str, finding: str) -> None:
    doc = FINDINGS[finding]()
    assert AUTOMATIONS[automation](doc) == []


def test_the_systemic_finding_is_flagged_by_the_run() -> None:
    doc = FINDINGS["systemic"]()
    assert [s["check"] for s in doc["fleet"]["systemic"]] == ["gpus"]
    assert all("systemic" in (why_not_act(r, [(r["node"], "gpus")]) or "") for r in doc["results"])


def test_a_single_nodes_failure_is_drained_and_the_fleet_guard_holds() -> None:
    one = _doc([_result("n0", "gpus", "fail", "7 of 8 GPUs"), *(_result(f"n{i}", "gpus", "pass") for i in (1, 2, 3))])
    assert _run_drain(one) == ["n0"]
    # 3 of 8 fail alike-but-not-all: past 25 % (2 of 8), none is drained without the override
    many = _doc(
        [
            *(_result(f"n{i}", "gpus", "fail", "7 of 8 GPUs") for i in range(3)),
            *(_result(f"n{i}", "gpus", "pass") for i in range(3, 8)),
        ]
    )
    plan = drain_plan(many)
    assert [d.node for d in plan if d.drain] == []
    assert all("--drain-max-fraction" in d.why for d in plan if d.check == "gpus")
    assert [d.node for d in drain_plan(many, 1.0) if d.drain] == ["n0", "n1", "n2"]
    assert DRAIN_MAX_FRACTION == 0.25 and drain_limit(8, 0.25) == 2 and drain_limit(2, 0.25) == 1


#: Calls that change a node's state in Slurm.
_DRAIN_CALLS = {"drain_node", "drain", "drain_argv"}
#: Where they are called, (module, function) -> the automation of AUTOMATIONS that walks it.
_WALKED = {
    ("nvtest/run/drain.py", "drain_failed_nodes"): "run --drain-failed",
    ("nvtest/ops/sweep.py", "_drain"): "sweep --drain",
    ("nvtest/ops/gate/engine.py", "_slurm"): "gate --drain",
    # the mechanism itself (builds the scontrol call), not a decision on findings
    ("nvtest/ops/gate/slurm.py", "drain_node"): "",
    ("nvtest/transports/slurm.py", "drain"): "",
}


def test_every_drain_call_site_is_walked() -> None:
    sites: set[tuple[str, str]] = set()
    for path in sorted((REPO / "nvtest").rglob("*.py")):
        rel = path.relative_to(REPO).as_posix()
        if rel.startswith(("nvtest/probes/", "nvtest/testing/")):
            continue
        text = path.read_text(encoding="utf-8")
        if "drain" not in text:
            continue
        tree = ast.parse(text)
        for fn in ast.walk(tree):
            if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for call in ast.walk(fn):
                if isinstance(call, ast.Call):
                    f = call.func
                    name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
                    if name in _DRAIN_CALLS:
                        sites.add((rel, fn.name))
    unwalked = {s for s in sites if s not in _WALKED}
    assert not unwalked, f"Slurm drain called where no test walks it: {sorted(unwalked)}"
    assert {a for a in _WALKED.values() if a} <= set(AUTOMATIONS)
    assert Path(REPO / "nvtest/run/drain.py").is_file()
