"""``nvtest report RUN_DIR``: rebuild a run's reports from what it stored (no node is touched)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from nvtest.cli.app import app, console, fail
from nvtest.cli.verify import rejudged_line
from nvtest.errors import NvtestError

__all__ = ["report"]


@app.command(epilog="Example: nvtest report reports/latest")
def report(
    run_dir: Annotated[Path, typer.Argument(help="A run directory holding results.json.")],
    pdf: Annotated[bool, typer.Option("--pdf", help="Also write report.pdf (needs WeasyPrint or Chromium).")] = False,
    sign_key: Annotated[
        Path | None, typer.Option(help="Ed25519 private key (PEM) that signs the new manifest.sha256.")
    ] = None,
) -> None:
    """Rebuild results.json, report.html, junit.xml and results.csv (and report.pdf) of a run (no node is touched).

    From the run's results.jsonl where it has one (every measurement is there first),
    else from its results.json (a copied run, an ``nvtest evaluate`` output). The evidence
    is judged again: the reports say so, and a new manifest.sha256 covers the files.
    """
    from nvtest.analysis.finish import finish_run
    from nvtest.results import load_results

    try:
        doc = None if (run_dir / "results.jsonl").is_file() else load_results(run_dir)
        paths = finish_run(run_dir, doc=doc, pdf=pdf, sign_key=sign_key, rejudged="nvtest report").paths
    except NvtestError as exc:
        raise fail(exc) from exc
    for p in paths:
        console.print(str(p))
    console.print(rejudged_line("nvtest report", run_dir), markup=False, highlight=False)
