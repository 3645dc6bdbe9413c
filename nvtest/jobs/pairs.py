"""Pair schedules: which nodes test the link between them, in rounds that run at once.

A schedule is a list of rounds; a round is a tuple of disjoint pairs (no node twice in a
round), so every pair of a round can run concurrently without two tests sharing a node.

- ``ring``: node i with node i+1 (mod N). Every node is in two pairs. For even N the ring's
  edges split into two perfect matchings: **2 rounds**. An odd cycle needs three colours
  (its chromatic index is 3), so odd N >= 3 takes 3 rounds, the third holding one pair.
  N = 2 has one pair (1 round); N = 1 has none.
- ``all-pairs``: the round-robin tournament by the circle method (Kirkman 1847; e.g. Harary,
  *Graph Theory*, 1969, thm 9.1: K_2n is 1-factorable): node 0 is fixed and the others rotate.
  Every unordered pair exactly once; **N - 1 rounds** of N/2 pairs for even N; for odd N a
  phantom node is added, whose partner sits the round out (a bye): **N rounds** of (N-1)/2.
- ``random``: ``k`` random perfect matchings (one bye per round for odd N), from a seeded
  generator, so a run can be repeated exactly; pairs may repeat across rounds (as the
  randomised iterations of Imbue's host-validation scripts do).

Names are kept as given; the schedules depend only on their order.
"""

from __future__ import annotations

import random as _random
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "SCHEDULES",
    "Pair",
    "Round",
    "Schedule",
    "all_pairs",
    "build_schedule",
    "estimate_wall_s",
    "random_matchings",
    "ring",
]

#: An unordered pair, as (first, second) in the order the schedule chose (first serves).
Pair = tuple[str, str]
#: Disjoint pairs that run at the same time.
Round = tuple[Pair, ...]

SCHEDULES = ("ring", "all-pairs", "random")


@dataclass(frozen=True)
class Schedule:
    """A named schedule: its rounds and, per round, the node that sat out (odd N)."""

    name: str
    rounds: tuple[Round, ...]
    byes: tuple[tuple[str, ...], ...] = ()

    @property
    def pairs(self) -> list[Pair]:
        """Every pair of every round, in order."""
        return [p for r in self.rounds for p in r]

    def nodes_in(self, index: int) -> set[str]:
        """The nodes busy in round ``index``."""
        return {n for p in self.rounds[index] for n in p}


def _check(nodes: Sequence[str]) -> list[str]:
    names = list(nodes)
    if len(set(names)) != len(names):
        raise ValueError("node names must be distinct")
    return names


def ring(nodes: Sequence[str]) -> Schedule:
    """Ring pairs (i, i+1 mod N): 2 rounds for even N, 3 for odd N >= 3, 1 for N = 2."""
    names = _check(nodes)
    n = len(names)
    if n < 2:
        return Schedule("ring", ())
    if n == 2:
        return Schedule("ring", (((names[0], names[1]),),))
    even = tuple((names[i], names[i + 1]) for i in range(0, n - 1, 2))
    odd = tuple((names[i], names[(i + 1) % n]) for i in range(1, n, 2))
    if n % 2 == 0:
        return Schedule("ring", (even, odd))
    # odd n: `even` leaves the last node out, `odd` ends with (n-2, n-1); the closing edge
    # (n-1, 0) shares a node with both, so it runs alone in a third round.
    closing = ((names[n - 1], names[0]),)
    return Schedule(
        "ring",
        (even, odd, closing),
        ((names[n - 1],), (names[0],), tuple(names[1 : n - 1])),
    )


def all_pairs(nodes: Sequence[str]) -> Schedule:
    """Round-robin tournament (circle method): each pair once, N-1 rounds (even N) or N (odd N)."""
    names: list[str | None] = list(_check(nodes))
    if len(names) < 2:
        return Schedule("all-pairs", ())
    if len(names) % 2:
        names.append(None)  # the phantom: its partner has a bye
    m = len(names)
    rounds: list[Round] = []
    byes: list[tuple[str, ...]] = []
    order = list(range(m))
    for _ in range(m - 1):
        rnd: list[Pair] = []
        bye: list[str] = []
        for i in range(m // 2):
            a, b = names[order[i]], names[order[m - 1 - i]]
            if a is None or b is None:
                bye.append(a if b is None else b)  # type: ignore[arg-type]
            else:
                rnd.append((a, b))
        rounds.append(tuple(rnd))
        byes.append(tuple(bye))
        order = [order[0], order[-1], *order[1:-1]]  # rotate all but the first
    return Schedule("all-pairs", tuple(rounds), tuple(byes))


def random_matchings(nodes: Sequence[str], k: int = 3, seed: int = 0) -> Schedule:
    """``k`` random perfect matchings from ``random.Random(seed)`` (a bye per round for odd N)."""
    names = _check(nodes)
    if k < 1:
        raise ValueError("k must be at least 1")
    if len(names) < 2:
        return Schedule("random", ())
    rng = _random.Random(seed)
    rounds: list[Round] = []
    byes: list[tuple[str, ...]] = []
    for _ in range(k):
        order = names[:]
        rng.shuffle(order)
        bye = (order.pop(),) if len(order) % 2 else ()
        rounds.append(tuple((order[i], order[i + 1]) for i in range(0, len(order), 2)))
        byes.append(bye)
    return Schedule("random", tuple(rounds), tuple(byes))


def build_schedule(name: str, nodes: Sequence[str], *, k: int = 3, seed: int = 0) -> Schedule:
    """The schedule called ``name`` (one of :data:`SCHEDULES`) over ``nodes``.

    Raises:
        ValueError: unknown name (the message lists the known ones).
    """
    if name == "ring":
        return ring(nodes)
    if name == "all-pairs":
        return all_pairs(nodes)
    if name == "random":
        return random_matchings(nodes, k=k, seed=seed)
    raise ValueError(f"unknown pair schedule {name!r}; known: {', '.join(SCHEDULES)}")


def estimate_wall_s(schedule: Schedule, per_pair_s: float, max_concurrent_pairs: int | None = None) -> float:
    """Estimated wall time, seconds: every round takes ``per_pair_s`` per wave of pairs.

    A round of P pairs runs in ceil(P / ``max_concurrent_pairs``) waves (one wave when the
    limit is None), each taking ``per_pair_s``.
    """
    total = 0.0
    for rnd in schedule.rounds:
        waves = 1 if not max_concurrent_pairs else -(-len(rnd) // max_concurrent_pairs)
        total += waves * per_pair_s
    return total
