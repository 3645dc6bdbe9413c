"""Schemas of the ``recipe:`` sections of a SKU profile or overlay, one per section a check reads.

Every section name a check, job or the gate reads (``sku.recipe.get("gemm")``,
``node_recipe(ctx, node, "mpi")``, ...) has a pydantic model here (or, for ``resilience``,
``ckpt``, ``inference`` and ``sdc``, in :mod:`nvtest.config.thresholds` and
:mod:`nvtest.config.workload_recipes`), each with ``extra="forbid"``: a misspelt section
(``recipe: {gaet: ...}``) or key (``recipe.gemm.dtyeps``) is a configuration error naming
the file, the line and the nearest name, raised where the profile or overlay is loaded,
by every verb. The recipe stays a plain mapping after validation (suites read it as one);
the defaults of a missing key are the reader's own.

:class:`nvtest.config.thresholds.RecipeSections` is the one model of a whole recipe
(tests/config/test_recipe_sections.py walks it against the readers in nvtest/ and suites/).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictStr

__all__ = [
    "BugReportRecipe",
    "BurninRecipe",
    "CollectivesMultinodeRecipe",
    "CollectivesRecipe",
    "ConfigRecipe",
    "DcgmDiagRecipe",
    "FleetRecipe",
    "GateRecipe",
    "GemmRecipe",
    "IbPortsRecipe",
    "IbWriteBwRecipe",
    "MpiRecipe",
    "NcclMultinodeRecipe",
    "NcclSectionRecipe",
    "PairsRecipe",
    "TcpBwRecipe",
    "ThermalRecipe",
    "TrainMultinodeRecipe",
    "TrainSmokeRecipe",
]

PositiveInt = Annotated[int, Field(gt=0)]
NonNegativeInt = Annotated[int, Field(ge=0)]
PositiveFloat = Annotated[float, Field(gt=0, allow_inf_nan=False)]
NonNegativeFloat = Annotated[float, Field(ge=0, allow_inf_nan=False)]
#: A comma-separated list of message sizes in bytes (``"65536,4194304"``) or one size.
Sizes = Annotated[str, Field(pattern=r"^\s*\d+(\s*,\s*\d+)*\s*$")] | PositiveInt


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class GemmRecipe(_Section):
    """Recipe ``gemm`` (suites/compute/test_gemm.py): dtypes, matrix size, seconds per dtype."""

    dtypes: list[StrictStr] | None = None
    size: PositiveInt | None = None
    min_seconds: PositiveFloat | None = None


class BurninRecipe(_Section):
    """Recipe ``burnin`` (suites/compute/test_burnin.py): seconds of the burn, its dtype."""

    seconds: PositiveFloat | None = None
    dtype: StrictStr | None = None


class ThermalRecipe(BurninRecipe):
    """Recipe ``thermal`` (suites/health/test_thermal.py): seconds under load, its dtype."""


class DcgmDiagRecipe(_Section):
    """Recipe ``dcgm_diag`` (suites/health/test_dcgm.py): ``dcgmi diag -r`` level, tests that must
    run, and its deadline in seconds (``timeout_s``; default 3600, scaled by ``--timeout-scale``)."""

    level: Literal[1, 2, 3, 4] | None = None
    required: list[StrictStr] | None = None
    timeout_s: PositiveFloat | None = None


class TrainSmokeRecipe(_Section):
    """Recipe ``train_smoke`` (suites/workload/test_train_smoke.py): ranks and steps."""

    nproc: PositiveInt | None = None
    steps: PositiveInt | None = None


class TrainMultinodeRecipe(_Section):
    """Recipe ``train_multinode``: ranks per node, steps, the job's deadline (s)."""

    nproc_per_node: PositiveInt | None = None
    steps: PositiveInt | None = None
    timeout_s: PositiveFloat | None = None


class ConfigRecipe(_Section):
    """Recipe ``config`` (the Playbook's audit): ``persistence_mode: expected|required|any``."""

    persistence_mode: Literal["expected", "required", "any"] | None = None


class CollectivesRecipe(_Section):
    """Recipe ``collectives`` (torch.distributed on one node): ranks, sizes (bytes), iterations, ops."""

    nproc: PositiveInt | None = None
    sizes: Sizes | None = None
    iters: PositiveInt | None = None
    ops: list[StrictStr] | None = None


class CollectivesMultinodeRecipe(_Section):
    """Recipe ``collectives_multinode``: as ``collectives``, per node, with the job's deadline (s)."""

    nproc_per_node: PositiveInt | None = None
    sizes: Sizes | None = None
    iters: PositiveInt | None = None
    ops: list[StrictStr] | None = None
    timeout_s: PositiveFloat | None = None


class MpiRecipe(_Section):
    """Recipe ``mpi`` (nvtest/jobs/mpi.py, suites/interconnect/test_mpi.py)."""

    sizes: Sizes | None = None
    iters: PositiveInt | None = None
    barriers: PositiveInt | None = None
    ranks_per_node: PositiveInt | None = None
    timeout_s: PositiveFloat | None = None
    rsh_agent: StrictStr | None = None
    tcp_if_include: StrictStr | None = None
    mca: dict[str, Any] | None = None


class PairsRecipe(_Section):
    """The ``pairs`` block of a pair check (nvtest/checks/interconnect/pair_check.py)."""

    schedule: StrictStr | None = None
    k: PositiveInt | None = None
    seed: int | None = None
    max_concurrent_pairs: PositiveInt | None = None


class TcpBwRecipe(_Section):
    """Recipe ``tcp_bw``: seconds and streams per pair, the pair schedule."""

    seconds: PositiveFloat | None = None
    streams: PositiveInt | None = None
    pairs: PairsRecipe | None = None


class IbWriteBwRecipe(_Section):
    """Recipe ``ib_write_bw`` (nvtest/jobs/pair_jobs.py PerftestPairJob)."""

    ib_port: PositiveInt | None = None
    size_bytes: PositiveInt | None = None
    seconds: PositiveFloat | None = None
    gid_index: NonNegativeInt | None = None
    use_cuda: StrictBool | None = None
    hcas: list[StrictStr] | None = None
    pairs: PairsRecipe | None = None


class IbPortsRecipe(_Section):
    """Recipe ``ib_ports`` (nvtest/checks/interconnect/rdma.py port_problems)."""

    hcas: list[StrictStr] | None = None
    link_layer: Literal["InfiniBand", "Ethernet"] | None = None


class NcclSectionRecipe(_Section):
    """Recipe ``nccl`` (nvtest/jobs/nccl.py NcclRecipe; sizes in bytes)."""

    ops: list[StrictStr] | None = None
    min_bytes: PositiveInt | None = None
    max_bytes: PositiveInt | None = None
    step_factor: PositiveInt | None = None
    plateau_bytes: PositiveInt | None = None
    iters: PositiveInt | None = None
    warmup_iters: NonNegativeInt | None = None
    tests_dir: StrictStr | None = None
    env: dict[str, str] | None = None


class NcclMultinodeRecipe(NcclSectionRecipe):
    """Recipe ``nccl_multinode``: as ``nccl``, and the pair schedule of its pair check."""

    pairs: PairsRecipe | None = None


class BugReportRecipe(_Section):
    """Recipe ``bug_report`` (nvtest/session/bug_report.py): at the end of a run, run
    ``nvidia-bug-report.sh`` on each node that failed, for its RMA bundle (``nvtest rma``).
    Off unless ``enabled``; ``timeout_s`` is its deadline on each node (seconds)."""

    enabled: StrictBool = False
    timeout_s: PositiveFloat = 300.0


class FleetRecipe(_Section):
    """Recipe ``fleet`` (nvtest/analysis/outliers.py FleetPolicy): how far from the fleet a value may be."""

    warn_below_pct: NonNegativeFloat | None = None
    robust_z: PositiveFloat | None = None
    min_delta_pct: NonNegativeFloat | None = None
    fail_below_pct: NonNegativeFloat | None = None
    min_samples: PositiveInt | None = None


#: The IB port counters the gate watches (nvtest/ops/gate/context.py IB_COUNTERS_SCRIPT).
IbCounter = Literal["symbol_error", "port_rcv_errors", "link_error_recovery", "link_downed"]


def _counter_limits() -> dict[IbCounter, float]:
    return {"symbol_error": 100.0, "port_rcv_errors": 100.0, "link_error_recovery": 10.0}


class GateRecipe(_Section):
    """Recipe ``gate`` (nvtest/ops/gate/recipe.py): the gate's site settings. Sizes in GiB, rates per hour."""

    disk_free_gib: dict[str, NonNegativeFloat] = Field(default_factory=lambda: {"/": 1.0, "/tmp": 1.0})
    memory_available_gib: NonNegativeFloat = 1.0
    mounts: list[StrictStr] = Field(default_factory=list)
    services: list[StrictStr] = Field(default_factory=list)
    hcas: list[StrictStr] = Field(default_factory=list)
    ib_counter_max_per_h: dict[IbCounter, NonNegativeFloat] = Field(default_factory=_counter_limits)
