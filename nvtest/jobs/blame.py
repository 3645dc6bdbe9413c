"""Which node failing pairs point at, and the second pass that confirms it (pure).

A pair test measures a link between two nodes; a failing pair does not say which end is at
fault. The rules, as the CHS pairwise NCCL test and Imbue's host validation apply them:

1. **Suspects.** A failing pair whose failure the tool printed from one node's process only
   (``PairOutcome.named``: its failure line, or the NCCL WARN of a path fault) is explained by
   that node, as a *common* suspect. Then take the failing pairs; repeatedly blame the node that
   appears in the most still-unexplained failing pairs (at least two): that node is *common* to
   those failures and they are explained by it. A failing pair left unexplained (each of its nodes failed once)
   makes both of its nodes suspects (*ambiguous*).
2. **Known-good nodes**: not suspects, at least one passing pair, no pair that erred.
3. **Second pass** (:func:`repair_rounds`): each suspect is paired with a known-good node
   (no node twice in a round) and tested again.
4. **Attribution** (:func:`attribute`): a suspect that fails again with a known-good node is
   the faulty node (``fail``); one that passes with a known-good node is cleared (``warn``:
   the first-pass failure is on its partner or on the path between them). With no known-good
   node to re-pair with, a *common* suspect fails on the first-pass evidence and an ambiguous
   one fails with "cannot isolate". A node whose failing pairs are all explained by a suspect
   confirmed faulty passes (the failure is noted), where a pair of its own passed; with none,
   it is ``error`` (not measured). A pair that could not run (``error``)
   gives its nodes ``error`` unless they have a worse verdict.

A failing pair is never turned into a pass by a retry: the second pass only decides which of
its two nodes the failure belongs to.

Hangs (a pair that ran past its deadline) are pinned, not copied (:func:`pinned_hangs`): a
hang is pinned on a node when the evidence names it (a process there survived SIGKILL, or the
node was blocked by an earlier hang) or when the node is common to two or more hung pairs.
Once pinned, the node is paired no further (the runner records the pairs it would have run as
errors naming it, at no deadline's cost) and is neither a suspect nor known-good; its peers'
hung pairs are explained by it, not errors of theirs. A peer left with no pair measured but
such hangs is re-paired with a known-good node in the second pass (an *orphan*).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from nvtest.jobs.pairs import Pair, Round

__all__ = [
    "NodeFinding",
    "PairOutcome",
    "Suspicion",
    "attribute",
    "find_suspects",
    "pinned_hangs",
    "repair_rounds",
]

Status = Literal["pass", "fail", "error"]


@dataclass(frozen=True)
class PairOutcome:
    """The result of one pair test.

    Attributes:
        pair: (first, second) as scheduled (first = server or launcher).
        status: ``pass``, ``fail`` (below the floor, wrong results, a tool-reported fabric
            error) or ``error`` (could not run: unreachable, timeout, unreadable output).
        value: the measured figure (e.g. Gb/s), None when none.
        unit: unit of ``value``.
        reason: why not a pass ("" for a pass).
        round: the round index; second-pass rounds continue the numbering.
        second_pass: True for a re-pairing with a known-good node.
        label: what was measured (e.g. the HCA name); "" when one test per pair.
        logs: node name -> evidence path of this pair's commands.
        command: the command lines run, one per line.
        hung: the nodes whose command ran past its deadline (timed out, left an unkillable
            process, or was blocked by an earlier hang there).
        pinned: the node the evidence pins the hang on ("" when it names none): the one whose
            process survived SIGKILL or that an earlier hang blocked.
        named: for a failing pair, the node whose own process printed the failure (the tool's
            failure line, a path fault in its warnings) when only one did ("" otherwise).
        cause: the cause key of a failure the judge named (``results:wrong``) or of an
            ``error`` its node's command gave (``transport:timeout``,
            ``transport:unkillable:storage``: :func:`nvtest.session.phase.cause_of`), else None.
    """

    pair: Pair
    status: Status
    value: float | None = None
    unit: str = ""
    reason: str = ""
    round: int = 0
    second_pass: bool = False
    label: str = ""
    logs: dict[str, str] = field(default_factory=dict)
    command: str = ""
    hung: tuple[str, ...] = ()
    pinned: str = ""
    named: str = ""
    cause: str | None = None

    def peer(self, node: str) -> str:
        """The other node of the pair."""
        a, b = self.pair
        return b if node == a else a

    def describe(self) -> str:
        """``node01<->node02 [mlx5_0]: 12.3 Gb/s (reason)``."""
        a, b = self.pair
        lab = f" [{self.label}]" if self.label else ""
        val = f"{self.value:.4g} {self.unit}" if self.value is not None else "no value"
        return f"{a}<->{b}{lab}: {val}" + (f" ({self.reason})" if self.reason else "")


@dataclass(frozen=True)
class Suspicion:
    """The first pass read: suspects, which are common to several failures, the known-good;
    the nodes hangs are pinned on (node -> why) and the orphans (nodes whose only pairs hung
    on a pinned node), re-paired with known-good nodes like the suspects."""

    suspects: tuple[str, ...]
    common: frozenset[str]
    known_good: tuple[str, ...]
    explained_by: dict[Pair, str]
    pinned: dict[str, str] = field(default_factory=dict)
    orphans: tuple[str, ...] = ()


@dataclass(frozen=True)
class NodeFinding:
    """One node's verdict from the pair tests it took part in; ``cause``: the cause key of the
    outcome its reason is made from, where that outcome has one."""

    node: str
    verdict: Status | Literal["warn"]
    reason: str
    outcomes: tuple[PairOutcome, ...]
    cause: str | None = None


def _lead(fails: list[PairOutcome] | tuple[PairOutcome, ...]) -> str:
    """The words the failing pairs share, to lead a node's reason (``"NCCL used network
    Socket ...: "``), or "" when they share none.

    A node's reason is bounded to one line (:data:`nvtest.results.REASON_MAX_CHARS`); the
    cause a tool named (the transport NCCL fell back to, GDR off on an HCA) must come before
    the pair bookkeeping that the bound would otherwise keep instead of it.
    """
    reasons = [o.reason for o in fails if o.reason]
    if not reasons:
        return ""
    top, count = Counter(reasons).most_common(1)[0]
    if count < 2 and len(reasons) > 1:  # no reason shared by the pairs: none leads
        return ""
    return f"{top[:160]}: "


def _key(pair: Pair) -> Pair:
    a, b = pair
    return (a, b) if a <= b else (b, a)


def pinned_hangs(outcomes: Iterable[PairOutcome]) -> dict[str, str]:
    """node -> why a hang is pinned on it: the evidence names it (``pinned``), or it is common
    to two or more hung pairs with different peers (the module text)."""
    out: dict[str, str] = {}
    hung_with: dict[str, set[str]] = {}
    for o in outcomes:
        # pinned by its own evidence: a process there survived SIGKILL or it was blocked (a
        # hung pair), or a pair not run because a hang was already pinned on it
        if o.pinned and o.pinned not in out and (o.pinned in o.hung or not o.hung):
            out[o.pinned] = o.reason or "hung"
        for n in o.hung:
            hung_with.setdefault(n, set()).add(o.peer(n))
    for n, peers in sorted(hung_with.items()):
        if n not in out and len(peers) >= 2:
            out[n] = f"hung with {len(peers)} peers ({', '.join(sorted(peers))})"
    return out


def _culprit(o: PairOutcome, pinned: Mapping[str, str]) -> str:
    """The node an errored outcome's hang is pinned on ("" when none)."""
    if o.status != "error":
        return ""
    if o.pinned:
        return o.pinned
    on = [n for n in o.pair if n in pinned]
    return on[0] if len(on) == 1 else ""


def find_suspects(nodes: Sequence[str], outcomes: Iterable[PairOutcome]) -> Suspicion:
    """Read the first pass: see the module docstring, rules 1 and 2, and the hangs."""
    outs = list(outcomes)
    pinned = pinned_hangs(outs)
    failing = sorted({_key(o.pair) for o in outs if o.status == "fail"})
    unexplained = set(failing)
    explained_by: dict[Pair, str] = {}
    common: set[str] = set()
    # a failure the tool's own words put on one node's process is that node's (rule 1)
    for o in outs:
        if o.status == "fail" and o.named in o.pair and _key(o.pair) in unexplained:
            common.add(o.named)
            explained_by[_key(o.pair)] = o.named
            unexplained.discard(_key(o.pair))
    while unexplained:
        counts = Counter(n for p in unexplained for n in p)
        node, count = min(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        if count < 2:
            break
        common.add(node)
        for p in [p for p in unexplained if node in p]:
            explained_by[p] = node
            unexplained.discard(p)
    suspects = (set(common) | {n for p in unexplained for n in p}) - set(pinned)
    passed = {n for o in outs if o.status == "pass" for n in o.pair}
    judged = {n for o in outs if o.status in ("pass", "fail") for n in o.pair}
    erred = {n for o in outs if o.status == "error" and not _culprit(o, pinned) for n in o.pair}
    good = tuple(n for n in nodes if n in passed and n not in suspects and n not in erred and n not in pinned)
    explained = {n for o in outs if (c := _culprit(o, pinned)) for n in o.pair if n != c}
    orphans = tuple(n for n in nodes if n in explained and n not in judged and n not in erred and n not in pinned)
    order = sorted(suspects, key=lambda n: (n not in common, list(nodes).index(n) if n in nodes else 0))
    return Suspicion(tuple(order), frozenset(common), good, explained_by, pinned, orphans)


def repair_rounds(suspicion: Suspicion) -> list[Round]:
    """Pair every suspect (then every orphan) with a known-good node; rounds keep every node to
    one pair.

    Suspect i meets known-good node i mod G in round i // G (G known-good nodes), so a round
    holds at most G pairs and no node twice. Empty when there is no known-good node.
    """
    good = suspicion.known_good
    if not good:
        return []
    rounds: list[list[Pair]] = []
    for i, suspect in enumerate([*suspicion.suspects, *suspicion.orphans]):
        r = i // len(good)
        while len(rounds) <= r:
            rounds.append([])
        rounds[r].append((good[i % len(good)], suspect))
    return [tuple(r) for r in rounds]


def attribute(
    nodes: Sequence[str],
    first: Sequence[PairOutcome],
    second: Sequence[PairOutcome] = (),
    suspicion: Suspicion | None = None,
) -> dict[str, NodeFinding]:
    """Each node's finding from the first and second pass (module docstring, rules 3 and 4)."""
    sus = suspicion or find_suspects(nodes, first)
    by_node: dict[str, list[PairOutcome]] = {n: [] for n in nodes}
    for o in [*first, *second]:
        for n in o.pair:
            by_node.setdefault(n, []).append(o)
    confirmed: set[str] = set()
    cleared: set[str] = set()
    for s in sus.suspects:
        mine = [o for o in second if s in o.pair]
        if any(o.status == "fail" for o in mine):
            confirmed.add(s)
        elif mine and all(o.status == "pass" for o in mine):
            cleared.add(s)
    out: dict[str, NodeFinding] = {}
    for n in nodes:
        outs = tuple(by_node.get(n, ()))
        out[n] = _quoted_cause(_finding(n, outs, sus, confirmed, cleared))
    return out


def _quoted_cause(f: NodeFinding) -> NodeFinding:
    """``f`` with the cause key of the first failing pair its reason quotes (a value outside
    its threshold: ``threshold:below_floor``) where it has none of its own."""
    if f.verdict != "fail" or f.cause is not None:
        return f
    quoted = next((o.cause for o in f.outcomes if o.status == "fail" and o.cause and o.describe() in f.reason), None)
    return replace(f, cause=quoted) if quoted else f


def _finding(
    n: str, outs: tuple[PairOutcome, ...], sus: Suspicion, confirmed: set[str], cleared: set[str]
) -> NodeFinding:
    fails = [o for o in outs if o.status == "fail" and not o.second_pass]
    again = [o for o in outs if o.second_pass and n == o.pair[1]]
    errors = [o for o in outs if o.status == "error" and _culprit(o, sus.pinned) in ("", n)]
    if n in sus.pinned:
        mine = [o for o in outs if o.status == "error" and (n in o.hung or o.pinned == n)]
        # a process of its own that survived SIGKILL proves the node bad (a fail, as anywhere)
        wedged = any(o.pinned == n and "unkillable" in o.reason for o in mine)
        causes = [o.cause for o in sorted(mine, key=lambda o: o.pinned != n) if o.cause]
        return NodeFinding(
            n,
            "fail" if wedged else "error",
            f"the pair test hung on this node ({sus.pinned[n]}); no further pair was run with it: "
            + "; ".join(o.describe() for o in mine[:3]),
            outs,
            causes[0] if causes else None,
        )
    if n in sus.orphans:
        return _orphan(n, outs, again, sus)
    listed = "; ".join(o.describe() for o in fails[:4]) + (f" (+{len(fails) - 4} more)" if len(fails) > 4 else "")
    if n in confirmed:
        bad = next(o for o in again if o.status == "fail")
        return NodeFinding(
            n,
            "fail",
            f"{_lead(fails)}fails with known-good node {bad.peer(n)} too: {bad.describe()}; first pass: {listed}",
            outs,
        )
    if n in cleared:
        return NodeFinding(
            n,
            "warn",
            f"passed with known-good node {again[0].peer(n)}; first-pass failure(s) lie with the partner or the path: {listed}",
            outs,
        )
    if n in sus.suspects:
        if again:
            return NodeFinding(
                n,
                "fail",
                f"{_lead(fails)}re-pairing could not run ({again[0].describe()}); first pass: {listed}",
                outs,
            )
        if n in sus.common:
            own = any(o.named == n for o in fails)
            how = "its own process printed the failure" if own else f"common to {len(fails)} failing pairs"
            return NodeFinding(
                n,
                "fail",
                f"{_lead(fails)}{how} (no known-good node to re-pair with): {listed}",
                outs,
            )
        return NodeFinding(
            n,
            "fail",
            f"{_lead(fails)}pair failed and no known-good node to re-pair with, cannot isolate: {listed}",
            outs,
        )
    if fails:
        blamed = sorted({sus.explained_by.get(_key(o.pair), o.peer(n)) for o in fails})
        if all(b in confirmed or (b in sus.common and b not in cleared) for b in blamed):
            if not any(o.status == "pass" for o in outs):  # nothing measured proves it good
                return NodeFinding(
                    n,
                    "error",
                    f"not measured: failing pair(s) attributed to {', '.join(blamed)} and no passing pair: {listed}",
                    outs,
                )
            return NodeFinding(n, "pass", f"failing pair(s) attributed to {', '.join(blamed)}", outs)
        return NodeFinding(
            n,
            "warn",
            f"failed with {', '.join(blamed)}, which passed with a known-good node: {listed}",
            outs,
        )
    if errors:
        return NodeFinding(n, "error", "; ".join(o.describe() for o in errors[:3]), outs, errors[0].cause)
    if not outs:
        return NodeFinding(n, "error", "no pair test ran on this node", outs)
    hangs = sorted({c for o in outs if (c := _culprit(o, sus.pinned)) and c != n})
    note = f"pair(s) with {', '.join(hangs)} hung, pinned on {', '.join(hangs)}" if hangs else ""
    return NodeFinding(n, "pass", note, outs)


def _orphan(n: str, outs: tuple[PairOutcome, ...], again: list[PairOutcome], sus: Suspicion) -> NodeFinding:
    """The finding of a node whose only first-pass pairs hung on a pinned node."""
    on = sorted({c for o in outs if (c := _culprit(o, sus.pinned)) and c != n})
    where = f"its pair(s) hung on {', '.join(on)} (pinned there)"
    if not again:
        return NodeFinding(
            n, "error", f"not measured: {where}, and no known-good node was left to re-test it with", outs
        )
    last = again[-1]
    if last.status == "pass":
        return NodeFinding(n, "pass", f"{where}; passed with known-good node {last.peer(n)}", outs)
    if last.status == "fail":
        return NodeFinding(n, "fail", f"{where}; fails with known-good node {last.peer(n)}: {last.describe()}", outs)
    return NodeFinding(n, "error", f"{where}; the re-test could not run: {last.describe()}", outs, last.cause)
