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
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    ValidationError,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

from nvtest.verdict import Verdict

__all__ = [
    "CkptRecipe",
    "Evaluation",
    "Overlay",
    "ResilienceRecipe",
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

#: Units whose values cannot be negative: a negative bound in one is a config error.
NON_NEGATIVE_UNITS = KNOWN_UNITS - {"C", "%", "ratio"}


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
        if self.unit in NON_NEGATIVE_UNITS:
            for name in ("min", "max", "warn_min", "warn_max"):
                value = getattr(self, name)
                if value is not None and value < 0:
                    raise ValueError(f"{name} {value:g} is negative; a value in {self.unit} cannot be")
        # the fail bounds enclose the warn band: min <= warn_min <= warn_max <= max
        for low, high in _ORDERED_BOUNDS:
            lo, hi = getattr(self, low), getattr(self, high)
            if lo is not None and hi is not None and lo > hi:
                raise ValueError(f"{low} {lo:g} > {high} {hi:g}")
        return self


_ORDERED_BOUNDS = (
    ("min", "max"),
    ("warn_min", "warn_max"),
    ("min", "warn_min"),
    ("warn_max", "max"),
    ("min", "warn_max"),
    ("warn_min", "max"),
)


class SkuMatch(BaseModel):
    """How a node is recognised as this SKU (all given fields must match)."""

    model_config = ConfigDict(extra="forbid")

    gpu_name: str | None = Field(default=None, description="regular expression, case-insensitive, on the GPU product name")
    gpu_count: int | None = None
    pci_device_ids: list[str] | None = Field(
        default=None,
        description="PCI device ids (vendor 10de) of the SKU's GPUs, lower-case hex (2330): the bus "
        "identifies the SKU even when nvidia-smi cannot talk to the driver",
    )
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
    hcas: list[str] | None = Field(
        default=None,
        description="names of the compute HCAs (ibstat), when the board fixes them; otherwise the "
        "fleet's majority is the golden shape",
    )


PositiveInt = Annotated[StrictInt, Field(gt=0)]
NonNegativeInt = Annotated[StrictInt, Field(ge=0)]
PositiveFloat = Annotated[StrictFloat, Field(gt=0)]
NonNegativeFloat = Annotated[StrictFloat, Field(ge=0)]


class CkptRecipe(BaseModel):
    """Recipe ``ckpt``: the checkpoint tier probe's sizes (MiB) and directories."""

    model_config = ConfigDict(extra="forbid")

    size_mib: PositiveFloat = 2048
    quick_size_mib: PositiveFloat = 256
    chunk_mib: PositiveFloat = 16
    mem_path: Annotated[StrictStr, Field(min_length=1)] = "/dev/shm/nvtest-ckpt"
    local_path: Annotated[StrictStr, Field(min_length=1)] = "/var/tmp/nvtest-ckpt"
    shared_path: Annotated[StrictStr, Field(min_length=1)] | None = None


class ResilienceTargets(BaseModel):
    """Recipe ``resilience.targets``: seconds; past a target warns; null: none."""

    model_config = ConfigDict(extra="forbid")

    injob_recovery_s: NonNegativeFloat | None = 120.0
    inprocess_recovery_s: NonNegativeFloat | None = 20.0
    requeue_training_again_s: NonNegativeFloat | None = None


class ResilienceEstimate(BaseModel):
    """Recipe ``resilience.estimate``: the effective-training-time model's inputs."""

    model_config = ConfigDict(extra="forbid")

    mtbf_h: PositiveFloat = 24.0
    interval_min: PositiveFloat = 30.0
    save_gib: PositiveFloat = 8.0
    tier: Literal["mem", "local", "shared"] = "local"


class ResilienceRecipe(BaseModel):
    """Recipe ``resilience``: the restart and straggler drills (docs/resilience.md)."""

    model_config = ConfigDict(extra="forbid")

    nproc: PositiveInt = 2
    steps: PositiveInt = 30
    ckpt_every: PositiveInt = 5
    kill_rank: NonNegativeInt = 1
    kill_seed: StrictInt | None = None
    launcher: Literal["auto", "ft_launcher", "torchrun"] = "auto"
    slow_rank: NonNegativeInt = 1
    slow_s: NonNegativeFloat = 0.0
    straggler_min_score: Annotated[StrictFloat, Field(gt=0, le=1)] = 0.75
    requeue_release_hold: StrictBool = False
    targets: ResilienceTargets = ResilienceTargets()
    estimate: ResilienceEstimate = ResilienceEstimate()


class _RecipeSections(BaseModel):
    """The recipe sections with a schema; the others stay free-form."""

    model_config = ConfigDict(extra="allow")

    resilience: ResilienceRecipe | None = None
    ckpt: CkptRecipe | None = None


def _recipe_error(loc: tuple[str, ...], message: str, value: Any) -> ValidationError:
    detail = InitErrorDetails(type=PydanticCustomError("recipe", message), loc=loc, input=value)
    return ValidationError.from_exception_data("recipe", [detail])


def _check_recipe(recipe: dict[str, Any]) -> dict[str, Any]:
    """Validate the ``resilience`` and ``ckpt`` sections of a recipe mapping (keys,
    types, ranges, and the cross-key rules over the defaults); return it unchanged."""
    sections = _RecipeSections.model_validate(recipe)
    given = recipe.get("resilience") or {}
    res = sections.resilience or ResilienceRecipe()
    if res.ckpt_every >= res.steps:
        key = "ckpt_every" if "ckpt_every" in given or "steps" not in given else "steps"
        raise _recipe_error(
            ("resilience", key),
            f"ckpt_every {res.ckpt_every} must be less than steps {res.steps} "
            "(the drills kill a rank after the first checkpoint)",
            given.get(key),
        )
    for key in ("kill_rank", "slow_rank") if res.slow_s > 0 else ("kill_rank",):
        if getattr(res, key) >= res.nproc:
            blame = key if key in given or "nproc" not in given else "nproc"
            raise _recipe_error(
                ("resilience", blame),
                f"{key} {getattr(res, key)} is not a rank of nproc {res.nproc} (0..{res.nproc - 1})",
                given.get(blame),
            )
    return recipe


#: A recipe mapping: free-form per check, with ``resilience`` and ``ckpt`` validated.
Recipe = Annotated[dict[str, Any], AfterValidator(_check_recipe)]


class SkuProfile(BaseModel):
    """A SKU profile file (``configs/skus/*.yaml``), schema version 1."""

    model_config = ConfigDict(extra="forbid")

    schema_version: Literal[1] = 1
    name: str
    description: str
    match: SkuMatch = SkuMatch()
    expect: SkuExpect = SkuExpect()
    recipe: Recipe = Field(default_factory=dict, description="per-check parameters: sizes, dtypes, durations")
    thresholds: dict[str, dict[str, Threshold]] = Field(default_factory=dict)
    sources: dict[str, str] = Field(default_factory=dict, description="abbreviation -> full reference")

    def threshold(self, check: str, metric: str) -> Threshold | None:
        """The threshold of ``check``/``metric``, or None."""
        return self.thresholds.get(check, {}).get(metric)

    def threshold_map(self, check: str) -> dict[str, Threshold]:
        """Every threshold of ``check``: metric -> :class:`Threshold` (empty when none)."""
        return dict(self.thresholds.get(check, {}))


class Overlay(BaseModel):
    """A site's overlay: thresholds and recipe values that replace a profile's."""

    model_config = ConfigDict(extra="forbid")

    schema_version: Literal[1] = 1
    name: str
    description: str | None = None
    applies_to: list[str] | None = Field(default=None, description="SKU names; None: all")
    recipe: Recipe = Field(default_factory=dict)
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
