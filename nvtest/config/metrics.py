"""The metric catalog: what every check measures, in which unit, and its physical bounds.

One entry per (check, metric name or pattern). A pattern names its placeholder
(``{dtype}_tflops``, ``{kernel}_gbps``, ``{op}_busbw_gbps``, ``{direction}_gbps``);
:data:`PLACEHOLDERS` lists the values each placeholder takes, so every metric name
a check may judge is known in advance. The catalog is the one place that says so:

- the Judge (:class:`nvtest.checks.api.Judge`) refuses a metric that is not declared
  here (``error`` "metric not declared": a new check must declare what it measures),
  and one judged in another unit than declared;
- a threshold in a SKU profile or an overlay must name a declared (check, metric) in
  its declared unit (:func:`nvtest.config.thresholds.validate_thresholds`), with the
  nearest name suggested when not;
- :func:`lower_is_better` says which way a value is better, from its unit: the Judge writes
  it on every :class:`~nvtest.results.MetricResult`, the fleet outliers and the history's
  trends ask it of results.json's and the history's metrics;
- :func:`plausible_bounds` gives the physical bounds of a value from the hardware it
  ran on (:class:`Hardware`: the SKU profile's ``expect`` and ``peaks`` and the node's
  facts). A value outside them is ``error`` "implausible", never judged against a
  threshold, never in the fleet statistics.

Bound rules (:data:`BOUND_RULES`), each ``Hardware, labels -> Bound``; upper bounds
taken from a peak are multiplied by :data:`PEAK_MARGIN`:

=================  ====================================================================
rule               bound
=================  ====================================================================
``host_memory``    0 .. the profile's ``peaks.host_memory_gbps``, else
                   :data:`HOST_MEMORY_CEILING_GBPS` (GB/s)
``fleet_memory``   0 .. ``host_memory`` x the run's node count (aggregates over nodes)
``device_memory``  device ``cpu``: ``host_memory``; a GPU: ``peaks.hbm_gbps``, else
                   :data:`GPU_MEMORY_CEILING_GBPS`
``host_link``      0 .. one direction of the GPU's host link: ``peaks.host_link_gbps``,
                   else the node's fastest GPU PCIe link (``nvidia-smi -q -x`` max gen x
                   max width), else the profile's ``expect.pcie_gen`` x ``pcie_width``,
                   else PCIe Gen6 x16; ``host_link_bidir``: twice that
``gpu_peer``       0 .. one direction of a GPU's NVLink: ``peaks.nvlink_gbps``, else
                   ``expect.nvlinks_per_gpu`` x ``nvlink_gbps_per_link``; no NVLink
                   (``nvlinks_per_gpu: 0``): ``host_link``; unknown:
                   :data:`NVLINK_CEILING_GBPS`
``gpu_fabric``     0 .. both directions of ``gpu_peer`` (NVLink SHARP lets an all_reduce
                   busbw exceed one direction's rate)
``collective``     0 .. the larger of ``gpu_fabric`` (where the node has GPUs) and
                   ``host_memory`` (gloo and MPI move data through host memory)
``ib_port``        0 .. the profile's ``expect.ib_rate_gbps``, else
                   :data:`IB_RATE_CEILING_GBIT_S` (Gb/s)
``ib_rate``        0 .. :data:`IB_RATE_CEILING_GBIT_S` (a port rate ibstat reports; a rate other
                   than the SKU's is the ``ib_ports`` check's finding, not implausible)
``tcp``            0 .. ``host_memory`` in Gb/s (a TCP stream crosses host memory)
``gemm``           device ``cpu``: 0 .. threads x :data:`CPU_CLOCK_CEILING_GHZ` x
                   :data:`CPU_FLOP_PER_CYCLE`; a GPU: ``peaks.<dtype>_tflops``, else the
                   profile's largest TFLOP/s peak, else :data:`GPU_TFLOPS_CEILING`
``gpu_count``      0 .. the NVIDIA display functions lspci lists (else 64), integral
``hca_count``      0 .. the Mellanox network functions lspci lists (else 64), integral
``nvlinks``        0 .. :data:`NVLINKS_PER_GPU_MAX`, integral
``lanes``          0 .. 32 (the widest PCIe link), integral
``pcie_gen``       1 .. 7, integral
``count``          0 .. no upper bound, integral
``cpu_cores``      1 .. 16384, integral; ``memory_gib`` 0 .. 262144 GiB (256 TiB)
``positive``       above 0 (latencies, step times)
``non_negative``   0 .. no upper bound (durations, ratios, throughputs)
``fraction``       0 .. 1
``temperature``    -40 .. 150 C (a GPU sensor outside it is a misread)
``percent_delta``  -100 .. 100 %
=================  ====================================================================
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from nvtest.config.loader import nearest_name

if TYPE_CHECKING:
    from nvtest.config.thresholds import SkuProfile

__all__ = [
    "BOUND_RULES",
    "CATALOG",
    "HIGHER_IS_BETTER",
    "KNOWN_UNITS",
    "LOWER_IS_BETTER",
    "PEAK_KEYS",
    "PEAK_MARGIN",
    "PLACEHOLDERS",
    "Bound",
    "Hardware",
    "MetricSpec",
    "check_names",
    "declare_metric",
    "declare_recorded",
    "declared",
    "hardware_from_facts",
    "lower_is_better",
    "metric_names",
    "plausible_bounds",
    "site_declarations",
    "suggest",
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
        "steps",  # training steps (resilience drills)
        "loss",  # a difference of training loss values
    }
)

#: Units of rates (bandwidth, throughput): a larger value is better.
HIGHER_IS_BETTER = frozenset({"GB/s", "Gb/s", "TB/s", "TFLOP/s", "GFLOP/s", "tokens/s"})
#: Units of times (latency, duration): a smaller value is better.
LOWER_IS_BETTER = frozenset({"s", "ms", "us", "ns"})


def lower_is_better(unit: str | None) -> bool | None:
    """Which way a value in ``unit`` is better: True for a time (:data:`LOWER_IS_BETTER`),
    False for a rate (:data:`HIGHER_IS_BETTER`), None for a unit with no better direction
    (``count``, ``C``, ``%``, ``ratio``...: judged against thresholds only, never against the
    fleet, never a trend's drop)."""
    if unit in LOWER_IS_BETTER:
        return True
    if unit in HIGHER_IS_BETTER:
        return False
    return None


#: Values of each name placeholder, from the probes and tools that produce them:
#: dtype (probes/gemm_probe.py UNIT_ROUNDOFF), kernel (probes/stream_probe.py, STREAM's four
#: kernels; probes/devmem_probe.py KERNEL_WORDS), op (jobs/nccl.py NCCL_OPS and
#: probes/collective_probe.py OPS), direction (probes/h2d_probe.py DIRECTIONS).
PLACEHOLDERS: dict[str, tuple[str, ...]] = {
    "dtype": ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8"),
    "kernel": ("copy", "scale", "add", "triad"),
    "op": (
        "all_reduce",
        "all_gather",
        "reduce_scatter",
        "alltoall",
        "sendrecv",
        "broadcast",
        "reduce",
    ),
    "direction": ("h2d", "d2h", "bidir"),
}
#: Placeholders that take any whole number (a batch size, a message size): matched as digits,
#: shown in name lists as the pattern itself.
NUMERIC_PLACEHOLDERS = frozenset({"batch", "size"})
_HOLDER = re.compile(r"\{(\w+)\}")

#: Multiplier on an upper bound taken from a peak or a line rate: tools round, count
#: MB as 10^6 or 2^20 (perftest), and clocks boost; beyond it no link or device can go.
PEAK_MARGIN = 1.10
#: Host DRAM ceiling without a profile figure, GB/s: above any shipped host's theoretical
#: bandwidth (8 sockets x 8 channels DDR5-4800 = 2.46 TB/s; 2 x Xeon Max HBM2e ~2.4 TB/s).
HOST_MEMORY_CEILING_GBPS = 4000.0
#: GPU memory ceiling without a profile figure, GB/s (B200/B300 HBM3e: 8 TB/s per GPU).
GPU_MEMORY_CEILING_GBPS = 10000.0
#: One direction of a GPU's NVLink without a profile figure, GB/s (NVLink 5: 18 x 50 GB/s).
NVLINK_CEILING_GBPS = 900.0
#: The fastest InfiniBand port without a profile figure, Gb/s (XDR, 4 lanes x 200G).
IB_RATE_CEILING_GBIT_S = 800.0
#: GPU dense GEMM ceiling without a profile figure, TFLOP/s (above B300's dense FP4 ~15,000).
GPU_TFLOPS_CEILING = 20000.0
#: CPU clock ceiling, GHz (no shipped server core sustains more).
CPU_CLOCK_CEILING_GHZ = 6.0
#: CPU flops per cycle per hardware thread, by dtype: two AVX-512 FMA units (fp64 32,
#: fp32 64); Intel AMX tiles for the 16-bit and 8-bit types (1024 bf16 ops per cycle, x2 int8).
CPU_FLOP_PER_CYCLE: dict[str, float] = {
    "fp64": 32.0,
    "fp32": 64.0,
    "tf32": 64.0,
    "fp16": 1024.0,
    "bf16": 1024.0,
    "fp8": 2048.0,
}
#: Links per GPU of the NVLink generations that have the most (NVLink 4 and 5: 18).
NVLINKS_PER_GPU_MAX = 18
#: Per-lane data rate of each PCIe generation after line encoding, GB/s per direction
#: (PCI-SIG: 2.5/5 GT/s 8b/10b; 8/16/32 GT/s 128b/130b; 64/128 GT/s FLIT).
PCIE_LANE_GBPS: dict[int, float] = {
    1: 0.25,
    2: 0.5,
    3: 0.985,
    4: 1.969,
    5: 3.938,
    6: 7.877,
    7: 15.754,
}

#: Profile ``peaks:`` keys and their units: theoretical figures of the hardware (datasheets).
PEAK_KEYS: dict[str, str] = {
    "hbm_gbps": "GB/s",  # device memory bandwidth per GPU
    "host_link_gbps": "GB/s",  # one direction host <-> one GPU, where not PCIe (NVLink-C2C)
    "nvlink_gbps": "GB/s",  # one direction of one GPU's NVLinks together
    "host_memory_gbps": "GB/s",  # the node's host DRAM
    **{f"{d}_tflops": "TFLOP/s" for d in PLACEHOLDERS["dtype"]},  # dense, per GPU
}


@dataclass(frozen=True)
class MetricSpec:
    """One declared metric of one or more checks.

    Attributes:
        checks: the checks that judge it (``pytest.mark.check`` names).
        pattern: the metric name, or a pattern with one placeholder of :data:`PLACEHOLDERS`.
        unit: the unit it is judged in (one of :data:`KNOWN_UNITS`).
        kind: bandwidth, throughput, latency, duration, count, ratio, temperature, percent,
            size, lanes or generation.
        bound: the name of its rule in :data:`BOUND_RULES`.
        what: what it is, measured by which tool.
    """

    checks: tuple[str, ...]
    pattern: str
    unit: str
    kind: str
    bound: str
    what: str

    @property
    def open_ended(self) -> bool:
        """True when a placeholder takes any whole number (the names cannot be listed)."""
        return any(h in NUMERIC_PLACEHOLDERS for h in _HOLDER.findall(self.pattern))

    def names(self) -> tuple[str, ...]:
        """Every concrete metric name of the pattern (a numeric placeholder as its example, 1)."""
        out = [self.pattern]
        for holder in _HOLDER.findall(self.pattern):
            values = ("1",) if holder in NUMERIC_PLACEHOLDERS else PLACEHOLDERS[holder]
            out = [n.replace("{" + holder + "}", v, 1) for n in out for v in values]
        return tuple(out)

    def regex(self) -> re.Pattern[str]:
        """The pattern as a regular expression with a named group per placeholder."""
        parts, pos = [], 0
        for m in _HOLDER.finditer(self.pattern):
            parts.append(re.escape(self.pattern[pos : m.start()]))
            holder = m.group(1)
            alt = r"\d+" if holder in NUMERIC_PLACEHOLDERS else "|".join(map(re.escape, PLACEHOLDERS[holder]))
            parts.append(f"(?P<{holder}>{alt})")
            pos = m.end()
        parts.append(re.escape(self.pattern[pos:]))
        return re.compile("".join(parts))

    @property
    def lower_is_better(self) -> bool | None:
        """Which way its values are better (:func:`lower_is_better` of its unit)."""
        return lower_is_better(self.unit)

    def values(self, name: str) -> dict[str, str]:
        """The placeholders' values in ``name`` ({} when ``name`` does not fit)."""
        m = self.regex().fullmatch(name)
        return m.groupdict() if m else {}


def _s(checks: str, pattern: str, unit: str, kind: str, bound: str, what: str) -> MetricSpec:
    return MetricSpec(tuple(checks.split()), pattern, unit, kind, bound, what)


_RESTART = "restart_injob"
_CKPT = "ckpt_mem ckpt_local ckpt_shared resilience_quick shared_fs"

#: The catalog: every metric every check judges (suites/ and nvtest/checks/).
CATALOG: tuple[MetricSpec, ...] = (
    # inventory
    _s("host", "cpu_cores", "count", "count", "cpu_cores", "CPU cores (/proc/cpuinfo)"),
    _s("host", "memory_gib", "GiB", "size", "memory_gib", "host memory (/proc/meminfo MemTotal)"),
    _s("gpus", "gpu_count", "count", "count", "gpu_count", "GPUs nvidia-smi -q -x lists"),
    _s("gpus", "pcie_width", "lanes", "lanes", "lanes", "a GPU's current PCIe link width (nvidia-smi)"),
    # health
    _s("ecc", "ecc_volatile_uncorrectable", "count", "count", "count", "volatile uncorrectable ECC errors per GPU"),
    _s("ecc", "ecc_volatile_correctable", "count", "count", "count", "volatile correctable ECC errors per GPU"),
    _s(
        "ecc",
        "remapped_rows_uncorrectable",
        "count",
        "count",
        "count",
        "rows remapped for uncorrectable errors per GPU",
    ),
    _s("nvlink", "nvlinks_active", "count", "count", "nvlinks", "active NVLinks per GPU (nvidia-smi nvlink -s)"),
    _s("pcie_link", "link_width", "lanes", "lanes", "lanes", "trained PCIe width per hop (sysfs current_link_width)"),
    _s("pcie_link", "link_gen", "count", "generation", "pcie_gen", "trained PCIe generation per hop (sysfs)"),
    _s("xid_scan", "xid_events", "count", "count", "count", "Xid events in the kernel log"),
    _s("xid_scan", "fatal_xid_events", "count", "count", "count", "fatal Xid events in the kernel log"),
    _s(
        "sw_uniformity",
        "versions_differing",
        "count",
        "count",
        "count",
        "versions where the node differs from its SKU's majority",
    ),
    _s(
        "thermal burnin",
        "{dtype}_tflops",
        "TFLOP/s",
        "throughput",
        "gemm",
        "sustained GEMM, median window (burnin probe)",
    ),
    _s(
        "thermal burnin",
        "gpu_temp_max_c",
        "C",
        "temperature",
        "temperature",
        "highest GPU temperature under load (NVML)",
    ),
    _s("thermal burnin", "sm_clock_drop_pct", "%", "percent", "percent_delta", "SM clock drop under load (NVML)"),
    # config audit
    _s(
        "pcie_acs",
        "acs_redirect_bridges",
        "count",
        "count",
        "count",
        "PCIe bridges above a GPU/NIC with ACS redirect on (lspci -vvv ACSCtl)",
    ),
    _s(
        "package_drift",
        "drifted_packages",
        "count",
        "count",
        "count",
        "kernel/driver packages named in a drift finding (dpkg-query, rpm)",
    ),
    # memory
    _s("stream", "{kernel}_gbps", "GB/s", "bandwidth", "host_memory", "STREAM best rate (stream probe)"),
    _s(
        "devmem",
        "{kernel}_gbps",
        "GB/s",
        "bandwidth",
        "device_memory",
        "device memory copy/triad best rate (devmem probe)",
    ),
    _s(
        "h2d",
        "{direction}_gbps",
        "GB/s",
        "bandwidth",
        "host_link",
        "pinned host<->GPU copies (h2d probe, nvbandwidth CE)",
    ),
    _s(
        "h2d",
        "d2d_read_ce_gbps",
        "GB/s",
        "bandwidth",
        "gpu_peer",
        "slowest peer read per GPU (nvbandwidth device_to_device_memcpy_read_ce)",
    ),
    # compute
    _s("gemm", "{dtype}_tflops", "TFLOP/s", "throughput", "gemm", "dense GEMM median (gemm probe)"),
    # interconnect
    _s(
        "nccl nccl_nics_only nccl_multinode",
        "{op}_busbw_gbps",
        "GB/s",
        "bandwidth",
        "gpu_fabric",
        "nccl-tests busbw at the plateau",
    ),
    _s("nccl nccl_nics_only nccl_multinode", "wrong", "count", "count", "count", "nccl-tests #wrong elements"),
    _s(
        "collectives collectives_multinode",
        "{op}_busbw_gbps",
        "GB/s",
        "bandwidth",
        "collective",
        "torch.distributed busbw at the largest size (collective probe)",
    ),
    _s(
        "mpi",
        "allreduce_busbw_gbps",
        "GB/s",
        "bandwidth",
        "collective",
        "MPI_Allreduce busbw at the largest size (mpi probe)",
    ),
    _s("mpi", "barrier_latency_us", "us", "latency", "positive", "MPI_Barrier median (mpi probe)"),
    _s(
        "nvlink_multinode",
        "mn_read_ce_gbps",
        "GB/s",
        "bandwidth",
        "gpu_peer",
        "slowest multi-node NVLink read per GPU (nvbandwidth multinode_device_to_device_memcpy_read_ce)",
    ),
    _s("ib_ports", "hca_count", "count", "count", "hca_count", "HCAs ibstat lists"),
    _s("ib_ports", "rate_gbps", "Gb/s", "bandwidth", "ib_rate", "port rate (ibstat Rate)"),
    _s(
        "ib_write_bw",
        "bw_avg_gbit_s",
        "Gb/s",
        "bandwidth",
        "ib_port",
        "perftest ib_write_bw BW average per HCA (--report_gbits)",
    ),
    _s("tcp_bw", "tcp_gbit_s", "Gb/s", "bandwidth", "tcp", "TCP stream bandwidth between a pair (tcp_bw probe)"),
    # workload
    _s(
        "train_smoke train_multinode",
        "final_loss_ratio",
        "ratio",
        "ratio",
        "non_negative",
        "mean loss of the last 5 steps / the first 5",
    ),
    _s("train_smoke train_multinode", "step_time_s", "s", "latency", "positive", "median training step time"),
    _s(
        "train_smoke train_multinode",
        "tokens_per_s",
        "tokens/s",
        "throughput",
        "non_negative",
        "training tokens per second",
    ),
    # resilience
    _s(_CKPT, "write_gbps", "GB/s", "bandwidth", "host_memory", "checkpoint write + fsync (ckpt probe)"),
    _s(_CKPT, "read_gbps", "GB/s", "bandwidth", "host_memory", "checkpoint read back (ckpt probe)"),
    _s(_CKPT, "model_save_s", "s", "duration", "non_negative", "torch.save of the model and optimizer state"),
    _s(_CKPT, "model_load_s", "s", "duration", "non_negative", "torch.load of the model and optimizer state"),
    _s(
        "ckpt_shared",
        "aggregate_write_gbps",
        "GB/s",
        "bandwidth",
        "fleet_memory",
        "all nodes writing the shared tier at once",
    ),
    _s(
        "ckpt_shared",
        "aggregate_read_gbps",
        "GB/s",
        "bandwidth",
        "fleet_memory",
        "all nodes reading the shared tier at once",
    ),
    _s(_RESTART, "detect_s", "s", "duration", "non_negative", "kill -> the fault detected"),
    _s(_RESTART, "restart_s", "s", "duration", "non_negative", "kill -> the ranks up again"),
    _s(_RESTART, "reload_s", "s", "duration", "non_negative", "kill -> the checkpoint reloaded"),
    _s(
        f"{_RESTART} restart_inprocess",
        "recovery_s",
        "s",
        "duration",
        "non_negative",
        "kill -> every rank trained a step",
    ),
    _s(f"{_RESTART} requeue", "steps_lost", "steps", "count", "count", "steps trained again after the restart"),
    _s(
        _RESTART,
        "loss_max_abs_diff",
        "loss",
        "ratio",
        "non_negative",
        "largest |loss difference| from the uninterrupted run",
    ),
    _s(
        f"{_RESTART} resilience_quick",
        "effective_fraction",
        "ratio",
        "ratio",
        "fraction",
        "effective training time estimate",
    ),
    _s("straggler", "min_rank_score", "ratio", "ratio", "fraction", "lowest relative straggler score of a rank"),
    _s("straggler", "node_relative_score", "ratio", "ratio", "fraction", "node's step time against the fastest node's"),
    _s("requeue", "running_again_s", "s", "duration", "non_negative", "requeue -> the job running again"),
    _s("requeue", "resumed_s", "s", "duration", "non_negative", "requeue -> resumed from the checkpoint"),
    _s("requeue", "training_again_s", "s", "duration", "non_negative", "requeue -> training again"),
    _s(
        "inference",
        "{dtype}_bs{batch}_prefill_tokens_per_s",
        "tokens/s",
        "throughput",
        "non_negative",
        "prompt tokens / time to first token",
    ),
    _s(
        "inference",
        "{dtype}_bs{batch}_decode_tokens_per_s",
        "tokens/s",
        "throughput",
        "non_negative",
        "decoded tokens / decode time",
    ),
    _s("inference", "{dtype}_bs{batch}_ttft_ms", "ms", "latency", "positive", "time to first token, median"),
    _s("inference", "{dtype}_bs{batch}_token_p50_ms", "ms", "latency", "positive", "per-token latency p50"),
    _s("inference", "{dtype}_bs{batch}_token_p99_ms", "ms", "latency", "positive", "per-token latency p99"),
    _s("inference", "vllm_output_tokens_per_s", "tokens/s", "throughput", "non_negative", "vllm bench output tokens/s"),
    _s("inference", "vllm_total_tokens_per_s", "tokens/s", "throughput", "non_negative", "vllm bench total tokens/s"),
    _s("sdc", "peers_agreeing", "count", "count", "count", "peers whose digest agrees"),
)


def _index() -> dict[tuple[str, str], MetricSpec]:
    out: dict[tuple[str, str], MetricSpec] = {}
    for spec in CATALOG:
        if spec.open_ended:
            continue
        for check in spec.checks:
            for name in spec.names():
                if (check, name) in out:
                    raise RuntimeError(f"metric catalog declares {check}.{name} twice")
                out[(check, name)] = spec
    return out


_INDEX = _index()
#: check -> the open-ended specs (a numeric placeholder), matched by regular expression.
_OPEN: dict[str, list[MetricSpec]] = {}
for _spec in CATALOG:
    if _spec.open_ended:
        for _check in _spec.checks:
            _OPEN.setdefault(_check, []).append(_spec)
#: Metrics declared at run time by a site's own checks (:func:`declare_metric`).
EXTRA: list[MetricSpec] = []


def declare_metric(
    checks: str | tuple[str, ...], pattern: str, unit: str, *, kind: str, bound: str, what: str = ""
) -> MetricSpec:
    """Declare a metric of a site's own check (the bundled checks' are in :data:`CATALOG`).

    Call it at the top of the check's module, before the check judges it::

        declare_metric("nvme_bw", "read_gbps", "GB/s", kind="bandwidth", bound="host_memory",
                       what="fio sequential read")

    ``checks``: a check name or several; ``pattern``: a name or a pattern with
    placeholders of :data:`PLACEHOLDERS` or :data:`NUMERIC_PLACEHOLDERS`;
    ``bound``: a rule of :data:`BOUND_RULES`.
    Declaring the same metric again the same way does nothing.

    Raises:
        ConfigError: an unknown unit, bound rule or placeholder, or the metric is already
            declared otherwise (a bundled metric cannot be redeclared).
    """
    from nvtest.errors import ConfigError

    names = (checks,) if isinstance(checks, str) else tuple(checks)
    spec = MetricSpec(names, pattern, unit, kind, bound, what)
    if unit not in KNOWN_UNITS:
        raise ConfigError(f"unknown unit {unit!r}; known: {', '.join(sorted(KNOWN_UNITS))}", field=pattern)
    if bound not in BOUND_RULES:
        raise ConfigError(f"unknown bound rule {bound!r}; known: {', '.join(sorted(BOUND_RULES))}", field=pattern)
    for holder in _HOLDER.findall(pattern):
        if holder not in PLACEHOLDERS and holder not in NUMERIC_PLACEHOLDERS:
            known_holders = ", ".join([*PLACEHOLDERS, *sorted(NUMERIC_PLACEHOLDERS)])
            raise ConfigError(f"unknown placeholder {{{holder}}}; known: {known_holders}", field=pattern)
    for check in names:
        for name in spec.names():
            known = declared(check, name)
            if known is not None and (known.unit, known.bound, known.pattern) != (unit, bound, pattern):
                raise ConfigError(f"{check}.{name} is already declared in {known.unit} ({known.bound})", field=pattern)
    if all(declared(check, name) is not None for check in names for name in spec.names()):
        return spec  # declared before, the same way
    for check in names:
        if spec.open_ended:
            _OPEN.setdefault(check, []).append(spec)
            continue
        for name in spec.names():
            _INDEX.setdefault((check, name), spec)
    EXTRA.append(spec)
    return spec


def site_declarations(check: str) -> list[dict[str, str]]:
    """The metrics a site's own check declared at run time (:func:`declare_metric`), as
    results.json keeps them (``checks.<name>.declared_metrics``: pattern, unit, kind, bound,
    what), so that judging the run again (``nvtest evaluate``) knows them without the module."""
    return [
        {"pattern": s.pattern, "unit": s.unit, "kind": s.kind, "bound": s.bound, "what": s.what}
        for s in EXTRA
        if check in s.checks
    ]


def declare_recorded(checks: Mapping[str, Mapping[str, Any]]) -> None:
    """Declare again the site metrics a stored run recorded (results.json ``checks``, each
    check's ``declared_metrics``: :func:`site_declarations`).

    Raises:
        ConfigError: a recorded declaration is invalid or conflicts with the catalog.
    """
    for name, entry in checks.items():
        for m in entry.get("declared_metrics") or ():
            declare_metric(
                name,
                str(m["pattern"]),
                str(m["unit"]),
                kind=str(m["kind"]),
                bound=str(m["bound"]),
                what=str(m.get("what") or ""),
            )


def declared(check: str, metric: str) -> MetricSpec | None:
    """The catalog entry of ``check``/``metric`` (a concrete name), or None."""
    spec = _INDEX.get((check, metric))
    if spec is None:
        spec = next((s for s in _OPEN.get(check, ()) if s.regex().fullmatch(metric)), None)
    return spec


def check_names() -> list[str]:
    """Every check that declares a metric, sorted."""
    return sorted({c for c, _ in _INDEX} | set(_OPEN))


def metric_names(check: str) -> list[str]:
    """Every metric name ``check`` declares, sorted (an open-ended one as its pattern)."""
    return sorted([m for c, m in _INDEX if c == check] + [s.pattern for s in _OPEN.get(check, ())])


def suggest(word: str, choices: list[str]) -> str:
    """`` (did you mean 'x'?)`` for the nearest of ``choices`` (difflib), else ``""``."""
    near = nearest_name(word, choices)
    return f" (did you mean {near!r}?)" if near else ""


@dataclass(frozen=True)
class Hardware:
    """What a node is, for the plausibility bounds of its measurements.

    Attributes:
        profile: the SKU profile the node is judged with (``expect``, ``peaks``), or None.
        gpu_pcie: per GPU, (max generation, max width) from ``nvidia-smi -q -x``.
        pci_gpus: NVIDIA display functions lspci lists (None: lspci listed nothing).
        pci_hcas: Mellanox network functions lspci lists (None: lspci listed nothing).
        gpus: GPUs nvidia-smi lists (None: unknown).
        threads: hardware threads of the host (None: unknown).
        nodes: nodes in the run (for aggregates over the fleet).
    """

    profile: SkuProfile | None = None
    gpu_pcie: tuple[tuple[int, int], ...] = ()
    pci_gpus: int | None = None
    pci_hcas: int | None = None
    gpus: int | None = None
    threads: int | None = None
    nodes: int = 1

    def peak(self, key: str) -> tuple[float, str] | None:
        """(value, source) of the profile's ``peaks.<key>``, or None."""
        peaks = getattr(self.profile, "peaks", None) or {}
        p = peaks.get(key)
        return (
            (
                float(p.value),
                f"{self.profile.name if self.profile else '?'} peaks.{key}: {p.source}",
            )
            if p
            else None
        )

    def has_gpus(self) -> bool:
        expect = self.profile.expect.gpus if self.profile else None
        return bool(self.gpus) or bool(expect)


#: PCI vendor IDs of NVIDIA and of Mellanox/NVIDIA networking (lspci -nn).
NVIDIA_VENDOR_ID = "10de"
MELLANOX_VENDOR_ID = "15b3"


def hardware_from_facts(facts: Mapping[str, Any] | None, profile: SkuProfile | None, nodes: int = 1) -> Hardware:
    """:class:`Hardware` from a node's facts as JSON (``NodeFacts.to_json()``, results.json
    ``nodes.<node>.inventory``): GPUs and their max PCIe links (nvidia-smi -q -x), NVIDIA
    display and Mellanox network functions (lspci), host threads."""
    if not facts:
        return Hardware(profile=profile, nodes=nodes)
    gpus = facts.get("gpus") or []
    pci = facts.get("pci") or []

    def functions(vendor: str, cls: str) -> int | None:
        if not pci:
            return None
        return sum(1 for p in pci if p.get("vendor_id") == vendor and str(p.get("class_id") or "").startswith(cls))

    return Hardware(
        profile=profile,
        gpu_pcie=tuple(
            (int(g["pcie_gen_max"]), int(g["pcie_width_max"]))
            for g in gpus
            if g.get("pcie_gen_max") is not None and g.get("pcie_width_max") is not None
        ),
        pci_gpus=functions(NVIDIA_VENDOR_ID, "03"),
        pci_hcas=functions(MELLANOX_VENDOR_ID, "02"),
        gpus=len(gpus),
        threads=facts.get("threads") or facts.get("cores"),
        nodes=nodes,
    )


@dataclass(frozen=True)
class Bound:
    """The physical range of one value, and where it comes from.

    ``lo_open``: the value must be above ``lo`` (a latency), not merely at least it;
    ``integral``: the value must be a whole number (a count).
    """

    lo: float | None
    hi: float | None
    basis: str
    lo_open: bool = False
    integral: bool = False
    rule: str = ""

    def violation(self, value: float, unit: str) -> str | None:
        """Why ``value`` is outside the bound, or None when it is inside."""
        if self.lo is not None and (value <= self.lo if self.lo_open else value < self.lo):
            return f"{value:.6g} {unit} {'<=' if self.lo_open else '<'} {self.lo:.6g} {unit} ({self.basis})"
        if self.hi is not None and value > self.hi:
            return f"{value:.6g} {unit} > {self.hi:.6g} {unit} ({self.basis})"
        if self.integral and not float(value).is_integer():
            return f"{value!r} is not a whole number ({self.basis})"
        return None

    def to_json(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "min": self.lo,
            "max": None if self.hi is None else round(self.hi, 6),
            "min_exclusive": self.lo_open,
            "integral": self.integral,
            "basis": self.basis,
        }


def _peak_hi(value: float, basis: str) -> tuple[float, str]:
    return value * PEAK_MARGIN, f"{basis} x {PEAK_MARGIN:g}"


def _host_memory(hw: Hardware) -> tuple[float, str]:
    p = hw.peak("host_memory_gbps")
    if p:
        return _peak_hi(*p)
    return HOST_MEMORY_CEILING_GBPS, "host DRAM ceiling (no host_memory_gbps peak in the profile)"


def _pcie_direction(hw: Hardware) -> tuple[float, str]:
    links = [(g, w) for g, w in hw.gpu_pcie if g in PCIE_LANE_GBPS and w > 0]
    if links:
        g, w = max(links, key=lambda gw: PCIE_LANE_GBPS[gw[0]] * gw[1])
        return _peak_hi(PCIE_LANE_GBPS[g] * w, f"PCIe Gen{g} x{w} per direction (nvidia-smi max link)")
    exp = hw.profile.expect if hw.profile else None
    if exp and exp.pcie_gen in PCIE_LANE_GBPS and exp.pcie_width:
        return _peak_hi(
            PCIE_LANE_GBPS[exp.pcie_gen] * exp.pcie_width,
            f"PCIe Gen{exp.pcie_gen} x{exp.pcie_width} per direction ({hw.profile.name if hw.profile else '?'} expect)",
        )
    return _peak_hi(PCIE_LANE_GBPS[6] * 16, "PCIe Gen6 x16 per direction (no link known)")


def _host_link(hw: Hardware) -> tuple[float, str]:
    p = hw.peak("host_link_gbps")
    return _peak_hi(*p) if p else _pcie_direction(hw)


def _gpu_peer(hw: Hardware) -> tuple[float, str]:
    p = hw.peak("nvlink_gbps")
    if p:
        return _peak_hi(*p)
    exp = hw.profile.expect if hw.profile else None
    if exp and exp.nvlinks_per_gpu == 0:
        return _host_link(hw)
    if exp and exp.nvlinks_per_gpu and exp.nvlink_gbps_per_link:
        name = hw.profile.name if hw.profile else "?"
        return _peak_hi(
            exp.nvlinks_per_gpu * exp.nvlink_gbps_per_link,
            f"{exp.nvlinks_per_gpu} NVLinks x {exp.nvlink_gbps_per_link:g} GB/s per direction ({name} expect)",
        )
    return NVLINK_CEILING_GBPS, "NVLink ceiling per direction (no NVLink figure in the profile)"


def _gpu_fabric(hw: Hardware) -> tuple[float, str]:
    hi, basis = _gpu_peer(hw)
    return 2 * hi, f"both directions of {basis}"


def _bw(
    fn: Callable[[Hardware], tuple[float, str]], scale: float = 1.0, note: str = ""
) -> Callable[[Hardware, Mapping[str, str]], Bound]:
    def rule(hw: Hardware, labels: Mapping[str, str]) -> Bound:
        hi, basis = fn(hw)
        return Bound(0.0, hi * scale, f"{note}{basis}" if note else basis)

    return rule


def _on_cpu(labels: Mapping[str, str]) -> bool:
    return str(labels.get("device", "")).startswith("cpu")


def _device_memory(hw: Hardware, labels: Mapping[str, str]) -> Bound:
    if _on_cpu(labels):
        return Bound(0.0, *_host_memory(hw))
    p = hw.peak("hbm_gbps")
    if p:
        return Bound(0.0, *_peak_hi(*p))
    return Bound(0.0, GPU_MEMORY_CEILING_GBPS, "GPU memory ceiling (no hbm_gbps peak in the profile)")


def _collective(hw: Hardware, labels: Mapping[str, str]) -> Bound:
    mem = _host_memory(hw)
    if hw.has_gpus():
        fab = _gpu_fabric(hw)
        if fab[0] > mem[0]:
            return Bound(0.0, *fab)
    return Bound(0.0, *mem)


def _ib_port(hw: Hardware, labels: Mapping[str, str]) -> Bound:
    rate = hw.profile.expect.ib_rate_gbps if hw.profile else None
    if rate:
        return Bound(
            0.0,
            *_peak_hi(
                rate,
                f"{rate:g} Gb/s port rate ({hw.profile.name if hw.profile else '?'} expect.ib_rate_gbps)",
            ),
        )
    return Bound(0.0, IB_RATE_CEILING_GBIT_S, "XDR port rate (no ib_rate_gbps in the profile)")


def _gemm(hw: Hardware, labels: Mapping[str, str], dtype: str) -> Bound:
    if _on_cpu(labels):
        threads = hw.threads or 1024
        per = CPU_FLOP_PER_CYCLE.get(dtype, max(CPU_FLOP_PER_CYCLE.values()))
        hi = threads * CPU_CLOCK_CEILING_GHZ * 1e9 * per / 1e12
        return Bound(
            0.0,
            hi,
            f"{threads} threads x {CPU_CLOCK_CEILING_GHZ:g} GHz x {per:g} {dtype} flop/cycle",
        )
    p = hw.peak(f"{dtype}_tflops")
    if p:
        return Bound(0.0, *_peak_hi(*p))
    peaks = [(k, v) for k, v in (getattr(hw.profile, "peaks", None) or {}).items() if k.endswith("_tflops")]
    if peaks:
        key, top = max(peaks, key=lambda kv: kv[1].value)
        return Bound(0.0, *_peak_hi(float(top.value), f"the profile's fastest dtype, peaks.{key}"))
    return Bound(0.0, GPU_TFLOPS_CEILING, "GPU TFLOP/s ceiling (no TFLOP/s peak in the profile)")


def _count_of(listed: int | None, what: str) -> Bound:
    if listed:
        return Bound(0.0, float(listed), f"{listed} {what} on the PCI bus (lspci)", integral=True)
    return Bound(0.0, 64.0, f"at most 64 {what} per node (lspci listed none)", integral=True)


def _fixed(
    lo: float | None, hi: float | None, basis: str, *, lo_open: bool = False, integral: bool = False
) -> Callable[[Hardware, Mapping[str, str]], Bound]:
    bound = Bound(lo, hi, basis, lo_open, integral)
    return lambda hw, labels: bound


#: Bound rules by name (see the module doc); each ``(Hardware, labels) -> Bound``.
BOUND_RULES: dict[str, Callable[[Hardware, Mapping[str, str]], Bound]] = {
    "host_memory": _bw(_host_memory),
    "fleet_memory": lambda hw, labels: Bound(
        0.0,
        _host_memory(hw)[0] * max(1, hw.nodes),
        f"{max(1, hw.nodes)} nodes x {_host_memory(hw)[1]}",
    ),
    "device_memory": _device_memory,
    "host_link": _bw(_host_link),
    "host_link_bidir": _bw(_host_link, 2.0, "both directions of "),
    "gpu_peer": _bw(_gpu_peer),
    "gpu_fabric": _bw(_gpu_fabric),
    "collective": _collective,
    "ib_port": _ib_port,
    "ib_rate": _fixed(0.0, IB_RATE_CEILING_GBIT_S, "the fastest InfiniBand port rate (XDR 4x)"),
    "tcp": lambda hw, labels: Bound(0.0, _host_memory(hw)[0] * 8, f"{_host_memory(hw)[1]}, in Gb/s"),
    "gpu_count": lambda hw, labels: _count_of(hw.pci_gpus, "NVIDIA GPUs"),
    "hca_count": lambda hw, labels: _count_of(hw.pci_hcas, "Mellanox network functions"),
    "nvlinks": _fixed(
        0.0,
        float(NVLINKS_PER_GPU_MAX),
        f"a GPU has at most {NVLINKS_PER_GPU_MAX} NVLinks",
        integral=True,
    ),
    "lanes": _fixed(0.0, 32.0, "a PCIe link is at most x32", integral=True),
    "pcie_gen": _fixed(
        1.0,
        float(max(PCIE_LANE_GBPS)),
        f"PCIe generations 1 to {max(PCIE_LANE_GBPS)}",
        integral=True,
    ),
    "count": _fixed(0.0, None, "a count is a whole number >= 0", integral=True),
    "cpu_cores": _fixed(1.0, 16384.0, "1 to 16384 cores per host", integral=True),
    "memory_gib": _fixed(0.0, 262144.0, "at most 256 TiB of host memory"),
    "positive": _fixed(0.0, None, "a latency or step time is above 0", lo_open=True),
    "non_negative": _fixed(0.0, None, "cannot be negative"),
    "fraction": _fixed(0.0, 1.0, "a fraction of 0 to 1"),
    "temperature": _fixed(-40.0, 150.0, "a GPU sensor reads -40 to 150 C"),
    "percent_delta": _fixed(-100.0, 100.0, "a relative change of -100 to 100 %"),
}


def plausible_bounds(spec: MetricSpec, name: str, hw: Hardware, labels: Mapping[str, str] | None = None) -> Bound:
    """The physical bound of metric ``name`` (declared by ``spec``) on hardware ``hw``."""
    labels = labels or {}
    if spec.bound == "gemm":
        dtype = spec.values(name).get("dtype", "")
        bound = _gemm(hw, labels, dtype)
    elif spec.bound == "host_link" and name == "bidir_gbps":
        bound = BOUND_RULES["host_link_bidir"](hw, labels)
    else:
        bound = BOUND_RULES[spec.bound](hw, labels)
    return Bound(bound.lo, bound.hi, bound.basis, bound.lo_open, bound.integral, rule=spec.bound)


def is_finite_number(value: object) -> bool:
    """True for an int or float (not a bool) that is finite."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
