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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from nvtest.config.resources import probes_dir
from nvtest.config.thresholds import SkuProfile
from nvtest.errors import NodeError, ProbeError, ProbeSkip
from nvtest.transports.base import CommandResult

if TYPE_CHECKING:
    from nvtest.config.inventory import Node
    from nvtest.session.context import RunContext

__all__ = ["ArgsFn", "Probe", "measure_probe", "parse_probe_json", "raw_output"]


ArgsFn = Callable[["Node", "SkuProfile | None"], Sequence[str]]


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
    """

    name: str
    script: str | None = None
    command: tuple[str, ...] | None = None
    args: Sequence[str] | ArgsFn = ()
    timeout_s: float = 300.0
    env: Mapping[str, str] = field(default_factory=dict)

    def argv(self, node: Node, probe_dir: str, sku: SkuProfile | None) -> list[str]:
        """The command line for ``node``."""
        extra = list(self.args(node, sku) if callable(self.args) else self.args)
        if self.script:
            return [node.python, f"{probe_dir}/{self.script}", *extra]
        if self.command:
            return [*self.command, *extra]
        raise ValueError(f"probe {self.name!r} has neither script nor command")


def raw_output(ctx: RunContext, probe: Probe, node: Node, nodes: Sequence[Node]) -> CommandResult:
    """Run ``probe`` over ``nodes`` (once, cached) and return ``node``'s result.

    Raises:
        NodeError: the node was down at the start, or its command did not complete.
    """
    state = ctx.states[node.name]
    if state.down_reason:
        raise NodeError(f"node unreachable: {state.down_reason}")

    def build(n: Node) -> list[str]:
        st = ctx.states[n.name]
        prof = st.match.profile if st.match else None
        return probe.argv(n, ctx.probe_dirs.get(n.name, str(probes_dir())), prof)

    results = ctx.phases.cached(probe.name)
    if results is None:  # the first item of the phase: nothing per node for the others
        live = [n for n in nodes if not ctx.states[n.name].down_reason]
        ctx.emit("phase", {"check": probe.name, "nodes": len(live)})
        results = ctx.phases.run(
            probe.name, live, build, timeout_s=probe.timeout_s * ctx.config.timeout_scale, env=dict(probe.env) or None
        )
    res = results.get(node.name)
    if res is None:
        raise NodeError("no result from the transport")
    if not res.completed:
        raise NodeError(res.error or "command did not complete")
    return res


def measure_probe(ctx: RunContext, probe: Probe, node: Node, nodes: Sequence[Node]) -> dict[str, Any]:
    """Run a JSON probe and return this node's document (``status`` ok).

    Raises:
        NodeError: see :func:`raw_output`.
        ProbeSkip: the probe reported ``status: skip``.
        ProbeError: the probe reported ``status: error``, or printed no JSON.
    """
    res = raw_output(ctx, probe, node, nodes)
    doc = parse_probe_json(res)
    status = doc.get("status")
    if status == "skip":
        raise ProbeSkip(str(doc.get("reason") or "probe skipped without a reason"))
    if status != "ok":
        raise ProbeError(str(doc.get("reason") or f"probe status {status!r}"))
    return doc


def parse_probe_json(res: CommandResult) -> dict[str, Any]:
    """The JSON document a probe printed (the last line that parses as an object).

    Raises:
        ProbeError: no JSON document in stdout (the exit code and stderr tail are quoted).
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
    tail = res.stderr.strip().splitlines()[-3:]
    raise ProbeError(f"probe printed no JSON (exit {res.exit_code}){': ' + ' | '.join(tail) if tail else ''}")
