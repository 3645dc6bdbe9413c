"""``nvtest gate``'s engine: the node's passive checks within a wall-time budget, one verdict.

:func:`run_gate` starts every tool at once (:class:`~nvtest.ops.gate.tools.Sources`),
matches the node to its SKU profile from ``nvidia-smi -q`` and ``lspci``, runs each check
(:data:`CHECKS`) in its own thread, and at the deadline stops waiting: a check that has not
answered is ``unknown`` ("did not answer within the budget"), never a hang and never a drain
by itself. Then, opt-in, it drains or resumes the node (:mod:`~nvtest.ops.gate.slurm`), keeps
its cursor (:mod:`~nvtest.ops.gate.state`) and writes the verdict into the history.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nvtest import __version__
from nvtest.checks.health.gpus import closest_profiles
from nvtest.config.skus import Catalog, GpuSummary, load_catalog
from nvtest.config.thresholds import SkuProfile
from nvtest.errors import ConfigError, HistoryError
from nvtest.ops.gate.checks_gpu import GPU_CHECKS
from nvtest.ops.gate.checks_node import NODE_CHECKS
from nvtest.ops.gate.context import GateContext, base_commands, recipe_commands
from nvtest.ops.gate.document import SCHEMA, SCHEMA_VERSION, CheckResult, exit_code, worst
from nvtest.ops.gate.recipe import DEFAULTS, gate_recipe
from nvtest.ops.gate.slurm import SlurmAction, drain_node, resume_node
from nvtest.ops.gate.state import GateState, default_state_dir, load_state, save_state
from nvtest.ops.gate.tools import DEFAULT_PATH, Sources

__all__ = ["CHECKS", "MODES", "GateOptions", "run_gate"]

#: Every passive check, in report order.
CHECKS: tuple[tuple[str, Callable[[GateContext], CheckResult]], ...] = (*GPU_CHECKS, *NODE_CHECKS)
#: Shares of the budget: the tools are killed at 80 % of it, the checks waited for until
#: 90 %; the rest is for the drain/resume call, the state and the history write.
TOOLS_SHARE, CHECKS_SHARE = 0.8, 0.9
#: The hooks ``--mode`` knows; ``manual`` is a person or a cron job.
MODES = ("prolog", "epilog", "healthcheck", "manual")


@dataclass
class GateOptions:
    """What ``nvtest gate`` was asked. ``budget_s``: the wall-time budget of the checks, s."""

    node: str | None = None
    mode: str = "manual"
    budget_s: float = 10.0
    strict: bool = False
    drain: bool = False
    resume: bool = False
    clear_xids: bool = False
    sku: str | None = None
    sku_dirs: Sequence[Path] = ()
    overlay: Path | None = None
    state_dir: Path | None = None
    sysfs: Path = Path("/sys")
    history: str | None = None
    cluster: str | None = None
    only: Sequence[str] = ()
    warnings: list[str] = field(default_factory=list)


def gate_cluster(given: str | None, node: str) -> str:
    """The cluster the gate's node is known by in the history (:mod:`nvtest.history.cluster`):
    ``--cluster``, else ``$SLURM_CLUSTER_NAME`` (slurmd sets it for its hooks), else
    slurm.conf's ``ClusterName`` (a file read), else ``local:<node>``."""
    from nvtest.history.cluster import slurm_conf_cluster_name

    return (
        given
        or os.environ.get("SLURM_CLUSTER_NAME", "").strip()
        or slurm_conf_cluster_name()
        or f"local:{node}"
    )


def node_name(given: str | None) -> str:
    """``--node``, else ``$SLURMD_NODENAME`` (set by slurmd for its hooks), else the short hostname."""
    return given or os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]


def match_sku(
    catalog: Catalog, sources: Sources, forced: str | None, state: GateState
) -> tuple[SkuProfile | None, str]:
    """The node's profile and how it was chosen (forced, matched, closest, remembered)."""
    from nvtest.ops.gate.context import read_smi

    if forced:
        return catalog.get(forced), "forced (--sku)"
    query, why = read_smi(sources.get("smi"))
    gpus = list(query.gpus) if query else []
    mems = [int(g.memory_total_mib) if isinstance(g.memory_total_mib, (int, float)) else None for g in gpus]
    if gpus:
        m = catalog.match(GpuSummary(tuple(g.product_name or "" for g in gpus), tuple(mems)))
        if m.profile is not None:
            state.sku = m.profile.name
            return m.profile, "matched: " + "; ".join(m.reasons)
    from nvtest.parsers import lspci
    from nvtest.parsers._common import ParseError

    pci_out = sources.get("lspci")
    try:
        on_bus = [d for d in lspci.parse(pci_out.stdout).devices if d.is_nvidia_gpu] if pci_out.ok else None
    except ParseError:
        on_bus = None
    names = [g.product_name or "" for g in gpus] or [d.device_name or "" for d in on_bus or []]
    if names:
        near = closest_profiles(catalog, names, mems)
        if len(near) == 1:
            return near[0], f"closest: {near[0].name} (GPU name and memory fit; the count differs)"
    if state.sku and state.sku in catalog.profiles and (names or query is None):
        return catalog.profiles[state.sku], f"as this node last matched ({state.sku}); no GPU reading now"
    if on_bus == [] and not gpus and not (query and query.lost_gpus):
        m = catalog.match(GpuSummary())
        return m.profile, "matched: lspci lists no NVIDIA display device"
    smi_text = why or f"lists {len(gpus)} GPUs"
    pci_text = "unreadable" if on_bus is None else f"{len(on_bus)} NVIDIA GPUs"
    return None, f"no profile: nvidia-smi {smi_text}; lspci {pci_text}"


def _run_checks(ctx: GateContext, names: Sequence[str], deadline: float) -> list[CheckResult]:
    results: dict[str, CheckResult] = {}
    threads = []

    def one(name: str, fn: Callable[[GateContext], CheckResult]) -> None:
        t0 = time.monotonic()
        try:
            res = fn(ctx)
        except Exception as exc:  # a check's own bug is unknown for that check, never a crash
            res = CheckResult(name)
            res.add("unknown", name, f"internal error in the gate check: {type(exc).__name__}: {exc}")
        res.duration_s = time.monotonic() - t0
        results[name] = res

    for name, fn in CHECKS:
        if names and name not in names:
            continue
        t = threading.Thread(target=one, args=(name, fn), daemon=True, name=f"check-{name}")
        t.start()
        threads.append((name, t))
    for name, t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
        if name not in results:
            res = CheckResult(name)
            res.add("unknown", name, f"{name} did not answer within the gate's budget ({ctx.budget_s:g} s); not a verdict on the node")
            results[name] = res
    return [results[name] for name, _ in threads]


def _slurm(opts: GateOptions, node: str, verdict: str, checks: list[CheckResult]) -> dict[str, Any]:
    out: dict[str, Any] = {"drain": None, "resume": None}
    if opts.drain and verdict == "fail":
        first = next(c for c in checks if c.verdict == "fail")
        act: SlurmAction = drain_node(node, first.check, first.reason)
        out["drain"] = act.to_json()
    if opts.resume and verdict in ("pass", "warn", "skip"):
        out["resume"] = resume_node(node).to_json()
    return out


def run_gate(opts: GateOptions) -> dict[str, Any]:
    """Run the gate (see the module docstring) and return its document (docs/gate.schema.json).

    Raises:
        ConfigError: an unknown ``--sku``, an invalid profile, overlay or ``recipe.gate``.
    """
    os.environ.setdefault("PATH", DEFAULT_PATH)
    t0, start = time.monotonic(), time.time()
    deadline = t0 + TOOLS_SHARE * opts.budget_s
    node = node_name(opts.node)
    sources = Sources(base_commands(opts.sysfs), deadline)
    catalog = load_catalog(list(opts.sku_dirs), opts.overlay)
    state_dir = opts.state_dir or default_state_dir()
    state = load_state(state_dir, node)
    provisional = opts.sku or state.sku  # the site recipe's commands start now, not after matching
    if provisional in catalog.profiles:
        sources.start(recipe_commands(gate_recipe(catalog.profiles[provisional], catalog)[0]))
    else:
        sources.start(recipe_commands(DEFAULTS))
    previous = state.last_gate_at
    if opts.clear_xids:
        cleared = list(state.fatal_events)
        state.fatal_events = []
        opts.warnings.append(f"cleared {len(cleared)} fatal GPU event(s) at the operator's request (--clear-xids)")
    sku, how = match_sku(catalog, sources, opts.sku, state)
    recipe, recipe_source = gate_recipe(sku, catalog) if sku else (DEFAULTS, "nvtest gate default (docs/operations.md)")
    sources.start(recipe_commands(recipe))
    origin = f"overlay:{catalog.overlay_file}" if sku and catalog.overlay and (not catalog.overlay.applies_to or sku.name in catalog.overlay.applies_to) else ""
    ctx = GateContext(sources, sku, f"profile:{sku.name}" if sku else "no profile", catalog, recipe, recipe_source,
                      state, start, opts.budget_s)  # fmt: skip
    checks = _run_checks(ctx, opts.only, t0 + CHECKS_SHARE * opts.budget_s)
    duration = time.monotonic() - t0
    verdict = worst(c.verdict for c in checks)
    code = exit_code(verdict, strict=opts.strict)
    doc: dict[str, Any] = {
        "schema": SCHEMA, "schema_version": SCHEMA_VERSION, "nvtest_version": __version__,
        "node": node, "mode": opts.mode, "job_id": os.environ.get("SLURM_JOB_ID"),
        "cluster": gate_cluster(opts.cluster, node),
        "started_at": start, "duration_s": round(duration, 3), "budget_s": opts.budget_s,
        "verdict": verdict, "exit_code": code, "strict": opts.strict,
        "sku": {"name": sku.name if sku else None, "how": how, "overlay": origin or None},
        "checks": [c.to_json() for c in checks],
        "slurm": _slurm(opts, node, verdict, checks),
        "state": {"dir": str(state_dir), "previous_gate_at": previous},
        "warnings": opts.warnings,
    }  # fmt: skip
    state.last_gate_at = start
    try:
        doc["state"]["file"] = str(save_state(state_dir, node, state, cleared=opts.clear_xids))
    except OSError as exc:
        opts.warnings.append(f"gate state not saved in {state_dir}: {exc.strerror or exc} (Xid cursor not kept)")
    doc["history"] = _record(opts, doc)
    doc["total_s"] = round(time.monotonic() - t0, 3)
    return doc


def _record(opts: GateOptions, doc: dict[str, Any]) -> dict[str, Any] | None:
    """Write the gate into the history (a failure is a warning); its database, or None."""
    from nvtest.ops.gate.history import record_gate

    try:
        return record_gate(doc, opts.history, cleared=opts.clear_xids)
    except (HistoryError, ConfigError) as exc:
        opts.warnings.append(f"history not recorded: {exc}")
        return None
