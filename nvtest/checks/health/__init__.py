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

from typing import TYPE_CHECKING

from nvtest.errors import ProbeError, ProbeSkip
from nvtest.playbook.diagnosis import first_cause
from nvtest.verdict import Measured, Outcome

if TYPE_CHECKING:
    from nvtest.checks.api import Judge

__all__ = ["Measured", "Outcome", "apply"]


def skipped(reason: str) -> Outcome:
    """An outcome that says the check does not apply here."""
    return Outcome(skip=reason)


def apply(outcome: Outcome, judge: Judge) -> None:
    """Record ``outcome`` on ``judge``, its ``cause`` key included (on the Judge, and on the
    exception raised for an error).

    Raises:
        ProbeSkip: ``outcome.skip`` is set (the item is skipped with that reason).
        ProbeError: ``outcome.error`` is set and nothing failed (an ``error`` verdict).
    """
    if outcome.skip is not None:
        raise ProbeSkip(outcome.skip)
    # the warnings' keys too: the item's reason quotes its warnings beside its failures
    keyed = [outcome.cause, *(outcome.keys.get(f) for f in (*outcome.failures, *outcome.warnings))]
    if any(keyed):  # of several keyed findings, the one the Playbook diagnoses first
        judge.cause = first_cause([judge.cause, *keyed])
    for m in outcome.metrics:
        judge(m.name, m.value, m.unit, **m.labels)
    for f in outcome.failures:
        judge.fail(f)
    for w in outcome.warnings:
        judge.warn(w)
    if outcome.notes:
        judge.detail("notes", list(outcome.notes))
    if outcome.error is None and not (outcome.metrics or outcome.failures or outcome.warnings):
        # the check's logic looked and found nothing wrong: that is its judgement
        judge.passed("; ".join(outcome.notes) or "the check's findings: none")
    for k, v in outcome.details.items():
        judge.detail(k, v)
    if outcome.error is not None and not outcome.failures:
        raise ProbeError(outcome.error, cause=outcome.cause)
