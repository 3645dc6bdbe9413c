"""The ``nvtest`` Typer application, its consoles and what every verb shares.

Exit codes (every verb):

====  =======================================================================
0     all checks passed (warnings allowed)
1     a check failed or errored (a node unreachable, a probe that could not run)
2     usage or configuration error (the message names the file and the field)
3     harness error (nvtest itself failed), or the run was stopped by SIGTERM
130   the run was interrupted by Ctrl-C (SIGINT); what was measured is kept
====  =======================================================================

Each verb lives in its own module of :mod:`nvtest.cli` and registers itself on
:data:`app` when imported; :func:`main` is the console-script entry point.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import secrets
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from nvtest import __version__
from nvtest.errors import NvtestError, OutputWriteError, exit_code_of
from nvtest.report.console import make_console

__all__ = [
    "app",
    "console",
    "err_console",
    "fail",
    "list_app",
    "main",
    "new_run_id",
    "remove_latest",
    "update_latest",
]

app = typer.Typer(
    name="nvtest",
    help="GPU cluster acceptance tests: run a suite on every node, judge against SKU thresholds, write a report.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
list_app = typer.Typer(help="List suites, checks or SKU profiles.", no_args_is_help=True)
app.add_typer(list_app, name="list")

#: stdout and stderr: data printed as it is (no markup, emoji or highlighting, see
#: :func:`nvtest.report.console.make_console`)
console: Console = make_console()
err_console: Console = make_console(stderr=True)


def fail(exc: NvtestError) -> typer.Exit:
    """Print ``nvtest: error: <exc>`` on stderr; the :class:`typer.Exit` of its exit code."""
    err_console.print(f"nvtest: error: {exc}")
    return typer.Exit(exc.exit_code)


def _version_cb(value: bool) -> None:
    if value:
        console.print(f"nvtest {__version__}")
        raise typer.Exit(0)


@app.callback()
def _main(
    version: Annotated[
        bool, typer.Option("--version", callback=_version_cb, is_eager=True, help="Print the version.")
    ] = False,
) -> None:
    """nvtest: acceptance tests for GPU clusters."""


def new_run_id() -> str:
    """``YYYYmmdd-HHMMSS-xxxx`` (UTC time and 4 random hex digits)."""
    return dt.datetime.now(tz=dt.UTC).strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(2)


def update_latest(out: Path, run_dir: Path) -> None:
    """Point ``out/latest`` at ``run_dir`` (a new link renamed over the old one: a reader
    sees the old target or the new one).

    Raises:
        OutputWriteError: the link could not be made; ``latest`` is then removed, so it
            never points at an earlier run as if it were this one.
    """
    latest = out / "latest"
    tmp = out / f".latest.tmp-{os.getpid()}"
    try:
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(run_dir.name)
        os.replace(tmp, latest)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        remove_latest(out)
        raise OutputWriteError.of(latest, exc) from None


def remove_latest(out: Path) -> None:
    """Remove ``out/latest`` (a run that wrote no results.json must not leave it pointing
    at an earlier run, which CI would then read)."""
    latest = out / "latest"
    with contextlib.suppress(OSError):
        if latest.is_symlink():
            latest.unlink()


def main() -> None:
    """Console-script entry point; maps uncaught errors to the exit-code table."""
    import nvtest.cli  # noqa: F401 - registers every verb on the app

    try:
        app()
    except NvtestError as exc:
        err_console.print(f"nvtest: error: {exc}")
        sys.exit(exit_code_of(exc))
    except KeyboardInterrupt as exc:
        sys.exit(exit_code_of(exc))
