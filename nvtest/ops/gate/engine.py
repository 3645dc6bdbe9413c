"""``nvtest gate``'s engine: the node's passive checks within a wall-time budget, one verdict.

:func:`run_gate` starts every tool at once (:class:`~nvtest.ops.gate.tools.Sources`),
matches the node to its SKU profile from ``nvidia-smi -q`` and ``lspci``, runs each check
(:data:`CHECKS`) in its own thread, and at the deadline stops waiting: a check that has not
answered is ``unknown`` ("did not answer within the budget"), never a hang and never a drain
by itself. Once all have answered, every bad decision's next step is chosen from everything the
gate found on the node (:func:`~nvtest.ops.gate.diagnose.diagnose_gate`). The checks that need no GPU (:data:`SKU_FREE`) start at once with the provisional
recipe, never waiting for the match (which waits for nvidia-smi). Then, opt-in, it drains or
resumes the node (:mod:`~nvtest.ops.gate.slurm`: its outcome belongs in the document), keeps
its cursor (:mod:`~nvtest.ops.gate.state`), hands the document out (``GateOptions.emit``)
and only then writes the verdict into the history, or spools it. Every one of these side
effects is bounded by what the budget has left (:mod:`~nvtest.ops.gate.budget`), and a
SIGTERM or SIGINT stops the gate with a document and a record.
"""

from __future__ import annotations

import math
import os
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nvtest import __version__
from nvtest.analysis.acting import first_actionable
from nvtest.checks.health.gpus import closest_profiles
from nvtest.config.site import ConfigProblem, load_site
from nvtest.config.skus import Catalog, GpuSummary
from nvtest.config.thresholds import SkuProfile
from nvtest.errors import ConfigError, HistoryError
from nvtest.ops.gate.budget import CHECKS_SHARE, TOOLS_SHARE, Budget, bounded, on_signals
from nvtest.ops.gate.checks_gpu import GPU_CHECKS
from nvtest.ops.gate.checks_node import NODE_CHECKS
from nvtest.ops.gate.config import (
    RECIPE_CHECKS,
    config_verdicts,
    configuration_json,
    forced_sku,
    gate_exit_code,
)
from nvtest.ops.gate.context import GateContext, base_commands, recipe_commands
from nvtest.ops.gate.diagnose import diagnose_gate
from nvtest.ops.gate.document import SCHEMA, SCHEMA_VERSION, GateCheck, exit_code, worst
from nvtest.ops.gate.recipe import gate_recipe, provisional_recipe
from nvtest.ops.gate.slurm import SlurmAction, drain_node, resume_node
from nvtest.ops.gate.state import GateState, default_state_dir, load_state, save_state
from nvtest.ops.gate.tools import DEFAULT_PATH, Sources
from nvtest.ops.gate.witnesses import Witness, gpu_witnesses, no_gpu_on_the_bus, witness_time

__all__ = ["CHECKS", "MODES", "GateOptions", "run_gate"]

#: Every passive check, in report order.
CHECKS: tuple[tuple[str, Callable[[GateContext], GateCheck]], ...] = (*GPU_CHECKS, *NODE_CHECKS)
#: The longest the state file's lock is waited for, s: another gate holds it for milliseconds,
#: so a longer hold is a stuck process, not worth holding the document back for.
STATE_LOCK_S = 2.0
#: The share of a side effect's time given to the database driver's own timeouts.
DRIVER_SHARE = 0.8
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
    forget_sku: bool = False
    expect_gpus: int | None = None
    sku: str | None = None
    sku_dirs: Sequence[Path] = ()
    overlay: Path | None = None
    state_dir: Path | None = None
    sysfs: Path = Path("/sys")
    history: str | None = None
    cluster: str | None = None
    only: Sequence[str] = ()
    warnings: list[str] = field(default_factory=list)
    #: mistakes in the options found before the gate started (a hook mode records, not refuses)
    config_problems: list[ConfigProblem] = field(default_factory=list)

    #: Handed the document as soon as it is complete, before the history write (the CLI prints it).
    emit: Callable[[dict[str, Any]], None] | None = None


#: Operator requests a hook never applies (a hook runs unattended: nobody checked the GPUs).
MANUAL_ONLY = {"clear_xids": "--clear-xids", "forget_sku": "--forget-sku"}


def operator_requests(opts: GateOptions, state: GateState) -> None:
    """Apply ``--clear-xids`` and ``--forget-sku`` to ``state`` in ``--mode manual``; in a hook
    mode refuse them (a warning; the gate judges as without them, and they are not recorded).
    """
    for attr, flag in MANUAL_ONLY.items():
        if getattr(opts, attr) and opts.mode != "manual":
            setattr(opts, attr, False)
            opts.warnings.append(
                f"{flag} refused in --mode {opts.mode}: only an operator's manual gate applies it; judged without it"
            )
    if opts.clear_xids:
        cleared = list(state.fatal_events)
        state.fatal_events, state.fatal_events_unknown = [], None
        opts.warnings.append(f"cleared {len(cleared)} fatal GPU event(s) at the operator's request (--clear-xids)")
    if opts.forget_sku:
        opts.warnings.append(
            f"forgot this node's SKU ({state.sku or state.sku_unknown or 'none remembered'}) at the operator's request (--forget-sku)"
        )
        state.sku = state.sku_unknown = None


def gate_cluster(given: str | None, node: str) -> str:
    """The cluster the gate's node is known by in the history (:mod:`nvtest.history.cluster`):
    ``--cluster``, else ``$SLURM_CLUSTER_NAME`` (slurmd sets it for its hooks), else
    slurm.conf's ``ClusterName`` (a file read), else ``local:<node>``."""
    from nvtest.history.cluster import slurm_conf_cluster_name

    return given or os.environ.get("SLURM_CLUSTER_NAME", "").strip() or slurm_conf_cluster_name() or f"local:{node}"


def node_name(given: str | None) -> str:
    """``--node``, else ``$SLURMD_NODENAME`` (set by slurmd for its hooks), else the short hostname."""
    return given or os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]


def match_sku(
    catalog: Catalog,
    sources: Sources,
    forced: str | None,
    state: GateState,
    witnesses: Callable[[], tuple[list[Witness], list[str]]] | None = None,
) -> tuple[SkuProfile | None, str]:
    """The node's profile and how it was chosen (forced, matched, closest, remembered, a
    second witness, cpu-generic). ``witnesses`` is asked only when the PCI bus shows no NVIDIA
    GPU (:func:`no_gpu_on_the_bus`)."""
    from nvtest.ops.gate.context import read_smi

    if forced:
        return catalog.get(forced), "forced (--sku)"
    query, why = read_smi(sources.get("smi"))
    gpus = list(query.gpus) if query else []
    mems = [int(g.memory_total_mib) if isinstance(g.memory_total_mib, (int, float)) else None for g in gpus]
    if gpus:
        m = catalog.match(GpuSummary(tuple(g.product_name or "" for g in gpus), tuple(mems)))
        if m.profile is not None:
            state.sku, state.sku_unknown = m.profile.name, None
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
        return no_gpu_on_the_bus(catalog, state, witnesses)
    smi_text = why or f"lists {len(gpus)} GPUs"
    pci_text = "unreadable" if on_bus is None else f"{len(on_bus)} NVIDIA GPUs"
    return None, f"no profile: nvidia-smi {smi_text}; lspci {pci_text}"


#: The checks that read no GPU and need no SKU: they start at once with the provisional
#: recipe, never waiting on the SKU match (which waits on nvidia-smi).
SKU_FREE = ("xid_scan", "disk", "memory", "mounts", "services")
#: Of those, the ones judged by the recipe: judged again when the match changes the recipe.
REJUDGED = tuple(c for c in SKU_FREE if c in RECIPE_CHECKS)


class _Checks:
    """Checks running, each in its own thread, their results by name as they come."""

    def __init__(self) -> None:
        self.results: dict[str, GateCheck] = {}
        self.order: list[str] = []
        self.gen: dict[str, int] = {}

    def start(self, ctx: GateContext, names: Sequence[str]) -> None:
        """Start ``names`` (in :data:`CHECKS` order) on ``ctx``; a name started again replaces its result."""

        def one(name: str, fn: Callable[[GateContext], GateCheck], gen: int) -> None:
            t0 = time.monotonic()
            try:
                res = fn(ctx)
            except Exception as exc:  # a check's own bug is unknown for that check, never a crash
                res = GateCheck(name)
                res.add("unknown", name, f"internal error in the gate check: {type(exc).__name__}: {exc}")
            res.duration_s = time.monotonic() - t0
            if self.gen[name] == gen:  # a judgement by a recipe since replaced is dropped
                self.results[name] = res

        for name, fn in CHECKS:
            if name in names:
                self.gen[name] = self.gen.get(name, 0) + 1
                self.results.pop(name, None)
                if name not in self.order:
                    self.order.append(name)
                threading.Thread(target=one, args=(name, fn, self.gen[name]), daemon=True, name=f"check-{name}").start()

    def done(self, names: Sequence[str] | None = None) -> bool:
        return all(n in self.results for n in (self.order if names is None else names))

    def collect(self, budget: Budget) -> list[GateCheck]:
        """Every check's result in :data:`CHECKS` order; ``unknown`` for one that has not answered."""
        out = []
        for name, _ in CHECKS:
            if name not in self.order:
                continue
            res = self.results.get(name)
            if res is None:
                res = GateCheck(name)
                why = (
                    f"{name}: the gate was interrupted by {budget.interrupted} before it answered"
                    if budget.stopped
                    else f"{name} did not answer within the gate's budget ({budget.budget_s:g} s)"
                )
                res.add("unknown", name, f"{why}; not a verdict on the node")
            out.append(res)
        return out


def _slurm(opts: GateOptions, node: str, verdict: str, checks: list[GateCheck], budget: Budget) -> dict[str, Any]:
    """Drain or resume (opt-in), each scontrol call bounded by what the budget has left;
    nothing after a signal (the gate is being stopped: its verdict is incomplete)."""
    out: dict[str, Any] = {"drain": None, "resume": None}
    if budget.stopped:
        if opts.drain or opts.resume:
            opts.warnings.append(f"no drain or resume: the gate was interrupted by {budget.interrupted}")
        return out
    if opts.drain and verdict == "fail":
        # the rule every automation follows (nvtest.analysis.acting): a failure proven on the
        # node; the gate's unknowns (ours, the site's, a check that did not answer) never drain
        first, _ = first_actionable([{"check": c.check, "node": node, "verdict": c.verdict} for c in checks])
        if first is not None:
            why = next(c.reason for c in checks if c.check == first["check"])
            act: SlurmAction = drain_node(node, str(first["check"]), why, timeout_s=budget.left)
            out["drain"] = act.to_json()
    if opts.resume and verdict in ("pass", "warn", "skip"):
        out["resume"] = resume_node(node, timeout_s=budget.left).to_json()
    return out


def run_gate(opts: GateOptions, budget: Budget | None = None) -> dict[str, Any]:
    """Run the gate (see the module docstring) and return its document (docs/gate.schema.json).

    A mistake in the site's files or options does not raise: it is judged as
    :mod:`nvtest.ops.gate.config` says (the ``configuration`` check and object).
    ``budget``: the gate's clock (default: ``opts.budget_s`` from now); a SIGTERM or SIGINT
    in the main thread stops it (:func:`~nvtest.ops.gate.budget.on_signals`): the tools'
    process groups are killed, the checks not answered are ``unknown``, the document says
    ``interrupted`` and the record is still written or spooled. ``opts.emit``, when given,
    is handed the document as soon as it is complete and before the history write.

    Raises:
        ConfigError: a budget that is not a finite number of seconds > 0 (a library caller;
            the CLI checks its options first).
    """
    if not (math.isfinite(opts.budget_s) and opts.budget_s > 0):
        raise ConfigError(f"{opts.budget_s}: not a budget (a finite number of seconds > 0)", field="--budget")
    os.environ.setdefault("PATH", DEFAULT_PATH)
    budget = budget or Budget(opts.budget_s)
    with on_signals(budget.interrupt):
        if budget.stopped:  # a signal while the command started: nothing is started now
            return _stopped_before_start(opts, budget)
        sources = Sources(base_commands(opts.sysfs), budget.at(TOOLS_SHARE))
        budget.on_stop(lambda: sources.kill_all(f"interrupted by {budget.interrupted}"))
        if budget.stopped:
            sources.kill_all(f"interrupted by {budget.interrupted}")
        try:
            return _gate(opts, budget, sources)
        finally:
            sources.kill_all("ended")  # no tool outlives its gate (a hung nvidia-smi with it)


def _stopped_before_start(opts: GateOptions, budget: Budget) -> dict[str, Any]:
    """The document of a gate stopped by a signal before it started (slurmd's SIGTERM while
    the interpreter was importing): every check ``unknown``, no tool run, no drain or resume;
    handed out at once and recorded like a gate stopped later (:func:`_finish`)."""
    node = node_name(opts.node)
    state_dir = opts.state_dir or default_state_dir()
    why = f"the gate was interrupted by {budget.interrupted} before it started; not a verdict on the node"
    results = []
    for name, _ in CHECKS:
        if not opts.only or name in opts.only:
            res = GateCheck(name)
            res.add("unknown", name, why)
            results.append(res)
    if opts.drain or opts.resume:
        opts.warnings.append(f"no drain or resume: the gate was interrupted by {budget.interrupted}")
    problems = [p.to_json() for p in opts.config_problems]
    doc: dict[str, Any] = {
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "nvtest_version": __version__,
        "node": node,
        "mode": opts.mode,
        "job_id": os.environ.get("SLURM_JOB_ID"),
        "cluster": gate_cluster(opts.cluster, node),
        "started_at": time.time() - (time.monotonic() - budget.t0),
        "duration_s": round(time.monotonic() - budget.t0, 3),
        "budget_s": opts.budget_s,
        "verdict": "unknown",
        "exit_code": exit_code("unknown", strict=opts.strict),
        "strict": opts.strict,
        "sku": {"name": None, "how": why, "overlay": None},
        "checks": [c.to_json() for c in results],
        "slurm": {"drain": None, "resume": None},
        "state": {"dir": str(state_dir), "previous_gate_at": None},
        "warnings": opts.warnings,
        "configuration": {"ok": not problems, "overlay": None, "files": [], "problems": problems},
        "interrupted": budget.interrupted,
    }
    _finish(opts, doc, budget, state_dir)
    return doc


def _gate(opts: GateOptions, budget: Budget, sources: Sources) -> dict[str, Any]:
    start = time.time() - (time.monotonic() - budget.t0)
    node = node_name(opts.node)
    site = load_site(list(opts.sku_dirs), opts.overlay)
    site.problems[:0] = opts.config_problems
    catalog = site.catalog
    state_dir = opts.state_dir or default_state_dir()
    state = load_state(state_dir, node)
    opts.warnings.extend(state.warnings)
    forced = forced_sku(opts.sku, site)
    # the site recipe's commands and the checks that need no GPU start now, not after matching
    first, first_source, first_sku = provisional_recipe(catalog, forced or state.sku)
    sources.start(recipe_commands(first))
    previous = state.last_gate_at
    operator_requests(opts, state)
    wanted = [n for n, _ in CHECKS if not opts.only or n in opts.only]
    checks = _Checks()
    ctx0 = GateContext(
        sources,
        first_sku,
        f"profile:{first_sku.name}" if first_sku else "no profile",
        catalog,
        first,
        first_source,
        state,
        start,
        opts.budget_s,
    )
    checks.start(ctx0, [n for n in wanted if n in SKU_FREE])
    sku, how = match_sku(
        catalog,
        sources,
        forced,
        state,
        lambda: gpu_witnesses(
            node, state, catalog, opts.history, witness_time(opts.budget_s, budget.at(TOOLS_SHARE)), opts.expect_gpus
        ),
    )
    recipe, recipe_source = gate_recipe(sku, catalog) if sku else (first, first_source)
    sources.start(recipe_commands(recipe))
    origin = (
        f"overlay:{catalog.overlay_file}"
        if sku and catalog.overlay and (not catalog.overlay.applies_to or sku.name in catalog.overlay.applies_to)
        else ""
    )
    ctx = GateContext(
        sources,
        sku,
        f"profile:{sku.name}" if sku else "no profile",
        catalog,
        recipe,
        recipe_source,
        state,
        start,
        opts.budget_s,
    )
    checks.start(ctx, [n for n in wanted if n not in SKU_FREE])
    if recipe != first and not budget.stopped:  # the match changed the recipe: judge by the right one
        checks.start(ctx, [n for n in wanted if n in REJUDGED])
    budget.wait(checks.done, budget.at(CHECKS_SHARE))
    results = config_verdicts(site, sku, checks.collect(budget))
    diagnose_gate(results, state)  # the next steps from everything this gate found on the node
    duration = time.monotonic() - budget.t0
    verdict = worst(c.verdict for c in results)
    code = gate_exit_code(results, strict=opts.strict, mode=opts.mode, site=site, sku=sku)
    doc: dict[str, Any] = {
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "nvtest_version": __version__,
        "node": node,
        "mode": opts.mode,
        "job_id": os.environ.get("SLURM_JOB_ID"),
        "cluster": gate_cluster(opts.cluster, node),
        "started_at": start,
        "duration_s": round(duration, 3),
        "budget_s": opts.budget_s,
        "verdict": verdict,
        "exit_code": code,
        "strict": opts.strict,
        "sku": {"name": sku.name if sku else None, "how": how, "overlay": origin or None},
        "checks": [c.to_json() for c in results],
        "slurm": _slurm(opts, node, verdict, results, budget),
        "state": {"dir": str(state_dir), "previous_gate_at": previous},
        "warnings": opts.warnings,
        "configuration": configuration_json(site),
    }
    if budget.stopped:
        doc["interrupted"] = budget.interrupted
    state.last_gate_at = start
    try:
        doc["state"]["file"] = str(
            save_state(state_dir, node, state, cleared=opts.clear_xids, timeout_s=min(budget.left(), STATE_LOCK_S))
        )
    except OSError as exc:
        opts.warnings.append(f"gate state not saved in {state_dir}: {exc.strerror or exc} (Xid cursor not kept)")
    _finish(opts, doc, budget, state_dir)
    return doc


def _finish(opts: GateOptions, doc: dict[str, Any], budget: Budget, state_dir: Path) -> None:
    """Hand the document out (``opts.emit``), then write its record within what the budget
    has left, else spool it; then, with time left, send records spooled by earlier gates.
    ``doc["history"]``: ``{"status": "pending"}`` in the document handed out, then
    ``written`` (with the database), ``spooled`` (with the file and why), ``lost`` or None
    (history off)."""
    from nvtest.ops.gate.history import check_target, import_spool, record_gate, spool_gate, spooled

    spool_dir = state_dir / "spool"
    try:
        url = check_target(opts.history)
    except ConfigError as exc:
        opts.warnings.append(f"history not recorded: {exc}")
        url = "?"
    doc["history"] = {"status": "pending"} if url not in (None, "?") else None
    doc["total_s"] = round(time.monotonic() - budget.t0, 3)
    if opts.emit is not None:
        opts.emit(doc)
    if url is None:
        return
    error = "the history URL is not usable" if url == "?" else ""
    if not error:
        left = budget.left()
        try:
            if left <= 0:
                raise TimeoutError("no time left in the gate's budget")
            # the driver's own timeouts end first (its error says why); the thread bounds the rest
            doc["history"] = (
                bounded(
                    lambda: record_gate(doc, opts.history, cleared=opts.clear_xids, timeout_s=DRIVER_SHARE * left),
                    left,
                    "the history write",
                    budget,
                )
                or None
            )
            if doc["history"]:
                doc["history"]["status"] = "written"
        except (HistoryError, ConfigError, TimeoutError) as exc:
            error = str(exc)
    if error:
        try:
            path = spool_gate(spool_dir, {**doc, "history": None}, cleared=opts.clear_xids)
            doc["history"] = {"status": "spooled", "spool": str(path), "error": error}
        except OSError as exc:
            doc["history"] = {"status": "lost", "error": f"{error}; not spooled in {spool_dir}: {exc.strerror or exc}"}
            opts.warnings.append(f"gate record lost: not spooled in {spool_dir}: {exc.strerror or exc}")
    elif spooled(spool_dir) and budget.left() > 0 and not budget.stopped:
        left = budget.left()
        try:

            def send() -> tuple[int, list[str]]:
                return import_spool(
                    spool_dir,
                    opts.history,
                    timeout_s=DRIVER_SHARE * left,
                    stop=lambda: time.monotonic() > budget.hard_end,
                )

            sent, problems = bounded(send, left, "sending the spool", budget)
            doc["history"]["spool_sent"] = sent
            opts.warnings.extend(f"spooled gate record not sent: {p}" for p in problems)
        except (HistoryError, ConfigError, TimeoutError) as exc:
            opts.warnings.append(f"spooled gate records not sent yet: {exc}")
    doc["total_s"] = round(time.monotonic() - budget.t0, 3)
