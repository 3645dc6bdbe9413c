"""``nvtest export --prometheus DIR``: the latest verdicts and metrics per node from the
history, as node_exporter's textfile collector reads them (``DIR/nvtest.prom``, written
atomically). Run it after each gate or sweep, or from the same timer. Exit 0; 2 for a bad
option or an unreadable database; 3 when the file cannot be written."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from nvtest.cli.app import app, console, err_console
from nvtest.cli.history import open_history
from nvtest.errors import EXIT_HARNESS

__all__ = ["export"]


@app.command(
    epilog="Example: nvtest export --prometheus /var/lib/node_exporter/textfile_collector --history postgresql://nvtest@db/fleet"
)
def export(
    prometheus: Annotated[
        Path, typer.Option("--prometheus", help="node_exporter's textfile directory: nvtest.prom is written there.")
    ],
    node: Annotated[
        list[str] | None,
        typer.Option("--node", help="Only this node (repeatable; default: every node in the history)."),
    ] = None,
    history: Annotated[str | None, typer.Option(help="History database: SQLite path or postgresql:// URL.")] = None,
    cluster: Annotated[
        str | None,
        typer.Option(
            help="Only this cluster's records (a node is known by cluster and name; default: every cluster's)."
        ),
    ] = None,
) -> None:
    """Write the latest verdicts and metrics per node for Prometheus (node_exporter textfile)."""
    from nvtest.ops.export import write_textfile

    store = open_history(history, "history is off: nothing to export")
    with store:
        try:
            path = write_textfile(store, prometheus, nodes=list(node or []), cluster=cluster)
        except OSError as exc:
            err_console.print(f"nvtest: error: cannot write {prometheus}: {exc.strerror or exc}", markup=False)
            raise typer.Exit(EXIT_HARNESS) from exc
    console.print(f"wrote {path}", markup=False, highlight=False)
