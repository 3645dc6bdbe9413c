"""A result's reason is one readable line of at most REASON_MAX_CHARS; the evidence holds the
rest (issue 24, class 7: package_drift repeated its dpkg command per package, container_identity
embedded the whole srun line, 5 KB reasons).

The bound is kept in one place, :class:`nvtest.results.CheckResult` (every item the plugin
records) and the run's analysis (:func:`nvtest.analysis.postprocess.post_process`, after it
adds fleet notes); the checks below are the ones that made long reasons, run on inputs that
make them long, and recorded the way the plugin records an item.
"""

from __future__ import annotations

import pytest

from nvtest.analysis.postprocess import post_process
from nvtest.checks.api import Judge
from nvtest.checks.config.container import judge_identities, parse_identities
from nvtest.checks.config.packages import Package, package_drift
from nvtest.checks.health import Outcome, apply
from nvtest.results import REASON_MAX_CHARS, CheckResult, one_line_reason
from nvtest.testing.standin import Recording
from nvtest.verdict import Verdict
from tests.checks.config.conftest import dpkg_lines, probe_platform
from tests.checks.config.fakesys import titanx_plx

SRUN = (
    "srun --nodes=2 --ntasks-per-node=8 --container-image=/shared/images/pytorch-24.05-nvtest.sqsh "
    "--container-mounts=/shared:/shared,/scratch:/scratch,/etc/nvtest-image-id:/etc/nvtest-image-id "
    + " ".join(f"--export=ALL,NCCL_VAR_{i}=value{i}" for i in range(40))
    + " sh -c 'echo nvtest-rank rank=$SLURM_PROCID node=$SLURMD_NODENAME'"
)


def _package_drift(tmp_path) -> tuple[str, Outcome]:
    """Thirty kernel/driver packages changed after the image on one node of three."""
    mine = {f"nvidia-pkg-{i:02d}": (f"560.35.{i:02d}-1", 1_714_100_000 + i) for i in range(30)}
    p = probe_platform(tmp_path, titanx_plx(), {"dpkg-query": Recording(stdout=dpkg_lines(mine))})
    base = {k: Package(k, "535.104.05-1", 1_713_000_000) for k in mine}
    fleet = {"node001": dict(base), "node002": dict(base), "me": {k: Package(k, v, t) for k, (v, t) in mine.items()}}
    return "package_drift", package_drift(p, fleet)


def _container_identity(tmp_path) -> tuple[str, Outcome]:
    """Sixteen ranks of which eight ran on the host, the launch line 2 KB long."""
    lines = "".join(
        f"nvtest-rank rank={r} node=gpu00{1 + r // 8} image={'-' if r >= 8 else 'img-7'} "
        f"source={'none' if r >= 8 else '/etc/nvtest-image-id'}\n"
        for r in range(16)
    )
    outs = judge_identities(parse_identities(lines), {r: f"gpu00{1 + r // 8}" for r in range(16)}, "img-7", SRUN)
    return "container_identity", outs["gpu002"]


LONG = {"package_drift": _package_drift, "container_identity": _container_identity}


@pytest.mark.parametrize("name", sorted(LONG))
def test_a_long_reason_is_one_bounded_line_and_the_evidence_keeps_it_whole(name, tmp_path):
    check, out = LONG[name](tmp_path)
    judge = Judge(None, check, "gpu002", None)
    apply(out, judge)
    assert judge.verdict is Verdict.FAIL
    words = judge.summary()
    assert len(words) > 2 * REASON_MAX_CHARS, len(words)  # the input does make it long
    res = CheckResult(
        check=check,
        node="gpu002",
        verdict=judge.verdict,
        reason=words,
        metrics=tuple(judge.metrics),
        details=dict(judge.details),
    )  # as the plugin does
    assert len(res.reason) <= REASON_MAX_CHARS and "\n" not in res.reason, res.reason
    assert "whole reason in details.reason_full" in res.reason
    assert res.details is not None and res.details["reason_full"] == words
    first = out.failures[0].split(" (source: ")[0]
    assert res.reason.startswith(first[:20]), (res.reason, first)  # the first finding, not a command line
    assert SRUN not in res.reason and "dpkg-query" not in res.reason
    failing = [f for f in res.details["findings"] if f["severity"] == "fail"]
    assert len(failing) >= 8
    for finding in failing:  # every failing finding, with its source, is in the evidence
        assert finding["message"] in res.details["reason_full"]


def test_the_analysis_keeps_the_bound_and_diagnoses_from_the_whole_words():
    tail = "NCCL WARN NET/IB : Got completion from peer 10.0.0.2<53474> with status=12 opcode=0"
    reason = "; ".join([f"finding {i}: a long sentence about what was seen on the node" for i in range(12)] + [tail])
    res = CheckResult(check="nccl", node="n1", verdict=Verdict.FAIL, reason=reason)
    doc = {"run": {}, "nodes": {"n1": {"sku": None}}, "results": [res.to_json()]}
    post_process(doc)
    r = doc["results"][0]
    assert len(r["reason"]) <= REASON_MAX_CHARS and r["details"]["reason_full"] == reason
    assert tail not in r["reason"]
    assert r["diagnosis"]["rule"] not in ("generic_fail", "generic_error"), r["diagnosis"]


def test_short_reasons_are_kept_as_they_are():
    assert one_line_reason("bf16_tflops: 612 TFLOP/s < min 650 TFLOP/s") == (
        "bf16_tflops: 612 TFLOP/s < min 650 TFLOP/s",
        False,
    )
    res = CheckResult(check="gemm", node="n1", verdict=Verdict.FAIL, reason="two\nlines")
    assert res.reason == "two lines" and res.details == {"reason_full": "two\nlines"}
