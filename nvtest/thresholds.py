"""Thresholds as data: the schema of SKU profiles and overlays, and metric evaluation.

A SKU profile (``configs/skus/<name>.yaml``) gives, per check and metric, a
:class:`Threshold` with its unit and the source of its number::

    thresholds:
      stream:
        triad_gbps: {min: 1.0, unit: GB/s, source: "sanity floor"}

Evaluation (:func:`evaluate`) is pure: value + threshold -> verdict + reason.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from nvtest.verdict import Verdict

__all__ = [
    "Evaluation",
    "Overlay",
    "SkuExpect",
    "SkuMatch",
    "SkuProfile",
    "Threshold",
    "evaluate",
]

#: Units nvtest knows; a threshold with another unit is a config error.
KNOWN_UNITS = frozenset(
    {
        "GB/s",  # 10^9 bytes per second
        "Gb/s",  # 10^9 bits per second (perftest --report_gbits, link rates)
        "TB/s",
        "TFLOP/s",
        "GFLOP/s",
        "s",
        "ms",
        "us",
        "ns",
        "W",
        "C",
        "%",
        "count",
        "bool",
        "GiB",
        "MiB",
        "GT/s",
        "lanes",
        "ratio",
        "tokens/s",
    }
)


class Threshold(BaseModel):
    """Bounds for one metric.

    ``value < min`` or ``value > max`` fails; a value inside the bounds but below
    ``warn_min`` (or above ``warn_max``) warns. ``unit`` and ``source`` are required:
    a number without its unit and its origin is not accepted.
    """

    model_config = ConfigDict(extra="forbid")

    unit: str
    source: str
    min: float | None = None
    max: float | None = None
    warn_min: float | None = None
    warn_max: float | None = None
    proposed: bool = Field(default=False, description="a proposed default, to calibrate on a golden node")
    note: str | None = None

    @model_validator(mode="after")
    def _check(self) -> Threshold:
        if self.unit not in KNOWN_UNITS:
            raise ValueError(f"unknown unit {self.unit!r}; known: {', '.join(sorted(KNOWN_UNITS))}")
        if self.min is None and self.max is None and self.warn_min is None and self.warn_max is None:
            raise ValueError("a threshold needs at least one of min, max, warn_min, warn_max")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"min {self.min} > max {self.max}")
        return self


class SkuMatch(BaseModel):
    """How a node is recognised as this SKU (all given fields must match)."""

    model_config = ConfigDict(extra="forbid")

    gpu_name: str | None = Field(default=None, description="regular expression, case-insensitive, on the GPU product name")
    gpu_count: int | None = None
    gpu_memory_mib_min: int | None = None
    gpu_memory_mib_max: int | None = None


class SkuExpect(BaseModel):
    """What the node must have: counts, links and versions."""

    model_config = ConfigDict(extra="forbid")

    gpus: int | None = None
    nvswitches: int | None = None
    ib_hcas: int | None = None
    ib_rate_gbps: float | None = Field(default=None, description="per HCA port, Gb/s")
    nvlinks_per_gpu: int | None = None
    nvlink_gbps_per_link: float | None = Field(default=None, description="GB/s per link, as nvidia-smi nvlink -s reports")
    pcie_gen: int | None = None
    pcie_width: int | None = None
    min_driver: str | None = None
    ecc: bool | None = None


class SkuProfile(BaseModel):
    """A SKU profile file (``configs/skus/*.yaml``), schema version 1."""

    model_config = ConfigDict(extra="forbid")

    schema_version: Literal[1] = 1
    name: str
    description: str
    match: SkuMatch = SkuMatch()
    expect: SkuExpect = SkuExpect()
    recipe: dict[str, Any] = Field(default_factory=dict, description="per-check parameters: sizes, dtypes, durations")
    thresholds: dict[str, dict[str, Threshold]] = Field(default_factory=dict)
    sources: dict[str, str] = Field(default_factory=dict, description="abbreviation -> full reference")

    def threshold(self, check: str, metric: str) -> Threshold | None:
        """The threshold of ``check``/``metric``, or None."""
        return self.thresholds.get(check, {}).get(metric)


class Overlay(BaseModel):
    """A site's overlay: thresholds and recipe values that replace a profile's."""

    model_config = ConfigDict(extra="forbid")

    schema_version: Literal[1] = 1
    name: str
    description: str | None = None
    applies_to: list[str] | None = Field(default=None, description="SKU names; None: all")
    recipe: dict[str, Any] = Field(default_factory=dict)
    thresholds: dict[str, dict[str, Threshold]] = Field(default_factory=dict)


@dataclass(frozen=True)
class Evaluation:
    """The outcome of judging one value: verdict and a one-line reason."""

    verdict: Verdict
    reason: str


def _fmt(x: float) -> str:
    return f"{x:.4g}"


def evaluate(value: float | None, unit: str, threshold: Threshold | None) -> Evaluation:
    """Judge ``value`` (in ``unit``) against ``threshold``.

    - no threshold: ``pass`` ("measured only, no threshold"),
    - value None or not finite: ``error`` (a missing metric is an error, never a pass),
    - unit differs from the threshold's: ``error`` (never compare GB/s with Gb/s),
    - outside [min, max]: ``fail``; inside but past warn_min/warn_max: ``warn``.
    """
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return Evaluation(Verdict.ERROR, f"no valid measurement ({value!r})")
    if threshold is None:
        return Evaluation(Verdict.PASS, "measured only, no threshold")
    if unit != threshold.unit:
        return Evaluation(Verdict.ERROR, f"unit mismatch: measured in {unit}, threshold in {threshold.unit}")
    t = threshold
    if t.min is not None and value < t.min:
        return Evaluation(Verdict.FAIL, f"{_fmt(value)} {unit} < min {_fmt(t.min)} {unit}")
    if t.max is not None and value > t.max:
        return Evaluation(Verdict.FAIL, f"{_fmt(value)} {unit} > max {_fmt(t.max)} {unit}")
    if t.warn_min is not None and value < t.warn_min:
        return Evaluation(Verdict.WARN, f"{_fmt(value)} {unit} < warn_min {_fmt(t.warn_min)} {unit}")
    if t.warn_max is not None and value > t.warn_max:
        return Evaluation(Verdict.WARN, f"{_fmt(value)} {unit} > warn_max {_fmt(t.warn_max)} {unit}")
    parts = []
    if t.min is not None:
        parts.append(f">= {_fmt(t.min)}")
    if t.max is not None:
        parts.append(f"<= {_fmt(t.max)}")
    return Evaluation(Verdict.PASS, f"{_fmt(value)} {unit} {' and '.join(parts) or 'within warn band'}")
