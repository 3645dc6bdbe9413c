"""A device left out of a pair test because a peer lacked it is a finding about that device."""

from __future__ import annotations

from nvtest.checks.interconnect.pair_check import label_coverage
from nvtest.jobs.blame import NodeFinding, PairOutcome
from nvtest.jobs.pair_runner import PairReport
from nvtest.jobs.pairs import Schedule

HCAS = {"a": ["mlx5_0", "mlx5_1"], "b": ["mlx5_0"], "c": ["mlx5_0", "mlx5_1"]}


def _report(pairs: list[tuple[str, str]]) -> PairReport:
    outs = [PairOutcome((x, y), "pass", 390.0, "Gb/s", label=h) for x, y in pairs for h in HCAS[x] if h in HCAS[y]]
    findings = {n: NodeFinding(n, "pass", "", tuple(o for o in outs if n in o.pair)) for n in HCAS}
    return PairReport(Schedule("ring", ((tuple(pairs)),)), tuple(outs), (), findings)


def _used(node: str):
    return lambda peer: [h for h in HCAS[node] if h in HCAS[peer]]


def test_left_out_with_one_peer_but_measured_with_another():
    report = _report([("a", "b"), ("b", "c"), ("c", "a")])
    cov = label_coverage(report, "a", HCAS["a"], ["mlx5_0", "mlx5_1"], _used("a"))
    assert cov.left_out == {"mlx5_1": ["b"]} and cov.never == () and cov.lacking == ()
    assert cov.effective(HCAS["a"])["measured"] == ["mlx5_0", "mlx5_1"]


def test_never_measured_when_every_peer_lacks_it_and_the_lacking_node_is_named():
    report = _report([("a", "b")])
    cov = label_coverage(report, "a", HCAS["a"], ["mlx5_0", "mlx5_1"], _used("a"))
    assert cov.never == ("mlx5_1",) and cov.left_out == {"mlx5_1": ["b"]}
    lacking = label_coverage(report, "b", HCAS["b"], ["mlx5_0", "mlx5_1"], _used("b"))
    assert lacking.lacking == ("mlx5_1",)
