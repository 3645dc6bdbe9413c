"""The checkpoint tier probe run here: figures, verification, a corrupted read caught, the shared skip."""

from __future__ import annotations

from nvtest.checks.api import Judge
from nvtest.checks.resilience.ckpt import aggregate_of, judge_tier
from nvtest.verdict import Verdict
from tests.checks.resilience.conftest import run_probe


def test_tier_written_read_back_and_verified(tmp_path):
    doc = run_probe(
        "ckpt_probe.py",
        "--tier",
        "local",
        "--path",
        str(tmp_path / "local"),
        "--size-mib",
        "6",
        "--chunk-mib",
        "1",
        "--model",
    )
    assert doc["status"] == "ok", doc
    tier, model = doc["results"]
    assert tier["verified"] and tier["read_bytes"] == 6 * 2**20 and tier["checksum"] == tier["read_checksum"]
    assert tier["write_gbps"] > 0 and tier["read_gbps"] > 0 and tier["fsync_s"] >= 0
    assert tier["t_write_start"] <= tier["t_write_end"] <= tier["t_read_start"] <= tier["t_read_end"]
    assert model["kind"] == "model_state" and model["verified"] and model["bytes"] > 100_000
    assert model["save_s"] > 0 and model["load_s"] > 0
    assert not list((tmp_path / "local").iterdir())  # nothing left behind
    judge = Judge(None, "ckpt_local", "here", None)
    judge_tier(judge, doc)
    assert judge.verdict is Verdict.PASS, judge.summary()
    assert {m.name for m in judge.metrics} == {
        "write_gbps",
        "read_gbps",
        "model_save_s",
        "model_load_s",
    }


def test_corrupted_read_is_caught(tmp_path):
    doc = run_probe(
        "ckpt_probe.py",
        "--tier",
        "mem",
        "--path",
        str(tmp_path / "shm"),
        "--size-mib",
        "3",
        "--chunk-mib",
        "1",
        "--inject-corruption",
    )
    (tier,) = doc["results"]
    assert tier["corruption_injected_at"] == 3 * 2**20 // 2
    assert not tier["verified"] and tier["checksum"] != tier["read_checksum"]
    judge = Judge(None, "ckpt_mem", "here", None)
    judge_tier(judge, doc)
    assert judge.verdict is Verdict.FAIL
    assert "checksum mismatch" in judge.summary()


def test_shared_tier_without_path_is_skipped_with_the_reason():
    doc = run_probe("ckpt_probe.py", "--tier", "shared", "--path", "")
    assert doc["status"] == "skip" and "shared_path" in doc["reason"]


def test_aggregate_spans_all_nodes():
    mib = 2**20
    entries = [
        {
            "size_bytes": 100 * mib,
            "t_write_start": 0.0,
            "t_write_end": 1.0,
            "t_read_start": 2.0,
            "t_read_end": 2.5,
        },
        {
            "size_bytes": 100 * mib,
            "t_write_start": 0.5,
            "t_write_end": 2.0,
            "t_read_start": 2.2,
            "t_read_end": 3.0,
        },
    ]
    agg = aggregate_of(entries)
    assert agg["write_gbps"] == 200 * mib / 2.0 / 1e9 and agg["read_gbps"] == 200 * mib / 1.0 / 1e9
