"""``nvtest evaluate RUN_DIR``: re-judge a stored run with another SKU profile or overlay.

Everything the profile says (expectations, physical figures, thresholds) is applied to
everything the run recorded (node facts, metrics, skips); nothing is rerun and none of the
run's own files is changed, but the re-judged copy is written by default into a new
subdirectory RUN_DIR/evaluate-<sku>/ (``--out`` puts it elsewhere); exits 0/1 by the new
verdict, 2 for a bad SKU, overlay or run directory.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from nvtest.cli.app import app, console, fail
from nvtest.cli.verify import rejudged_line
from nvtest.errors import EXIT_CHECK_FAILED, EXIT_OK, NvtestError

__all__ = ["evaluate_cmd"]


@app.command(
    "evaluate",
    epilog="Example: nvtest evaluate reports/latest --sku h100-sxm-80gb --overlay site.yaml --out /tmp/rejudged"
    "  (or --overlay site.yaml alone: each node with its own SKU)",
)
def evaluate_cmd(
    run_dir: Annotated[Path, typer.Argument(help="A run directory holding results.json.")],
    sku: Annotated[
        str | None,
        typer.Option(help="Judge every node against this SKU profile (default: each node's SKU of the run)."),
    ] = None,
    overlay: Annotated[Path | None, typer.Option(help="Site overlay applied on top of the profile.")] = None,
    out: Annotated[
        Path | None,
        typer.Option(help="Output directory (default: a new RUN_DIR/evaluate-<sku>/ inside the run directory)."),
    ] = None,
    sku_dir: Annotated[list[Path] | None, typer.Option(help="Extra directory of SKU profiles.")] = None,
    sign_key: Annotated[
        Path | None, typer.Option(help="Ed25519 private key (PEM) that signs the copy's manifest.sha256.")
    ] = None,
) -> None:
    """Re-judge a stored run's measurements with other thresholds. Nothing is rerun and the run's
    own files are not changed; the re-judged copy (results.json, report) goes to --out, by
    default a new subdirectory RUN_DIR/evaluate-<sku>/."""
    from nvtest.analysis.reevaluate import evaluate_run
    from nvtest.checks.offline import rejudge_from_facts

    try:
        out_dir, doc = evaluate_run(
            run_dir,
            sku,
            overlay=overlay,
            out=out,
            sku_dirs=list(sku_dir or []),
            facts_rejudge=rejudge_from_facts,
            sign_key=sign_key,
        )
    except NvtestError as exc:
        raise fail(exc) from exc
    s = doc["summary"]
    what = " + ".join(x for x in (sku or "each node's SKU of the run", str(overlay) if overlay else "") if x)
    console.print(f"re-judged with {what}: {s['verdict'].upper()}", markup=False, highlight=False)
    for r in doc["results"]:
        if r["verdict"] in ("fail", "error"):
            console.print(f"  {r['verdict'].upper():5} {r['check']}[{r['node']}]: {r['reason'][:200]}")
    console.print(f"written: {out_dir / 'results.json'}")
    console.print(rejudged_line("nvtest evaluate", out_dir), markup=False, highlight=False)
    if out_dir.resolve().is_relative_to(run_dir.resolve()) and (run_dir / "manifest.sha256").is_file():
        console.print(
            f"note: {run_dir}/manifest.sha256 does not list this copy: `nvtest verify {run_dir}` names it ADDED; "
            f"verify it on its own (`nvtest verify {out_dir}`) or write it elsewhere with --out",
            markup=False,
            highlight=False,
        )
    raise typer.Exit(EXIT_CHECK_FAILED if s["verdict"] in ("fail", "error") else EXIT_OK)
