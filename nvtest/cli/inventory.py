"""``nvtest inventory``: gather every node's facts and summarise the fleet.

The fleet summary counts nodes per SKU and per driver version and names the odd
nodes out: for each attribute (driver, CUDA, kernel, OS, GPU count, CPU model),
the nodes whose value differs from the majority's.
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from nvtest.cli.app import app, console, fail, new_run_id
from nvtest.cli.options import with_options
from nvtest.errors import EXIT_CHECK_FAILED, EXIT_OK, NvtestError
from nvtest.report.console import fmt_counts, print_table
from nvtest.session.context import RunConfig, RunContext
from nvtest.transports.options import SshOptions

__all__ = [
    "UNIFORM_FIELDS",
    "fleet_summary",
    "gather_inventory",
    "inventory_cmd",
    "odd_ones_out",
    "print_inventory",
]

#: Attributes expected to be the same on every node of a fleet.
UNIFORM_FIELDS = ("driver_version", "cuda_version", "kernel", "os", "gpu_count", "cpu_model")


def odd_ones_out(values: dict[str, Any]) -> dict[str, Any]:
    """Nodes whose value differs from the most common one (ties: none are odd)."""
    present = {k: v for k, v in values.items()}
    counts = Counter(present.values())
    if len(counts) <= 1:
        return {}
    (top, n1), (_, n2) = counts.most_common(2)
    if n1 == n2:
        return {}
    return {node: v for node, v in present.items() if v != top}


def fleet_summary(nodes: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Counts per SKU and per driver, and the odd ones out per uniform field."""
    inv = {n: d["inventory"] for n, d in nodes.items() if d.get("inventory")}
    odd = {}
    for f in UNIFORM_FIELDS:
        o = odd_ones_out({n: i.get(f) for n, i in inv.items()})
        if o:
            odd[f] = o
    return {
        "nodes": len(nodes),
        "reachable": len(inv),
        "per_sku": dict(Counter(d.get("sku") or "none" for d in nodes.values())),
        "per_driver": dict(Counter(str(i.get("driver_version") or "none") for i in inv.values())),
        "odd_ones_out": odd,
    }


def gather_inventory(
    *,
    inventory: Path | None,
    nodes: str | None,
    backend: str | None,
    ssh: SshOptions | None = None,
) -> dict[str, Any]:
    """Run the inventory probe on the nodes; return ``{"nodes": {...}, "summary": {...}}``.

    ``backend`` None: ssh with an inventory or nodes, else local (this machine). Over ssh
    the inventory's ``known_hosts`` applies unless the options give one.

    Raises:
        ConfigError: bad inventory, hostlist or backend.
    """
    from nvtest.config.inventory import load_inventory

    backend = backend or ("ssh" if inventory is not None or nodes is not None else "local")
    opts: dict[str, Any] = {}
    if backend == "ssh":
        opts = {k: v for k, v in (ssh or SshOptions()).as_kwargs().items() if v is not None}
        if inventory is not None and "known_hosts" not in opts:
            known = load_inventory(inventory).known_hosts
            if known:
                opts["known_hosts"] = known
    with tempfile.TemporaryDirectory(prefix="nvtest-inventory-") as tmp:
        cfg = RunConfig(
            # unique: two inventories at once against the same nodes stage apart
            run_id=f"inventory-{new_run_id()}",
            run_dir=tmp,
            suite="inventory",
            backend=backend,
            backend_options=opts,
            inventory=str(inventory) if inventory else None,
            nodes=nodes,
            command_line=" ".join(["nvtest", *sys.argv[1:]]),
        )
        ctx = RunContext.from_config(cfg)
        try:
            ctx.gather_facts()
        finally:
            ctx.close(interrupted=False)
        out: dict[str, dict[str, Any]] = {}
        for name, st in ctx.states.items():
            out[name] = {
                "inventory": st.facts.to_json() if st.facts else None,
                "sku": st.match.name if st.match else None,
                "sku_match": list(st.match.reasons) if st.match else [],
                "down_reason": st.down_reason,
                "down_message": st.down_message if st.down_reason else None,
                "staging": ctx.transport.staging_method(name),
            }
    return {"nodes": out, "summary": fleet_summary(out)}


def print_inventory(console: Console, data: dict[str, Any]) -> None:
    """Print the per-node table and the fleet summary (plain text in a pipe, see
    :func:`nvtest.report.console.print_table`)."""
    headers = ("node", "SKU", "CPU", "cores", "mem GiB", "GPUs", "driver", "CUDA", "OS / kernel")
    rows: list[tuple[str, ...]] = []
    for name, d in data["nodes"].items():
        inv = d.get("inventory")
        if not inv:
            why = d.get("down_message") or f"unreachable: {d.get('down_reason')}"
            rows.append((name, "-", why, "", "", "", "", "", ""))
            continue
        gpus = inv["gpus"]
        on_bus = len((inv.get("bus") or {}).get("gpu") or [])
        gpu_txt = f"{len(gpus)} x {gpus[0]['name']}" if gpus else f"0 ({inv.get('gpu_absent_reason') or 'none'})"
        if on_bus > len(gpus):
            gpu_txt = f"{len(gpus)} of {on_bus} on the PCI bus: {inv.get('smi_error') or 'nvidia-smi reports fewer'}"
        rows.append(
            (
                name,
                d.get("sku") or "none",
                str(inv.get("cpu_model")),
                str(inv.get("cores")),
                f"{(inv.get('memory_total_kib') or 0) / 1048576:.1f}",
                gpu_txt,
                str(inv.get("driver_version") or "-"),
                str(inv.get("cuda_version") or "-"),
                f"{inv.get('os')} / {inv.get('kernel')}",
            )
        )
    print_table(console, headers, rows)
    s = data["summary"]
    console.print(
        f"fleet: {s['reachable']}/{s['nodes']} reachable; per SKU: {fmt_counts(s['per_sku'])}; "
        f"per driver: {fmt_counts(s['per_driver'])}"
    )
    for field, odd in s["odd_ones_out"].items():
        console.print(f"  odd {field}: " + ", ".join(f"{n}={v}" for n, v in odd.items()))


@app.command("inventory", epilog="Example: nvtest inventory --json")
@with_options(ssh=True)
def inventory_cmd(
    inventory: Annotated[Path | None, typer.Option(help="Inventory YAML file.")] = None,
    nodes: Annotated[str | None, typer.Option(help="Nodes as a hostlist.")] = None,
    backend: Annotated[
        str | None,
        typer.Option(help="local, ssh or slurm. Default: ssh with --inventory or --nodes, else local."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
    *,
    ssh: SshOptions,
) -> None:
    """Gather and print the inventory of the nodes (this machine by default)."""
    try:
        data = gather_inventory(
            inventory=inventory,
            nodes=nodes,
            backend=backend,
            ssh=ssh,
        )
    except NvtestError as exc:
        raise fail(exc) from exc
    if as_json:
        sys.stdout.write(json.dumps(data, indent=1) + "\n")
    else:
        print_inventory(console, data)
    raise typer.Exit(EXIT_CHECK_FAILED if any(n.get("down_reason") for n in data["nodes"].values()) else EXIT_OK)
