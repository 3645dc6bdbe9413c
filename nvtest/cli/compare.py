"""The ``nvtest compare`` command: what got better or worse between two runs.

Reads two run directories' results.json (and their asbuilt.json: parts swapped, firmware
moved, nodes in one run only); exits 0 whatever
changed (2 when a results.json cannot be read or ``--tolerance`` is not a finite
number >= 0, 3 when the ``--html`` page cannot be written). The as-built changes are read
from each run's asbuilt.json, the record its report shows.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.text import Text

from nvtest.cli.app import app, console, fail
from nvtest.errors import EXIT_OK, NvtestError, OutputWriteError
from nvtest.report.console import print_table

__all__ = ["compare"]

_STYLE = {
    "worse": "red",
    "better": "green",
    "gone": "yellow",
    "new": "yellow",
    "changed": "cyan",
    "same": "dim",
}


_AB_STYLE = {"swapped": "red", "removed": "red", "disappeared": "red", "firmware": "cyan"}


@app.command(
    "compare",
    epilog="Example: nvtest compare reports/run-before reports/run-after --html diff.html",
)
def compare(
    run_a: Annotated[Path, typer.Argument(help="The earlier run directory (or its results.json).")],
    run_b: Annotated[Path, typer.Argument(help="The later run directory (or its results.json).")],
    html: Annotated[
        Path | None,
        typer.Option("--html", help="Also write the comparison as a self-contained HTML page here."),
    ] = None,
    show_all: Annotated[bool, typer.Option("--all", help="List unchanged metrics too.")] = False,
    tolerance: Annotated[
        float, typer.Option(help="A relative change within this many percent counts as the same.")
    ] = 2.0,
) -> None:
    """Show per node and metric what got better or worse from RUN_A to RUN_B (e.g. before and after a repair)."""
    from nvtest.analysis.compare import compare_docs, render_compare_html, summarise
    from nvtest.report.model import fmt_num
    from nvtest.results import load_results

    try:
        doc_a, doc_b = load_results(run_a), load_results(run_b)
        changes = compare_docs(doc_a, doc_b, tolerance_pct=tolerance)
    except NvtestError as exc:
        raise fail(exc) from exc
    ra, rb = doc_a.get("run") or {}, doc_b.get("run") or {}
    console.print(
        f"A {ra.get('run_id')} ({doc_a.get('summary', {}).get('verdict')}) -> B {rb.get('run_id')} ({doc_b.get('summary', {}).get('verdict')})",
    )
    shown = [c for c in changes if show_all or c.kind != "same"]
    if shown:
        rows = []
        for c in shown:
            metric = c.metric + (f" [{c.labels}]" if c.labels else "") if c.metric else "(item)"
            delta = "-" if c.delta_pct is None else f"{c.delta_pct:+.1f} %"
            rows.append(
                (
                    c.node,
                    c.check,
                    metric,
                    f"{fmt_num(c.a)} {c.unit}".strip(),
                    f"{fmt_num(c.b)} {c.unit}".strip(),
                    delta,
                    f"{c.verdict_a or '-'} -> {c.verdict_b or '-'}",
                    Text(c.kind, style=_STYLE[c.kind]),
                )
            )
        headers = ("node", "check", "metric", "A", "B", "Δ", "verdict", "change")
        print_table(console, headers, rows)
    else:
        console.print("no change beyond the tolerance")
    counts = summarise(changes)
    console.print("  ".join(f"{n} {k}" for k, n in counts.items()))
    parts = _print_asbuilt(run_a, run_b)
    if html is not None:
        page = render_compare_html(changes, doc_a, doc_b, show_same=show_all, asbuilt=parts)
        try:
            html.write_text(page, encoding="utf-8")
        except OSError as exc:  # no such directory, a read-only mount, a full disk: one line
            raise fail(OutputWriteError.of(html, exc)) from None
        console.print(f"html: {html}")
    raise typer.Exit(EXIT_OK)


def _print_asbuilt(run_a: Path, run_b: Path) -> list[dict[str, Any]] | None:
    """Print the as-built changes from A to B (parts swapped, firmware moved, nodes in one run
    only) and return them; None when either run has no asbuilt.json."""
    from nvtest.analysis.asbuilt import compare_runs

    parts = compare_runs(run_a, run_b)
    if parts is None:
        console.print("as built: not compared (a run without asbuilt.json)")
        return None
    if not parts:
        console.print("as built: no part swapped, no firmware moved, the same nodes")
        return parts
    rows = [
        (
            c["node"],
            Text(c["kind"], style=_AB_STYLE.get(c["kind"], "yellow")),
            c["part"],
            c["field"] or "",
            c["before"] if c["before"] is not None else "",
            c["now"] if c["now"] is not None else "",
        )
        for c in parts
    ]
    console.print(f"as built: {len(parts)} change(s)")
    print_table(console, ("node", "change", "part", "field", "A", "B"), rows)
    return parts
