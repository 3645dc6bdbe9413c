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

from nvtest.cli.app import app, console, fail
from nvtest.cli.options import with_options
from nvtest.errors import EXIT_CHECK_FAILED, EXIT_OK, NvtestError
from nvtest.run.console import fmt_counts, print_table
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
    backend: str,
    ssh: SshOptions | None = None,
) -> dict[str, Any]:
    """Run the inventory probe on the nodes; return ``{"nodes": {...}, "summary": {...}}``.

    Raises:
        ConfigError: bad inventory, hostlist or backend.
    """
    opts: dict[str, Any] = {}
    if backend == "ssh":
        opts = {k: v for k, v in (ssh or SshOptions()).as_kwargs().items() if v is not None}
    with tempfile.TemporaryDirectory(prefix="nvtest-inventory-") as tmp:
        cfg = RunConfig(
            run_id="inventory",
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
            }
    return {"nodes": out, "summary": fleet_summary(out)}


def print_inventory(console: Console, data: dict[str, Any]) -> None:
    """Print the per-node table and the fleet summary (plain text in a pipe, see
    :func:`nvtest.run.console.print_table`)."""
    headers = ("node", "SKU", "CPU", "cores", "mem GiB", "GPUs", "driver", "CUDA", "OS / kernel")
    rows: list[tuple[str, ...]] = []
    for name, d in data["nodes"].items():
        inv = d.get("inventory")
        if not inv:
            rows.append((name, "-", f"unreachable: {d.get('down_reason')}", "", "", "", "", "", ""))
            continue
        gpus = inv["gpus"]
        gpu_txt = f"{len(gpus)} x {gpus[0]['name']}" if gpus else f"0 ({inv.get('gpu_absent_reason') or 'none'})"
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
    backend: Annotated[str, typer.Option(help="local, ssh or slurm.")] = "local",
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
