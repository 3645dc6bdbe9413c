"""Thresholds as data: the schema of SKU profiles and overlays, and metric evaluation.

A SKU profile (``configs/skus/<name>.yaml``) gives, per check and metric, a
:class:`Threshold` with its unit and the source of its number::

    thresholds:
      stream:
        triad_gbps: {min: 1.0, unit: GB/s, source: "sanity floor"}

Every threshold names a (check, metric) of the metric catalog
(:mod:`nvtest.config.metrics`) in its declared unit, with finite numeric bounds;
``peaks:`` holds the hardware's theoretical figures the plausibility bounds use.

Evaluation is pure: :func:`evaluate` (value + threshold -> verdict + reason) and
:func:`assess` (declared? plausible? then the threshold), the one judgement of a
measured value that the Judge, the pair jobs and ``nvtest evaluate`` share.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
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

from nvtest.config.loader import KeysFrom
from nvtest.config.metrics import (
    KNOWN_UNITS,
    PEAK_KEYS,
    Bound,
    Hardware,
    check_names,
    declared,
    metric_names,
    plausible_bounds,
    suggest,
)
from nvtest.config.recipes import (
    BugReportRecipe,
    BurninRecipe,
    CollectivesMultinodeRecipe,
    CollectivesRecipe,
    ConfigRecipe,
    DcgmDiagRecipe,
    FleetRecipe,
    GateRecipe,
    GemmRecipe,
    IbPortsRecipe,
    IbWriteBwRecipe,
    MpiRecipe,
    NcclMultinodeRecipe,
    NcclSectionRecipe,
    TcpBwRecipe,
    ThermalRecipe,
    TrainMultinodeRecipe,
    TrainSmokeRecipe,
)
from nvtest.config.workload_recipes import InferenceRecipe, SdcRecipe
from nvtest.verdict import Verdict

__all__ = [
    "IMPLAUSIBLE",
    "METRIC_UNDECLARED",
    "METRIC_UNIT",
    "OUTSIDE_THRESHOLD",
    "UNIT_MISMATCH",
    "Assessment",
    "CkptRecipe",
    "Evaluation",
    "Overlay",
    "Peak",
    "RecipeSections",
    "ResilienceRecipe",
    "SkuExpect",
    "SkuMatch",
    "SkuProfile",
    "Threshold",
    "assess",
    "evaluate",
    "validate_thresholds",
]

#: Units whose values cannot be negative: a negative bound in one is a config error.
NON_NEGATIVE_UNITS = KNOWN_UNITS - {"C", "%", "ratio"}


def _bound_number(value: Any) -> Any:
    """A threshold bound as a number: YAML 1.1 reads ``1e9`` (no dot) as a string, which is
    taken as the number it spells; ``true``/``false`` and other strings are errors."""
    if isinstance(value, bool):
        raise ValueError(f"must be a number, not {str(value).lower()}")
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            raise ValueError(f"must be a number, not {value!r}") from None
    return value


#: A bound in a threshold: a finite number (not true/false, not .nan or .inf).
FiniteNumber = Annotated[float, BeforeValidator(_bound_number), Field(allow_inf_nan=False)]


class Threshold(BaseModel):
    """Bounds for one metric.

    ``value < min`` or ``value > max`` fails; a value inside the bounds but below
    ``warn_min`` (or above ``warn_max``) warns. ``unit`` and ``source`` are required:
    a number without its unit and its origin is not accepted.
    """

    model_config = ConfigDict(extra="forbid")

    unit: str
    source: str
    min: FiniteNumber | None = None
    max: FiniteNumber | None = None
    warn_min: FiniteNumber | None = None
    warn_max: FiniteNumber | None = None
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

    gpu_name: str | None = Field(
        default=None, description="regular expression, case-insensitive, on the GPU product name"
    )
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
    mig: bool | None = Field(
        default=None,
        description="True: the GPUs run in MIG mode; unset or False: whole GPUs (a GPU with MIG "
        "enabled fails, a leftover configuration)",
    )
    ib_mtu: int | None = Field(
        default=None,
        description="active_mtu of every active InfiniBand port, bytes (ibv_devinfo); RoCE ports "
        "and a profile without it: uniform across the node's HCAs and the fleet's majority",
    )
    nvlinks_per_gpu: int | None = None
    nvlink_gbps_per_link: float | None = Field(
        default=None, description="GB/s per link, as nvidia-smi nvlink -s reports"
    )
    imex: bool | None = Field(
        default=None,
        description="True: the GPUs share memory with other nodes over multi-node NVLink (GB200 "
        "NVL72): an IMEX channel, the nvidia-imex service and its domain are checked, and the "
        "multi-node NVLink bandwidth is measured",
    )
    nvls: bool | None = Field(
        default=None,
        description="True: NVLink SHARP (NVSwitch multicast: HGX H100/H200/B200, GB200 NVL72) is "
        "expected; an all_reduce whose NCCL INFO log says NVLS is not available, or failed to "
        "bind its multicast memory, fails naming NCCL's line",
    )
    collnet: bool | None = Field(
        default=None,
        description="True: the site runs the IB SHARP (CollNet) plugin; a multi-node all_reduce "
        "whose NCCL INFO log shows no CollNet connected fails (default off)",
    )
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
    """Recipe ``ckpt``: the checkpoint tier probe's sizes (MiB) and directories.

    ``shared_path``: the site's shared (checkpoint) filesystem; None: the site declares none
    (``shared_fs`` and ``ckpt_shared`` skip saying so). ``shared_deadline_s``: seconds the
    shared path has to answer, take a write and be measured (a hung mount is a failure named
    at the step it stopped at, in bounded time).
    """

    model_config = ConfigDict(extra="forbid")

    size_mib: PositiveFloat = 2048
    quick_size_mib: PositiveFloat = 256
    chunk_mib: PositiveFloat = 16
    mem_path: Annotated[StrictStr, Field(min_length=1)] = "/dev/shm/nvtest-ckpt"
    local_path: Annotated[StrictStr, Field(min_length=1)] = "/var/tmp/nvtest-ckpt"
    shared_path: Annotated[StrictStr, Field(min_length=1)] | None = None
    shared_deadline_s: Annotated[StrictFloat | StrictInt, Field(gt=0, le=3000)] = 60


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
    #: the requeue drill's rendezvous port (MASTER_PORT); the node that sorts n-th uses port + n
    requeue_port: Annotated[StrictInt, Field(ge=1024, le=65000)] = 29650
    targets: ResilienceTargets = ResilienceTargets()
    estimate: ResilienceEstimate = ResilienceEstimate()


class RecipeSections(BaseModel):
    """The whole ``recipe:`` mapping: every section a check reads, each with its schema
    (:mod:`nvtest.config.recipes`); an unknown section is an error naming the nearest one."""

    model_config = ConfigDict(extra="forbid")

    resilience: ResilienceRecipe | None = None
    ckpt: CkptRecipe | None = None
    inference: InferenceRecipe | None = None
    sdc: SdcRecipe | None = None
    gemm: GemmRecipe | None = None
    burnin: BurninRecipe | None = None
    thermal: ThermalRecipe | None = None
    dcgm_diag: DcgmDiagRecipe | None = None
    train_smoke: TrainSmokeRecipe | None = None
    train_multinode: TrainMultinodeRecipe | None = None
    config: ConfigRecipe | None = None
    collectives: CollectivesRecipe | None = None
    collectives_multinode: CollectivesMultinodeRecipe | None = None
    mpi: MpiRecipe | None = None
    tcp_bw: TcpBwRecipe | None = None
    ib_write_bw: IbWriteBwRecipe | None = None
    ib_ports: IbPortsRecipe | None = None
    nccl: NcclSectionRecipe | None = None
    nccl_multinode: NcclMultinodeRecipe | None = None
    fleet: FleetRecipe | None = None
    gate: GateRecipe | None = None
    bug_report: BugReportRecipe | None = None


def _recipe_error(loc: tuple[str, ...], message: str, value: Any) -> ValidationError:
    detail = InitErrorDetails(type=PydanticCustomError("recipe", message), loc=loc, input=value)
    return ValidationError.from_exception_data("recipe", [detail])


def _check_recipe(recipe: dict[str, Any]) -> dict[str, Any]:
    """Validate every section of a recipe mapping against :class:`RecipeSections` (section
    names, keys, types, ranges, and the cross-key rules over the defaults); return it unchanged."""
    sections = RecipeSections.model_validate(recipe)
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


#: A recipe mapping, every section validated by :class:`RecipeSections` (the metadata names
#: the model, so that the loader suggests the nearest section or key of a misspelt one).
Recipe = Annotated[dict[str, Any], AfterValidator(_check_recipe), KeysFrom(RecipeSections)]


class Peak(BaseModel):
    """One theoretical figure of the hardware (``peaks:`` of a profile), with its source.

    Keys and units are :data:`nvtest.config.metrics.PEAK_KEYS` (``hbm_gbps`` GB/s,
    ``bf16_tflops`` TFLOP/s dense per GPU, ...); the plausibility bounds use them.
    """

    model_config = ConfigDict(extra="forbid")

    value: Annotated[float, Field(strict=True, allow_inf_nan=False, gt=0)]
    unit: str
    source: str


def _error(loc: tuple[str, ...], message: str, value: Any) -> ValidationError:
    detail = InitErrorDetails(type=PydanticCustomError("catalog", message), loc=loc, input=value)
    return ValidationError.from_exception_data("catalog", [detail])


def validate_thresholds(thresholds: dict[str, dict[str, Threshold]]) -> dict[str, dict[str, Threshold]]:
    """Every threshold names a declared (check, metric) in its declared unit.

    Raises:
        ValidationError: at ``(check,)`` or ``(check, metric)``, naming the nearest
            declared name (a profile or overlay loaded through the loader becomes a
            ConfigError with file and line).
    """
    checks = check_names()
    for check, metrics in thresholds.items():
        if check not in checks:
            raise _error((check,), f"no check {check!r} declares a metric{suggest(check, checks)}", check)
        for metric, thr in metrics.items():
            spec = declared(check, metric)
            if spec is None:
                names = metric_names(check)
                near = suggest(metric, names) or f"; {check} measures: {', '.join(names)}"
                raise _error((check, metric), f"{check} has no metric {metric!r}{near}", metric)
            if thr.unit != spec.unit:
                raise _error(
                    (check, metric, "unit"),
                    f"unit {thr.unit!r} differs from the unit {check}.{metric} is measured in, {spec.unit!r}",
                    thr.unit,
                )
    return thresholds


def _check_peaks(peaks: dict[str, Peak]) -> dict[str, Peak]:
    for key, peak in peaks.items():
        if key not in PEAK_KEYS:
            raise _error(
                (key,),
                f"unknown peak {key!r}{suggest(key, sorted(PEAK_KEYS)) or '; known: ' + ', '.join(PEAK_KEYS)}",
                key,
            )
        if peak.unit != PEAK_KEYS[key]:
            raise _error((key, "unit"), f"peak {key} is in {PEAK_KEYS[key]}, not {peak.unit!r}", peak.unit)
    return peaks


#: ``thresholds:`` of a profile or overlay: check -> metric -> Threshold, each declared.
Thresholds = Annotated[dict[str, dict[str, Threshold]], AfterValidator(validate_thresholds)]
#: ``peaks:`` of a profile: key of PEAK_KEYS -> Peak.
Peaks = Annotated[dict[str, Peak], AfterValidator(_check_peaks)]


class SkuProfile(BaseModel):
    """A SKU profile file (``configs/skus/*.yaml``), schema version 1."""

    model_config = ConfigDict(extra="forbid")

    schema_version: Literal[1] = 1
    name: str
    description: str
    match: SkuMatch = SkuMatch()
    expect: SkuExpect = SkuExpect()
    recipe: Recipe = Field(default_factory=dict, description="per-check parameters: sizes, dtypes, durations")
    thresholds: Thresholds = Field(default_factory=dict)
    peaks: Peaks = Field(default_factory=dict, description="theoretical figures for the plausibility bounds")
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
    thresholds: Thresholds = Field(default_factory=dict)


@dataclass(frozen=True)
class Evaluation:
    """The outcome of judging one value: verdict, a one-line reason and the cause key of a
    value the threshold fails or cannot judge (:data:`OUTSIDE_THRESHOLD`, :data:`UNIT_MISMATCH`;
    None otherwise)."""

    verdict: Verdict
    reason: str
    cause: str | None = None


#: The cause keys of a threshold's judgement: a value below its minimum or above its maximum;
#: a value in another unit than its threshold (never compared).
OUTSIDE_THRESHOLD = "threshold:below_floor"
UNIT_MISMATCH = "threshold:unit_mismatch"
#: The cause keys of a value never judged: a metric the catalog does not declare, or measured
#: in another unit than declared (the check's mistake); a value outside its physical bound.
METRIC_UNDECLARED = "metric:undeclared"
METRIC_UNIT = "metric:unit"
IMPLAUSIBLE = "metric:implausible"


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
        return Evaluation(
            Verdict.ERROR, f"unit mismatch: measured in {unit}, threshold in {threshold.unit}", UNIT_MISMATCH
        )
    t = threshold
    if t.min is not None and value < t.min:
        return Evaluation(Verdict.FAIL, f"{_fmt(value)} {unit} < min {_fmt(t.min)} {unit}", OUTSIDE_THRESHOLD)
    if t.max is not None and value > t.max:
        return Evaluation(Verdict.FAIL, f"{_fmt(value)} {unit} > max {_fmt(t.max)} {unit}", OUTSIDE_THRESHOLD)
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


@dataclass(frozen=True)
class Assessment:
    """The judgement of one measured value (:func:`assess`).

    Attributes:
        verdict, reason: as :class:`Evaluation`.
        threshold: the threshold judged against (None: none, or not reached).
        bound: the physical bound checked (None when the metric is undeclared or has no value).
        implausible: the value was outside ``bound`` (an ``error``, never judged).
        cause: as :class:`Evaluation`.
    """

    verdict: Verdict
    reason: str
    threshold: Threshold | None = None
    bound: Bound | None = None
    implausible: bool = False
    cause: str | None = None


RERUN_HINT = "rerun the check (nvtest run --rerun-failed RUN_DIR)"


def assess(
    check: str,
    name: str,
    value: float | None,
    unit: str,
    profile: SkuProfile | None,
    hardware: Hardware | None = None,
    labels: dict[str, str] | None = None,
    raw: str | None = None,
) -> Assessment:
    """Judge one measured value of ``check``: declared, in its unit, plausible, then the threshold.

    - a metric not in the catalog: ``error`` "metric not declared" (fail closed: a new
      check declares what it measures in :mod:`nvtest.config.metrics`);
    - measured in another unit than declared: ``error``;
    - None or not finite: ``error`` (see :func:`evaluate`);
    - outside its physical bound on ``hardware`` (default: the profile alone):
      ``error`` "implausible: ..." with ``raw`` (the tool's line, where the check gives it)
      and a rerun hint; the threshold is not applied;
    - else :func:`evaluate` against the profile's threshold.
    """
    spec = declared(check, name)
    if spec is None:
        names = metric_names(check)
        near = suggest(name, names) if names else suggest(check, check_names())
        return Assessment(
            Verdict.ERROR,
            f"metric not declared: {check}.{name} is not in the metric catalog (nvtest/config/metrics.py){near}",
            cause=METRIC_UNDECLARED,
        )
    if unit != spec.unit:
        return Assessment(
            Verdict.ERROR, f"measured in {unit}, but {check}.{name} is declared in {spec.unit}", cause=METRIC_UNIT
        )
    if value is None or not math.isfinite(value):
        return Assessment(Verdict.ERROR, f"no valid measurement ({value!r})")
    bound = plausible_bounds(spec, name, hardware or Hardware(profile=profile), labels)
    why = bound.violation(value, unit)
    if why is not None:
        said = f"raw: {raw.strip()[:300]!r}" if raw else f"as recorded: {value!r}"
        return Assessment(
            Verdict.ERROR, f"implausible: {why}; {said}; not judged: {RERUN_HINT}", None, bound, True, IMPLAUSIBLE
        )
    thr = profile.threshold(check, name) if profile else None
    ev = evaluate(value, unit, thr)
    return Assessment(ev.verdict, ev.reason, thr, bound, cause=ev.cause)
