"""``nvtest evidence``: the command of the GPU evidence kit (the operation is
:mod:`nvtest.ops.evidence`; docs/gpu-evidence.md).

Exit codes: 0 the kit ran to its end (whatever the node measured: the verdicts are in the
evidence), 2 a usage error (OUT holds files that are not a previous kit's, an unknown step, a --budget-s not a
positive number of seconds), 3 the kit failed.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated

import typer

from nvtest.cli.app import app, console, err_console, fail
from nvtest.errors import EXIT_HARNESS, EXIT_OK, ConfigError, NvtestError
from nvtest.ops.evidence import Kit, check_steps
from nvtest.ops.evidence.steps import BUDGET_S, SHORT_BUDGET_S

__all__ = ["evidence"]


@app.command(
    epilog="Example: nvtest evidence --out gpu-evidence/    (make gpu-evidence; docs/gpu-evidence.md)",
)
def evidence(
    out: Annotated[Path, typer.Option(help="The evidence directory (the only place written).")] = Path("gpu-evidence"),
    short: Annotated[
        bool, typer.Option(help="Short form: small sizes, 3 s burn-in, a delivery subset.", envvar="GPU_EVIDENCE_SHORT")
    ] = False,
    budget_s: Annotated[
        float | None, typer.Option(help="The whole kit's seconds (default 480; short form 180).")
    ] = None,
    steps: Annotated[
        str | None,
        typer.Option(
            help="Comma list of groups (capture, probe, run) or step names to run; the rest are recorded as not run."
        ),
    ] = None,
) -> None:
    """Run every GPU capture and probe and the delivery and burn-in suites on this node;
    write the evidence (manifest.json, summary.md, captures, probes, runs) into OUT, sanitised."""
    only = frozenset(s.strip() for s in steps.split(",") if s.strip()) if steps else None
    if budget_s is not None and not (math.isfinite(budget_s) and budget_s > 0):
        # 0 read as "the default" ran the whole 480 s; a negative or nan one ran nothing and exited 0
        raise fail(
            ConfigError(f"--budget-s must be a positive number of seconds, not {budget_s:g}", field="--budget-s")
        )
    kit = Kit(
        out=out,
        short=short,
        budget_s=budget_s if budget_s is not None else (SHORT_BUDGET_S if short else BUDGET_S),
        only=only,
        console=console,
    )
    try:
        check_steps(only, out, short=short)
        manifest = kit.collect()
    except NvtestError as exc:
        raise fail(exc) from exc
    if kit.kit_error:
        err_console.print(f"nvtest: error: the evidence kit failed: {kit.kit_error}", markup=False, highlight=False)
        raise typer.Exit(EXIT_HARNESS)
    counts: dict[str, int] = {}
    for s in manifest["steps"]:
        counts[s["status"]] = counts.get(s["status"], 0) + 1
    console.print(
        f"evidence: {kit.out} ({', '.join(f'{v} {k}' for k, v in sorted(counts.items()))}); summary: {kit.out / 'summary.md'}",
        markup=False,
        highlight=False,
    )
    raise typer.Exit(EXIT_OK)
