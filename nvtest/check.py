"""The API a check (a pytest function in ``suites/``) is written with.

A check names its probe, asks for this node's output with the ``measure``
fixture (the probe runs on all target nodes at once on first use), and records
judged metrics with the ``judge`` fixture::

    STREAM = Probe("stream", script="stream_probe.py", timeout_s=600)

    @pytest.mark.check("stream", area="memory", title="Host memory bandwidth (STREAM)")
    def test_stream(node, measure, judge):
        doc = measure(STREAM)
        for r in doc["results"]:
            judge(f"{r['kernel']}_gbps", r["best_rate_gbps"], "GB/s")

A metric outside its SKU threshold fails the item; a probe that could not run
gives it an ``error`` verdict; a probe that reports ``skip`` skips it with the
probe's reason.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from nvtest.errors import NvtestError, ProbeError
from nvtest.results import MetricResult
from nvtest.thresholds import SkuProfile, evaluate
from nvtest.transports.base import CommandResult
from nvtest.verdict import Verdict, worst

if TYPE_CHECKING:
    from nvtest.context import RunContext
    from nvtest.inventory import Node

__all__ = ["Judge", "NodeError", "Probe", "ProbeSkip", "measure_probe", "raw_output"]


class NodeError(NvtestError):
    """The node could not run the probe (unreachable, timeout, crash): an ``error`` verdict."""


class ProbeSkip(NvtestError):
    """The probe says this check does not apply here (the reason is shown)."""


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
    live = [n for n in nodes if not ctx.states[n.name].down_reason]

    def build(n: Node) -> list[str]:
        st = ctx.states[n.name]
        prof = st.match.profile if st.match else None
        from nvtest.resources import probes_dir

        return probe.argv(n, ctx.probe_dirs.get(n.name, str(probes_dir())), prof)

    if ctx.phases.cached(probe.name) is None:
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


class Judge:
    """Records the judged metrics of one (check, node) item.

    ``judge(name, value, unit, **labels)`` evaluates against the node's SKU
    threshold for (check, name) and keeps the result; ``judge.fail(reason)``
    records a failure the tool itself reported; ``judge.detail(key, value)``
    keeps extra data for the report.
    """

    def __init__(self, ctx: RunContext | None, check: str, node: str, sku: SkuProfile | None) -> None:
        self.ctx = ctx
        self.check = check
        self.node = node
        self.sku = sku
        self.metrics: list[MetricResult] = []
        self.failures: list[str] = []
        self.warnings: list[str] = []
        self.details: dict[str, Any] = {}
        self.log: str | None = None

    def __call__(self, name: str, value: float | None, unit: str, **labels: Any) -> MetricResult:
        thr = self.sku.threshold(self.check, name) if self.sku else None
        ev = evaluate(None if value is None else float(value), unit, thr)
        thr_json = None
        if thr is not None and self.sku is not None:
            origin = self.ctx.catalog.origin(self.sku.name, self.check, name) if self.ctx else f"profile:{self.sku.name}"
            thr_json = {**thr.model_dump(exclude_none=True), "origin": origin}
        m = MetricResult(
            name=name,
            value=None if value is None else float(value),
            unit=unit,
            verdict=ev.verdict,
            reason=ev.reason,
            threshold=thr_json,
            labels={k: str(v) for k, v in labels.items()},
        )
        self.metrics.append(m)
        return m

    def fail(self, reason: str) -> None:
        """Record a failure the tool reported (wrong results, validation failed)."""
        self.failures.append(reason)

    def warn(self, reason: str) -> None:
        """Record a warning that does not fail the item."""
        self.warnings.append(reason)

    def detail(self, key: str, value: Any) -> None:
        """Keep ``value`` (JSON-able) for the report under ``key``."""
        self.details[key] = value

    @property
    def verdict(self) -> Verdict:
        base = [m.verdict for m in self.metrics]
        if self.failures:
            base.append(Verdict.FAIL)
        if self.warnings:
            base.append(Verdict.WARN)
        return worst(base, default=Verdict.PASS)

    def summary(self) -> str:
        """One line: the failures first, then failing/erroring/warning metrics."""
        bad = [m for m in self.metrics if m.verdict in (Verdict.FAIL, Verdict.ERROR, Verdict.WARN)]
        bad.sort(key=lambda m: -m.verdict.rank)
        parts = list(self.failures)
        for m in bad:
            lab = ",".join(f"{k}={v}" for k, v in m.labels.items())
            parts.append(f"{m.name}{'[' + lab + ']' if lab else ''}: {m.reason}")
        parts.extend(self.warnings)
        return "; ".join(parts)
