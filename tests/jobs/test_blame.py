"""Blame and re-pairing: the node common to failing pairs is found and confirmed."""

from __future__ import annotations

from nvtest.jobs.blame import PairOutcome, attribute, find_suspects, repair_rounds
from nvtest.jobs.pairs import all_pairs, ring


def _first_pass(pairs, bad: set[str], erring: set[str] = frozenset()):
    out = []
    for a, b in pairs:
        if {a, b} & erring:
            out.append(PairOutcome((a, b), "error", reason="timed out"))
        elif {a, b} & bad:
            out.append(PairOutcome((a, b), "fail", 3.0, "Gb/s", "below 100 Gb/s"))
        else:
            out.append(PairOutcome((a, b), "pass", 390.0, "Gb/s"))
    return out


def _second_pass(rounds, bad):
    return [
        PairOutcome(p, "fail" if set(p) & bad else "pass", 1.0, "Gb/s", second_pass=True) for r in rounds for p in r
    ]


def _run(names, pairs, bad, erring=frozenset()):
    first = _first_pass(pairs, bad, erring)
    sus = find_suspects(names, first)
    rounds = repair_rounds(sus)
    for r in rounds:
        busy = [n for p in r for n in p]
        assert len(busy) == len(set(busy))
    second = _second_pass(rounds, bad)
    return sus, attribute(names, first, second, sus)


def test_all_pairs_one_bad_node_is_blamed_and_confirmed():
    names = [f"n{i}" for i in range(6)]
    sus, found = _run(names, all_pairs(names).pairs, {"n3"})
    assert sus.suspects == ("n3",) and sus.common == {"n3"}
    assert "n3" not in sus.known_good and len(sus.known_good) == 5
    assert found["n3"].verdict == "fail" and "known-good" in found["n3"].reason
    assert all(found[n].verdict == "pass" for n in names if n != "n3")
    assert "attributed to n3" in found["n0"].reason


def test_ring_bad_node_between_two_failing_pairs():
    names = [f"n{i}" for i in range(8)]
    sus, found = _run(names, ring(names).pairs, {"n5"})
    assert sus.suspects == ("n5",)
    assert [v.node for v in found.values() if v.verdict == "fail"] == ["n5"]


def test_two_node_cluster_cannot_isolate():
    names = ["a", "b"]
    sus, found = _run(names, [("a", "b")], {"a"})
    assert sus.known_good == () and set(sus.suspects) == {"a", "b"}
    assert found["a"].verdict == found["b"].verdict == "fail"
    assert "cannot isolate" in found["a"].reason


def test_single_failing_pair_resolved_by_second_pass():
    names = [f"n{i}" for i in range(4)]
    pairs = [("n0", "n1"), ("n2", "n3")]
    first = [
        PairOutcome(("n0", "n1"), "fail", 1.0, "Gb/s", "slow"),
        PairOutcome(("n2", "n3"), "pass", 390.0, "Gb/s"),
    ]
    sus = find_suspects(names, first)
    assert set(sus.suspects) == {"n0", "n1"} and sus.known_good == ("n2", "n3")
    rounds = repair_rounds(sus)
    assert rounds == [(("n2", "n0"), ("n3", "n1"))]
    second = _second_pass(rounds, {"n1"})
    found = attribute(names, first, second, sus)
    assert found["n1"].verdict == "fail"
    assert found["n0"].verdict == "warn" and "partner" in found["n0"].reason
    assert found["n2"].verdict == found["n3"].verdict == "pass"
    del pairs


def test_errors_are_not_passes_and_not_blame():
    names = [f"n{i}" for i in range(4)]
    sus, found = _run(names, ring(names).pairs, set(), erring={"n2"})
    assert sus.suspects == ()
    assert found["n2"].verdict == "error" and "timed out" in found["n2"].reason
    assert found["n0"].verdict == "pass"


def test_second_pass_that_errs_still_fails_the_suspect():
    names = [f"n{i}" for i in range(4)]
    first = _first_pass(ring(names).pairs, {"n1"})
    sus = find_suspects(names, first)
    second = [PairOutcome(p, "error", reason="unreachable", second_pass=True) for r in repair_rounds(sus) for p in r]
    found = attribute(names, first, second, sus)
    assert found["n1"].verdict == "fail" and "could not run" in found["n1"].reason


def test_the_words_failing_pairs_share_lead_the_node_reason_within_its_bound():
    """The transport NCCL fell back to is the cause: it comes before the pair bookkeeping, so
    the one-line reason (bounded to REASON_MAX_CHARS) still names it with many pairs listed."""
    from nvtest.results import REASON_MAX_CHARS, bound_reason

    names = ["a", "b"]
    words = "NCCL used network Socket (NET/Socket : Using [0]eth0:10.0.0.1<0>): no RDMA path"
    first = [PairOutcome(("a", "b"), "fail", 22.0, "GB/s", words, label=f"mlx5_{i}") for i in range(8)]
    sus = find_suspects(names, first)
    found = attribute(names, first, [], sus)
    line, _ = bound_reason(found["a"].reason, {})
    assert found["a"].verdict == "fail" and line.startswith(words) and len(line) <= REASON_MAX_CHARS
    assert "cannot isolate" in found["a"].reason


def test_a_failure_the_tool_printed_from_one_nodes_process_is_that_nodes():
    # nccl#629: "gpu-node-0001: Test NCCL failure ... 'unhandled cuda error'", no word of b's
    named = [PairOutcome(("a", "b"), "fail", None, "GB/s", "CUDA failure on a", named="a")]
    sus = find_suspects(["a", "b"], named)
    assert sus.suspects == ("a",) and "a" in sus.common
    found = attribute(["a", "b"], named, suspicion=sus)
    assert found["a"].verdict == "fail" and "cannot isolate" not in found["a"].reason
    assert "its own process printed the failure" in found["a"].reason
    # b is not blamed, and not proven good either: no pair of its own passed
    assert found["b"].verdict == "error" and "attributed to a" in found["b"].reason
    # with no process named, the two-node pair still cannot be isolated
    anon = [PairOutcome(("a", "b"), "fail", None, "GB/s", "busbw below the floor")]
    assert set(find_suspects(["a", "b"], anon).suspects) == {"a", "b"}
