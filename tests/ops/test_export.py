"""``nvtest export --prometheus``: node_exporter's textfile from the history, read back with
prometheus_client's own parser."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from nvtest.history import HistoryStore
from nvtest.ops.gate.engine import GateOptions, run_gate
from nvtest.testing.standin_nodes import FAULTS, node_bin
from tests.conftest import run_nvtest


def _fleet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    url = f"sqlite:///{tmp_path / 'h.sqlite'}"
    t = time.time() - 600
    with HistoryStore(url) as store:
        store.ingest_results(
            {
                "run": {"run_id": "r1", "started_at": t},
                "summary": {"verdict": "fail"},
                "nodes": {"gpu01": {"sku": "h100-sxm-80gb"}},
                "results": [
                    {
                        "check": "gemm",
                        "node": "gpu01",
                        "verdict": "fail",
                        "reason": "612 < 660",
                        "started_at": t,
                        "metrics": [
                            {
                                "name": "bf16_tflops",
                                "value": 612.5,
                                "unit": "TFLOP/s",
                                "verdict": "fail",
                                "labels": {"gpu": "3", "dtype": "bf16"},
                            }
                        ],
                    }
                ],
            }
        )
    tools = FAULTS["ib_port_down"][0](node_bin(tmp_path, "gpu02"))
    monkeypatch.setenv("PATH", tools.path_prefix())
    run_gate(GateOptions(node="gpu02", state_dir=tmp_path / "state", history=url))
    return url


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_the_textfile_reads_back_with_the_prometheus_parser(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = _fleet(tmp_path, monkeypatch)
    prom = tmp_path / "textfile"
    prom.mkdir()
    (prom / "nvtest.prom").write_text("# an older file\n")
    proc = run_nvtest("export", "--prometheus", str(prom), "--history", url, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in prom.iterdir()) == ["nvtest.prom"]  # replaced whole, no temporary left
    got = _samples((prom / "nvtest.prom").read_text())
    assert got[("nvtest_check_verdict", (("check", "gemm"), ("node", "gpu01"), ("sku", "h100-sxm-80gb")))] == 3.0
    key = (
        "nvtest_metric",
        (
            ("check", "gemm"),
            ("labels", "dtype=bf16,gpu=3"),
            ("metric", "bf16_tflops"),
            ("node", "gpu01"),
            ("unit", "TFLOP/s"),
        ),
    )
    assert got[key] == 612.5
    assert got[("nvtest_check_verdict", (("check", "ib_ports"), ("node", "gpu02"), ("sku", "h100-sxm-80gb")))] == 3.0
    assert got[("nvtest_check_verdict", (("check", "mounts"), ("node", "gpu02"), ("sku", "h100-sxm-80gb")))] == -1.0
    assert got[("nvtest_check_verdict", (("check", "gpus"), ("node", "gpu02"), ("sku", "h100-sxm-80gb")))] == 0.0
    duration = got[("nvtest_gate_duration_seconds", (("node", "gpu02"),))]
    assert 0 < duration < 10
    free = [v for (name, labels), v in got.items() if name == "nvtest_metric" and ("metric", "free_gib") in labels]
    assert free and all(v > 0 for v in free)


def test_one_node_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = _fleet(tmp_path, monkeypatch)
    proc = run_nvtest("export", "--prometheus", str(tmp_path / "p"), "--history", url, "--node", "gpu02", timeout=120)
    assert proc.returncode == 0
    nodes = {dict(labels).get("node") for _, labels in _samples((tmp_path / "p" / "nvtest.prom").read_text())}
    assert nodes == {"gpu02"}


def test_the_grafana_dashboard_asks_only_for_exported_series() -> None:
    import json
    import re

    from tests.conftest import REPO

    dash = json.loads((REPO / "docs" / "grafana-nvtest.json").read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
    exprs += [v["query"]["query"] for v in dash["templating"]["list"] if isinstance(v.get("query"), dict)]
    used = {m for e in exprs for m in re.findall(r"\bnvtest_[a-z_]+", e)}
    exported = {
        "nvtest_check_verdict",
        "nvtest_check_timestamp_seconds",
        "nvtest_metric",
        "nvtest_gate_duration_seconds",
    }
    assert used == exported
    assert len({p["id"] for p in dash["panels"]}) == len(dash["panels"])


@pytest.mark.parametrize("verb", [("export", "--prometheus", "PROM"), ("history", "n1")])
def test_a_silent_database_ends_the_reading_verbs_in_their_timeout(tmp_path: Path, verb: tuple[str, ...]) -> None:
    """A PostgreSQL history that accepts and never answers: ``export`` (a cron job) and
    ``history`` give up after the history's timeout ($NVTEST_HISTORY_TIMEOUT_S) with a
    message, never hang."""
    from nvtest.testing.blackhole import BlackHole

    with BlackHole(hold_s=30.0) as hole:
        args = [a.replace("PROM", str(tmp_path / "prom")) for a in verb]
        t0 = time.monotonic()
        res = run_nvtest(
            *args,
            "--history",
            f"postgresql://nvtest@127.0.0.1:{hole.port}/fleet",
            env={"NVTEST_HISTORY_TIMEOUT_S": "2"},
            timeout=60,
        )
        took = time.monotonic() - t0
    assert res.returncode not in (0, 1) and took < 2 + 8, (res.returncode, took, res.stderr[-500:])
    assert "Traceback" not in res.stderr and "127.0.0.1" in res.stderr, res.stderr[-500:]
