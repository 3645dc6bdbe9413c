"""``nvtest skus show|match``: SKU profiles on the command line.

``skus match`` exits 1 when a node matches no profile.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.text import Text

from nvtest.cli.app import app, console, fail
from nvtest.cli.options import with_options
from nvtest.config.skus import Catalog, GpuSummary, MatchResult
from nvtest.errors import EXIT_CHECK_FAILED, EXIT_OK, ConfigError, NvtestError
from nvtest.report.console import print_table
from nvtest.transports.options import SshOptions

__all__ = ["fields_text", "gpus_from_text", "match", "show", "unknown_sku_help"]


def _value_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"  # as the profile writes it, not Python's True
    if isinstance(value, (list, tuple)):
        return "|".join(_value_text(v) for v in value) or "-"  # one of these
    return str(value)


def fields_text(fields: dict[str, Any]) -> str:
    """``key=value, ...`` of a profile's ``match`` or ``expect`` in the profile's own
    words: a list as ``a|b`` (any of them), a flag as ``true``; ``-`` when empty."""
    return ", ".join(f"{k}={_value_text(v)}" for k, v in fields.items()) or "-"


PROFILE_HOWTO = (
    "To add one: copy the closest file of configs/skus/ (or write one in a directory given with --sku-dir), "
    "set match.gpu_name (a regular expression on the GPU name), gpu_memory_mib_min/max and expect.gpus, "
    "and give every threshold its unit and source (docs/skus.md). Until then, force a profile with "
    "--sku NAME or run without one: every check still measures, with no thresholds."
)


def gpus_from_text(text: str) -> GpuSummary:
    """GPU names and memory from ``nvidia-smi -q -x``, ``nvidia-smi -q`` or plain ``nvidia-smi``.

    Raises:
        ConfigError: the text is none of those formats.
    """
    from nvtest import parsers

    tool = parsers.detect(text)
    if tool in ("nvidia-smi-xml", "nvidia-smi-q"):
        q = parsers.parse(tool, text)
        names = [g.product_name or "unknown" for g in q.gpus]
        mems = [int(g.memory_total_mib) if isinstance(g.memory_total_mib, float) else None for g in q.gpus]
    elif tool == "nvidia-smi":
        p = parsers.parse(tool, text)
        names = [g.name for g in p.gpus]
        mems = [int(g.memory_total_mib) if isinstance(g.memory_total_mib, float) else None for g in p.gpus]
    else:
        raise ConfigError(
            f"not an nvidia-smi output (detected: {tool or 'nothing'}); give nvidia-smi -q -x, -q or plain output",
            field="--from-file",
        )
    return GpuSummary(tuple(names), tuple(mems))


def unknown_sku_help(catalog: Catalog, gpus: GpuSummary, match: MatchResult) -> str:
    """The message for hardware no profile matches: why each was rejected, the known SKUs, how to add one."""
    from nvtest.checks.health.gpus import closest_profiles

    lines = [f"no SKU profile matches {gpus.count} x {gpus.names[0] if gpus.names else 'no GPU'}:"]
    lines += [f"  - {r}" for r in match.reasons if not r.startswith("cpu-generic")]
    near = closest_profiles(catalog, gpus.names, gpus.memory_mib)
    if near:
        lines.append(
            f"closest by GPU name and memory: {', '.join(p.name for p in near)} "
            "(a count that differs may be a lost GPU: see the gpus check)"
        )
    lines.append(f"known SKUs: {', '.join(catalog.names())}")
    lines.append(PROFILE_HOWTO)
    return "\n".join(lines)


def _num(x: float | None) -> str:
    return "" if x is None else f"{x:g}"


skus_app = typer.Typer(help="SKU profiles: show one, or find which one a node matches.", no_args_is_help=True)
app.add_typer(skus_app, name="skus")


@skus_app.command("show", epilog="Example: nvtest skus show h100-sxm-80gb --overlay site.yaml")
def show(
    sku: Annotated[str, typer.Argument(help="SKU profile name (nvtest list skus).")],
    sku_dir: Annotated[list[Path] | None, typer.Option(help="Extra directory of SKU profiles.")] = None,
    overlay: Annotated[Path | None, typer.Option(help="Site overlay applied on top.")] = None,
) -> None:
    """Show a SKU profile: how it is matched, what is expected, thresholds with units and sources."""
    from nvtest.config.skus import load_catalog

    try:
        cat = load_catalog(list(sku_dir or []), overlay)
        prof = cat.get(sku)
    except NvtestError as exc:
        raise fail(exc) from exc
    console.print(Text.assemble((prof.name, "bold"), f": {prof.description}  ({cat.files.get(prof.name)})"))
    m = fields_text(prof.match.model_dump(exclude_none=True))
    e = fields_text(prof.expect.model_dump(exclude_none=True))
    console.print(f"match:  {m}")
    console.print(f"expect: {e}")
    rows = []
    for check, metrics in prof.thresholds.items():
        for name, thr in metrics.items():
            src = thr.source + (" [proposed: calibrate on a golden node]" if thr.proposed else "")
            rows.append(
                (
                    check,
                    name,
                    _num(thr.min),
                    _num(thr.warn_min),
                    _num(thr.max),
                    thr.unit,
                    src,
                    cat.origin(prof.name, check, name),
                )
            )
    headers = ("check", "metric", "fail below", "warn below", "fail above", "unit", "source", "origin")
    print_table(console, headers, rows)
    for abbr, ref in prof.sources.items():
        console.print(f"  {abbr}: {ref}")


@skus_app.command(
    "match",
    epilog="Example: nvtest skus match --from-file node17-nvidia-smi-q-x.xml  (or --nodes 'gpu[001-004]' --backend ssh)",
)
@with_options(ssh=True)
def match(
    from_file: Annotated[Path | None, typer.Option(help="An nvidia-smi -q -x (or -q, or plain) output file.")] = None,
    inventory: Annotated[Path | None, typer.Option(help="Inventory YAML file: match each node.")] = None,
    nodes: Annotated[str | None, typer.Option(help="Nodes as a hostlist, e.g. 'gpu[001-004]'.")] = None,
    backend: Annotated[str, typer.Option(help="local, ssh or slurm.")] = "local",
    sku_dir: Annotated[list[Path] | None, typer.Option(help="Extra directory of SKU profiles.")] = None,
    *,
    ssh: SshOptions,
) -> None:
    """Which SKU profile a node (or a recorded nvidia-smi output) matches, and why."""
    from nvtest.config.skus import load_catalog

    try:
        cat = load_catalog(list(sku_dir or []))
        found: dict[str, tuple[GpuSummary, MatchResult, str | None]] = {}
        if from_file is not None:
            try:
                text = from_file.read_text(encoding="utf-8", errors="replace")
            except OSError as exc:
                raise ConfigError(f"cannot read: {exc.strerror or exc}", path=str(from_file)) from exc
            gpus = gpus_from_text(text)
            found[str(from_file)] = (gpus, cat.match(gpus), None)
        else:
            from nvtest.cli.inventory import gather_inventory

            data = gather_inventory(
                inventory=inventory,
                nodes=nodes,
                backend=backend,
                ssh=ssh,
            )
            for name, nd in data["nodes"].items():
                inv: dict[str, Any] = nd.get("inventory") or {}
                g = inv.get("gpus") or []
                gpus = GpuSummary(tuple(x.get("name") or "?" for x in g), tuple(x.get("memory_mib") for x in g))
                down = nd.get("down_message") or (
                    f"unreachable: {nd['down_reason']}" if nd.get("down_reason") else None
                )
                found[name] = (gpus, cat.match(gpus), down)
    except NvtestError as exc:
        raise fail(exc) from exc
    unmatched = 0
    for name, (gpus, res, down) in found.items():
        if down:
            unmatched += 1
            console.print(f"{name}: {down}")
            continue
        if res.profile is None:
            unmatched += 1
            console.print(f"{name}: {unknown_sku_help(cat, gpus, res)}")
            continue
        console.print(f"{name}: {res.name}")
        for r in res.reasons:
            console.print(f"  - {r}")
    raise typer.Exit(EXIT_CHECK_FAILED if unmatched else EXIT_OK)
