"""``nvtest submit``: ``nvtest run --backend slurm`` as a batch job in its own allocation."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from nvtest.cli.app import app, console, err_console, fail, new_run_id, update_latest
from nvtest.cli.options import with_options
from nvtest.errors import EXIT_CONFIG, ConfigError, NvtestError
from nvtest.transports.options import SlurmOptions

__all__ = ["submit"]


#: Options of the run inside the job (its multi-node launches), passed through to ``nvtest run``.
RUN_ONLY = ("mpi", "container_image", "container_mounts", "image_id")


@app.command(
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    epilog="Example: nvtest submit --partition gpu --time 120 --exclusive --nodes 'gpu[001-016]' --suite delivery",
)
@with_options(slurm=True, exclude=RUN_ONLY)
def submit(
    ctx: typer.Context,
    nodes: Annotated[
        str | None, typer.Option(help="Nodes as a hostlist; default: all available nodes of --partition.")
    ] = None,
    inventory: Annotated[Path | None, typer.Option(help="Inventory YAML file (its nodes are allocated).")] = None,
    out: Annotated[Path, typer.Option(help="Where the run directory is created.")] = Path("reports"),
    *,
    slurm: SlurmOptions,
) -> None:
    """Submit `nvtest run --backend slurm` as a batch job in its own allocation.

    Every other option (--suite, -k, --sku, --overlay, --drain-failed, ...) is passed
    to `nvtest run` inside the job. The batch script is kept in the run directory;
    the job id and the report's path are printed.
    """
    from nvtest.cli.run import EXCLUDED_FILE, excluded_nodes
    from nvtest.config.inventory import expand_hostlist, load_inventory
    from nvtest.results import write_atomic
    from nvtest.transports.slurm import SlurmTransport, discover_nodes

    excluded: dict[str, str] = {}

    passthrough = list(ctx.args)
    run_cmd = typer.main.get_command(app).get_command(ctx, "run")  # type: ignore[attr-defined]
    try:
        assert run_cmd is not None
        run_cmd.make_context("run", [*passthrough], parent=ctx, resilient_parsing=False)
    except Exception as exc:  # typer's (vendored click) usage errors
        message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
        err_console.print(f"nvtest: error: option not accepted by nvtest run: {message}")
        raise typer.Exit(EXIT_CONFIG) from exc
    try:
        if inventory is not None:
            names = load_inventory(inventory).names()
        elif nodes:
            names = expand_hostlist(nodes)
        elif slurm.partition:
            every = discover_nodes(partition=slurm.partition, include_unavailable=True)
            excluded = excluded_nodes(every)  # listed in the run's results, never dropped
            names = [n for n in every if n not in excluded]
        else:
            raise ConfigError("nvtest submit needs --nodes, --inventory or --partition", field="--nodes")
        if not names:
            why = "; ".join(f"{n}: {w}" for n, w in excluded.items())
            raise ConfigError(
                f"no available node in partition {slurm.partition!r}{': ' + why if why else ''}", field="--partition"
            )
        run_id = new_run_id()
        out.mkdir(parents=True, exist_ok=True)
        run_dir = (out / run_id).resolve()
        transport = SlurmTransport(allocate=False, run_id=run_id, **slurm.as_kwargs())
        argv = [sys.executable, "-m", "nvtest.cli", "run", "--backend", "slurm", "--progress", "plain"]
        if inventory is not None:
            argv += ["--inventory", str(inventory.resolve())]
        argv += passthrough
        script = transport.write_batch_script(run_dir, argv, nodes=names)
        if excluded:
            write_atomic(run_dir / EXCLUDED_FILE, json.dumps(excluded, indent=1))
        job_id = transport.submit(script)
    except NvtestError as exc:
        raise fail(exc) from exc
    update_latest(out, run_dir)
    console.print(f"submitted job {job_id}: {len(names)} node(s); batch script {script}")
    console.print(f"report (when the job ends): {run_dir / 'report.html'}")
