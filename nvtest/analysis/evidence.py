"""The summary of a GPU evidence directory (``nvtest evidence``): each figure against the SKU
profile the node matched, with the ratio to the profile's number.

Input: the evidence directory ``OUT`` and its ``manifest.json`` (see docs/gpu-evidence.md):
``captures/nvidia-smi-q-x.xml`` and ``captures/lspci-nvidia.txt`` for the GPUs and the
SKU match, ``probes/<step>.json`` (the probes' one JSON document each, docs/probes.md),
``runs/<suite>/<run-id>/results.json`` (docs/results.schema.json). Output: markdown.

Figures, with the profile threshold each is compared with (``configs/skus/*.yaml``):

=======================  ==============================  ====================================
figure                   from                            threshold (check / metric)
=======================  ==============================  ====================================
GEMM TFLOP/s per dtype   gemm probe ``tflops_median``    ``gemm / <dtype>_tflops``
HBM GB/s (copy, triad)   devmem probe ``best_gbps``      ``devmem / <kernel>_gbps``
H2D, D2H, bidir GB/s     h2d probe ``best_gbps``, or     ``h2d / <direction>_gbps``
                         nvbandwidth's CE matrices
collective busbw GB/s    collective probe, largest size  ``collectives / <op>_busbw_gbps``
inference tokens/s       inference probe, any            ``inference / <key>``
                         ``*tokens_per_s`` result key
NCCL busbw and the rest  the runs' judged metrics        as the run judged them
=======================  ==============================  ====================================

The ratio is the measured value over the profile's number: its ``min`` (else ``max``, else
``warn_min``, else ``warn_max``). The verdict of a probe figure is
:func:`nvtest.config.thresholds.evaluate` (the SKU bound only; the runs' own verdicts add
plausibility and fleet rules).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nvtest.config.skus import Catalog, GpuSummary, MatchResult
from nvtest.config.thresholds import SkuProfile, Threshold, evaluate
from nvtest.errors import ParseError
from nvtest.parsers import nvbandwidth, nvidia_smi_xml

__all__ = [
    "Figure",
    "NodeIdentity",
    "identify_node",
    "probe_figures",
    "profile_number",
    "render_summary",
]


@dataclass(frozen=True)
class Figure:
    """One measured figure of a probe.

    Attributes:
        area: what it measures (``GEMM``, ``HBM``, ``host link``, ``collectives``, ``inference``).
        check: the profile's threshold section (``gemm``).
        metric: the threshold's metric (``bf16_tflops``).
        device: ``cuda:0``, ``cpu`` ...
        value: the figure, in ``unit``; None when not measured (``reason`` says why).
        unit: ``TFLOP/s``, ``GB/s``, ``tokens/s``.
        source: the file it was read from, relative to the evidence directory.
        reason: why there is no value, or what is wrong with it (a failed correctness check).
        library: what measured it (``torch 2.13.0``).
    """

    area: str
    check: str
    metric: str
    device: str
    value: float | None
    unit: str
    source: str
    reason: str | None = None
    library: str | None = None


@dataclass(frozen=True)
class NodeIdentity:
    """What the node is: its GPUs (from ``nvidia-smi -q -x``) and the profile they match.

    ``match`` is None when the GPUs could not be told (``reason`` says why).
    """

    gpus: GpuSummary
    driver_version: str | None
    cuda_version: str | None
    match: MatchResult | None
    reason: str | None = None


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def _step(manifest: dict[str, Any], name: str) -> dict[str, Any]:
    return next((s for s in manifest.get("steps", []) if s.get("name") == name), {})


def identify_node(out: Path, manifest: dict[str, Any], catalog: Catalog) -> NodeIdentity:
    """The node's GPUs and SKU profile from the evidence.

    GPUs come from ``nvidia-smi -q -x``. When it did not run, "no GPU" needs proof: lspci
    listing no NVIDIA function (then ``cpu-generic``); otherwise no profile is matched.
    """
    smi = _step(manifest, "nvidia-smi-q-x")
    text = _read(out / smi["files"][0]) if smi.get("status") == "ok" and smi.get("files") else None
    if text:
        try:
            q = nvidia_smi_xml.parse(text)
        except ParseError as exc:
            return NodeIdentity(GpuSummary(), None, None, None, f"nvidia-smi -q -x unreadable: {exc}")
        names = tuple(g.product_name or "unknown" for g in q.gpus)
        mems = tuple(int(g.memory_total_mib) if isinstance(g.memory_total_mib, float) else None for g in q.gpus)
        gpus = GpuSummary(names, mems)
        if gpus.count:
            return NodeIdentity(gpus, q.driver_version, q.cuda_version, catalog.match(gpus))
    lspci = _step(manifest, "lspci-nvidia")
    why = f"nvidia-smi -q -x: {smi.get('status', 'not run')}"
    if smi.get("reason"):
        why += f" ({smi['reason']})"
    if lspci.get("status") == "empty":
        return NodeIdentity(GpuSummary(), None, None, catalog.match(GpuSummary()), f"{why}; {lspci.get('reason')}")
    return NodeIdentity(
        GpuSummary(),
        None,
        None,
        None,
        f"cannot tell the GPUs: {why}; lspci -d 10de: {lspci.get('status', 'not run')}",
    )


def profile_number(t: Threshold) -> tuple[str, float] | None:
    """The bound a ratio is taken to: ``("min", 660.0)``; None for a threshold without bounds."""
    for name in ("min", "max", "warn_min", "warn_max"):
        value = getattr(t, name)
        if value is not None:
            return name, float(value)
    return None


def _doc(out: Path, rel: str) -> dict[str, Any] | None:
    text = _read(out / rel)
    if not text:
        return None
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None


def _entries(doc: dict[str, Any], rel: str, area: str, check: str, unit: str) -> list[Figure]:
    """Skip/error documents as one figure without a value."""
    status = doc.get("status")
    if status in ("skip", "error") and not doc.get("results"):
        return [Figure(area, check, "-", "-", None, unit, rel, f"{status}: {doc.get('reason')}")]
    return []


def _gemm(doc: dict[str, Any], rel: str) -> list[Figure]:
    figs = _entries(doc, rel, "GEMM", "gemm", "TFLOP/s")
    for r in doc.get("results") or []:
        check = r.get("check") or {}
        reason = r.get("reason") if r.get("status") in ("skip", "error") else None
        if reason is None and r.get("status") == "ok" and not check.get("ok", False):
            reason = f"product wrong: max relative error {check.get('max_rel_err')} > {check.get('tolerance')}"
        value = r.get("tflops_median") if r.get("status") == "ok" else None
        figs.append(
            Figure(
                "GEMM",
                "gemm",
                f"{r.get('dtype')}_tflops",
                str(r.get("device")),
                value,
                "TFLOP/s",
                rel,
                reason,
                r.get("library") or doc.get("library"),
            )
        )
    return figs


def _devmem(doc: dict[str, Any], rel: str) -> list[Figure]:
    figs = _entries(doc, rel, "HBM", "devmem", "GB/s")
    for r in doc.get("results") or []:
        reason = None if r.get("check_ok", False) else "copied values differ from the expected ones"
        if r.get("status") in ("skip", "error"):
            reason = f"{r.get('status')}: {r.get('reason')}"
        figs.append(
            Figure(
                "HBM",
                "devmem",
                f"{r.get('kernel')}_gbps",
                str(r.get("device")),
                r.get("best_gbps"),
                "GB/s",
                rel,
                reason,
                doc.get("library"),
            )
        )
    return figs


def _h2d(doc: dict[str, Any], rel: str) -> list[Figure]:
    figs = _entries(doc, rel, "host link", "h2d", "GB/s")
    if doc.get("raw_tool") == "nvbandwidth":
        return figs + _nvbandwidth(doc.get("raw") or "", rel)
    for r in doc.get("results") or []:
        figs.append(
            Figure(
                "host link",
                "h2d",
                f"{r.get('direction')}_gbps",
                str(r.get("device")),
                r.get("best_gbps"),
                "GB/s",
                rel,
                None,
                doc.get("library"),
            )
        )
    return figs


def _nvbandwidth(text: str, rel: str) -> list[Figure]:
    try:
        result = nvbandwidth.parse(text)
    except ParseError as exc:
        return [Figure("host link", "h2d", "-", "-", None, "GB/s", rel, f"nvbandwidth output unreadable: {exc}")]
    figs = []
    for direction, gpu, value in result.host_copies():  # as the h2d check judges them
        figs.append(
            Figure("host link", "h2d", f"{direction}_gbps", f"cuda:{gpu}", value, "GB/s", rel, None, "nvbandwidth")
        )
    return figs


def _collectives(doc: dict[str, Any], rel: str) -> list[Figure]:
    figs = _entries(doc, rel, "collectives", "collectives", "GB/s")
    largest: dict[str, dict[str, Any]] = {}
    for r in doc.get("results") or []:
        op = str(r.get("op"))
        if op not in largest or (r.get("size_bytes") or 0) > (largest[op].get("size_bytes") or 0):
            largest[op] = r
    device = f"{doc.get('device')} x {doc.get('world_size', '?')} ranks"
    for op, r in largest.items():
        reason = f"{r.get('wrong')} wrong elements" if r.get("wrong") else None
        figs.append(
            Figure(
                "collectives",
                "collectives",
                f"{op}_busbw_gbps",
                device,
                r.get("busbw_gbps"),
                "GB/s",
                rel,
                reason,
                doc.get("library"),
            )
        )
    return figs


def _inference(doc: dict[str, Any], rel: str) -> list[Figure]:
    figs = _entries(doc, rel, "inference", "inference", "tokens/s")
    for r in doc.get("results") or []:
        # the inference check's metric names: <dtype>_bs<batch>_<figure> (checks/workload/inference.py)
        prefix = f"{r['dtype']}_bs{r['batch']}_" if r.get("dtype") and r.get("batch") else ""
        reason = None if (r.get("check") or {}).get("ok", True) else "generated tokens differ from the fp32 reference"
        if r.get("status") in ("skip", "error"):
            reason = f"{r.get('status')}: {r.get('reason')}"
        for key, value in r.items():
            if re.search(r"tokens_per_s$", key) and isinstance(value, (int, float)):
                figs.append(
                    Figure(
                        "inference",
                        "inference",
                        prefix + key,
                        str(r.get("device", "-")),
                        float(value),
                        "tokens/s",
                        rel,
                        reason,
                        doc.get("library"),
                    )
                )
    return figs


_EXTRACT = {"gemm": _gemm, "devmem": _devmem, "h2d": _h2d, "collectives": _collectives, "inference": _inference}


def probe_figures(out: Path, manifest: dict[str, Any]) -> list[Figure]:
    """Every figure of the probe steps that wrote a JSON document (see the module doc)."""
    figs: list[Figure] = []
    for step in manifest.get("steps", []):
        if step.get("group") != "probe" or not step.get("files"):
            continue
        rel = step["files"][0]
        doc = _doc(out, rel)
        if doc is None:
            continue
        extract = _EXTRACT.get(str(doc.get("probe")))
        if extract is not None:
            figs += extract(doc, rel)
    return figs


def _fmt(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x:.4g}"


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _against(value: float | None, unit: str, t: Threshold | None) -> tuple[str, str, str, str]:
    """(profile's number, ratio, verdict, source) cells for one value."""
    if t is None:
        return "no threshold", "-", "measured only" if value is not None else "-", "-"
    bound = profile_number(t)
    number = f"{bound[0]} {_fmt(bound[1])} {t.unit}" + (" (proposed)" if t.proposed else "") if bound else "-"
    ratio = f"{value / bound[1]:.3f}" if value is not None and bound and bound[1] else "-"
    verdict = evaluate(value, unit, t).verdict.value if value is not None else "-"
    return number, ratio, verdict, t.source


def _figures_table(figs: list[Figure], profile: SkuProfile | None) -> list[str]:
    lines = [
        "| figure | device | measured | profile's number | ratio | verdict | profile's source | from |",
        "| --- | --- | ---: | --- | ---: | --- | --- | --- |",
    ]
    missing = []
    for f in figs:
        if f.value is None:
            missing.append(f"- {f.area} {f.metric} ({f.device}): {f.reason or 'no value'} [{f.source}]")
            continue
        t = profile.threshold(f.check, f.metric) if profile else None
        number, ratio, verdict, source = _against(f.value, f.unit, t)
        if f.reason:
            verdict = f"fail: {f.reason}"
        lib = f" ({f.library})" if f.library else ""
        lines.append(
            f"| {_cell(f.area)} {_cell(f.metric)} | {_cell(f.device)}{_cell(lib)} | {_fmt(f.value)} {f.unit} | "
            f"{_cell(number)} | {ratio} | {_cell(verdict)} | {_cell(source)} | {_cell(f.source)} |"
        )
    if len(lines) == 2:
        lines.append("| (none measured) | | | | | | | |")
    if missing:
        lines += ["", "Not measured:", "", *missing]
    return lines


def _run_section(out: Path, step: dict[str, Any]) -> list[str]:
    """The judged items and metrics of one ``nvtest run`` step, from its results.json."""
    code = step.get("exit_code")
    head = f"### {step['name']}: {step.get('status')}, exit {'-' if code is None else code}, {step.get('duration_s', 0):.0f} s"
    run_dir = step.get("run_dir")
    doc = _doc(out, f"{run_dir}/results.json") if run_dir else None
    if doc is None:
        return [head, "", f"No results.json: {step.get('reason') or 'the run wrote none'}", ""]
    summary = doc.get("summary") or {}
    skus = sorted({str(n.get("sku")) for n in (doc.get("nodes") or {}).values()})
    items = ", ".join(f"{n} {v}" for v, n in (summary.get("items") or {}).items() if n) or "none"
    lines = [
        head,
        "",
        f"Run `{run_dir}`: verdict **{summary.get('verdict')}**, SKU {', '.join(skus) or '-'}, items: {items}.",
        "",
        "| check | verdict | metric | measured | threshold | ratio | reason |",
        "| --- | --- | --- | ---: | --- | ---: | --- |",
    ]
    for r in doc.get("results") or []:
        metrics = r.get("metrics") or []
        if not metrics:
            lines.append(f"| {r.get('check')} | {r.get('verdict')} | - | - | - | - | {_cell(r.get('reason') or '')} |")
        for m in metrics:
            t = m.get("threshold") or {}
            bound = next(((k, t[k]) for k in ("min", "max", "warn_min", "warn_max") if t.get(k) is not None), None)
            ratio = f"{m['value'] / bound[1]:.3f}" if bound and bound[1] and m.get("value") is not None else "-"
            labels = ",".join(f"{k}={v}" for k, v in (m.get("labels") or {}).items())
            name = f"{m.get('name')}" + (f" [{labels}]" if labels else "")
            lines.append(
                f"| {r.get('check')} | {m.get('verdict')} | {_cell(name)} | {_fmt(m.get('value'))} {m.get('unit')} | "
                f"{_cell(f'{bound[0]} {bound[1]:g}' if bound else '-')} | {ratio} | {_cell(m.get('reason') or '')} |"
            )
    return [*lines, ""]


def _steps_table(manifest: dict[str, Any]) -> list[str]:
    lines = ["| step | status | exit | seconds | version | reason |", "| --- | --- | ---: | ---: | --- | --- |"]
    for s in manifest.get("steps", []):
        lines.append(
            f"| {s.get('name')} | {s.get('status')} | {s.get('exit_code') if s.get('exit_code') is not None else '-'} | "
            f"{s.get('duration_s', 0):.1f} | {_cell(s.get('version') or '-')} | {_cell(s.get('reason') or '')} |"
        )
    return lines


def _node_lines(ident: NodeIdentity, catalog: Catalog) -> list[str]:
    if ident.gpus.count:
        mem = ", ".join(sorted({f"{m} MiB" for m in ident.gpus.memory_mib if m is not None}))
        lines = [
            f"- GPUs: {ident.gpus.count} x {', '.join(sorted(set(ident.gpus.names)))} ({mem}); "
            f"driver {ident.driver_version or '?'}, CUDA {ident.cuda_version or '?'} (nvidia-smi -q -x)"
        ]
    else:
        lines = [f"- GPUs: none seen ({ident.reason})"]
    m = ident.match
    if m is not None and m.profile is not None:
        where = catalog.files.get(m.profile.name, "?")
        lines.append(f"- SKU profile: **{m.profile.name}** ({Path(where).name}): {'; '.join(m.reasons)}")
    elif m is not None:
        lines.append(f"- SKU profile: none matched ({'; '.join(m.reasons)}); figures are shown without ratios")
    else:
        lines.append(f"- SKU profile: none matched ({ident.reason}); figures are shown without ratios")
    return lines


def render_summary(out: Path, manifest: dict[str, Any], catalog: Catalog) -> str:
    """The markdown summary of the evidence directory ``out`` (see the module doc)."""
    ident = identify_node(out, manifest, catalog)
    profile = ident.match.profile if ident.match else None
    lines = [
        f"# GPU evidence: {manifest.get('host')}",
        "",
        f"nvtest {manifest.get('nvtest_version')}, {manifest.get('mode')} form, started {manifest.get('started_at')}, "
        f"{manifest.get('duration_s', 0):.0f} s of a {manifest.get('budget_s', 0):.0f} s budget, "
        f"Python {manifest.get('python')}.",
        "",
        "## The node",
        "",
        *_node_lines(ident, catalog),
        "",
        f"## Figures against the profile ({profile.name if profile else 'none matched'})",
        "",
        *_figures_table(probe_figures(out, manifest), profile),
        "",
        "## The harness runs",
        "",
    ]
    runs = [s for s in manifest.get("steps", []) if s.get("group") == "run"]
    for step in runs:
        lines += _run_section(out, step)
    if not runs:
        lines += ["No run in this kit.", ""]
    lines += ["## Steps", "", *_steps_table(manifest), ""]
    return "\n".join(lines)
