"""The API a check (a pytest function in ``suites/``) is written with: where a check author starts.

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

from typing import TYPE_CHECKING, Any

from nvtest.config.thresholds import SkuProfile, evaluate
from nvtest.errors import NodeError, ProbeError, ProbeSkip
from nvtest.results import MetricResult
from nvtest.session.facts import NodeFacts
from nvtest.session.probe import ArgsFn, Probe, measure_probe, parse_probe_json, raw_output
from nvtest.verdict import Verdict, worst

if TYPE_CHECKING:
    from nvtest.session.context import RunContext

__all__ = [
    "ArgsFn",
    "Judge",
    "NodeError",
    "NodeFacts",
    "Probe",
    "ProbeError",
    "ProbeSkip",
    "measure_probe",
    "parse_probe_json",
    "raw_output",
]


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
