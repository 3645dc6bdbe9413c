"""Node health logic: pure functions from parsed tool output to an :class:`Outcome`.

Each module judges one area from records of :mod:`nvtest.parsers` (or of a
small probe's ``key=value`` text) and the node's SKU profile; the checks in
``suites/health/`` fetch the raw output and hand the outcome to their Judge
with :func:`apply`. Tests call the same functions on corpus text.

=================  ===================================================================
module             checks
=================  ===================================================================
``gpus``           GPU count and model vs the SKU, lost GPUs, driver and CUDA versions
``ecc``            ECC mode, uncorrectable errors, retired pages, row remapping
``kernel_log``     Xid / SXid events in ``dmesg`` or ``journalctl -k``
``pcie``           PCIe width/speed per hop (LnkCap vs LnkSta) for GPUs and NICs
``nvlink``         NVLink links active at speed; fabric manager on NVSwitch systems
``uniformity``     software and firmware versions against the fleet majority
``dcgm``           ``dcgmi diag`` results (Skip is not Pass)
``thermal``        clocks, throttle reasons and temperature under a sustained GEMM
=================  ===================================================================
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from nvtest.errors import ProbeError, ProbeSkip
from nvtest.verdict import Verdict

if TYPE_CHECKING:
    from nvtest.checks.api import Judge

__all__ = ["Measured", "Outcome", "apply"]


@dataclass(frozen=True)
class Measured:
    """One value to judge: ``name`` (with its unit in it), value, unit, labels."""

    name: str
    value: float | None
    unit: str
    labels: dict[str, str] = field(default_factory=dict)


@dataclass
class Outcome:
    """What a health function found on one node.

    ``failures`` fail the item, ``warnings`` warn it, ``notes`` are shown only;
    ``skip`` (not applicable, with the reason) and ``error`` (could not judge)
    replace every other finding.
    """

    metrics: list[Measured] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)
    skip: str | None = None
    error: str | None = None

    def measure(self, name: str, value: float | None, unit: str, **labels: Any) -> None:
        self.metrics.append(Measured(name, value, unit, {k: str(v) for k, v in labels.items()}))

    def fail(self, reason: str) -> None:
        self.failures.append(reason)

    def warn(self, reason: str) -> None:
        self.warnings.append(reason)

    def note(self, text: str) -> None:
        self.notes.append(text)

    @property
    def verdict(self) -> Verdict:
        """The verdict of the findings alone (metric thresholds are the Judge's)."""
        if self.skip is not None:
            return Verdict.SKIP
        if self.failures:
            return Verdict.FAIL
        if self.error is not None:
            return Verdict.ERROR
        return Verdict.WARN if self.warnings else Verdict.PASS

    def text(self) -> str:
        """Every finding on one line (for assertions and logs)."""
        parts = [self.skip or "", self.error or "", *self.failures, *self.warnings, *self.notes]
        return "; ".join(p for p in parts if p)


def skipped(reason: str) -> Outcome:
    """An outcome that says the check does not apply here."""
    return Outcome(skip=reason)


def apply(outcome: Outcome, judge: Judge) -> None:
    """Record ``outcome`` on ``judge``.

    Raises:
        ProbeSkip: ``outcome.skip`` is set (the item is skipped with that reason).
        ProbeError: ``outcome.error`` is set and nothing failed (an ``error`` verdict).
    """
    if outcome.skip is not None:
        raise ProbeSkip(outcome.skip)
    for m in outcome.metrics:
        judge(m.name, m.value, m.unit, **m.labels)
    for f in outcome.failures:
        judge.fail(f)
    for w in outcome.warnings:
        judge.warn(w)
    if outcome.notes:
        judge.detail("notes", list(outcome.notes))
    for k, v in outcome.details.items():
        judge.detail(k, v)
    if outcome.error is not None and not outcome.failures:
        raise ProbeError(outcome.error)
