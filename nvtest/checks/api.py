"""The API a check (a pytest function in ``suites/``) is written with: where a check author starts.

A check names its probe, asks for this node's output with the ``read`` fixture (a
declared tool probe: its typed record, the fail-closed rules applied from the
declaration, :func:`nvtest.checks.hardware.read_declared`) or the ``measure`` fixture
(a probe script's JSON document); the probe runs on all target nodes at once on
first use. It records judged metrics with the ``judge`` fixture::

    STREAM = Probe("stream", script="stream_probe.py", timeout_s=600, needs=("host-memory",))

    @pytest.mark.check("stream", area="memory", title="Host memory bandwidth (STREAM)")
    def test_stream(node, measure, judge):
        doc = measure(STREAM)
        for r in doc["results"]:
            judge(f"{r['kernel']}_gbps", r["best_rate_gbps"], "GB/s")

Every metric a check judges is declared in the metric catalog
(:mod:`nvtest.config.metrics`: its unit and physical bound); an undeclared one is an
``error`` ("metric not declared"), and a value outside its physical bound an ``error``
("implausible"), before any threshold. A metric outside its SKU threshold fails the
item; a probe that could not run gives it an ``error`` verdict; a probe that reports
``skip`` skips it with the probe's reason.

A suite imports only this module, ``nvtest.checks.<area>``, ``nvtest.parsers`` and
``nvtest.errors`` (tests/architecture/test_suite_imports.py): the types a check's
signature names (:class:`Node`, :class:`SkuProfile`, :class:`NodeFacts`,
:class:`RunContext`, :class:`Verdict`) are handed out here.
"""

from __future__ import annotations

import math
from typing import Any

from nvtest.checks.fleet import Fleet
from nvtest.config.inventory import Node
from nvtest.config.metrics import Hardware, declare_metric, lower_is_better
from nvtest.config.thresholds import SkuProfile, assess
from nvtest.errors import NodeError, ProbeError, ProbeSkip
from nvtest.playbook.diagnosis import first_cause
from nvtest.results import MetricResult
from nvtest.session.context import RunContext
from nvtest.session.facts import NodeFacts, hardware_of
from nvtest.session.probe import (
    DRIVER,
    ArgsFn,
    Probe,
    each_node,
    effective_of,
    measure_probe,
    parse_probe_json,
    raw_output,
)
from nvtest.transports.base import CommandResult
from nvtest.verdict import Verdict, worst

__all__ = [
    "DRIVER",
    "ArgsFn",
    "CommandResult",
    "Fleet",
    "Judge",
    "Node",
    "NodeError",
    "NodeFacts",
    "Probe",
    "ProbeError",
    "ProbeSkip",
    "RunContext",
    "SkuProfile",
    "Verdict",
    "declare_metric",
    "each_node",
    "measure_probe",
    "note_probe_run",
    "parse_probe_json",
    "raw_output",
]


class Judge:
    """Records the judged metrics of one (check, node) item.

    ``judge(name, value, unit, raw=line, **labels)`` judges a value with
    :func:`nvtest.config.thresholds.assess` (declared in the metric catalog, in its
    unit, inside its physical bound on this node's hardware, then the node's SKU
    threshold for (check, name)) and keeps the result; ``raw`` is the tool's line the
    value was read from (shown when the value is implausible). ``judge.fail(reason)``
    records a failure the tool itself reported; ``judge.detail(key, value)`` keeps
    extra data for the report; ``judge.cause`` is the key of the cause where the check knows
    it (``tool:init_failure``, ``xid:79``; :data:`nvtest.playbook.diagnosis.CAUSES`), copied to
    the item's result when it fails or errors.

    ``hardware`` (default: from the run context's facts of ``node`` and ``sku``) is what
    the plausibility bounds are computed from.
    """

    def __init__(
        self,
        ctx: RunContext | None,
        check: str,
        node: str,
        sku: SkuProfile | None,
        hardware: Hardware | None = None,
    ) -> None:
        self.ctx = ctx
        self.check = check
        self.node = node
        self.sku = sku
        self.metrics: list[MetricResult] = []
        self.failures: list[str] = []
        self.warnings: list[str] = []
        self.details: dict[str, Any] = {}
        self.log: str | None = None
        #: why the judging started over (:meth:`restart`), in order
        self.restarts: list[str] = []
        self._cause: str | None = None
        #: the cause keys of the judged metrics a threshold failed or could not judge
        self._metric_causes: list[str] = []
        self._hardware = hardware
        #: why the check found nothing wrong where it judged no metric (:meth:`passed`)
        self._passed: list[str] = []

    @property
    def cause(self) -> str | None:
        """The key of the item's cause: of the check's own (set, or given to :meth:`fail`) and
        its metrics' (a value outside its threshold, a unit mismatch), the one the Playbook
        diagnoses first (:func:`nvtest.playbook.diagnosis.first_cause`); None: none known."""
        return first_cause([self._cause, *self._metric_causes])

    @cause.setter
    def cause(self, key: str | None) -> None:
        self._cause = key

    @property
    def hardware(self) -> Hardware:
        """The node's hardware for the plausibility bounds (profile, facts, nodes in the run)."""
        if self._hardware is None:
            facts = None
            nodes = 1
            if self.ctx is not None:
                state = self.ctx.states.get(self.node)
                facts = state.facts if state is not None else None
                nodes = len(self.ctx.nodes) or 1
            self._hardware = hardware_of(facts, self.sku, nodes)
        return self._hardware

    def __call__(
        self, name: str, value: float | None, unit: str, /, *, raw: str | None = None, **labels: Any
    ) -> MetricResult:
        lab = {k: str(v) for k, v in labels.items()}
        number = _number(value)
        a = assess(self.check, name, number, unit, self.sku, self.hardware, lab, raw)
        thr_json = None
        if a.threshold is not None and self.sku is not None:
            origin = (
                self.ctx.catalog.origin(self.sku.name, self.check, name) if self.ctx else f"profile:{self.sku.name}"
            )
            thr_json = {**a.threshold.model_dump(exclude_none=True), "origin": origin}
        bound = {**a.bound.to_json(), "implausible": a.implausible} if a.bound is not None else None
        m = MetricResult(
            name=name,
            value=number if number is None or math.isfinite(number) else None,
            unit=unit,
            verdict=a.verdict,
            reason=f"no valid measurement ({value!r})"
            if number is None and value is not None and a.reason.startswith("no valid")
            else a.reason,
            threshold=thr_json,
            labels=lab,
            bound=bound,
            lower_is_better=lower_is_better(unit),
        )
        self.metrics.append(m)
        if a.cause is not None:
            self._metric_causes.append(a.cause)
        return m

    def fail(self, reason: str, cause: str | None = None) -> None:
        """Record a failure the tool reported (wrong results, validation failed); ``cause``: its
        key where the check knows it (of several, :attr:`cause` keeps the one the Playbook
        diagnoses first: :func:`nvtest.playbook.diagnosis.first_cause`). A blank ``reason``
        still fails the item, in words that say none was given."""
        self.failures.append(
            reason if reason.strip() else "the check failed without saying why (judge.fail with no reason)"
        )
        if cause is not None:
            self.cause = first_cause([self.cause, cause])

    def warn(self, reason: str) -> None:
        """Record a warning that does not fail the item."""
        self.warnings.append(reason)

    def passed(self, reason: str) -> None:
        """Record that the check looked and found nothing wrong, where it judges no metric
        (``reason``: what it looked at, e.g. "no Xid in 1200 kernel log lines"; kept in the
        details under ``passed``). :func:`~nvtest.checks.health.apply` of an outcome records it.

        Raises:
            ValueError: ``reason`` is blank: a pass that names nothing looked at proves nothing
                (the item is an ``error``, ``check:raised``).
        """
        if not reason.strip():
            raise ValueError("judge.passed() needs the words of what the check looked at: an empty pass proves nothing")
        self._passed.append(reason)
        self.details["passed"] = list(self._passed)

    @property
    def judged(self) -> bool:
        """True once the check recorded a judgement: a metric, a failure, a warning or a
        :meth:`passed`. An item whose check took the Judge and recorded none is an ``error``
        (``check:judged_nothing``): nothing proves the node good (fail closed)."""
        return bool(self.metrics or self.failures or self.warnings or self._passed)

    def detail(self, key: str, value: Any) -> None:
        """Keep ``value`` (JSON-able) for the report under ``key``."""
        self.details[key] = value

    def restart(self, reason: str) -> None:
        """Start the judging over: drop the metrics and failures recorded so far (warnings,
        details and the log stay), because ``reason`` says a second measurement replaces the
        first (the pair re-run of a multi-node launch that did not pass); kept in
        :attr:`restarts`."""
        self.metrics.clear()
        self._metric_causes.clear()
        self.failures.clear()
        self._passed.clear()
        self.details.pop("passed", None)
        self.restarts.append(reason)

    def unmeasured(self) -> list[str]:
        """The SKU's thresholds of this check that no judged metric met, each with its cause.

        A threshold defined at a point that was not measured (a dtype not run, a size not
        reached) is not a pass: the plugin makes the item an ``error`` with these lines.
        The cause is the detail that names the point (``skipped bf16 on cuda:0: ...``), else
        that the check reported no value for it.
        """
        if self.sku is None:
            return []
        seen = {m.name for m in self.metrics}
        out = []
        for metric, thr in sorted(self.sku.threshold_map(self.check).items()):
            if metric in seen:
                continue
            stem = metric.split("_")[0]
            said = [f"{k}: {v}" for k, v in self.details.items() if stem in str(k)]
            bound = " ".join(f"{b} {getattr(thr, b):g}" for b in ("min", "max") if getattr(thr, b) is not None)
            out.append(
                f"threshold {metric} ({bound} {thr.unit}, {thr.source}) not measured: "
                f"{'; '.join(said) if said else 'the check reported no value for it'}"
            )
        return out

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


def _number(value: Any) -> float | None:
    """``value`` as a float (None when it is None, a bool or not a number)."""
    if value is None or isinstance(value, bool):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def note_probe_run(judge: Judge, ctx: RunContext, probe: Probe, node: Node, doc: dict[str, Any] | None) -> None:
    """Record on ``judge`` what ran for ``node``: the probe's evidence log, the command line
    sent (``details.requested``) and what the probe says took effect (``details.effective``,
    from ``doc``; None when it printed no document). The ``measure`` fixture does this for
    every check; a check that reads a probe's documents itself (a fleet-level comparison)
    calls it for its own node."""
    judge.log = ctx.phases.log_path(probe.name, node.name)
    res = ctx.phases.cached(probe.name) or {}
    if node.name in res:
        judge.detail("requested", {"command": res[node.name].command})
    if doc is not None:
        judge.detail("effective", effective_of(doc))
