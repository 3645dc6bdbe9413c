"""Running a probe through the run's phase runner, and the probes' JSON contract.

A :class:`Probe` names a node-side script (``nvtest/probes/``) or a tool's argv;
:func:`raw_output` runs it on all target nodes at once (one phase, cached) and
returns one node's :class:`~nvtest.transports.base.CommandResult`;
:func:`measure_probe` reads the JSON document a probe script printed
(``{"status": "ok"|"skip"|"error", ...}``, see ``nvtest/probes/_contract.py``).
Checks reach these through :mod:`nvtest.checks.api`; multi-node jobs use them directly.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from nvtest.config.resources import probes_dir
from nvtest.config.thresholds import SkuProfile
from nvtest.errors import (
    NodeError,
    NodeWedged,
    NvtestError,
    ProbeError,
    ProbeSkip,
    UnreportedHardware,
)
from nvtest.playbook.diagnosis import CAUSES
from nvtest.session.expect import Expected, expected_gpus
from nvtest.session.phase import cause_of
from nvtest.transports.base import CommandResult

if TYPE_CHECKING:
    from nvtest.config.inventory import Node
    from nvtest.session.context import NodeState, RunContext

__all__ = [
    "DEVICES",
    "DRIVER",
    "EXPECTS",
    "PEER_FAILURES",
    "EFFECTIVE_KEYS",
    "ArgsFn",
    "Probe",
    "device_for",
    "each_node",
    "effective_of",
    "measure_probe",
    "parse_probe_json",
    "raw_output",
    "require_completed",
]

#: Keys of a probe's document, or of its result entries, that say what ran: devices,
#: libraries, data types, sizes, ranks and world size, iterations, durations, threads.
EFFECTIVE_KEYS = frozenset(
    {
        "device",
        "library",
        "implementation",
        "backend",
        "dtype",
        "dtypes",
        "m",
        "n",
        "k",
        "size",
        "sizes",
        "size_bytes",
        "array_elements",
        "array_mib",
        "threads",
        "reps",
        "iters",
        "seconds",
        "window_s",
        "sample_s",
        "ranks",
        "world_size",
        "nproc",
        "steps",
        "op",
        "kernel",
        "direction",
        "tier",
        "mode",
        "gpu_name",
        "pci_bus_id",
        "raw_tool",
        "fallback_reason",
        "libraries_missing",
        "omp_env",
        "launcher",
    }
)


ArgsFn = Callable[["Node", "SkuProfile | None"], Sequence[str]]

#: Devices a probe may need, besides the tools it runs (named as on PATH, ``nvidia-smi``).
DEVICES = ("gpu", "hca", "pci", "host-memory", "storage", "network")

#: Kinds of hardware a probe may expect (``Probe.expects``): the node's GPUs, NVSwitches, RDMA
#: NICs, counted by :mod:`nvtest.session.expect` (PCI bus, SKU profile, the tools' reports).
EXPECTS = ("gpu", "nvswitch", "hca")

#: ``Probe.package`` of a tool the NVIDIA driver ships (nvidia-smi): without it the driver is
#: not there to report on the GPUs, so its absence fails the check in the shell's words
#: (a tool from another package missing is an ``error``: nothing measured).
DRIVER = "NVIDIA driver"

#: Launchers whose name says nothing of what the probe runs: such a probe declares ``needs``.
_SHELLS = frozenset({"sh", "bash", "dash", "env", "timeout"})


@dataclass(frozen=True)
class Probe:
    """A command a check runs on every target node.

    Exactly one of ``script`` (a file in ``nvtest/probes/``, run with the node's
    Python) or ``command`` (a tool's argv, e.g. ``["nvidia-smi", "topo", "-m"]``).

    Attributes:
        name: the evidence name (``logs/<node>/<name>.log``) and cache key.
        script: probe file name.
        command: tool argv.
        args: extra argv, or a function (node, sku profile) -> argv (per-SKU recipes).
        timeout_s: per-node time limit, seconds (scaled by ``--timeout-scale``).
        env: environment for the command.
        needs: the tools (``nvidia-smi``, ``dcgmi``) and devices (:data:`DEVICES`) the
            command cannot finish without. When it runs past its deadline on a node, they
            are marked hung there and every later probe on that node that needs one of
            them is ``blocked`` at once (see :class:`~nvtest.session.phase.PhaseRunner`).
            Default: the tool a ``command`` runs (its first word); a script or a shell
            command declares its own.
        device: the script takes ``--device``: ``"any"`` (a CPU path too) or ``"gpu"``
            (GPU only). On a node that must have NVIDIA GPUs (PCI bus, SKU) it is asked for
            ``--device cuda``, and a skip or error there fails the item with the probe's
            words (:func:`measure_probe`); ``"any"`` probes get ``--device cpu`` where the
            bus proves there is no GPU.
        expects: the hardware the check judges (:data:`EXPECTS`; several: any of them).
            The ``read`` and ``measure`` fixtures require it before running the probe: a
            PCI bus that proves it absent skips the item with the bus's words, a bus that
            could not be read makes it an ``error`` (:func:`nvtest.checks.hardware.require`).
        parse: how the ``read`` fixture reads the tool's output: text -> typed record
            (a parser of :mod:`nvtest.parsers`). A ``ParseError``, or a record whose
            ``failure`` is set, fails the item with the tool's words; None from it (the
            tool reported nothing to read) is accepted only from a tool that exited 0.
        package: what ships the tool (named when it is missing: the inventory found no
            ``command[0]`` on the node's PATH, an ``error``), or :data:`DRIVER`.
        stdout_only: ``parse`` reads stdout alone (default: stdout and stderr).
        skip_if: after the hardware is required, the SKU (None: no profile matched) on
            which the probe does not apply: the skip's words, else None (a PCIe SKU has no
            NVLink to ask about).
    """

    name: str
    script: str | None = None
    command: tuple[str, ...] | None = None
    args: Sequence[str] | ArgsFn = ()
    timeout_s: float = 300.0
    env: Mapping[str, str] = field(default_factory=dict)
    needs: tuple[str, ...] = ()
    device: Literal["any", "gpu"] | None = None
    expects: str | tuple[str, ...] = ()
    parse: Callable[[str], Any] | None = None
    package: str | None = None
    stdout_only: bool = False
    skip_if: Callable[[SkuProfile | None], str | None] | None = None

    def __post_init__(self) -> None:
        """A kind of hardware ``expects`` does not know is the declaration's mistake, told where
        the probe is declared (its module's import), not as a KeyError once a node is read.

        Raises:
            ValueError: an ``expects`` kind not in :data:`EXPECTS`.
        """
        unknown = [k for k in self.expected_kinds() if k not in EXPECTS]
        if unknown:
            raise ValueError(
                f"probe {self.name!r}: expects={', '.join(map(repr, unknown))} is not a kind of hardware; "
                f"known: {', '.join(EXPECTS)}"
            )

    def expected_kinds(self) -> tuple[str, ...]:
        """``expects`` as a tuple (empty: the probe expects no hardware)."""
        return (self.expects,) if isinstance(self.expects, str) else tuple(self.expects)

    def tool(self) -> str:
        """The tool as messages name it: the command's words (``nvidia-smi -q -x``), or the
        probe's name for a script or a shell command."""
        if self.command and PurePosixPath(self.command[0]).name not in _SHELLS:
            return " ".join(self.command)
        return self.name

    def all_needs(self) -> tuple[str, ...]:
        """``needs``, or the tool a ``command`` runs when none are declared (empty for a
        script or a shell command without ``needs``: it never blocks nor is blocked)."""
        if self.needs:
            return tuple(self.needs)
        if self.command:
            tool = PurePosixPath(self.command[0]).name
            if tool not in _SHELLS:
                return (tool,)
        return ()

    def argv(self, node: Node, probe_dir: str, sku: SkuProfile | None) -> list[str]:
        """The command line for ``node``."""
        extra = list(self.args(node, sku) if callable(self.args) else self.args)
        if self.script:
            return [node.python, f"{probe_dir}/{self.script}", *extra]
        if self.command:
            return [*self.command, *extra]
        raise ValueError(f"probe {self.name!r} has neither script nor command")


def _gpus_of(state: NodeState) -> Expected | None:
    if state.facts is None:
        return None
    return expected_gpus(state.facts, state.match.profile if state.match else None)


def device_for(probe: Probe, state: NodeState) -> list[str]:
    """The ``--device`` argument of a device probe on one node (empty for other probes).

    ``cuda`` wherever GPUs are expected, ``cpu`` for an ``"any"`` probe where their
    absence is proven, else nothing (the probe's ``auto``).
    """
    if probe.device is None:
        return []
    exp = _gpus_of(state)
    if exp is not None and exp.count:
        return ["--device", "cuda"]
    if probe.device == "any" and exp is not None and exp.absent:
        return ["--device", "cpu"]
    return []


#: What reading another node's result inside one node's item may raise: that node's own
#: failure (down, timed out, a process it could not kill, a tool that cannot report on its
#: hardware, a skip), which is its own item's verdict and never this item's.
PEER_FAILURES: tuple[type[BaseException], ...] = (NvtestError, ProbeSkip, AssertionError)

T = TypeVar("T")


def each_node(nodes: Iterable[Node], read: Callable[[Node], T]) -> tuple[dict[str, T], dict[str, str]]:
    """``read(node)`` for each node of an aggregate (a figure or a comparison over all nodes,
    judged in every node's item): (node -> value, node -> why it has none). A node whose
    reading raises one of :data:`PEER_FAILURES` is left out and named, so one node's fault
    (its process stuck in D state, its probe's error) is never copied onto the items of the
    others; each node's own item raises its own failure when it reads its own result."""
    got: dict[str, T] = {}
    left: dict[str, str] = {}
    for n in nodes:
        try:
            got[n.name] = read(n)
        except PEER_FAILURES as exc:
            text = str(exc)
            left[n.name] = text if text.startswith(type(exc).__name__) else f"{type(exc).__name__}: {text}"
    return got, left


def raw_output(
    ctx: RunContext, probe: Probe, node: Node, nodes: Sequence[Node], *, whole: bool = True
) -> CommandResult:
    """Run ``probe`` over ``nodes`` (once, cached) and return ``node``'s result.

    ``whole``: the caller parses the whole output (a tool's text): an output the capture
    limit cut (:mod:`nvtest.transports.capture`) is not judged on a part of it (a count or an
    event in the dropped middle would be missed). A JSON probe's document, on its last line,
    survives a cut of what came before it: :func:`measure_probe` passes False.

    Raises:
        NodeError: the node was down at the start, or its command did not complete, or
            (``whole``) its output was cut by the capture limit (the message says how much).
    """
    state = ctx.states[node.name]
    if state.down_reason:
        raise state.down_error()

    def build(n: Node) -> list[str]:
        st = ctx.states[n.name]
        prof = st.match.profile if st.match else None
        return [*probe.argv(n, ctx.probe_dirs.get(n.name, str(probes_dir())), prof), *device_for(probe, st)]

    results = ctx.phases.cached(probe.name)
    if results is None:  # the first item of the phase: nothing per node for the others
        live = [n for n in nodes if not ctx.states[n.name].down_reason]
        ctx.emit("phase", {"check": probe.name, "nodes": len(live)})
        results = ctx.phases.run(
            probe.name,
            live,
            build,
            timeout_s=probe.timeout_s * ctx.config.timeout_scale,
            env=dict(probe.env) or None,
            needs=probe.all_needs(),
        )
    res = results.get(node.name)
    if res is None:
        raise NodeError("no result from the transport")
    require_completed(res)
    if whole and res.truncated:
        raise NodeError(f"{res.truncated}; the tool's output is not judged on a part of it")
    return res


def require_completed(res: CommandResult) -> CommandResult:
    """``res`` when its command ran to its own exit.

    Raises:
        NodeWedged: a process of it survived SIGKILL (``unkillable``: a ``fail``).
        NodeError: it did not complete (timeout, blocked, unreachable...): an ``error``.
    """
    if res.failure == "unkillable":
        raise NodeWedged(res.error or "unkillable: a process survived SIGKILL", cause=cause_of(res))
    if not res.completed:
        raise NodeError(res.error or "command did not complete", cause=cause_of(res))
    return res


def measure_probe(ctx: RunContext, probe: Probe, node: Node, nodes: Sequence[Node]) -> dict[str, Any]:
    """Run a JSON probe and return this node's document (``status`` ok).

    Raises:
        NodeError: see :func:`raw_output`.
        UnreportedHardware: a device probe on a node that must have GPUs skipped or
            errored (CUDA cannot start): the item fails with the probe's words.
        ProbeSkip: the probe reported ``status: skip``.
        ProbeError: the probe reported ``status: error``, or printed no JSON.
    """
    res = raw_output(ctx, probe, node, nodes, whole=False)
    doc = parse_probe_json(res)
    status = doc.get("status")
    exp = _gpus_of(ctx.states[node.name]) if probe.device else None
    said = doc.get("cause")  # the probe's key (probes/_contract.py): trusted only if the Playbook knows it
    cause = said if isinstance(said, str) and said in CAUSES else None
    if exp is not None and exp.count and status != "ok":
        raise UnreportedHardware(
            f"{exp.text()}; the {probe.name} probe could not use them ({status}): "
            f"{doc.get('reason') or 'no reason given'}",
            cause=cause,
        )
    if status == "skip":
        raise ProbeSkip(str(doc.get("reason") or "probe skipped without a reason"))
    if status != "ok":
        raise ProbeError(str(doc.get("reason") or f"probe status {status!r}"), cause=cause)
    return doc


def effective_of(doc: dict[str, Any]) -> dict[str, Any]:
    """What a probe says ran (its document's :data:`EFFECTIVE_KEYS`, and the distinct values
    of those keys over its result entries), for the item's ``details.effective``."""
    out: dict[str, Any] = {k: v for k, v in doc.items() if k in EFFECTIVE_KEYS and v not in (None, "", [])}
    per: dict[str, set[str]] = {}
    for r in doc.get("results") or []:
        if not isinstance(r, dict):
            continue
        for k, v in r.items():
            if k in EFFECTIVE_KEYS and isinstance(v, (str, int, float)) and not isinstance(v, bool):
                per.setdefault(k, set()).add(str(v))
    for k, vs in per.items():
        out.setdefault(k, sorted(vs))
    return out


def parse_probe_json(res: CommandResult) -> dict[str, Any]:
    """The JSON document a probe printed (the last line that parses as an object).

    Raises:
        ProbeError: no JSON document in stdout (the exit code and stderr tail are quoted;
            when the capture limit cut the output, what was dropped:
            :mod:`nvtest.transports.capture`).
    """
    for line in reversed(res.stdout.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                doc = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(doc, dict):
                return doc
    try:
        doc = json.loads(res.stdout)
        if isinstance(doc, dict):
            return doc
    except json.JSONDecodeError:
        pass
    if res.truncated:
        raise ProbeError(f"{res.truncated}; the probe's JSON document could not be read")
    tail = res.stderr.strip().splitlines()[-3:]
    raise ProbeError(f"probe printed no JSON (exit {res.exit_code}){': ' + ' | '.join(tail) if tail else ''}")
