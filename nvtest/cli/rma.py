"""The ``nvtest rma`` command: one archive for the vendor of a failed node (:mod:`nvtest.analysis.rma`).

Reads a finished run directory; touches no node. Exits 0 when the archive is written, 2 when
the run cannot be read, the node is not in it or did not fail, 3 when the archive cannot be
written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from nvtest.cli.app import app, console, fail
from nvtest.errors import EXIT_OK, NvtestError

__all__ = ["rma"]


@app.command(
    "rma",
    epilog="Example: nvtest rma reports/20250101-120000-ab12 gpu017 --out gpu017-rma.tar.gz",
)
def rma(
    run_dir: Annotated[Path, typer.Argument(help="The run directory (or its results.json).")],
    node: Annotated[str, typer.Argument(help="The failed node, as the run names it.")],
    out: Annotated[
        Path | None,
        typer.Option("--out", help="The archive to write (default RUN_DIR/rma/NODE.tar.gz)."),
    ] = None,
) -> None:
    """Write NODE's RMA bundle: its as-built record, failing checks with their evidence and raw
    tool output, Xid/SXid events, diagnosis and next step, DCGM's output and nvidia-bug-report's
    log where the run has them; host names and addresses replaced, nothing of other nodes."""
    from nvtest.analysis.rma import write_bundle

    try:
        bundle = write_bundle(run_dir, node, out)
    except NvtestError as exc:
        raise fail(exc) from exc
    console.print(f"rma: {bundle.path} ({len(bundle.members)} files; the node is {bundle.node_as} in it)")
    raise typer.Exit(EXIT_OK)
