"""``nvtest gate``: the node's passive checks in seconds, for Slurm's Prolog, Epilog and
HealthCheckProgram, a Kubernetes init container or a cron job.

Prints one JSON verdict document on stdout (docs/gate.schema.json) and one summary line on
stderr. Exit status: 1 when a check failed (or, with ``--strict``, could not be measured),
2 for a bad option or configuration in ``--mode manual``, else 0 — Slurm drains a node whose
Prolog or Epilog exits non-zero, so nothing short of a proven failure does. In a hook mode a
configuration error is reported in the document as ``unknown`` and exits 0 (``--strict``: 1),
so that a mistake in a shared file does not drain every node.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from nvtest.cli.app import app, err_console
from nvtest.errors import EXIT_CONFIG, ConfigError
from nvtest.run.live import short

__all__ = ["gate"]

_EPILOG = (
    "Examples: nvtest gate --mode prolog --drain   |   "
    "nvtest gate --mode healthcheck --drain --resume --history postgresql://nvtest@db/fleet"
)


def _summary(doc: dict) -> str:
    bad = [c for c in doc["checks"] if c["verdict"] in ("fail", "unknown", "warn")]
    what = "; ".join(f"{c['check']} {c['verdict']}: {short(c['reason'], 100)}" for c in bad[:3]) or "all checks passed"
    slurm = doc.get("slurm") or {}
    acts = [f"{a['action']}" for a in (slurm.get("drain"), slurm.get("resume")) if a and a.get("action") not in ("none",)]
    return (
        f"nvtest gate {doc['node']}: {doc['verdict'].upper()} in {doc['duration_s']:.2f} s "
        f"({len(doc['checks'])} checks, sku {doc['sku']['name'] or '?'})"
        + (f" [{', '.join(acts)}]" if acts else "")
        + f": {what}"
    )


@app.command(epilog=_EPILOG)
def gate(
    mode: Annotated[str, typer.Option(help="prolog, epilog, healthcheck or manual: the hook that runs the gate.")] = "manual",
    budget: Annotated[float, typer.Option(help="Wall-time budget of the checks, seconds; a check past it is unknown.")] = 10.0,
    strict: Annotated[bool, typer.Option(help="Exit 1 on unknown (a check that could not be measured) too.")] = False,
    drain: Annotated[bool, typer.Option(help="Drain this node in Slurm when a check fails (reason 'nvtest: <check> ...').")] = False,
    resume: Annotated[bool, typer.Option(help="Resume this node when every check passes, if nvtest drained it.")] = False,
    clear_xids: Annotated[bool, typer.Option(help="Forget the fatal Xids seen this boot (after the GPU reset they asked for).")] = False,
    node: Annotated[str | None, typer.Option(help="This node's Slurm name (default: $SLURMD_NODENAME, else the short hostname).")] = None,
    sku: Annotated[str | None, typer.Option(help="Judge against this SKU profile (default: matched from nvidia-smi and lspci).")] = None,
    sku_dir: Annotated[list[Path] | None, typer.Option(help="Extra directory of SKU profiles (repeatable).")] = None,
    overlay: Annotated[Path | None, typer.Option(help="Site overlay (thresholds, recipe.gate: mounts, services, disk).")] = None,
    state_dir: Annotated[Path | None, typer.Option(help="Where the gate keeps its cursor (default /var/lib/nvtest).")] = None,
    sysfs: Annotated[Path, typer.Option(help="Where the node's sysfs is mounted (a container: the host's /sys).")] = Path("/sys"),
    history: Annotated[str | None, typer.Option(help="History database: a SQLite path, a postgresql:// URL, or 'off'.")] = None,
    check: Annotated[list[str] | None, typer.Option("--check", help="Run only this check (repeatable).")] = None,
    cluster: Annotated[str | None, typer.Option(help="The cluster this node is known by in the history (default: $SLURM_CLUSTER_NAME, else slurm.conf's ClusterName, else local:<node>).")] = None,
) -> None:
    """Run the passive health checks on this node and print one JSON verdict."""
    from nvtest.ops.gate.engine import CHECKS, MODES, GateOptions, run_gate

    if mode not in MODES:
        err_console.print(f"nvtest: error: --mode {mode!r}: one of {', '.join(MODES)}", markup=False)
        raise typer.Exit(EXIT_CONFIG)
    unknown = sorted(set(check or []) - {name for name, _ in CHECKS})
    if unknown or budget <= 0:
        why = f"unknown check(s) {', '.join(unknown)}; known: {', '.join(n for n, _ in CHECKS)}" if unknown else "--budget must be > 0"
        err_console.print(f"nvtest: error: {why}", markup=False)
        raise typer.Exit(EXIT_CONFIG)
    opts = GateOptions(
        node=node, mode=mode, budget_s=budget, strict=strict, drain=drain, resume=resume, clear_xids=clear_xids,
        sku=sku, sku_dirs=list(sku_dir or []), overlay=overlay, state_dir=state_dir, sysfs=sysfs,
        history=history, only=list(check or []), cluster=cluster,
    )  # fmt: skip
    try:
        doc = run_gate(opts)
    except ConfigError as exc:
        if mode == "manual":
            err_console.print(f"nvtest: error: {exc}", markup=False, highlight=False)
            raise typer.Exit(EXIT_CONFIG) from exc
        doc = _config_error_doc(opts, exc)
    sys.stdout.write(json.dumps(doc, default=str) + "\n")  # one line: a JSONL record in a hook's log
    sys.stdout.flush()
    err_console.print(_summary(doc), markup=False, highlight=False)
    for w in doc.get("warnings") or []:
        err_console.print(f"nvtest gate: warning: {w}", markup=False, highlight=False)
    raise typer.Exit(int(doc["exit_code"]))


def _config_error_doc(opts, exc: ConfigError) -> dict:  # type: ignore[no-untyped-def]
    """The document of a gate that could not start for a configuration error (a hook mode)."""
    import time

    from nvtest.ops.gate.document import SCHEMA, SCHEMA_VERSION, exit_code
    from nvtest.ops.gate.engine import node_name

    reason = f"configuration error, nothing judged: {exc}"
    return {
        "schema": SCHEMA, "schema_version": SCHEMA_VERSION, "node": node_name(opts.node), "mode": opts.mode,
        "started_at": time.time(), "duration_s": 0.0, "budget_s": opts.budget_s, "verdict": "unknown",
        "exit_code": exit_code("unknown", strict=opts.strict), "strict": opts.strict,
        "sku": {"name": None, "how": reason, "overlay": None},
        "checks": [{"check": "configuration", "verdict": "unknown", "reason": reason, "duration_s": 0.0,
                    "decisions": [], "evidence": [], "metrics": [], "notes": []}],
        "slurm": {"drain": None, "resume": None}, "warnings": [reason], "history": None,
    }  # fmt: skip
