"""``nvtest sweep``: an active suite on the idle nodes of a Slurm partition, as low-priority
jobs, at most ``--max-out`` nodes out of service at once; once per call (a systemd timer or
cron runs it: docs/operations.md).

Options after ``--`` (or any option ``nvtest run`` knows: ``--overlay``, ``--sku``, ``-k``)
are passed to the ``nvtest run`` each job starts on its node. Exit status: 0 every swept node
passed; 1 a node failed or errored; 3 the circuit breaker tripped (nvtest suspects itself:
nothing was drained); 2 a bad option (a number out of its range, a ``--nodes`` node the
partition does not have); 3 (130) stopped by SIGTERM (SIGINT), as ``nvtest run``: its
jobs cancelled, ``sweep.json`` written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from nvtest.cli.app import app, console, fail
from nvtest.cli.limits import check_numbers
from nvtest.errors import EXIT_CHECK_FAILED, EXIT_HARNESS, EXIT_OK, NvtestError, exit_code_of_signal

__all__ = ["sweep"]


@app.command(
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    epilog="Example: nvtest sweep --partition gpu --suite quick --max-out 5% --qos scavenger --drain --history postgresql://nvtest@db/fleet",
)
def sweep(
    ctx: typer.Context,
    partition: Annotated[
        str | None, typer.Option(help="Slurm partition to sweep (default: the default partition).")
    ] = None,
    nodes: Annotated[str | None, typer.Option(help="Only these nodes of the partition (a hostlist).")] = None,
    suite: Annotated[str, typer.Option(help="The suite each job runs (nvtest list suites).")] = "quick",
    max_out: Annotated[
        str, typer.Option(help="At most this many nodes out of service at once: a count or a share (10%).")
    ] = "1",
    nice: Annotated[int, typer.Option(help="sbatch --nice: a lower priority than the site's jobs.")] = 10000,
    qos: Annotated[str | None, typer.Option(help="sbatch --qos (e.g. a preemptible scavenger QOS).")] = None,
    reservation: Annotated[str | None, typer.Option(help="sbatch --reservation (a maintenance reservation).")] = None,
    time_limit: Annotated[int, typer.Option("--time", help="Each job's time limit, minutes.")] = 60,
    wait: Annotated[
        float | None,
        typer.Option(
            help="Seconds to wait for a batch (default: --time + 5 min); jobs not started by then are cancelled."
        ),
    ] = None,
    drain: Annotated[
        bool, typer.Option(help="Drain failed nodes ('nvtest: <check> <reason>') unless the breaker trips.")
    ] = False,
    breaker_share: Annotated[
        float, typer.Option(help="Trip when more than this share of swept nodes fail one check the same way.")
    ] = 0.5,
    breaker_min_nodes: Annotated[int, typer.Option(help="The breaker judges from this many swept nodes on.")] = 3,
    out: Annotated[Path, typer.Option(help="Where sweep-<id>/ is created (a directory every node sees).")] = Path(
        "reports"
    ),
    history: Annotated[
        str | None, typer.Option(help="History database: SQLite path, postgresql:// URL or 'off'.")
    ] = None,
) -> None:
    """Sweep the idle nodes of a partition with an active suite, in batches."""
    from nvtest.ops.sweep import SweepOptions, run_sweep

    _check_site_files(list(ctx.args))
    check_numbers(
        "sweep",
        nice=nice,
        time_limit=time_limit,
        wait=wait,
        breaker_share=breaker_share,
        breaker_min_nodes=breaker_min_nodes,
    )

    opts = SweepOptions(
        partition=partition,
        nodes=nodes,
        suite=suite,
        run_args=list(ctx.args),
        max_out=max_out,
        nice=nice,
        qos=qos,
        reservation=reservation,
        time_min=time_limit,
        wait_s=wait,
        out=out,
        drain=drain,
        breaker_share=breaker_share,
        breaker_min_nodes=breaker_min_nodes,
        history=history,
        log=lambda m: console.print(m, markup=False, highlight=False),
    )
    try:
        summary = run_sweep(opts)
    except NvtestError as exc:
        raise fail(exc) from exc
    table = Table(
        title=f"sweep {summary['sweep_id']}: {len(summary['batches'])} batch(es) of at most {summary['batch_size']}",
        title_justify="left",
    )
    for col in ("node", "verdict", "why"):
        table.add_column(col)
    for node, r in sorted(summary["nodes"].items()):
        table.add_row(node, r.get("verdict") or "not swept", escape(str(r.get("why") or "")[:160]))
    console.print(table)
    b = summary["breaker"] or {}
    console.print(
        ("CIRCUIT BREAKER TRIPPED: " if b.get("tripped") else "breaker: ") + str(b.get("reason")),
        markup=False,
        highlight=False,
    )
    for node, act in sorted(summary["drained"].items()):
        console.print(f"{node}: {act['action']}: {act['reason']}", markup=False, highlight=False)
    console.print(f"summary: {summary['dir']}/sweep.html", markup=False, highlight=False)
    if summary.get("interrupted"):  # systemd stop: the jobs were cancelled, sweep.json written
        console.print(
            f"sweep stopped by {summary['interrupted']}: its jobs cancelled, nothing drained",
            markup=False,
            highlight=False,
        )
        raise typer.Exit(exit_code_of_signal(str(summary["interrupted"])))
    if b.get("tripped"):
        raise typer.Exit(EXIT_HARNESS)
    bad = any(r.get("verdict") in ("fail", "error") for r in summary["nodes"].values())
    raise typer.Exit(EXIT_CHECK_FAILED if bad else EXIT_OK)


def _check_site_files(run_args: list[str]) -> None:
    """Load the ``--overlay`` and ``--sku-dir`` the jobs' ``nvtest run`` will load, before a
    job is submitted: a mistake in them exits 2 here, not once per node (file, line, key).

    Raises:
        typer.Exit: a profile or the overlay is invalid (exit 2).
    """
    from nvtest.config.skus import load_catalog

    values: dict[str, list[str]] = {"--overlay": [], "--sku-dir": []}
    for i, arg in enumerate(run_args):
        name, eq, value = arg.partition("=")
        if name in values:
            got = value if eq else (run_args[i + 1] if i + 1 < len(run_args) else None)
            if got is not None:
                values[name].append(got)
    try:
        load_catalog(
            [Path(d) for d in values["--sku-dir"]], Path(values["--overlay"][-1]) if values["--overlay"] else None
        )
    except NvtestError as exc:
        raise fail(exc) from exc
