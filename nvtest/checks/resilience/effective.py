"""Effective training time: the fraction of wall time spent advancing the model.

First-order model (Young 1974, Daly 2006), per unit of wall time::

    effective = 1 - C / T - (T / 2 + R) / M

with
    M  mean time between failures of the whole job, seconds (node MTBF / nodes),
    T  checkpoint interval, seconds of training between two checkpoints,
    C  time a checkpoint blocks training, seconds (size / write bandwidth of the tier),
    R  restart time after a failure, seconds: detection + restart + reload + first step
       (the measured ``recovery_s`` of the in-job drill).

Terms: ``C / T`` is the share of time spent saving; a failure lands on average
half-way through an interval, so ``T / 2`` of training is redone, plus ``R``
of restarting, once per ``M`` on average.

Assumptions: failures are independent and exponentially distributed (constant
rate 1/M); T, C and R are small against M (first order: two failures within one
interval are neglected); checkpoints are synchronous (an asynchronous save that
overlaps training makes C the blocking part only); a restart resumes from the
newest checkpoint, which is never lost.  Clamped to [0, 1].

Optimal intervals: Young ``T = sqrt(2 C M)``; Daly ``T = sqrt(2 C (M + R)) - C``
(for C < 2M).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

__all__ = [
    "EffectiveTime",
    "FORMULA",
    "daly_interval",
    "effective_fraction",
    "estimate",
    "young_interval",
]

FORMULA = "effective = 1 - C/T - (T/2 + R)/M  (C save s, T interval s, R restart s, M job MTBF s)"


def effective_fraction(interval_s: float, save_s: float, restart_s: float, mtbf_s: float) -> float:
    """``1 - C/T - (T/2 + R)/M`` clamped to [0, 1].

    Raises:
        ValueError: a non-positive interval or MTBF, or a negative time.
    """
    if interval_s <= 0 or mtbf_s <= 0:
        raise ValueError(f"interval ({interval_s}) and MTBF ({mtbf_s}) must be > 0")
    if save_s < 0 or restart_s < 0:
        raise ValueError(f"save ({save_s}) and restart ({restart_s}) times must be >= 0")
    value = 1.0 - save_s / interval_s - (interval_s / 2.0 + restart_s) / mtbf_s
    return min(1.0, max(0.0, value))


def young_interval(save_s: float, mtbf_s: float) -> float:
    """Young's optimal checkpoint interval ``sqrt(2 C M)``, seconds."""
    return math.sqrt(2.0 * save_s * mtbf_s)


def daly_interval(save_s: float, mtbf_s: float, restart_s: float) -> float:
    """Daly's first-order optimum ``sqrt(2 C (M + R)) - C`` (C < 2M), else M, seconds."""
    if save_s >= 2.0 * mtbf_s:
        return mtbf_s
    return math.sqrt(2.0 * save_s * (mtbf_s + restart_s)) - save_s


@dataclass(frozen=True)
class EffectiveTime:
    """An estimate with its inputs, for a report's details."""

    formula: str
    mtbf_s: float
    interval_s: float
    save_s: float
    restart_s: float
    effective_fraction: float
    save_share: float
    failure_share: float
    young_interval_s: float
    daly_interval_s: float
    effective_at_daly: float
    assumptions: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


ASSUMPTIONS = (
    "independent failures at a constant rate 1/M; T, C, R small against M; synchronous "
    "checkpoints (C = blocking part); restart resumes from the newest checkpoint"
)


def estimate(mtbf_s: float, interval_s: float, save_s: float, restart_s: float) -> EffectiveTime:
    """The effective fraction at ``interval_s`` and at Daly's optimum, with the shares of each loss."""
    daly = max(daly_interval(save_s, mtbf_s, restart_s), 1e-9)
    return EffectiveTime(
        formula=FORMULA,
        mtbf_s=mtbf_s,
        interval_s=interval_s,
        save_s=save_s,
        restart_s=restart_s,
        effective_fraction=effective_fraction(interval_s, save_s, restart_s, mtbf_s),
        save_share=save_s / interval_s,
        failure_share=(interval_s / 2.0 + restart_s) / mtbf_s,
        young_interval_s=young_interval(save_s, mtbf_s),
        daly_interval_s=daly,
        effective_at_daly=effective_fraction(daly, save_s, restart_s, mtbf_s),
        assumptions=ASSUMPTIONS,
    )
