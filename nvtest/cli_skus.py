"""``nvtest skus show|match`` and ``nvtest evaluate``: SKU profiles on the command line.

Registered on the main app by :func:`register` (one line in :mod:`nvtest.cli`).
Exit codes follow :mod:`nvtest.cli`: ``skus match`` exits 1 when a node matches
no profile; ``evaluate`` exits 0/1 by the new verdict.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from nvtest.errors import EXIT_CHECK_FAILED, EXIT_OK, ConfigError, NvtestError
from nvtest.skus import Catalog, GpuSummary, MatchResult

__all__ = ["gpus_from_text", "register", "unknown_sku_help"]

console = Console()
err_console = Console(stderr=True)

PROFILE_HOWTO = (
    "To add one: copy the closest file of configs/skus/ (or write one in a directory given with --sku-dir), "
    "set match.gpu_name (a regular expression on the GPU name), gpu_memory_mib_min/max and expect.gpus, "
    "and give every threshold its unit and source (docs/skus.md). Until then, force a profile with "
    "--sku NAME or run without one: every check still measures, with no thresholds."
)


def _fail(exc: NvtestError) -> typer.Exit:
    err_console.print(f"nvtest: error: {exc}", markup=False, highlight=False)
    return typer.Exit(exc.exit_code)


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
        mems = [
            int(g.memory_total_mib) if isinstance(g.memory_total_mib, float) else None
            for g in q.gpus
        ]
    elif tool == "nvidia-smi":
        p = parsers.parse(tool, text)
        names = [g.name for g in p.gpus]
        mems = [
            int(g.memory_total_mib) if isinstance(g.memory_total_mib, float) else None
            for g in p.gpus
        ]
    else:
        raise ConfigError(
            f"not an nvidia-smi output (detected: {tool or 'nothing'}); give nvidia-smi -q -x, -q or plain output",
            field="--from-file",
        )
    return GpuSummary(tuple(names), tuple(mems))


def unknown_sku_help(catalog: Catalog, gpus: GpuSummary, match: MatchResult) -> str:
    """The message for hardware no profile matches: why each was rejected, the known SKUs, how to add one."""
    from nvtest.health.gpus import closest_profiles

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


def show(
    sku: Annotated[str, typer.Argument(help="SKU profile name (nvtest list skus).")],
    sku_dir: Annotated[
        list[Path] | None, typer.Option(help="Extra directory of SKU profiles.")
    ] = None,
    overlay: Annotated[Path | None, typer.Option(help="Site overlay applied on top.")] = None,
) -> None:
    """Show a SKU profile: how it is matched, what is expected, thresholds with units and sources."""
    from nvtest.skus import load_catalog

    try:
        cat = load_catalog(list(sku_dir or []), overlay)
        prof = cat.get(sku)
    except NvtestError as exc:
        raise _fail(exc) from exc
    console.print(f"[bold]{prof.name}[/bold]: {prof.description}  ({cat.files.get(prof.name)})")
    m = ", ".join(f"{k}={v}" for k, v in prof.match.model_dump(exclude_none=True).items()) or "-"
    e = ", ".join(f"{k}={v}" for k, v in prof.expect.model_dump(exclude_none=True).items()) or "-"
    console.print(f"match:  {m}", markup=False, highlight=False)
    console.print(f"expect: {e}", markup=False, highlight=False)
    t = Table(
        "check", "metric", "fail below", "warn below", "fail above", "unit", "source", "origin"
    )
    for check, metrics in prof.thresholds.items():
        for name, thr in metrics.items():
            src = thr.source + (" [proposed: calibrate on a golden node]" if thr.proposed else "")
            t.add_row(
                check,
                name,
                _num(thr.min),
                _num(thr.warn_min),
                _num(thr.max),
                thr.unit,
                src,
                cat.origin(prof.name, check, name),
            )
    console.print(t)
    for abbr, ref in prof.sources.items():
        console.print(f"  {abbr}: {ref}", markup=False, highlight=False)


def match(
    from_file: Annotated[
        Path | None, typer.Option(help="An nvidia-smi -q -x (or -q, or plain) output file.")
    ] = None,
    inventory: Annotated[
        Path | None, typer.Option(help="Inventory YAML file: match each node.")
    ] = None,
    nodes: Annotated[
        str | None, typer.Option(help="Nodes as a hostlist, e.g. 'gpu[001-004]'.")
    ] = None,
    backend: Annotated[str, typer.Option(help="local, ssh or slurm.")] = "local",
    sku_dir: Annotated[
        list[Path] | None, typer.Option(help="Extra directory of SKU profiles.")
    ] = None,
    insecure_host_keys: Annotated[
        bool, typer.Option(help="ssh: accept unknown host keys.")
    ] = False,
) -> None:
    """Which SKU profile a node (or a recorded nvidia-smi output) matches, and why."""
    from nvtest.skus import load_catalog

    try:
        cat = load_catalog(list(sku_dir or []))
        found: dict[str, tuple[GpuSummary, MatchResult, str | None]] = {}
        if from_file is not None:
            try:
                text = from_file.read_text(encoding="utf-8", errors="replace")
            except OSError as exc:
                raise ConfigError(
                    f"cannot read: {exc.strerror or exc}", path=str(from_file)
                ) from exc
            gpus = gpus_from_text(text)
            found[str(from_file)] = (gpus, cat.match(gpus), None)
        else:
            from nvtest.fleet_inventory import gather_inventory

            data = gather_inventory(
                inventory=inventory,
                nodes=nodes,
                backend=backend,
                insecure_host_keys=insecure_host_keys,
                parallel=64,
            )
            for name, nd in data["nodes"].items():
                inv: dict[str, Any] = nd.get("inventory") or {}
                g = inv.get("gpus") or []
                gpus = GpuSummary(
                    tuple(x.get("name") or "?" for x in g), tuple(x.get("memory_mib") for x in g)
                )
                found[name] = (gpus, cat.match(gpus), nd.get("down_reason"))
    except NvtestError as exc:
        raise _fail(exc) from exc
    unmatched = 0
    for name, (gpus, res, down) in found.items():
        if down:
            unmatched += 1
            console.print(f"{name}: unreachable ({down})", markup=False, highlight=False)
            continue
        if res.profile is None:
            unmatched += 1
            console.print(
                f"{name}: {unknown_sku_help(cat, gpus, res)}", markup=False, highlight=False
            )
            continue
        console.print(f"{name}: {res.name}", markup=False, highlight=False)
        for r in res.reasons:
            console.print(f"  - {r}", markup=False, highlight=False)
    raise typer.Exit(EXIT_CHECK_FAILED if unmatched else EXIT_OK)


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
    from nvtest.evaluate import evaluate_run

    try:
        out_dir, doc = evaluate_run(
            run_dir, sku, overlay=overlay, out=out, sku_dirs=list(sku_dir or [])
        )
    except NvtestError as exc:
        raise _fail(exc) from exc
    s = doc["summary"]
    console.print(
        f"re-judged with {sku}{' + ' + str(overlay) if overlay else ''}: {s['verdict'].upper()}"
    )
    for r in doc["results"]:
        if r["verdict"] in ("fail", "error"):
            console.print(
                f"  {r['verdict'].upper():5} {r['check']}[{r['node']}]: {r['reason'][:200]}",
                markup=False,
                highlight=False,
            )
    console.print(f"written: {out_dir / 'results.json'}")
    raise typer.Exit(EXIT_CHECK_FAILED if s["verdict"] in ("fail", "error") else EXIT_OK)


def register(app: typer.Typer) -> None:
    """Add ``skus show``, ``skus match`` and ``evaluate`` to ``app``."""
    skus_app = typer.Typer(
        help="SKU profiles: show one, or find which one a node matches.", no_args_is_help=True
    )
    skus_app.command("show", epilog="Example: nvtest skus show h100-sxm-80gb --overlay site.yaml")(
        show
    )
    skus_app.command(
        "match",
        epilog="Example: nvtest skus match --from-file node17-nvidia-smi-q-x.xml  (or --nodes 'gpu[001-004]' --backend ssh)",
    )(match)
    app.add_typer(skus_app, name="skus")
    app.command(
        "evaluate",
        epilog="Example: nvtest evaluate reports/latest --sku h100-sxm-80gb --overlay site.yaml --out /tmp/rejudged",
    )(evaluate_cmd)
