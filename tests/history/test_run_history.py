"""Every finished run goes into the history, and its report shows each node's change since
its previous run and marks a node drained before (finish_run, the report's history section)."""

from __future__ import annotations

import time
from pathlib import Path

from nvtest.analysis.finish import finish_run
from nvtest.history import HistoryStore
from nvtest.history import queries as q
from nvtest.results import ResultStore


def _run(run_dir: Path, run_id: str, t: float, tflops: float, *, drain: str | None = None) -> None:
    store = ResultStore(run_dir)
    store.append("run", {"run_id": run_id, "started_at": t, "suite": "quick", "backend": "slurm"})
    for node in ("gpu01", "gpu02"):
        value = tflops if node == "gpu01" else 700.0
        verdict = "pass" if value >= 660 else "fail"
        store.append("node", {"name": node, "sku": "h100-sxm-80gb"})
        store.append(
            "result",
            {
                "check": "gemm",
                "node": node,
                "verdict": verdict,
                "started_at": t + 1,
                "reason": "" if verdict == "pass" else f"{value:g} TFLOP/s < min 660 TFLOP/s",
                "metrics": [
                    {
                        "name": "bf16_tflops",
                        "value": value,
                        "unit": "TFLOP/s",
                        "verdict": verdict,
                        "labels": {"gpu": "0"},
                    }
                ],
            },
        )
    if drain:
        store.append("drain", {"node": "gpu01", "reason": drain})
    store.append("end", {"ended_at": t + 30, "exit_code": 0})
    store.close()


def test_the_report_shows_the_change_since_the_last_run(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'h.sqlite'}"
    t0 = time.time() - 3600
    _run(tmp_path / "a", "run-a", t0, 731.0, drain=None)
    first = finish_run(tmp_path / "a", history=url).doc
    assert first["history"]["nodes"] == {}  # nothing before the first run
    _run(tmp_path / "b", "run-b", t0 + 600, 612.0, drain="nvtest run-b: gemm 612 TFLOP/s < min 660 TFLOP/s")
    finish_run(tmp_path / "b", history=url)
    _run(tmp_path / "c", "run-c", t0 + 1200, 640.0)
    doc = finish_run(tmp_path / "c", history=url).doc
    node = doc["history"]["nodes"]["gpu01"]
    assert node["previous_run"] == "run:run-b"
    assert node["drained_before"]["reason"].startswith("nvtest run-b: gemm")
    gemm = node["checks"]["gemm"]
    assert (gemm["verdict_before"], gemm["verdict_now"]) == ("fail", "fail")
    assert gemm["metrics"] == [
        {"name": "bf16_tflops", "labels": "gpu=0", "unit": "TFLOP/s", "before": 612.0, "now": 640.0, "delta_pct": 4.58}
    ]
    html = (tmp_path / "c" / "report.html").read_text()
    assert 'id="history"' in html and "Since the last run" in html
    assert 'id="drained-before"' in html and "nvtest run-b: gemm" in html
    html_b = (tmp_path / "b" / "report.html").read_text()
    assert "731 → 612 TFLOP/s (-16.3 %)" in html_b
    with HistoryStore(url) as store:
        kinds = [e.kind for e in q.timeline(store, "gpu01")]
        assert kinds == ["run", "run", "drain", "run"]


def test_rebuilding_a_run_replaces_it_and_a_rejudged_copy_is_not_recorded(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'h.sqlite'}"
    _run(tmp_path / "a", "run-a", time.time() - 60, 700.0)
    finish_run(tmp_path / "a", history=url)
    finish_run(tmp_path / "a", history=url)  # nvtest report RUN_DIR rebuilds it
    doc = finish_run(tmp_path / "a", history=url).doc
    doc["run"]["evaluated_from"] = {"run_dir": str(tmp_path / "a")}
    doc["run"]["run_id"] = "rejudged"
    (tmp_path / "e").mkdir()
    finish_run(tmp_path / "e", doc=doc, history=url)
    with HistoryStore(url) as store:
        assert [e.key for e in q.timeline(store, "gpu01")] == ["run:run-a"]


def test_an_unreachable_history_is_a_warning_not_a_failed_run(tmp_path: Path) -> None:
    _run(tmp_path / "a", "run-a", time.time() - 60, 700.0)
    doc = finish_run(tmp_path / "a", history="postgresql://nvtest@127.0.0.1:1/none").doc
    assert any(w.startswith("history not recorded:") for w in doc["run"]["warnings"])
    assert (tmp_path / "a" / "results.json").is_file() and doc["summary"]["verdict"] == "pass"
