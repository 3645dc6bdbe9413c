"""Questions asked of the history: a node's timeline, repeat offenders, trends, the previous run.

Pure reads on a :class:`~nvtest.history.store.HistoryStore`; the same SQL on SQLite and
PostgreSQL (no engine-specific function: days are the ``day`` integer written at ingest).
Verdict order is nvtest's (:func:`nvtest.verdict.rank_of`: ``skip < pass < warn < unknown/error < fail``).

A node is known by (cluster, node) (:mod:`nvtest.history.cluster`): every question that
takes ``cluster`` reads that cluster's records only; ``cluster=None`` reads every cluster's
(a node name that two clusters share then mixes them: :func:`node_clusters` tells).
"""

from __future__ import annotations

import json
import statistics
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import and_, func, select, union

from nvtest.config.metrics import lower_is_better
from nvtest.history.schema import events, metrics, results, runs
from nvtest.history.store import HistoryStore, day_of
from nvtest.verdict import Verdict, rank_of, worst_of

__all__ = [
    "Lemon",
    "MovedMetric",
    "NodeLatest",
    "PreviousRun",
    "TimelineEntry",
    "TrendSeries",
    "last_sku",
    "latest_per_node",
    "lemons",
    "node_clusters",
    "previous_runs",
    "timeline",
    "trend",
]

#: SQLite's default limit of host parameters is 999 (before 3.32): IN lists are chunked.
_CHUNK = 500


def _chunks(items: Sequence[Any]) -> Iterable[Sequence[Any]]:
    for i in range(0, len(items), _CHUNK):
        yield items[i : i + _CHUNK]


@dataclass(frozen=True)
class MovedMetric:
    """A number that changed between two runs of a node: ``delta_pct`` = (after-before)/before."""

    check: str
    metric: str
    labels: str
    unit: str | None
    before: float
    after: float
    delta_pct: float


@dataclass(frozen=True)
class TimelineEntry:
    """One thing that happened to a node: a run/gate/sweep verdict, or an event.

    ``kind``: run, gate, sweep (a result) or drain, resume, resume_refused, xid_cleared...
    ``checks``: (check, verdict, reason) of the node's bad items (fail, error, unknown, warn).
    ``cluster``: the cluster of the record (:mod:`nvtest.history.cluster`).
    """

    t: float
    kind: str
    key: str | None
    verdict: str | None
    text: str
    checks: tuple[tuple[str, str, str], ...] = ()
    moved: tuple[MovedMetric, ...] = ()
    cluster: str = ""


def node_clusters(store: HistoryStore, node: str) -> list[str]:
    """The clusters that have records of a node called ``node`` (runs or events), sorted."""
    q = union(
        select(runs.c.cluster).where(runs.c.id.in_(select(results.c.run_id).where(results.c.node == node))),
        select(events.c.cluster).where(events.c.node == node),
    )
    with store.engine.connect() as conn:
        return sorted({str(r[0]) for r in conn.execute(q)})


def _node_runs(store: HistoryStore, node: str, limit: int, cluster: str | None) -> list[Any]:
    q = (
        select(runs.c.id, runs.c.key, runs.c.kind, runs.c.started_at, runs.c.cluster)
        .where(runs.c.id.in_(select(results.c.run_id).where(results.c.node == node)))
        .order_by(runs.c.started_at.desc())
        .limit(limit)
    )
    if cluster is not None:
        q = q.where(runs.c.cluster == cluster)
    with store.engine.connect() as conn:
        return list(conn.execute(q))


def timeline(
    store: HistoryStore,
    node: str,
    *,
    limit: int = 50,
    moved_pct: float = 10.0,
    cluster: str | None = None,
) -> list[TimelineEntry]:
    """The node's last ``limit`` runs (any kind) and its events, oldest first; those of
    ``cluster`` only when given (None: every cluster's node of that name).

    Each run entry carries the node's verdict (worst of its items), its bad items, and the
    metrics that moved by at least ``moved_pct`` percent since the node's previous run of
    the same family (gates with gates, runs and sweeps together) of the same cluster.
    """
    rows = list(reversed(_node_runs(store, node, limit, cluster)))
    ids = [r.id for r in rows]
    per_run: dict[int, list[Any]] = defaultdict(list)
    vals: dict[int, dict[tuple[str, str, str], tuple[float, str | None]]] = defaultdict(dict)
    with store.engine.connect() as conn:
        for chunk in _chunks(ids):
            for r in conn.execute(select(results).where(and_(results.c.node == node, results.c.run_id.in_(chunk)))):
                per_run[r.run_id].append(r)
            for m in conn.execute(select(metrics).where(and_(metrics.c.node == node, metrics.c.run_id.in_(chunk)))):
                if m.value is not None:
                    vals[m.run_id][(m.check_name, m.metric, m.labels)] = (m.value, m.unit)
        ev_q = select(events).where(events.c.node == node).order_by(events.c.at)
        if cluster is not None:
            ev_q = ev_q.where(events.c.cluster == cluster)
        evs = list(conn.execute(ev_q))
    out: list[TimelineEntry] = []
    last_of: dict[tuple[str, str], int] = {}
    for r in rows:
        items = per_run[r.id]
        bad = tuple(
            sorted((i.check_name, i.verdict, i.reason or "") for i in items if rank_of(i.verdict) >= Verdict.WARN.rank)
        )
        family = (r.cluster, "gate" if r.kind == "gate" else "run")
        moved = _moved(vals.get(last_of[family], {}), vals.get(r.id, {}), moved_pct) if family in last_of else ()
        last_of[family] = r.id
        verdict = worst_of(i.verdict for i in items)
        text = f"{r.kind} {verdict}: " + (
            "; ".join(f"{c} {v}" for c, v, _ in bad[:5]) if bad else f"{len(items)} checks"
        )
        out.append(TimelineEntry(r.started_at, r.kind, r.key, verdict, text, bad, moved, r.cluster))
    if rows:  # events from the first listed run on (or all of them when none is listed)
        evs = [e for e in evs if e.at >= rows[0].started_at - 86400 * 365]
    for e in evs:
        out.append(TimelineEntry(e.at, e.kind, None, None, f"{e.kind}: {e.reason or ''}".strip(), cluster=e.cluster))
    return sorted(out, key=lambda x: x.t)


def _moved(
    before: dict[tuple[str, str, str], tuple[float, str | None]],
    after: dict[tuple[str, str, str], tuple[float, str | None]],
    pct: float,
) -> tuple[MovedMetric, ...]:
    out = []
    for key, (value, unit) in after.items():
        prev = before.get(key)
        if prev is None or prev[0] == 0:
            continue
        delta = (value - prev[0]) / abs(prev[0]) * 100.0
        if abs(delta) >= pct:
            out.append(MovedMetric(key[0], key[1], key[2], unit, prev[0], value, round(delta, 2)))
    return tuple(sorted(out, key=lambda m: -abs(m.delta_pct)))


@dataclass(frozen=True)
class Lemon:
    """A repeat offender: ``days`` separate UTC days with a failure or a drain in the window
    (``node`` of ``cluster``)."""

    node: str
    days: int
    failures: int
    drains: int
    first_t: float
    last_t: float
    last_reason: str
    cluster: str = ""


def lemons(store: HistoryStore, *, min_days: int = 3, window_days: int = 7, now: float | None = None) -> list[Lemon]:
    """Nodes with a ``fail`` verdict (any run, gate or sweep) or a drain on at least
    ``min_days`` separate days within the last ``window_days`` days, most days first.

    NVSentinel's default flags a node after 5 remediations in 7 days
    (``min_days=5, window_days=7``); nvtest's default is 3 days in 7.
    """
    t_now = time.time() if now is None else now
    d0 = day_of(t_now) - window_days + 1
    fail_days = (
        select(runs.c.cluster, results.c.node, results.c.day)
        .join(runs, runs.c.id == results.c.run_id)
        .where(and_(results.c.verdict == "fail", results.c.day >= d0))
    )
    drain_days = select(events.c.cluster, events.c.node, events.c.day).where(
        and_(events.c.kind == "drain", events.c.day >= d0)
    )
    days = union(fail_days, drain_days).subquery()
    q = (
        select(days.c.cluster, days.c.node, func.count(days.c.day).label("n"))
        .group_by(days.c.cluster, days.c.node)
        .having(func.count(days.c.day) >= min_days)
    )
    out: list[Lemon] = []
    with store.engine.connect() as conn:
        hits = {(r.cluster, r.node): int(r.n) for r in conn.execute(q)}
        for chunk in _chunks(sorted({n for _, n in hits})):
            fails: dict[tuple[str, str], list[Any]] = defaultdict(list)
            for r in conn.execute(
                select(runs.c.cluster, results.c.node, results.c.started_at, results.c.check_name, results.c.reason)
                .join(runs, runs.c.id == results.c.run_id)
                .where(and_(results.c.verdict == "fail", results.c.day >= d0, results.c.node.in_(chunk)))
            ):
                fails[(r.cluster, r.node)].append((r.started_at, f"{r.check_name}: {r.reason or ''}"))
            drains: dict[tuple[str, str], list[Any]] = defaultdict(list)
            for e in conn.execute(
                select(events.c.cluster, events.c.node, events.c.at, events.c.reason).where(
                    and_(events.c.kind == "drain", events.c.day >= d0, events.c.node.in_(chunk))
                )
            ):
                drains[(e.cluster, e.node)].append((e.at, f"drained: {e.reason or ''}"))
            in_chunk = set(chunk)
            for key in sorted(k for k in hits if k[1] in in_chunk):
                seen = sorted(fails[key] + drains[key])
                out.append(
                    Lemon(
                        key[1],
                        hits[key],
                        len(fails[key]),
                        len(drains[key]),
                        seen[0][0],
                        seen[-1][0],
                        seen[-1][1][:300],
                        cluster=key[0],
                    )
                )
    return sorted(out, key=lambda lem: (-lem.days, -lem.last_t, lem.node, lem.cluster))


@dataclass(frozen=True)
class TrendSeries:
    """One node's series of ``check.metric`` (one label set), oldest first.

    ``baseline`` is the median of up to ``window`` values before the latest;
    ``drop_pct`` how much worse the latest is than that baseline (positive: worse; for a
    unit in seconds a rise is worse); ``flagged`` when ``drop_pct`` exceeds the asked share.
    """

    node: str
    labels: str
    unit: str | None
    points: tuple[tuple[float, float], ...]
    baseline: float | None
    latest: float | None
    drop_pct: float | None
    flagged: bool


def trend(
    store: HistoryStore,
    check: str,
    metric: str,
    *,
    drop_pct: float = 10.0,
    window: int = 10,
    nodes: Sequence[str] | None = None,
    cluster: str | None = None,
) -> list[TrendSeries]:
    """Every node's series of ``check``/``metric`` (per label set), worst drop first; of
    ``cluster``'s runs only when given."""
    q = (
        select(metrics.c.node, metrics.c.labels, metrics.c.unit, metrics.c.value, runs.c.started_at)
        .join(runs, runs.c.id == metrics.c.run_id)
        .where(and_(metrics.c.check_name == check, metrics.c.metric == metric, metrics.c.value.is_not(None)))
        .order_by(runs.c.started_at)
    )
    if nodes:
        q = q.where(metrics.c.node.in_(list(nodes)))
    if cluster is not None:
        q = q.where(runs.c.cluster == cluster)
    series: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
    units: dict[tuple[str, str], str | None] = {}
    with store.engine.connect() as conn:
        for r in conn.execute(q):
            series[(r.node, r.labels)].append((float(r.started_at), float(r.value)))
            units[(r.node, r.labels)] = r.unit
    out = []
    for (node, labels), pts in series.items():
        latest = pts[-1][1]
        earlier = [v for _, v in pts[-1 - window : -1]]
        base = statistics.median(earlier) if earlier else None
        drop = None
        if base:
            sign = -1.0 if lower_is_better(units[(node, labels)]) else 1.0  # a time's drop is a rise
            drop = round(sign * (base - latest) / abs(base) * 100.0, 2)
        out.append(
            TrendSeries(
                node,
                labels,
                units[(node, labels)],
                tuple(pts),
                base,
                latest,
                drop,
                drop is not None and drop > drop_pct,
            )
        )
    return sorted(out, key=lambda s: (-(s.drop_pct if s.drop_pct is not None else -1e9), s.node, s.labels))


@dataclass(frozen=True)
class PreviousRun:
    """A node's latest run (or sweep) before a given one, and its last drain before then.

    ``checks``: check -> {"verdict": v, "metrics": {(metric, labels): (value, unit)}}.
    ``drained``: (time, reason) of the node's last drain before the run, or None.
    """

    node: str
    key: str | None
    kind: str | None
    started_at: float | None
    checks: dict[str, dict[str, Any]] = field(default_factory=dict)
    drained: tuple[float, str] | None = None


def previous_runs(
    store: HistoryStore,
    nodes: Sequence[str],
    *,
    before: float,
    exclude_key: str | None = None,
    kinds: Sequence[str] = ("run", "sweep"),
    cluster: str | None = None,
) -> dict[str, PreviousRun]:
    """For each of ``nodes``: its latest run of ``kinds`` started before ``before`` (not
    ``exclude_key``) with its verdicts and metrics, and its last drain before ``before``;
    of ``cluster``'s records only when given (None: any cluster's node of that name)."""
    latest: dict[str, tuple[float, int, str, str]] = {}
    drained: dict[str, tuple[float, str]] = {}
    checks: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    with store.engine.connect() as conn:
        for chunk in _chunks(list(nodes)):
            q = (
                select(results.c.node, runs.c.id, runs.c.key, runs.c.kind, runs.c.started_at)
                .join(runs, runs.c.id == results.c.run_id)
                .where(and_(results.c.node.in_(chunk), runs.c.kind.in_(list(kinds)), runs.c.started_at < before))
                .distinct()
            )
            if exclude_key:
                q = q.where(runs.c.key != exclude_key)
            ev_q = select(events.c.node, events.c.at, events.c.reason).where(
                and_(events.c.node.in_(chunk), events.c.kind == "drain", events.c.at < before)
            )
            if cluster is not None:
                q = q.where(runs.c.cluster == cluster)
                ev_q = ev_q.where(events.c.cluster == cluster)
            for r in conn.execute(q):
                if r.node not in latest or r.started_at > latest[r.node][0]:
                    latest[r.node] = (r.started_at, r.id, r.key, r.kind)
            for e in conn.execute(ev_q):
                if e.node not in drained or e.at > drained[e.node][0]:
                    drained[e.node] = (e.at, e.reason or "")
        by_run: dict[int, list[str]] = defaultdict(list)
        for node, (_, run_id, _, _) in latest.items():
            by_run[run_id].append(node)
        for run_id, ns in by_run.items():
            for chunk in _chunks(ns):
                for r in conn.execute(
                    select(results).where(and_(results.c.run_id == run_id, results.c.node.in_(chunk)))
                ):
                    checks[r.node][r.check_name] = {"verdict": r.verdict, "reason": r.reason, "metrics": {}}
                for m in conn.execute(
                    select(metrics).where(and_(metrics.c.run_id == run_id, metrics.c.node.in_(chunk)))
                ):
                    slot = checks[m.node].setdefault(m.check_name, {"verdict": None, "reason": None, "metrics": {}})
                    slot["metrics"][(m.metric, m.labels)] = (m.value, m.unit)
    out = {}
    for node in nodes:
        if node not in latest and node not in drained:
            continue
        t, _, key, kind = latest.get(node, (None, None, None, None))
        out[node] = PreviousRun(node, key, kind, t, checks.get(node, {}), drained.get(node))
    return out


@dataclass(frozen=True)
class NodeLatest:
    """The latest verdict of each check on a node, with its metrics (for the exporter).

    ``checks``: check -> (verdict, time, kind, [(metric, labels, value, unit)]).
    ``sku``: the SKU the node's latest run named; ``gate_duration_s``: its latest gate's.
    """

    node: str
    sku: str | None
    checks: dict[str, tuple[str, float, str, list[tuple[str, str, float | None, str | None]]]]
    gate_duration_s: float | None


def latest_per_node(store: HistoryStore, *, cluster: str | None = None) -> list[NodeLatest]:
    """Per node and check, the most recent result of any run, gate or sweep; of ``cluster``'s
    records only when given (a shared database with two clusters' ``node1``)."""
    newest_q = select(results.c.node, results.c.check_name, func.max(results.c.started_at).label("latest_t")).group_by(
        results.c.node, results.c.check_name
    )
    if cluster is not None:
        newest_q = newest_q.join(runs, runs.c.id == results.c.run_id).where(runs.c.cluster == cluster)
    newest = newest_q.subquery()
    q = (
        select(
            results.c.node,
            results.c.check_name,
            results.c.verdict,
            results.c.started_at,
            results.c.run_id,
            runs.c.kind,
            runs.c.details,
        )
        .join(
            newest,
            and_(
                newest.c.node == results.c.node,
                newest.c.check_name == results.c.check_name,
                newest.c.latest_t == results.c.started_at,
            ),
        )
        .join(runs, runs.c.id == results.c.run_id)
    )
    if cluster is not None:
        q = q.where(runs.c.cluster == cluster)
    per: dict[str, NodeLatest] = {}
    want: dict[int, set[tuple[str, str]]] = defaultdict(set)
    with store.engine.connect() as conn:
        rows = list(conn.execute(q))
        for r in rows:
            details = json.loads(r.details or "{}")
            nl = per.setdefault(r.node, NodeLatest(r.node, None, {}, None))
            sku = (details.get("skus") or {}).get(r.node) or details.get("sku")
            if sku and nl.sku is None:
                per[r.node] = nl = NodeLatest(r.node, str(sku), nl.checks, nl.gate_duration_s)
            if r.kind == "gate" and nl.gate_duration_s is None and details.get("duration_s") is not None:
                per[r.node] = nl = NodeLatest(r.node, nl.sku, nl.checks, float(details["duration_s"]))
            nl.checks[r.check_name] = (r.verdict, r.started_at, r.kind, [])
            want[r.run_id].add((r.node, r.check_name))
        for run_id, pairs in want.items():
            for m in conn.execute(select(metrics).where(metrics.c.run_id == run_id)):
                if (m.node, m.check_name) in pairs:
                    per[m.node].checks[m.check_name][3].append((m.metric, m.labels, m.value, m.unit))
    return [per[n] for n in sorted(per)]


def last_sku(store: HistoryStore, node: str, *, limit: int = 20) -> tuple[str, float] | None:
    """The SKU ``node`` was last judged against, and when (epoch s): the newest of its last
    ``limit`` runs (run, gate or sweep) that names one; None when none does."""
    q = (
        select(runs.c.details, runs.c.started_at)
        .where(runs.c.id.in_(select(results.c.run_id).where(results.c.node == node)))
        .order_by(runs.c.started_at.desc())
        .limit(limit)
    )
    with store.engine.connect() as conn:
        for r in conn.execute(q):
            details = json.loads(r.details or "{}")
            sku = (details.get("skus") or {}).get(node) or details.get("sku")
            if sku:
                return str(sku), float(r.started_at)
    return None
