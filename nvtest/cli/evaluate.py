"""``nvtest evaluate RUN_DIR``: re-judge a stored run with another SKU profile or overlay.

Nothing is rerun and RUN_DIR is not changed; exits 0/1 by the new verdict.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from nvtest.cli.app import app, console, fail
from nvtest.errors import EXIT_CHECK_FAILED, EXIT_OK, NvtestError

__all__ = ["evaluate_cmd"]


@app.command(
    "evaluate",
    epilog="Example: nvtest evaluate reports/latest --sku h100-sxm-80gb --overlay site.yaml --out /tmp/rejudged",
)
def evaluate_cmd(
    run_dir: Annotated[Path, typer.Argument(help="A run directory holding results.json.")],
    sku: Annotated[str, typer.Option(help="Judge every node against this SKU profile.")],
    overlay: Annotated[
        Path | None, typer.Option(help="Site overlay applied on top of the profile.")
    ] = None,
    out: Annotated[
        Path | None, typer.Option(help="Output directory (default RUN_DIR/evaluate-<sku>/).")
    ] = None,
    sku_dir: Annotated[
        list[Path] | None, typer.Option(help="Extra directory of SKU profiles.")
    ] = None,
) -> None:
    """Re-judge a stored run's measurements with other thresholds (nothing is rerun; RUN_DIR is not changed)."""
    from nvtest.analysis.reevaluate import evaluate_run

    try:
        out_dir, doc = evaluate_run(
            run_dir, sku, overlay=overlay, out=out, sku_dirs=list(sku_dir or [])
        )
    except NvtestError as exc:
        raise fail(exc) from exc
    s = doc["summary"]
    console.print(
        f"re-judged with {sku}{' + ' + str(overlay) if overlay else ''}: {s['verdict'].upper()}"
    )
    for r in doc["results"]:
        if r["verdict"] in ("fail", "error"):
            console.print(
                f"  {r['verdict'].upper():5} {r['check']}[{r['node']}]: {r['reason'][:200]}")
    console.print(f"written: {out_dir / 'results.json'}")
    raise typer.Exit(EXIT_CHECK_FAILED if s["verdict"] in ("fail", "error") else EXIT_OK)
