"""``nvtest history``: a node's record over months, repeat offenders, trends.

``nvtest history NODE`` prints the node's timeline (each run, gate and sweep verdict, the
numbers that moved, drains, resumes, cleared Xids); ``--lemons`` the nodes with a failure
or a drain on N separate days within M days; ``--trend CHECK.METRIC`` each node's series
and the nodes whose figure fell by more than a share against their own past. ``--json``
prints the same as JSON. Exit 0; 2 for a bad option or an unreadable database.

``nvtest history import [--spool DIR] [--history URL]`` writes the gate records a gate
could not write within its budget (spooled in ``<state dir>/spool``) into the history.

A node is known by (cluster, node) (:mod:`nvtest.history.cluster`): ``--cluster NAME`` reads
that cluster's records only; without it, a node name that several clusters have is shown
for all of them with a line naming them.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from nvtest.cli.app import app, console, err_console, fail
from nvtest.errors import EXIT_CHECK_FAILED, EXIT_CONFIG, NvtestError

if TYPE_CHECKING:
    from nvtest.history import HistoryStore

__all__ = ["history"]

_EPILOG = (
    "Examples: nvtest history gpu017   |   nvtest history --lemons --min-days 5 --window-days 7   |   "
    "nvtest history --trend gemm.bf16_tflops --drop-pct 10"
)


def _when(t: float | None) -> str:
    from nvtest.report.model import fmt_time

    return fmt_time(t)


def _timeline(store: Any, node: str, limit: int, as_json: bool, cluster: str | None) -> None:
    from nvtest.history import queries as q

    entries = q.timeline(store, node, limit=limit, cluster=cluster)
    if as_json:
        console.print_json(json.dumps([dataclasses.asdict(e) for e in entries]))
        return
    where = f"cluster {cluster!r}, " if cluster is not None else ""
    if not entries:
        console.print(f"no history for {node} in {where}{store.display_url}", markup=False)
        return
    mixed = cluster is None and len(clusters := q.node_clusters(store, node)) > 1
    if mixed:
        names = ", ".join(repr(c) for c in clusters)
        err_console.print(
            f"nvtest: {node} is a node of {len(clusters)} clusters ({names}): all are shown; --cluster NAME shows one",
            markup=False,
        )
    table = Table(title=f"{node}: {len(entries)} entries ({where}{store.display_url})", title_justify="left")
    for col in ("when (UTC)", "what", "verdict", "details"):
        table.add_column(col)
    for e in entries:
        details = [f"{c} {v}: {r[:90]}" for c, v, r in e.checks[:4]]
        details += [
            f"{m.check}.{m.metric}{'[' + m.labels + ']' if m.labels else ''} {m.before:.4g} -> {m.after:.4g} ({m.delta_pct:+.1f} %)"
            for m in e.moved[:4]
        ]
        if e.key is None:
            details = [e.text]
        table.add_row(
            _when(e.t),
            f"{e.kind} ({e.cluster or 'no cluster'})" if mixed else e.kind,
            e.verdict or "",
            escape("\n".join(details)),
        )
    console.print(table)


def _lemons(store: Any, min_days: int, window_days: int, as_json: bool) -> None:
    from nvtest.history import queries as q

    rows = q.lemons(store, min_days=min_days, window_days=window_days)
    if as_json:
        console.print_json(json.dumps([dataclasses.asdict(r) for r in rows]))
        return
    table = Table(
        title=f"repeat offenders: a failure or a drain on >= {min_days} separate days within {window_days} days",
        title_justify="left",
    )
    for col in ("cluster", "node", "days", "failures", "drains", "first", "last", "last reason"):
        table.add_column(col)
    for r in rows:
        table.add_row(
            r.cluster,
            r.node,
            str(r.days),
            str(r.failures),
            str(r.drains),
            _when(r.first_t),
            _when(r.last_t),
            escape(r.last_reason[:120]),
        )
    console.print(table)
    if not rows:
        console.print("none", markup=False)


def _trend(
    store: Any, what: str, drop_pct: float, window: int, show_all: bool, as_json: bool, cluster: str | None
) -> None:
    from nvtest.history import queries as q

    check, _, metric = what.partition(".")
    if not check or not metric:
        err_console.print(f"nvtest: error: --trend {what!r}: give CHECK.METRIC, e.g. gemm.bf16_tflops", markup=False)
        raise typer.Exit(EXIT_CONFIG)
    series = q.trend(store, check, metric, drop_pct=drop_pct, window=window, cluster=cluster)
    if as_json:
        console.print_json(json.dumps([dataclasses.asdict(s) for s in series]))
        return
    shown = series if show_all else [s for s in series if s.flagged]
    flagged = sum(1 for s in series if s.flagged)
    table = Table(
        title=f"{what}: {len(series)} series, {flagged} fell by more than {drop_pct:g} % against their own median of the last {window}",
        title_justify="left",
    )
    for col in ("node", "labels", "points", "baseline", "latest", "worse by %", ""):
        table.add_column(col)
    for s in shown:
        table.add_row(
            s.node,
            s.labels,
            str(len(s.points)),
            f"{s.baseline:.4g}" if s.baseline is not None else "-",
            f"{s.latest:.4g} {s.unit or ''}" if s.latest is not None else "-",
            f"{s.drop_pct:+.1f}" if s.drop_pct is not None else "-",
            "FELL" if s.flagged else "",
        )
    console.print(table)


def _import_spool(spool: Path | None, db: str | None) -> None:
    """``nvtest history import``: write the gate records spooled in ``spool`` into the
    history (each removed once written; importing again never duplicates one). Exit 0 when
    every record was written (or none waited), 1 when some could not be read (left in
    place), 2 when history is off or the database cannot be opened."""
    from nvtest.ops.gate.history import import_spool, spooled
    from nvtest.ops.gate.state import default_state_dir

    where = spool if spool is not None else default_state_dir() / "spool"
    if spool is not None and not spool.is_dir():
        err_console.print(f"nvtest: error: --spool {spool}: no such directory", markup=False)
        raise typer.Exit(EXIT_CONFIG)
    waiting = len(spooled(where))
    try:
        done, problems = import_spool(where, db)
    except NvtestError as exc:
        raise fail(exc) from exc
    for p in problems:
        err_console.print(f"nvtest history import: not imported: {p}", markup=False, highlight=False)
    console.print(f"imported {done} of {waiting} spooled gate record(s) from {where}", markup=False, highlight=False)
    if problems:
        raise typer.Exit(EXIT_CHECK_FAILED)


def open_history(value: str | None, off: str) -> HistoryStore:
    """The history at ``value`` for a verb that only reads it (``history``, ``export``):
    never created where nothing was recorded. Exits 2 with ``off`` when history is off, and
    with the error's exit code when it cannot be opened."""
    from nvtest.history import HistoryStore

    try:
        store = HistoryStore.open(value, create=False)
    except NvtestError as exc:
        raise fail(exc) from exc
    if store is None:
        err_console.print(f"nvtest: error: {off}", markup=False)
        raise typer.Exit(EXIT_CONFIG)
    return store


@app.command(epilog=_EPILOG)
def history(
    node: Annotated[str | None, typer.Argument(help="The node whose timeline to show.")] = None,
    lemons: Annotated[bool, typer.Option("--lemons", help="List repeat offenders.")] = False,
    trend: Annotated[
        str | None, typer.Option("--trend", help="CHECK.METRIC: per-node series and the nodes that fell.")
    ] = None,
    min_days: Annotated[int, typer.Option(help="--lemons: separate days with a failure or drain.")] = 3,
    window_days: Annotated[int, typer.Option(help="--lemons: within this many days.")] = 7,
    drop_pct: Annotated[float, typer.Option(help="--trend: flag a fall of more than this many percent.")] = 10.0,
    window: Annotated[
        int, typer.Option(help="--trend: the node's own past is the median of this many earlier values.")
    ] = 10,
    limit: Annotated[int, typer.Option(help="NODE: the last this many runs, gates and sweeps.")] = 50,
    show_all: Annotated[
        bool, typer.Option("--all", help="--trend: list every series, not only those that fell.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
    cluster: Annotated[
        str | None,
        typer.Option(
            "--cluster",
            help="NODE, --trend: only this cluster's records (a node is known by cluster and name; '' for records from before clusters were kept).",
        ),
    ] = None,
    db: Annotated[
        str | None,
        typer.Option(
            "--history",
            help="History database: SQLite path or postgresql:// URL (default: $NVTEST_HISTORY or the user's data dir).",
        ),
    ] = None,
    spool: Annotated[
        Path | None, typer.Option(help="import: the spool of gate records (default: <gate state dir>/spool).")
    ] = None,
) -> None:
    """Show a node's record, the repeat offenders or a metric's trend, from the history;
    ``nvtest history import`` sends the gate records spooled on this node."""
    if node == "import":
        _import_spool(spool, db)
        return
    if spool is not None:
        err_console.print("nvtest: error: --spool goes with `nvtest history import`", markup=False)
        raise typer.Exit(EXIT_CONFIG)
    asked = [x for x in (node, lemons or None, trend) if x]
    if len(asked) != 1:
        err_console.print("nvtest: error: give one of NODE, --lemons or --trend CHECK.METRIC", markup=False)
        raise typer.Exit(EXIT_CONFIG)
    store = open_history(db, "history is off (--history off / NVTEST_HISTORY=off)")
    with store:
        if node:
            _timeline(store, node, limit, as_json, cluster)
        elif lemons:
            _lemons(store, min_days, window_days, as_json)
        else:
            _trend(store, str(trend), drop_pct, window, show_all, as_json, cluster)
