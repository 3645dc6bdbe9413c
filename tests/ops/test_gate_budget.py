"""``nvtest gate`` stays inside its budget whatever its side effects meet (a controller that
does not answer, a state file another holds, a hung nvidia-smi), a SIGTERM leaves a document
and no tool behind, and every numeric option of gate and sweep is range-checked first."""

from __future__ import annotations

import fcntl
import json
import math
import os
import signal
import subprocess
import time
import typing
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import typer
from typer.testing import CliRunner

from nvtest.cli.app import app
from nvtest.cli.limits import LIMITS
from nvtest.history import HistoryStore
from nvtest.ops.gate.budget import GRACE_S
from nvtest.ops.gate.engine import GateOptions, run_gate
from nvtest.testing.standin_nodes import FAULTS, hung, node_bin
from tests.conftest import NVTEST, REPO

SCHEMA = json.loads((REPO / "docs" / "gate.schema.json").read_text())
#: A hung stand-in's sleep, unique to these tests: its processes are found by it.
MARK_S = 987.25


def leftovers(marker: str) -> list[str]:
    """Processes whose command line holds ``marker`` (``pgrep -af``), but pgrep itself."""
    proc = subprocess.run(["pgrep", "-af", marker], capture_output=True, text=True, timeout=10)
    return [ln for ln in proc.stdout.splitlines() if "pgrep" not in ln]


def by_check(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["check"]: c for c in doc["checks"]}


def test_a_hung_nvidia_smi_does_not_hold_back_the_checks_that_need_no_gpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A wedged driver and a missing /scratch: the mount is judged (fail), not 'did not answer'."""
    overlay = tmp_path / "site.yaml"
    overlay.write_text(f"schema_version: 1\nname: site\nrecipe:\n  gate:\n    mounts: ['{tmp_path}/scratch']\n")
    tools = hung(node_bin(tmp_path, "n1"), "nvidia-smi", MARK_S)
    monkeypatch.setenv("PATH", tools.path_prefix())
    doc = run_gate(GateOptions(node="n1", budget_s=2.0, overlay=overlay, state_dir=tmp_path / "s", history="off"))
    jsonschema.validate(doc, SCHEMA)
    checks = by_check(doc)
    assert checks["mounts"]["verdict"] == "fail", checks["mounts"]
    assert f"{tmp_path}/scratch is not mounted" in checks["mounts"]["reason"]
    assert checks["gpus"]["verdict"] == "unknown"
    assert doc["verdict"] == "fail" and doc["exit_code"] == 1
    assert not leftovers(f"sleep {MARK_S:g}")  # the hung tools were killed with the gate


def test_an_unresponsive_controller_and_a_held_state_file_stay_in_the_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tools = hung(FAULTS["ib_port_down"][0](node_bin(tmp_path, "n1")), "scontrol", MARK_S + 1)
    monkeypatch.setenv("PATH", tools.path_prefix())
    state = tmp_path / "s"
    state.mkdir()
    with open(state / "gate-n1.lock", "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # another gate that never lets go
        t0 = time.monotonic()
        doc = run_gate(GateOptions(node="n1", budget_s=2.0, drain=True, state_dir=state, history="off"))
        wall = time.monotonic() - t0
    assert wall <= 2.0 + GRACE_S + 0.5, wall
    assert doc["verdict"] == "fail" and doc["slurm"]["drain"]["action"] == "error", doc["slurm"]
    assert any("gate state not saved" in w for w in doc["warnings"]), doc["warnings"]
    assert not leftovers(f"sleep {MARK_S + 1:g}")  # scontrol's whole process group was killed


def test_sigterm_leaves_a_document_a_record_and_no_tool(tmp_path: Path) -> None:
    tools = hung(node_bin(tmp_path, "n1"), "nvidia-smi", MARK_S + 2)
    db = tmp_path / "h.sqlite"
    env = {**os.environ, "PATH": tools.path_prefix(), "PYTHONPATH": str(REPO)}
    argv = [
        *NVTEST,
        "gate",
        "--node",
        "n1",
        "--mode",
        "prolog",
        "--budget",
        "30",
        "--state-dir",
        str(tmp_path / "s"),
        "--history",
        str(db),
    ]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        until = time.monotonic() + 30
        while not any(c.startswith("nvidia-smi -q") for c in tools.calls()) and time.monotonic() < until:
            time.sleep(0.05)
        assert leftovers(f"sleep {MARK_S + 2:g}"), "the stand-in nvidia-smi never started"
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=10)
        took = time.monotonic() - t0
    finally:
        proc.kill()
    assert proc.returncode == 3  # as nvtest run: SIGTERM, the harness did not finish, err
    assert took < 3.0, took
    doc = json.loads(out)
    jsonschema.validate(doc, SCHEMA)
    assert doc["interrupted"] == "SIGTERM" and doc["verdict"] == "unknown"
    gpus = by_check(doc)["gpus"]
    assert gpus["verdict"] == "unknown" and "interrupted by SIGTERM" in gpus["reason"], gpus
    assert not leftovers(f"sleep {MARK_S + 2:g}") and not leftovers(str(tools.bin_dir))
    with HistoryStore(f"sqlite:///{db}") as store:
        assert store.engine.connect().exec_driver_sql("SELECT count(*) FROM runs WHERE kind = 'gate'").scalar_one() == 1


def _catches(pid: int, sig: signal.Signals) -> bool:
    """Whether process ``pid`` has a handler of its own for ``sig`` (/proc/<pid>/status SigCgt)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    mask = next((int(line.split()[1], 16) for line in status.splitlines() if line.startswith("SigCgt:")), 0)
    return bool(mask & (1 << (sig - 1)))


def test_a_sigterm_while_the_command_starts_leaves_a_document(tmp_path: Path) -> None:
    """slurmd's SIGTERM as soon as the process catches it (its first moments, while Python
    imports): a document on stdout, exit 3 as a later SIGTERM, the record written or spooled;
    when it came before the gate started, every check is unknown and nothing was run."""
    tools = node_bin(tmp_path, "n1")
    db, state = tmp_path / "h.sqlite", tmp_path / "s"
    env = {**os.environ, "PATH": tools.path_prefix(), "PYTHONPATH": str(REPO)}
    argv = [*NVTEST, "gate", "--node", "n1", "--mode", "prolog", "--state-dir", str(state), "--history", str(db)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        until = time.monotonic() + 30
        while not _catches(proc.pid, signal.SIGTERM) and proc.poll() is None and time.monotonic() < until:
            time.sleep(0.005)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 3, err
    doc = json.loads(out)
    jsonschema.validate(doc, SCHEMA)
    assert doc["interrupted"] == "SIGTERM" and doc["verdict"] == "unknown", err
    if "before it started" in doc["checks"][0]["reason"]:
        assert {c["verdict"] for c in doc["checks"]} == {"unknown"} and not tools.calls(), doc["checks"]
    with HistoryStore(f"sqlite:///{db}") as store:
        written = store.engine.connect().exec_driver_sql("SELECT count(*) FROM runs WHERE kind = 'gate'").scalar_one()
    assert written + len(list((state / "spool").glob("*"))) == 1, err


BAD = ("nan", "inf", "-1", "0", "1e12")


def numeric_params(verb: str) -> dict[str, tuple[str, type]]:
    """Every option of ``verb`` typed int or float (or either or None): name -> (option, type)."""
    cmd = typer.main.get_command(app).commands[verb]  # type: ignore[attr-defined]
    hints = typing.get_type_hints(cmd.callback)
    out = {}
    for p in cmd.params:
        base = hints.get(p.name or "")
        args = [a for a in typing.get_args(base) if a is not type(None)] or [base]
        if len(args) == 1 and args[0] in (int, float):
            out[p.name or ""] = (max(p.opts, key=len), args[0])
    return out


@pytest.mark.parametrize("verb", ["gate", "sweep"])
def test_every_numeric_option_is_range_checked_before_anything_starts(verb: str, tmp_path: Path) -> None:
    runner = CliRunner()
    params = numeric_params(verb)
    assert set(params) == set(LIMITS[verb]), "a numeric option without a range"
    for name, (flag, kind) in params.items():
        option, lo, hi = LIMITS[verb][name]
        assert option == flag
        for raw in BAD:
            value = float(raw)
            if kind is int and not (math.isfinite(value) and value == int(value)):
                continue  # not an integer: refused by the parser itself (exit 2) before we see it
            if math.isfinite(value) and lo <= value <= hi:
                continue  # a sane value (sweep --nice 0): not this test's business
            args = [verb, option, str(int(value)) if kind is int else raw, "--history", "off"]
            args += ["--state-dir", str(tmp_path)] if verb == "gate" else ["--out", str(tmp_path)]
            res = runner.invoke(app, args)
            assert res.exit_code == 2, (args, res.exit_code, res.output)
            assert option in res.output and "must be" in res.output, res.output
    assert not list(tmp_path.iterdir()), "something was written before the options were checked"


@pytest.mark.parametrize("spec", ["nan%", "inf", "-1", "0", "1e12", "0%", "150%"])
def test_sweep_max_out_is_a_sane_count_or_share(spec: str, tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["sweep", "--max-out", spec, "--out", str(tmp_path), "--history", "off"])
    assert res.exit_code == 2 and "--max-out" in res.output, res.output


def test_a_recipe_the_match_changes_is_judged_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An overlay for one SKU only: the checks start with the defaults, the match brings the
    site's recipe, and its missing mount is judged by it."""
    overlay = tmp_path / "site.yaml"
    overlay.write_text(
        "schema_version: 1\nname: site\napplies_to: [h100-sxm-80gb]\n"
        f"recipe:\n  gate:\n    mounts: ['{tmp_path}/scratch']\n"
    )
    monkeypatch.setenv("PATH", node_bin(tmp_path, "n1").path_prefix())
    doc = run_gate(GateOptions(node="n1", budget_s=10.0, overlay=overlay, state_dir=tmp_path / "s", history="off"))
    mounts = by_check(doc)["mounts"]
    assert (
        mounts["verdict"] == "fail" and mounts["decisions"][0]["source"] == f"overlay:{overlay} recipe.gate mounts"
    ), mounts
    assert doc["sku"]["name"] == "h100-sxm-80gb" and doc["exit_code"] == 1
