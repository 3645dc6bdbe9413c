"""The state of one run: its configuration, nodes, transport, SKUs, facts and store.

The CLI writes a :class:`RunConfig` as ``run_config.json`` in the run directory
and starts pytest with ``--nvtest-config`` pointing at it; the plugin builds one
:class:`RunContext` from it and keeps it in ``config.stash``.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from nvtest import __version__
from nvtest.config.inventory import (
    Inventory,
    Node,
    inventory_from_hostlist,
    load_inventory,
    select_nodes,
)
from nvtest.config.resources import probes_dir
from nvtest.config.skus import Catalog, MatchResult, check_inventory_skus, load_catalog
from nvtest.errors import ConfigError, NodeError, NodeWedged, OutputWriteError, ProbeError
from nvtest.history.cluster import run_cluster
from nvtest.results import ResultStore
from nvtest.session.asbuilt import asbuilt_record, down_record
from nvtest.session.facts import NodeFacts, facts_from_probe
from nvtest.session.kernel_log import (
    KERNEL_LOG_KEY,
    KERNEL_LOG_NEEDS,
    KERNEL_LOG_SCRIPT,
    NVML_DEADLINE_S,
    NVML_NEEDS,
    reset_blocker,
)
from nvtest.session.phase import PhaseRunner, node_log_dir
from nvtest.session.probe import parse_probe_json
from nvtest.transports import Transport, get_transport
from nvtest.transports.base import FAILURES, CommandResult
from nvtest.transports.local import local_hostname

__all__ = ["NodeState", "RunConfig", "RunContext"]


class RunConfig(BaseModel):
    """Everything a run needs, as written by ``nvtest run`` to ``run_config.json``."""

    model_config = ConfigDict(extra="forbid")

    run_id: str
    run_dir: str
    suite: str = "delivery"
    backend: str = "local"
    backend_options: dict[str, Any] = Field(default_factory=dict)
    inventory: str | None = None
    nodes: str | None = None
    sku: str | None = None
    sku_dirs: list[str] = Field(default_factory=list)
    overlay: str | None = None
    command_line: str = ""
    timeout_scale: float = 1.0
    duration_s: float | None = None
    rerun_of: str | None = None
    rerun_items: list[tuple[str, str]] | None = None
    #: nodes the scheduler had taken out of service when the run began (``--partition``
    #: under Slurm: drained, down, not responding...) -> Slurm's state and reason: each is
    #: a node of the run that is never started on, its items ``error`` with those words
    excluded: dict[str, str] = Field(default_factory=dict)


#: Words before a down node's reason, by cause (the transport's :data:`FAILURES`, and
#: what the inventory probe itself did).
DOWN_WORDS = {
    **FAILURES,
    "timeout": "inventory probe hung",
    "unkillable": "node wedged",
    "probe": "",  # the reason says it: "inventory probe exited 1: ..."
    "excluded": "excluded by Slurm",  # RunConfig.excluded: the scheduler's state and reason
}


#: Transport failures of a node that was not reached at all (no command of the run can run there).
UNREACHED = frozenset({"unreachable", "resolve", "auth", "config", "host_key"})


@dataclass
class NodeState:
    """What the run knows of one node: facts, SKU match, reachability.

    ``down_kind``: why the node is down, a key of :data:`DOWN_WORDS` (``unreachable``,
    ``resolve``, ``auth``, ``timeout``...), so each cause is worded as itself.
    ``nvml_blocked``: why NVML is not asked on this node (its kernel log shows a GPU that needs
    a reset: :func:`nvtest.session.kernel_log.reset_blocker`), else None.
    ``down_cause``: the cause key of ``down_kind`` (:attr:`cause`).
    """

    node: Node
    facts: NodeFacts | None = None
    match: MatchResult | None = None
    down_reason: str | None = None
    facts_log: str | None = None
    down_kind: str | None = None
    nvml_blocked: str | None = None
    down_cause: str | None = None

    @property
    def cause(self) -> str | None:
        """The cause key of an item of this down node: ``down_cause`` where the inventory
        phase's result gave one, else from ``down_kind`` (``transport:<failure>``; a hung
        inventory probe ``transport:timeout:inventory``, an unkillable one (``node wedged``)
        ``transport:unkillable:gpu``, a node Slurm excluded ``scheduler:excluded``); None
        for the probe's own exit status (its words say it; output it printed unreadable: ``probe:error``)."""
        if self.down_cause is not None:
            return self.down_cause
        kind = self.down_kind
        special = {
            "timeout": "transport:timeout:inventory",
            "unkillable": "transport:unkillable:gpu",
            "excluded": "scheduler:excluded",
        }
        if kind in special:
            return special[kind]
        return f"transport:{kind}" if kind in FAILURES else None

    @property
    def down_message(self) -> str:
        """``<the cause's words>: <reason>`` (``node unreachable: connection refused ...``,
        ``inventory probe hung: ...``)."""
        words = DOWN_WORDS.get(self.down_kind or "", "node not usable")
        reason = self.down_reason or "no facts"
        return f"{words}: {reason}" if words else reason

    def down_error(self) -> Exception:
        """The exception an item of this down node raises: :class:`NodeWedged` (``fail``)
        for an unkillable process, else :class:`NodeError` (``error``)."""
        if self.down_kind == "unkillable":
            return NodeWedged(self.down_message, cause=self.cause)
        return NodeError(self.down_message, cause=self.cause)


T = TypeVar("T")


class FleetCache:
    """Results a fleet-level check computes once per run and key (a pair schedule, one
    multi-node launch, the fleet's golden shape); a second caller waits for the first.
    One per :class:`RunContext` (:attr:`RunContext.fleet_cache`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}
        self._values: dict[str, Any] = {}
        self._errors: dict[str, BaseException] = {}

    def get(self, key: str, compute: Callable[[], T]) -> T:
        """The value of ``key``, computing it on first use. A computation that raised raises
        the same exception for every later caller (each node item gets the same error)."""
        with self._lock:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            if key in self._errors:
                # the same exception object, its traceback dropped: raised again as it was,
                # each raise would add this frame to it, and every item of a 4,096-node
                # check would carry (and format) the tracebacks of all the items before it
                raise self._errors[key].with_traceback(None)
            if key not in self._values:
                try:
                    self._values[key] = compute()
                except Exception as exc:
                    self._errors[key] = exc
                    raise
            return self._values[key]  # type: ignore[no-any-return]


@dataclass
class RunContext:
    """The live state of a run; one per pytest session."""

    config: RunConfig
    inventory: Inventory
    transport: Transport
    catalog: Catalog
    store: ResultStore
    phases: PhaseRunner
    run_dir: Path
    states: dict[str, NodeState] = field(default_factory=dict)
    probe_dirs: dict[str, str] = field(default_factory=dict)
    check_nodes: dict[str, list[str]] = field(default_factory=dict)
    interrupted: bool = False
    started: bool = False
    interrupt_signal: str | None = None
    listeners: list[Callable[[str, dict[str, Any]], None]] = field(default_factory=list)
    _facts_lock: threading.Lock = field(default_factory=threading.Lock)
    _facts_done: bool = False
    _targets: dict[str, tuple[Node, ...]] = field(default_factory=dict)
    _reachable: dict[str, tuple[Node, ...]] = field(default_factory=dict)
    #: node -> (check, verdict, reason) of each item judged so far, in order (see :meth:`note_result`)
    verdicts: dict[str, list[tuple[str, str, str]]] = field(default_factory=dict)
    _verdicts_lock: threading.Lock = field(default_factory=threading.Lock)
    #: what fleet-level checks computed once for this run (``fleet.once``, :class:`FleetCache`)
    fleet_cache: FleetCache = field(default_factory=FleetCache)

    @classmethod
    def from_config(cls, cfg: RunConfig) -> RunContext:
        """Build the context: inventory, transport, catalog, store.

        Raises:
            ConfigError: bad inventory, hostlist, SKU or backend.
        """
        run_dir = Path(cfg.run_dir)
        run_dir.mkdir(parents=True, exist_ok=True)
        if cfg.inventory:
            inv = load_inventory(Path(cfg.inventory))
            if cfg.nodes:
                inv = select_nodes(inv, cfg.nodes)
        elif cfg.nodes:
            settings: dict[str, Any] = {}
            if cfg.backend == "local":
                settings["python"] = sys.executable
            inv = inventory_from_hostlist(cfg.nodes, **settings)
        elif cfg.backend == "local":
            inv = Inventory(nodes=(Node(name=local_hostname(), python=sys.executable),))
        else:
            raise ConfigError(f"backend {cfg.backend!r} needs --inventory or --nodes", field="nodes")
        if cfg.backend == "local" and len(inv.nodes) != 1:
            raise ConfigError(
                f"the local backend runs one node (this machine); got {len(inv.nodes)}: use --backend ssh or slurm",
                field="nodes",
            )
        catalog = load_catalog([Path(d) for d in cfg.sku_dirs], Path(cfg.overlay) if cfg.overlay else None)
        if cfg.sku:
            catalog.get(cfg.sku)
        check_inventory_skus(inv, catalog)
        store = ResultStore(run_dir)
        listeners: list[Callable[[str, dict[str, Any]], None]] = []

        def note(message: str) -> None:
            # a transport's note (a changed host key accepted, a retry) is a run warning,
            # and the live view prints it at once, not only the report
            payload = {"message": message}
            store.append("warning", payload)
            for fn in list(listeners):
                fn("warning", payload)

        opts = dict(cfg.backend_options)
        if cfg.backend in ("ssh", "slurm"):
            opts.setdefault("run_id", cfg.run_id)
            opts.setdefault("log", note)
        transport = get_transport(cfg.backend, **opts)
        ctx = cls(
            config=cfg,
            inventory=inv,
            transport=transport,
            catalog=catalog,
            store=store,
            phases=PhaseRunner(transport, run_dir),
            run_dir=run_dir,
            states={n.name: NodeState(node=n) for n in inv.nodes},
            listeners=listeners,
        )
        return ctx

    # -- events -------------------------------------------------------------------------
    def emit(self, kind: str, payload: dict[str, Any]) -> None:
        """Store an event and tell the listeners (the progress view)."""
        self.store.append(kind, payload)
        for fn in self.listeners:
            fn(kind, payload)

    def start(self) -> None:
        """Write the run record (the run has begun)."""
        self.started = True
        cfg = self.config
        cluster, source = run_cluster(
            inventory_cluster=self.inventory.cluster,
            slurm_cluster=None
            if self.inventory.cluster
            else (os.environ.get("SLURM_CLUSTER_NAME") or self.transport.cluster_name()),
            backend=cfg.backend,
            inventory_file=self.inventory.source,
        )
        self.emit(
            "run",
            {
                "run_id": cfg.run_id,
                "nvtest_version": __version__,
                "command_line": cfg.command_line,
                "started_at": time.time(),
                "host": socket.gethostname(),
                "user": os.environ.get("USER") or os.environ.get("LOGNAME"),
                "backend": cfg.backend,
                "suite": cfg.suite,
                "cluster": self.inventory.cluster,
                "history_cluster": cluster,  # the history's (cluster, node) key: nvtest.history.cluster
                "history_cluster_source": source,
                "inventory_file": self.inventory.source,
                "forced_sku": cfg.sku,
                "overlay": self.catalog.overlay_file,
                "rerun_of": cfg.rerun_of,
                "python": sys.version.split()[0],
            },
        )

    # -- nodes --------------------------------------------------------------------------
    @property
    def nodes(self) -> list[Node]:
        return list(self.inventory.nodes)

    def check_targets(self, check: str) -> list[Node]:
        """The nodes of ``check``'s items (every node when it has none), in inventory order.

        Computed once per check (the items are known after collection), so an item asking
        costs nothing per node of the fleet.
        """
        got = self._targets.get(check)
        if got is None:
            names = set(self.check_nodes.get(check) or ())
            got = tuple(n for n in self.inventory.nodes if n.name in names) if names else self.inventory.nodes
            self._targets[check] = got
        return list(got)

    def reachable_targets(self, check: str) -> list[Node]:
        """:meth:`check_targets` less the nodes down at the inventory, in inventory order
        (computed once per check after the facts are gathered)."""
        got = self._reachable.get(check)
        if got is None:
            got = tuple(n for n in self.check_targets(check) if not self.states[n.name].down_reason)
            if self._facts_done:
                self._reachable[check] = got
        return list(got)

    def note_result(self, check: str, node: str, verdict: str, reason: str) -> None:
        """Remember an item's verdict (``pass``, ``fail``...) for the checks that run after it:
        a multi-node launch leaves out the nodes an earlier check failed
        (:func:`nvtest.jobs.base.known_bad`)."""
        with self._verdicts_lock:
            self.verdicts.setdefault(node, []).append((check, verdict, reason))

    def gather_facts(self) -> None:
        """Stage the probes, read every node's kernel log, then run the inventory probe, once.

        The kernel log comes first (passive, it cannot hang on a wedged GPU): on a node where
        it shows a GPU that needs a reset (:mod:`nvtest.session.kernel_log`), every command that
        needs NVML is blocked at once naming that line; the inventory probe gives its
        nvidia-smi a short deadline there (it may still answer for the GPUs left). A node whose inventory probe cannot run
        (unreachable, timeout) is marked down: its later items get an ``error`` verdict at
        once, with this reason.
        """
        with self._facts_lock:
            if self._facts_done:
                return
            self._facts_done = True
            excluded = self.config.excluded
            nodes = [n for n in self.nodes if n.name not in excluded]
            self.emit("phase", {"check": "inventory", "nodes": len(nodes)})
            try:
                self.probe_dirs = self.transport.stage(nodes, probes_dir()) if nodes else {}
            except Exception as exc:  # a staging failure on one node must not stop the run
                self.store.append("warning", {"message": f"staging probes failed: {exc}"})
                self.probe_dirs = {}
            unreached = self._read_kernel_logs(nodes) if nodes else {}
            reached = [n for n in nodes if n.name not in unreached]
            results = (
                self.phases.run(
                    "inventory",
                    reached,
                    self._inventory_command,
                    timeout_s=120 * self.config.timeout_scale,
                    touches=("gpu", "pci"),  # NVML and the PCI bus: what a wedged inventory waits on
                )
                if reached
                else {}
            )
            for name, state in self.states.items():
                probe_doc = None
                if name in excluded:  # never started on: the scheduler's words say why
                    state.down_reason, state.down_kind = excluded[name], "excluded"
                else:
                    key = KERNEL_LOG_KEY if name in unreached else "inventory"
                    state.facts_log = self.phases.log_path(key, name)
                    probe_doc = self._read_inventory(state, unreached.get(name) or results.get(name))
                self._match_sku(state)
                self.emit(
                    "node",
                    {
                        "name": name,
                        "settings": state.node.public_dict(),
                        "inventory": state.facts.to_json() if state.facts else None,
                        "down_reason": state.down_reason,
                        "down_kind": state.down_kind,
                        "down_message": state.down_message if state.down_reason else None,
                        "sku": state.match.name if state.match else None,
                        "sku_match": list(state.match.reasons) if state.match else [],
                        "sku_forced": bool(state.match and state.match.forced),
                        "inventory_log": state.facts_log,
                        "staging": self.transport.staging_method(name),
                        "log_dir": node_log_dir(name),
                    },
                )
                self.emit("asbuilt", {"node": name, "record": self._asbuilt(state, probe_doc)})
            for sku in sorted({s.match.name for s in self.states.values() if s.match and s.match.name}):
                prof = self.catalog.get(sku)
                self.emit(
                    "sku",
                    {
                        "name": sku,
                        "description": prof.description,
                        "file": self.catalog.files.get(sku),
                        "thresholds": {
                            c: {
                                m: {**t.model_dump(exclude_none=True), "origin": self.catalog.origin(sku, c, m)}
                                for m, t in ms.items()
                            }
                            for c, ms in prof.thresholds.items()
                        },
                        "sources": prof.sources,
                        "expect": prof.expect.model_dump(exclude_none=True),
                    },
                )

    def _asbuilt(self, state: NodeState, probe_doc: dict[str, Any] | None) -> dict[str, Any]:
        """The node's as-built record (:mod:`nvtest.session.asbuilt`), or why there is none."""
        sku = state.match.name if state.match else None
        rack = str(state.node.tags.get("rack")) if state.node.tags.get("rack") else None
        if probe_doc is None or state.facts is None:
            return down_record(state.node.name, state.down_message, sku=sku, rack=rack)
        return asbuilt_record(state.node.name, probe_doc, state.facts, sku=sku, rack=rack)

    def _read_kernel_logs(self, nodes: list[Node]) -> dict[str, CommandResult]:
        """The kernel-log phase on every node (cached for ``xid_scan``); NVML blocked where it
        shows a GPU that needs a reset. Returns the nodes the transport could not reach at all
        (:data:`UNREACHED`), with their result: the inventory probe is not tried there again
        (one connect timeout per down node, not two)."""
        results = self.phases.run(
            KERNEL_LOG_KEY,
            nodes,
            lambda n: ["sh", "-c", KERNEL_LOG_SCRIPT],
            timeout_s=60 * self.config.timeout_scale,
            needs=KERNEL_LOG_NEEDS,
        )
        for name, res in results.items():
            cause = reset_blocker(res.stdout) if res.completed else None
            if cause is not None and name in self.states:
                self.states[name].nvml_blocked = cause
                self.phases.block(name, NVML_NEEDS, KERNEL_LOG_KEY, cause)
                self.emit("warning", {"message": f"{name}: {cause}: NVML is not asked on this node"})
        return {name: res for name, res in results.items() if res.failure in UNREACHED}

    def _inventory_command(self, node: Node) -> list[str]:
        """The inventory probe's command line: where NVML is blocked, its nvidia-smi gets
        :data:`NVML_DEADLINE_S` (scaled) and the kernel log's cause to quote."""
        cmd = [node.python, f"{self.probe_dirs.get(node.name, str(probes_dir()))}/inventory_probe.py"]
        blocked = self.states[node.name].nvml_blocked
        if not blocked:
            return cmd
        deadline = f"{NVML_DEADLINE_S * self.config.timeout_scale:g}"
        return [*cmd, "--nvml-cause", blocked, "--nvml-deadline", deadline]

    def _read_inventory(self, state: NodeState, res: CommandResult | None) -> dict[str, Any] | None:
        """The node's facts from its inventory probe, or why it is down (in its own words);
        the probe's document (None when the node is down)."""
        if res is None:
            state.down_reason, state.down_kind = "no result from the transport", None
        elif res.failure in ("timeout", "unkillable"):
            state.down_kind = res.failure
            if res.cause == "transport:unkillable:storage":  # else "node wedged": the GPU's
                state.down_cause = res.cause
            state.down_reason = (
                f"{res.error}; the node answered over the {self.transport.name} transport, but "
                f"`{state.node.python} inventory_probe.py` did not finish: check that the "
                f"inventory's python ({state.node.python}) starts on the node"
            )
        elif not res.completed:
            state.down_reason, state.down_kind = res.error or "no result", res.failure
        elif res.exit_code != 0:
            state.down_kind = "probe"
            state.down_reason = f"inventory probe exited {res.exit_code}: {res.stderr.strip()[-300:]}"
        else:
            try:
                doc = parse_probe_json(res)
                state.facts = facts_from_probe(doc)
                return doc
            except (ProbeError, ValueError, KeyError, TypeError) as exc:
                state.down_kind, state.down_cause = "probe", "probe:error"
                state.down_reason = f"inventory probe output unreadable: {exc}"
        return None

    def _match_sku(self, state: NodeState) -> None:
        forced = state.node.sku or self.config.sku
        if forced:
            state.match = MatchResult(
                self.catalog.get(forced), (f"forced ({'inventory' if state.node.sku else '--sku'})",), True
            )
            return
        if state.facts is None:
            state.match = None
            return
        state.match = self.catalog.match(state.facts.gpu_summary())
        if state.match.profile is None:
            self.store.append(
                "warning",
                {
                    "message": f"{state.node.name}: no SKU profile matches ({'; '.join(state.match.reasons)}); "
                    f"measuring with no thresholds. Known SKUs: {', '.join(self.catalog.names())}. "
                    "Force one with --sku or write a profile (docs/skus.md).",
                },
            )

    def collect_bug_reports(self) -> None:
        """``nvidia-bug-report.sh`` on each node that failed, where its SKU's recipe enables it
        (:mod:`nvtest.session.bug_report`); a report not taken is a run warning."""
        from nvtest.results import read_events
        from nvtest.session.bug_report import bug_report_targets, collect_bug_reports

        failed = {
            str(ev.get("node"))
            for ev in read_events(self.run_dir / "results.jsonl")
            if ev.get("kind") == "result" and ev.get("verdict") == "fail"
        }
        up = {n for n in failed if n in self.states and not self.states[n].down_reason}
        recipes: dict[str, Any] = {}
        for n in up:
            match = self.states[n].match
            recipes[n] = match.profile.recipe if match is not None and match.profile is not None else None
        deadline, names = bug_report_targets(up, recipes)
        collect_bug_reports(
            [self.states[n].node for n in names],
            deadline * self.config.timeout_scale,
            self.phases.run,
            lambda message: self.store.append("warning", {"message": message}),
        )

    def write_errors(self) -> list[OutputWriteError]:
        """The run's files that could not be written so far: results.jsonl first, then
        the first evidence log files (see :class:`~nvtest.session.phase.PhaseRunner`)."""
        out = [self.store.write_error] if self.store.write_error else []
        return [*out, *self.phases.write_errors]

    def close(self, *, interrupted: bool, harness_error: str | None = None, signals: Sequence[str] = ()) -> None:
        """Write the end record and release the transport (its staged files removed) and the store.

        ``signals``: the stop signals received, in order (the first decides the exit code).
        """
        if self.phases.write_error_count:
            first = self.phases.write_errors[0]
            self.store.append(
                "warning",
                {"message": f"{self.phases.write_error_count} evidence log file(s) not written; the first: {first}"},
            )
        self.emit(
            "end",
            {
                "ended_at": time.time(),
                "interrupted": interrupted,
                "interrupt_signal": self.interrupt_signal,
                "signals": list(signals),
                "harness_error": harness_error,
            },
        )
        try:
            self.transport.close()
        finally:
            self.store.close()
