"""The sweep's pure parts: --max-out as a count or a share, batches, the circuit breaker."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nvtest.errors import ConfigError
from nvtest.ops.breaker import circuit_breaker
from nvtest.ops.sweep import max_out_count, plan_batches
from tests.conftest import run_nvtest


def test_max_out_is_a_count_or_a_share_of_the_partition() -> None:
    assert max_out_count("4", 100) == 4
    assert max_out_count("10%", 128) == 12
    assert max_out_count("0.05", 128) == 6
    assert max_out_count("1%", 10) == 1  # at least one
    for bad in ("0", "-1", "150%", "x", "0.0"):
        with pytest.raises(ConfigError, match="--max-out"):
            max_out_count(bad, 10)


def test_batches_never_exceed_the_budget() -> None:
    nodes = [f"n{i}" for i in range(7)]
    assert plan_batches(nodes, 3) == [["n0", "n1", "n2"], ["n3", "n4", "n5"], ["n6"]]
    assert plan_batches(nodes, 0) == [] and plan_batches([], 3) == []


def doc(node: str, check: str | None = None, value: float | None = None, reason: str = "") -> dict[str, Any]:
    results = [{"check": "host", "node": node, "verdict": "pass", "metrics": []}]
    if check:
        metrics = (
            [{"name": "triad_gbps", "unit": "GB/s", "value": value, "verdict": "fail"}] if value is not None else []
        )
        results.append({"check": check, "node": node, "verdict": "fail", "reason": reason, "metrics": metrics})
    return {"results": results}


def test_the_same_failure_with_similar_values_on_most_nodes_trips_it() -> None:
    docs = {f"n{i}": doc(f"n{i}", "stream", 410.0 + i) for i in range(5)}
    v = circuit_breaker(docs, share=0.5, min_nodes=3)
    assert v.tripped and v.check == "stream" and len(v.nodes) == 5
    assert "nvtest suspects itself" in v.reason and "nothing drained" in v.reason


def test_spread_values_or_a_minority_do_not() -> None:
    spread = {f"n{i}": doc(f"n{i}", "stream", v) for i, v in enumerate((100.0, 200.0, 300.0, 400.0))}
    assert not circuit_breaker(spread, share=0.5, min_nodes=3).tripped
    minority = {f"n{i}": doc(f"n{i}", "stream" if i < 2 else None, 400.0) for i in range(5)}
    v = circuit_breaker(minority, share=0.5, min_nodes=3)
    assert not v.tripped and "2/5" in v.reason


def test_the_same_reason_without_numbers_trips_it_whatever_the_node() -> None:
    docs = {
        n: doc(n, "gpus", None, f"{n}: 0 GPUs visible to nvidia-smi, SKU h100-sxm-80gb expects 8")
        for n in ("a1", "a2", "a3")
    }
    v = circuit_breaker(docs, share=0.5, min_nodes=3)
    assert v.tripped and v.check == "gpus" and v.details["signature"].startswith("reason <node>: # GPUs")


def test_too_few_nodes_are_no_pattern() -> None:
    docs = {n: doc(n, "stream", 400.0) for n in ("a1", "a2")}
    v = circuit_breaker(docs, share=0.5, min_nodes=3)
    assert not v.tripped and "fewer than 3" in v.reason
    assert circuit_breaker(docs, share=0.5, min_nodes=2).tripped


@pytest.mark.parametrize("spec", ["abc", "200%", "-5"])
def test_a_bad_max_out_is_a_usage_error_before_slurm_is_asked(tmp_path: Path, spec: str) -> None:
    """Exit 2 naming --max-out, not Slurm's error (exit 3), and no sweep directory left."""
    proc = run_nvtest(
        "sweep", "--partition", "gpu", "--max-out", spec, "--out", str(tmp_path / "r"), "--history", "off", timeout=60
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"--max-out {spec!r}" in proc.stderr and "sinfo" not in proc.stderr and "scontrol" not in proc.stderr
    assert not (tmp_path / "r").exists() or not any((tmp_path / "r").iterdir())
