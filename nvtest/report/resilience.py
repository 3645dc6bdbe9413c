"""The report's resilience section: what the resilience checks recorded, as a plain model.

:func:`resilience_view` reads the results of the resilience checks (see
docs/resilience.md) from a results.json document and returns a
:class:`ResilienceView` (None when the run has no resilience result), which the
HTML and PDF templates render:

- recovery figures per drill (``restart_injob``, ``restart_inprocess``,
  ``requeue``), one row per node and, for an in-job drill spanning nodes, the
  job's row (over all ranks), each beside its target (recipe
  ``resilience.targets``), the target's source and whether it is within;
- checkpoint tiers: write/read GB/s per tier and node, and the shared tier's
  aggregate over all nodes;
- stragglers: per node the lowest rank score and the node's relative score,
  the ranks named below the bound, the bound and its source;
- the effective-training-time estimate (``details.effective_time`` of
  ``restart_injob`` and ``resilience_quick``) with its inputs, the result,
  Young's and Daly's optimum intervals, and the formula with its symbols.

Nothing here judges anew except the job row's target: the check records the
target beside each node's own ``recovery_s``; the job's ``recovery_s`` (the
largest of the nodes') is set beside the same target here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from nvtest.verdict import worst_of

__all__ = [
    "DrillTable",
    "EstimateRow",
    "FigureRow",
    "RESILIENCE_CHECKS",
    "ResilienceView",
    "SYMBOLS",
    "StragglerRow",
    "Target",
    "TierRow",
    "fmt_pct",
    "resilience_view",
]

#: The checks whose results feed the section.
RESILIENCE_CHECKS = (
    "ckpt_mem",
    "ckpt_local",
    "ckpt_shared",
    "restart_injob",
    "restart_inprocess",
    "requeue",
    "straggler",
    "resilience_quick",
)

#: The estimate's formula (docs/resilience.md, ``nvtest.checks.resilience.effective``).
FORMULA = "effective = 1 - C/T - (T/2 + R)/M"

#: Each symbol of :data:`FORMULA` and what it stands for.
SYMBOLS = (
    ("M", "mean time between failures of the job, s (recipe estimate.mtbf_h per node / the job's nodes)"),
    ("T", "checkpoint interval, s of training (recipe estimate.interval_min)"),
    ("C", "time one checkpoint blocks training, s (estimate.save_gib per node / measured write bandwidth)"),
    ("R", "restart time after a failure, s (measured in-job recovery_s, or the in-job target in the quick form)"),
    ("C/T", "share of the time spent saving"),
    ("(T/2 + R)/M", "share lost to failures: half an interval redone on average, plus the restart, once per M"),
)


@dataclass(frozen=True)
class Target:
    """A recovery figure beside its target (seconds) and the target's source."""

    metric: str
    value: float | None
    target_s: float | None
    source: str
    within: bool | None

    @property
    def status(self) -> str:
        """``within``, ``over`` or ``no target`` (also when the figure was not measured)."""
        if self.within is None or self.target_s is None or self.value is None:
            return "no target" if self.target_s is None else "not measured"
        return "within" if self.within else "over"


@dataclass
class FigureRow:
    """One row of a drill table: a node's (or the job's) figures and its target."""

    scope: str
    verdict: str
    values: list[Any]
    target: Target | None = None
    note: str = ""
    job: bool = False


@dataclass
class DrillTable:
    """One drill's figures: ``columns`` are ``(metric, header)``; rows in node order, the job first."""

    check: str
    title: str
    columns: list[tuple[str, str]]
    rows: list[FigureRow] = field(default_factory=list)
    note: str = ""


@dataclass
class TierRow:
    """A checkpoint tier on one node (``node`` ``all nodes`` for the shared tier's aggregate)."""

    tier: str
    node: str
    check: str
    write_gbps: float | None
    read_gbps: float | None
    verdict: str
    note: str = ""


@dataclass
class StragglerRow:
    """One node's straggler figures and the ranks below the bound."""

    node: str
    verdict: str
    min_rank_score: float | None
    node_relative_score: float | None
    stragglers: list[dict[str, Any]]


@dataclass
class EstimateRow:
    """One effective-time estimate with its inputs (seconds) and where they came from."""

    check: str
    node: str
    mtbf_s: float | None = None
    mtbf_source: str = ""
    interval_s: float | None = None
    save_s: float | None = None
    save_source: str = ""
    restart_s: float | None = None
    restart_source: str = ""
    effective_fraction: float | None = None
    save_share: float | None = None
    failure_share: float | None = None
    young_interval_s: float | None = None
    daly_interval_s: float | None = None
    effective_at_daly: float | None = None
    error: str = ""


@dataclass
class ResilienceView:
    """The resilience section of a report."""

    drills: list[DrillTable]
    tiers: list[TierRow]
    stragglers: list[StragglerRow]
    straggler_bound: float | None
    straggler_bound_source: str
    estimates: list[EstimateRow]
    assumptions: str
    formula: str = FORMULA
    symbols: Sequence[tuple[str, str]] = SYMBOLS


def fmt_pct(x: Any) -> str:
    """A fraction as a percentage with one decimal (``0.9731`` -> ``97.3 %``); ``-`` for None."""
    if not isinstance(x, (int, float)) or isinstance(x, bool):
        return "-"
    return f"{100.0 * x:.1f} %"


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _metric(r: Mapping[str, Any], name: str, **labels: str) -> float | None:
    """The value of metric ``name`` of result ``r`` (with these labels, when given)."""
    for m in r.get("metrics") or []:
        if m.get("name") == name and all(str((m.get("labels") or {}).get(k)) == v for k, v in labels.items()):
            return _num(m.get("value"))
    return None


def _details(r: Mapping[str, Any]) -> Mapping[str, Any]:
    d = r.get("details")
    return d if isinstance(d, Mapping) else {}


def _target(r: Mapping[str, Any], metric: str) -> Target | None:
    """The ``<metric>_target`` detail the check recorded (``judge_target``)."""
    t = _details(r).get(f"{metric}_target")
    if not isinstance(t, Mapping):
        return None
    return Target(
        metric=metric,
        value=_num(t.get("value")),
        target_s=_num(t.get("target_s")),
        source=str(t.get("source") or ""),
        within=t.get("within") if isinstance(t.get("within"), bool) else None,
    )


_INJOB_COLUMNS = [
    ("detect_s", "detect s"),
    ("restart_s", "restart s"),
    ("reload_s", "reload s"),
    ("recovery_s", "recovery s"),
    ("steps_lost", "steps lost"),
    ("loss_match", "loss matches"),
]
_INPROCESS_COLUMNS = [("recovery_s", "recovery s")]
_REQUEUE_COLUMNS = [
    ("running_again_s", "running again s"),
    ("resumed_s", "resumed s"),
    ("training_again_s", "training again s"),
    ("steps_lost", "steps lost"),
]


def _loss_match(r: Mapping[str, Any]) -> bool | None:
    cmp = _details(r).get("loss_comparison")
    return bool(cmp.get("matches")) if isinstance(cmp, Mapping) else None


def _injob(items: Sequence[Mapping[str, Any]]) -> DrillTable:
    table = DrillTable("restart_injob", "In-job restart after a killed rank", _INJOB_COLUMNS)
    job: Mapping[str, Any] | None = None
    for r in items:
        d = _details(r)
        values = [_metric(r, k) for k, _ in _INJOB_COLUMNS[:-1]] + [_loss_match(r)]
        ranks = d.get("node_ranks")
        note = f"ranks {ranks}" if isinstance(ranks, list) else ""
        rec = d.get("recovery")
        if not d.get("job") and isinstance(rec, Mapping) and rec.get("killed_rank") is not None:
            note = f"rank {rec['killed_rank']} killed at step {rec.get('kill_step')}"
        table.rows.append(FigureRow(r["node"], r["verdict"], values, _target(r, "recovery_s"), note))
        if job is None and isinstance(d.get("job"), Mapping):
            job = d["job"]
            killed = d.get("killed") or (d.get("kill") or {}).get("killed")
            table.note = f"killed: {killed}" if killed else ""
    if job is not None:
        rec = job.get("recovery")
        fig: Mapping[str, Any] = rec if isinstance(rec, Mapping) else {}
        node_targets = [row.target for row in table.rows if row.target is not None]
        t0 = node_targets[0] if node_targets else None
        recovery = _num(fig.get("recovery_s"))
        target = None
        if t0 is not None:
            within = None
            if t0.target_s is not None and recovery is not None:
                within = recovery <= t0.target_s
            target = Target("recovery_s", recovery, t0.target_s, t0.source, within)
        matches = {row.values[-1] for row in table.rows} - {None}
        values = [_num(fig.get(k)) for k, _ in _INJOB_COLUMNS[:-1]] + [matches.pop() if len(matches) == 1 else None]
        nodes = job.get("nodes") or []
        scope = f"job ({job.get('world_size', '?')} ranks on {len(nodes)} nodes)"
        verdicts = [row.verdict for row in table.rows]
        worst = worst_of(verdicts)
        table.rows.insert(
            0,
            FigureRow(scope, worst, values, target, f"launcher {job.get('launcher')}", job=True),
        )
    return table


def _simple(
    check: str,
    title: str,
    columns: list[tuple[str, str]],
    target_metric: str,
    items: Sequence[Mapping[str, Any]],
) -> DrillTable:
    table = DrillTable(check, title, columns)
    for r in items:
        values = [_metric(r, k) for k, _ in columns]
        note = "" if r["verdict"] in ("pass", "warn") else str(r.get("reason") or "")
        table.rows.append(FigureRow(r["node"], r["verdict"], values, _target(r, target_metric), note))
    return table


def _tiers(by_check: Mapping[str, list[Mapping[str, Any]]]) -> list[TierRow]:
    rows: list[TierRow] = []
    for check in ("ckpt_mem", "ckpt_local", "ckpt_shared", "resilience_quick"):
        for r in by_check.get(check, []):
            tiers = [
                str((m.get("labels") or {}).get("tier"))
                for m in r.get("metrics") or []
                if m.get("name") == "write_gbps" and (m.get("labels") or {}).get("tier")
            ]
            for tier in dict.fromkeys(tiers):
                rows.append(
                    TierRow(
                        tier,
                        r["node"],
                        check,
                        _metric(r, "write_gbps", tier=tier),
                        _metric(r, "read_gbps", tier=tier),
                        r["verdict"],
                    )
                )
    shared = by_check.get("ckpt_shared", [])
    for r in shared:
        agg = _details(r).get("aggregate")
        w, rd = _metric(r, "aggregate_write_gbps"), _metric(r, "aggregate_read_gbps")
        if w is None and rd is None:
            continue
        nodes = agg.get("nodes") if isinstance(agg, Mapping) else None
        left = agg.get("left_out") if isinstance(agg, Mapping) else None
        note = f"{nodes} nodes at once" if nodes else ""
        if left:
            note += f"; left out: {'; '.join(map(str, left))}"
        rows.append(TierRow("shared", "all nodes (aggregate)", "ckpt_shared", w, rd, r["verdict"], note))
        break
    return rows


def _stragglers(items: Sequence[Mapping[str, Any]]) -> tuple[list[StragglerRow], float | None, str]:
    rows, bound, source = [], None, ""
    for r in items:
        st = _details(r).get("straggler")
        st = st if isinstance(st, Mapping) else {}
        if bound is None:
            bound = _num(st.get("bound"))
            source = str(st.get("bound_source") or "")
        slow = [dict(s) for s in st.get("stragglers") or [] if isinstance(s, Mapping)]
        rows.append(
            StragglerRow(
                r["node"],
                r["verdict"],
                _metric(r, "min_rank_score"),
                _metric(r, "node_relative_score"),
                slow,
            )
        )
    return rows, bound, source


_EST_KEYS = (
    "mtbf_s",
    "interval_s",
    "save_s",
    "restart_s",
    "effective_fraction",
    "save_share",
    "failure_share",
    "young_interval_s",
    "daly_interval_s",
    "effective_at_daly",
)


def _estimates(by_check: Mapping[str, list[Mapping[str, Any]]]) -> tuple[list[EstimateRow], str]:
    rows, assumptions = [], ""
    for check in ("restart_injob", "resilience_quick"):
        for r in by_check.get(check, []):
            est = _details(r).get("effective_time")
            if not isinstance(est, Mapping):
                continue
            row = EstimateRow(check, r["node"], error=str(est.get("error") or ""))
            for k in _EST_KEYS:
                setattr(row, k, _num(est.get(k)))
            row.save_source = str(est.get("save_source") or "")
            row.mtbf_source = str(est.get("mtbf_source") or "")
            row.restart_source = str(est.get("restart_source") or "")
            assumptions = assumptions or str(est.get("assumptions") or "")
            rows.append(row)
    return rows, assumptions


def resilience_view(results: Sequence[Mapping[str, Any]]) -> ResilienceView | None:
    """The resilience section of a run's ``results`` (None when no resilience check has a result).

    Skipped items are left out of the tables (their reasons are in the per-check section).
    """
    by_check: dict[str, list[Mapping[str, Any]]] = {}
    for r in results:
        if r.get("check") in RESILIENCE_CHECKS and r.get("verdict") != "skip":
            by_check.setdefault(r["check"], []).append(r)
    if not by_check:
        return None
    for items in by_check.values():
        items.sort(key=lambda r: str(r["node"]))
    drills = []
    if by_check.get("restart_injob"):
        drills.append(_injob(by_check["restart_injob"]))
    if by_check.get("restart_inprocess"):
        drills.append(
            _simple(
                "restart_inprocess",
                "In-process restart",
                _INPROCESS_COLUMNS,
                "recovery_s",
                by_check["restart_inprocess"],
            )
        )
    if by_check.get("requeue"):
        drills.append(
            _simple(
                "requeue",
                "Slurm job requeued and resumed",
                _REQUEUE_COLUMNS,
                "training_again_s",
                by_check["requeue"],
            )
        )
    stragglers, bound, bound_source = _stragglers(by_check.get("straggler", []))
    estimates, assumptions = _estimates(by_check)
    return ResilienceView(
        drills=drills,
        tiers=_tiers(by_check),
        stragglers=stragglers,
        straggler_bound=bound,
        straggler_bound_source=bound_source,
        estimates=estimates,
        assumptions=assumptions,
    )
