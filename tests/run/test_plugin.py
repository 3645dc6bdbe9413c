"""The nvtest pytest plugin, driven through pytester on this machine as a one-node run.

Each test writes a small check module (probes are tool commands printing a JSON document,
so nothing but the inventory probe runs) and the run_config.json ``nvtest run`` would
write, runs pytest on them with ``--nvtest-config``, and reads results.jsonl/results.json.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nvtest.session.context import RunConfig
from nvtest.transports.local import local_hostname

HOST = local_hostname()

HEADER = """
import pytest
from nvtest.checks.api import Judge, Probe, declare_metric

declare_metric("alpha", "x_gbps", "GB/s", kind="bandwidth", bound="host_memory")
declare_metric("ok", "v_count", "count", kind="count", bound="count")

def doc_probe(name, doc, rc=0):
    import json
    text = json.dumps(doc)
    return Probe(name, command=("sh", "-c", f"echo '{text}'; exit {rc}"), timeout_s=30)
"""


def _run(pytester: pytest.Pytester, checks: str, **cfg: object) -> tuple[pytest.RunResult, Path]:
    run_dir = pytester.path / "run"
    config = RunConfig(run_id="r1", run_dir=str(run_dir), **cfg)  # type: ignore[arg-type]
    cfg_path = pytester.path / "run_config.json"
    cfg_path.write_text(config.model_dump_json(), encoding="utf-8")
    pytester.makepyfile(test_checks=HEADER + checks)
    res = pytester.runpytest_subprocess(
        "--nvtest-config",
        str(cfg_path),
        "--nvtest-progress",
        "none",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:randomly",
        "-p",
        "no:xdist",
    )
    return res, run_dir


def _results(run_dir: Path) -> dict[tuple[str, str], dict]:
    doc = json.loads((run_dir / "results.json").read_text())
    return {(r["check"], r["node"]): r for r in doc["results"]}


def test_inert_without_a_config(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_plain="def test_ok():\n    assert True\n")
    res = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    res.assert_outcomes(passed=1)
    assert not (pytester.path / "run").exists()


def test_checks_are_parametrized_by_node_with_stable_ids(pytester: pytest.Pytester) -> None:
    res, run_dir = _run(
        pytester,
        """
@pytest.mark.check("alpha", area="demo", title="Alpha")
def test_alpha(node, judge):
    judge("x_gbps", 5.0, "GB/s")
""",
    )
    got = _results(run_dir)
    assert set(got) == {("alpha", HOST)}
    assert got[("alpha", HOST)]["nodeid"].endswith(f"test_alpha[{HOST}]")
    lines = [json.loads(x) for x in (run_dir / "results.jsonl").read_text().splitlines()]
    kinds = [e["kind"] for e in lines]
    assert kinds.index("check") < kinds.index("run") < kinds.index("node") < kinds.index("result")
    assert kinds[-1] == "end"
    assert {"name": "alpha", "area": "demo", "title": "Alpha"}.items() <= next(
        e for e in lines if e["kind"] == "check"
    ).items()
    for f in ("results.json", "junit.xml", "report.html"):
        assert (run_dir / f).is_file(), f


def test_outcomes_become_verdicts(pytester: pytest.Pytester) -> None:
    res, run_dir = _run(
        pytester,
        """
def test_ok(node, measure, judge):
    doc = measure(doc_probe("ok", {"status": "ok", "v": 3}))
    judge("v_count", doc["v"], "count")

def test_skipped(node, measure):
    measure(doc_probe("sk", {"status": "skip", "reason": "no NVSwitch on the bus"}))

def test_probe_error(node, measure):
    measure(doc_probe("er", {"status": "error", "reason": "CUDA error: no device"}))

def test_no_json(node, measure):
    measure(Probe("nj", command=("sh", "-c", "echo garbage; echo oops >&2; exit 4")))

def test_tool_failure(node, judge):
    judge.fail("wrong results: 3")

def test_warn(node, judge):
    judge.warn("slower than its peers")

def test_assertion(node):
    assert 1 == 2, "one is not two"

def test_crash(node):
    raise KeyError("boom")

def test_unjudged(node, measure):
    measure(doc_probe("un", {"status": "ok", "v": 3}))
""",
    )
    got = {c: r for (c, _), r in _results(run_dir).items()}
    assert got["ok"]["verdict"] == "pass" and got["ok"]["metrics"][0]["value"] == 3.0
    assert got["ok"]["log"] and (run_dir / got["ok"]["log"]).is_file()
    assert got["skipped"]["verdict"] == "skip" and got["skipped"]["reason"] == "no NVSwitch on the bus"
    assert got["probe_error"]["verdict"] == "error" and "CUDA error: no device" in got["probe_error"]["reason"]
    assert got["no_json"]["verdict"] == "error" and "printed no JSON (exit 4)" in got["no_json"]["reason"]
    assert got["tool_failure"]["verdict"] == "fail" and "wrong results: 3" in got["tool_failure"]["reason"]
    assert got["warn"]["verdict"] == "warn"
    assert got["assertion"]["verdict"] == "fail" and "one is not two" in got["assertion"]["reason"]
    assert got["crash"]["verdict"] == "error" and "KeyError" in got["crash"]["reason"]
    # returned without a Judge: nothing recorded, never a pass
    assert got["unjudged"]["verdict"] == "error" and got["unjudged"]["cause"] == "check:judged_nothing"
    assert "takes no judge fixture" in got["unjudged"]["reason"]
    doc = json.loads((run_dir / "results.json").read_text())
    assert doc["summary"]["verdict"] == "fail"  # a known failure is worse than an error


def test_a_probe_runs_once_per_check_as_a_phase(pytester: pytest.Pytester) -> None:
    marker = pytester.path / "count"
    res, run_dir = _run(
        pytester,
        f"""
P = Probe("counted", command=("sh", "-c", "echo x >> {marker}; echo '{{\\"status\\": \\"ok\\"}}'"))

def test_a(node, measure, judge):
    measure(P)
    measure(P)
    judge.passed("read it twice")
""",
    )
    assert marker.read_text().count("x") == 1
    assert _results(run_dir)[("a", HOST)]["verdict"] == "pass"


def test_rerun_items_select_only_those(pytester: pytest.Pytester) -> None:
    res, run_dir = _run(
        pytester,
        """
def test_one(node, judge):
    judge.passed("one")

def test_two(node, judge):
    judge.passed("two")
""",
        rerun_items=[("two", HOST)],
        rerun_of="r0",
    )
    assert set(_results(run_dir)) == {("two", HOST)}


def test_a_bad_config_is_a_usage_error(pytester: pytest.Pytester) -> None:
    cfg = pytester.path / "run_config.json"
    cfg.write_text('{"run_id": "r1"}', encoding="utf-8")
    pytester.makepyfile(test_x="def test_x(node):\n    pass\n")
    res = pytester.runpytest_subprocess("--nvtest-config", str(cfg), "-p", "no:cacheprovider")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    assert "nvtest:" in res.stderr.str()
