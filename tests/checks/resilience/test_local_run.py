"""``nvtest run`` of the resilience suite on this machine (local backend), for real.

One run: checkpoint tiers at MiB sizes, the in-job restart drill (a rank
SIGKILLed mid-run, resumed from its checkpoint, losses equal to the
uninterrupted run), the straggler drill with rank 1 slowed by an injected
sleep, and the requeue check (skipped: not Slurm).
"""

from __future__ import annotations

import json
import os

import pytest
import yaml

from tests.checks.resilience.conftest import by_check, metrics
from tests.conftest import run_nvtest

pytestmark = pytest.mark.slow

CHECKS = [
    "resilience/test_ckpt_tiers.py",
    "resilience/test_restart.py::test_restart_injob",
    "resilience/test_requeue.py",
    "resilience/test_stragglers.py",
]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    d = tmp_path_factory.mktemp("resil")
    skus = d / "skus"
    skus.mkdir()
    from tests.checks.resilience.conftest import tiny_sku

    (skus / "resil-cpu.yaml").write_text(yaml.safe_dump(tiny_sku(d)))
    suite = d / "suite.yaml"
    suite.write_text(yaml.safe_dump({"name": "r", "description": "r", "checks": CHECKS}))
    proc = run_nvtest(
        "run",
        "--sku-dir",
        str(skus),
        "--sku",
        "resil-cpu",
        "--suite",
        str(suite),
        "--out",
        str(d / "reports"),
        "--progress",
        "plain",
        env={**os.environ, "NVTEST_STRAGGLER_INJECT": "1:0.15", "OMP_NUM_THREADS": "1"},
        timeout=900,
    )
    doc = json.loads((d / "reports" / "latest" / "results.json").read_text())
    return proc, doc


def _one(doc, check):
    res = by_check(doc, check)
    assert len(res) == 1, (check, doc.get("results"))
    return next(iter(res.values()))


def test_ckpt_tiers_measured_and_shared_skipped(run):
    proc, doc = run
    for check in ("ckpt_mem", "ckpt_local"):
        r = _one(doc, check)
        assert r["verdict"] == "pass", r
        m = metrics(r)
        assert m["write_gbps"] > 0 and m["read_gbps"] > 0 and m["model_save_s"] > 0
        assert r["details"]["tier"]["checksum"].startswith("crc32:")
    shared = _one(doc, "ckpt_shared")
    assert shared["verdict"] == "skip" and "shared_path" in shared["reason"]


def test_killed_rank_detected_and_training_resumes_on_the_same_trajectory(run):
    proc, doc = run
    r = _one(doc, "restart_injob")
    assert r["verdict"] in ("pass", "warn"), r["reason"]
    m = metrics(r)
    assert 0 <= m["detect_s"] < 30
    assert m["recovery_s"] > m["detect_s"] and m["reload_s"] >= 0
    assert 0 <= m["steps_lost"] <= 4 + 2  # at most one checkpoint interval (+ the step in flight)
    assert m["loss_max_abs_diff"] <= 1e-6
    rec = r["details"]["recovery"]
    assert rec["resumed_from_step"] % 4 == 0 and rec["resumed_from_step"] <= rec["kill_step"]
    assert r["details"]["loss_comparison"]["matches"] and r["details"]["loss_comparison"]["steps_compared"] > 0
    eff = r["details"]["effective_time"]
    assert 0 < eff["effective_fraction"] < 1 and "C/T" in eff["formula"]
    assert r["details"]["recovery_s_target"]["target_s"] == 120
    assert r["log"].endswith("/restart_injob.log"), r["log"]  # the drill's evidence, not the tier's


def test_slowed_rank_is_the_only_straggler(run):
    proc, doc = run
    r = _one(doc, "straggler")
    assert r["verdict"] == "fail", r
    slow = r["details"]["straggler"]["stragglers"]
    assert [s["rank"] for s in slow] == [1], r["details"]["straggler"]
    scores = r["details"]["straggler"]["rank_scores"]
    assert scores["0"] >= 0.75 > scores["1"]
    assert "rank 1" in r["reason"] and "rank 0" not in r["reason"]
    assert metrics(r)["node_relative_score"] == 1.0  # one node: the fastest of its fleet


def test_requeue_skipped_outside_slurm(run):
    proc, doc = run
    r = _one(doc, "requeue")
    assert r["verdict"] == "skip" and "slurm backend" in r["reason"]
    assert proc.returncode == 1  # the injected straggler fails its item
