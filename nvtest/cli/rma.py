"""The ``nvtest rma`` command: one archive for the vendor of a failed node (:mod:`nvtest.analysis.rma`).

Reads a finished run directory; touches no node. Exits 0 when the archive is written, 2 when
the run cannot be read, the node is not in it or did not fail, or ``--out`` is a link or not a
regular file, 3 when the archive cannot be written, 130 on SIGTERM / SIGINT (the staged copies
and the half-written archive are removed first).
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

import typer

from nvtest.cli.app import app, console, err_console, fail
from nvtest.errors import EXIT_INTERRUPTED, EXIT_OK, NvtestError

__all__ = ["rma"]


@contextlib.contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """Within the block, SIGTERM raises KeyboardInterrupt in the main thread (as SIGINT does),
    so the ``finally`` blocks that remove temporary files run."""

    def _raise(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(signal.Signals(signum).name)

    previous = signal.signal(signal.SIGTERM, _raise)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@app.command(
    "rma",
    epilog="Example: nvtest rma reports/20250101-120000-ab12 gpu017 --out /srv/rma/",
)
def rma(
    run_dir: Annotated[
        Path, typer.Argument(help="The run directory (or its results.json), or a run id found under ./reports/.")
    ],
    node: Annotated[str, typer.Argument(help="The failed node, as the run names it.")],
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help="The archive to write, or a directory to write it in (default ./<run-id>-<node>-rma.tar.gz, "
            "outside the run directory). An existing link or non-regular file is refused.",
        ),
    ] = None,
) -> None:
    """Write NODE's RMA bundle: its as-built record, failing checks with their evidence and raw
    tool output, Xid/SXid events, diagnosis and next step, DCGM's output and nvidia-bug-report's
    log where the run has them; host names and addresses replaced, nothing of other nodes."""
    from nvtest.analysis.rma import write_bundle

    try:
        with _sigterm_interrupts():
            bundle = write_bundle(run_dir, node, out)
    except NvtestError as exc:
        raise fail(exc) from exc
    except KeyboardInterrupt as exc:
        err_console.print(f"nvtest: error: rma interrupted ({exc or 'SIGINT'}); nothing written")
        raise typer.Exit(EXIT_INTERRUPTED) from None
    console.print(f"rma: {bundle.path} ({len(bundle.members)} files; the node is {bundle.node_as} in it)")
    raise typer.Exit(EXIT_OK)
