"""Pair schedules: properties for N from 2 to 1,024 (odd N included), and the named round counts."""

from __future__ import annotations

from itertools import combinations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nvtest.jobs.pairs import (
    all_pairs,
    build_schedule,
    estimate_wall_s,
    random_matchings,
    ring,
)


def _names(n: int) -> list[str]:
    return [f"gpu{i:04d}" for i in range(n)]


def _no_node_twice_per_round(schedule) -> None:
    for rnd in schedule.rounds:
        busy = [x for p in rnd for x in p]
        assert len(busy) == len(set(busy)), rnd
        assert all(a != b for a, b in rnd)


# small N often, large N (up to 1,024) sometimes: all-pairs of 1,024 is 523,776 pairs
sizes = st.one_of(st.integers(2, 64), st.integers(65, 1024))


@settings(max_examples=20, deadline=None)
@given(st.one_of(st.integers(2, 64), st.integers(65, 1024), st.sampled_from([1023, 1024])))
def test_all_pairs_every_pair_once_and_round_count(n):
    names = _names(n)
    s = all_pairs(names)
    _no_node_twice_per_round(s)
    index = {x: i for i, x in enumerate(names)}
    seen = [min(index[a], index[b]) * n + max(index[a], index[b]) for a, b in s.pairs]
    assert len(seen) == len(set(seen)) == n * (n - 1) // 2
    assert len(s.rounds) == (n - 1 if n % 2 == 0 else n)
    for i, rnd in enumerate(s.rounds):  # every node plays or has the bye, once
        covered = [x for p in rnd for x in p] + list(s.byes[i])
        assert sorted(covered) == names


@settings(max_examples=60, deadline=None)
@given(sizes)
def test_ring_every_node_twice(n):
    names = _names(n)
    s = ring(names)
    _no_node_twice_per_round(s)
    count = {x: 0 for x in names}
    for a, b in s.pairs:
        count[a] += 1
        count[b] += 1
    if n == 2:
        assert len(s.rounds) == 1 and s.pairs == [(names[0], names[1])]
    else:
        assert set(count.values()) == {2}
        assert len(s.rounds) == (2 if n % 2 == 0 else 3)
        assert {frozenset(p) for p in s.pairs} == {frozenset((names[i], names[(i + 1) % n])) for i in range(n)}


@settings(max_examples=40, deadline=None)
@given(sizes, st.integers(1, 4), st.integers(0, 2**32))
def test_random_matchings_cover_every_node_each_round(n, k, seed):
    names = _names(n)
    s = random_matchings(names, k=k, seed=seed)
    _no_node_twice_per_round(s)
    assert len(s.rounds) == k
    for i, rnd in enumerate(s.rounds):
        assert len(rnd) == n // 2
        assert sorted([x for p in rnd for x in p] + list(s.byes[i])) == names
    assert random_matchings(names, k=k, seed=seed) == s  # seeded: repeatable


def test_named_round_counts_for_1024_nodes():
    names = _names(1024)
    assert len(ring(names).rounds) == 2
    assert len(all_pairs(names).rounds) == 1023
    assert len(all_pairs(names[:1023]).rounds) == 1023


def test_small_cases_exactly():
    assert ring(["a"]).rounds == () and all_pairs(["a"]).rounds == ()
    assert all_pairs(["a", "b", "c", "d"]).rounds == (
        (("a", "d"), ("b", "c")),
        (("a", "c"), ("d", "b")),
        (("a", "b"), ("c", "d")),
    )
    three = all_pairs(["a", "b", "c"])
    assert {frozenset(p) for p in three.pairs} == {frozenset(p) for p in combinations("abc", 2)}
    assert sorted(b for bye in three.byes for b in bye) == ["a", "b", "c"]


def test_build_schedule_names_and_errors():
    assert build_schedule("ring", ["a", "b", "c", "d"]).name == "ring"
    assert build_schedule("random", ["a", "b"], k=2).name == "random"
    with pytest.raises(ValueError, match="known: ring, all-pairs, random"):
        build_schedule("star", ["a", "b"])
    with pytest.raises(ValueError, match="distinct"):
        ring(["a", "a"])


def test_wall_time_estimate_counts_waves():
    s = all_pairs(_names(8))  # 7 rounds of 4 pairs
    assert estimate_wall_s(s, 10.0) == 70.0
    assert estimate_wall_s(s, 10.0, max_concurrent_pairs=3) == 140.0
