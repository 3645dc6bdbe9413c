"""What ``nvtest evidence`` runs: the steps of the GPU evidence kit, their argv and deadlines.

Three groups, in this order (cheap and most telling first, so a short lease still brings
back the figures):

- ``capture``: the field's tools, read-only, each output kept verbatim with its exit code
  and the tool's version: ``nvidia-smi`` (plain, ``-q``, ``-q -x``, ``topo -m``, ``nvlink
  -s``, ``nvlink -e``, ``--query-gpu`` CSV), ``lspci -vvv`` of the NVIDIA and Mellanox
  functions, ``dcgmi discovery -l`` and ``dcgmi diag -r 1``, ``nvbandwidth``;
- ``probe``: nvtest's node-side probes alone, run as scripts (their CLI, docs/probes.md):
  GEMM in every dtype, device memory, host<->device, collectives, inference where the
  probe exists;
- ``run``: ``nvtest run --suite delivery`` and ``--suite burnin --duration 120`` on this
  node (``--backend local``), each with its whole run directory.

Read-only: nothing here changes clocks, power limits, persistence, compute mode, ECC or
MIG, or resets a GPU; :func:`read_only_nvidia_smi` accepts the only nvidia-smi argument
lists the kit runs and ``tests/ops/test_evidence.py`` holds every planned step and every
call the kit made to it.

Deadlines (seconds) fit the whole kit in 8 minutes on one GPU node: each step stops at
``min(its deadline, what is left of the budget)`` (its whole task killed then); the short form
(``--short``, for machines without a GPU and the kit's own test) uses small sizes, a
3-second burn-in and a subset of the delivery suite.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

__all__ = [
    "BUDGET_S",
    "DELIVERY_SHORT_K",
    "FABRIC_QUERY",
    "QUERY_GPU_FIELDS",
    "READ_ONLY_NVIDIA_SMI",
    "SHORT_BUDGET_S",
    "Step",
    "VersionProbe",
    "capture_steps",
    "fit_burnin",
    "probe_steps",
    "read_only_nvidia_smi",
    "run_steps",
    "version_probes",
]

#: The whole kit's time, seconds (full form: 8 minutes on one GPU node).
BUDGET_S = 480.0
#: The short form's.
SHORT_BUDGET_S = 180.0
#: ``-k`` of the delivery run in the short form: inventory, the GPU checks' skip path, STREAM.
DELIVERY_SHORT_K = "host or gpus or stream"

#: ``--query-gpu`` fields of the broad CSV capture (every one read-only, drivers >= 450).
QUERY_GPU_FIELDS = (
    "index",
    "name",
    "pci.bus_id",
    "uuid",
    "driver_version",
    "vbios_version",
    "memory.total",
    "ecc.mode.current",
    "mig.mode.current",
    "persistence_mode",
    "compute_mode",
    "pstate",
    "pcie.link.gen.current",
    "pcie.link.gen.max",
    "pcie.link.width.current",
    "pcie.link.width.max",
    "temperature.gpu",
    "power.draw",
    "power.limit",
    "clocks.sm",
    "clocks.max.sm",
    "clocks.mem",
    "clocks_throttle_reasons.active",
)
#: The fields nvtest's fabric-manager check reads (nvtest/checks/health/nvlink.py FM_SCRIPT).
FABRIC_QUERY = ("index", "fabric.state", "fabric.status")

#: Every nvidia-smi argument list the kit may run (all read-only).
READ_ONLY_NVIDIA_SMI = frozenset(
    {
        (),
        ("--version",),
        ("-q",),
        ("-q", "-x"),
        ("topo", "-m"),
        ("nvlink", "-s"),
        ("nvlink", "-e"),
        (f"--query-gpu={','.join(QUERY_GPU_FIELDS)}", "--format=csv"),
        (f"--query-gpu={','.join(FABRIC_QUERY)}", "--format=csv"),
    }
)


def read_only_nvidia_smi(args: Sequence[str]) -> bool:
    """True for an nvidia-smi argument list the kit may run: one of
    :data:`READ_ONLY_NVIDIA_SMI`, or a CSV ``--query-gpu`` of fields the kit queries (a
    subset, when a driver refused one)."""
    if tuple(args) in READ_ONLY_NVIDIA_SMI:
        return True
    if len(args) == 2 and args[0].startswith("--query-gpu=") and args[1] == "--format=csv":
        return set(args[0].split("=", 1)[1].split(",")) <= set(QUERY_GPU_FIELDS) | set(FABRIC_QUERY)
    return False


@dataclass(frozen=True)
class Step:
    """One step of the kit.

    Attributes:
        name: the step's name, also its output file's stem (``nvidia-smi-q-x``).
        group: ``capture``, ``probe`` or ``run``.
        tool: what runs (``nvidia-smi``, ``gemm_probe.py``, ``nvtest``).
        argv: the command; a probe's starts with this Python, a run's with ``-m nvtest.cli``.
        deadline_s: its own deadline; the budget's remainder may cut it shorter.
        output: where stdout goes, relative to OUT (stderr beside it, ``.stderr.txt``).
        empty_reason: what an empty stdout with exit 0 means (e.g. lspci found no such
            function); None: empty output is an error.
        needs: a tool the step needs on PATH beyond ``tool`` (nvbandwidth for the
            nvbandwidth h2d probe), or None.
        min_start_s: not started with less than this left of the budget.
        drop_invalid_fields: a ``--query-gpu`` capture that nvidia-smi refuses for one field
            (older or newer drivers name some fields differently) runs once more without it.
    """

    name: str
    group: str
    tool: str
    argv: tuple[str, ...]
    deadline_s: float
    output: str
    empty_reason: str | None = None
    needs: str | None = None
    min_start_s: float = 5.0
    drop_invalid_fields: bool = False


@dataclass(frozen=True)
class VersionProbe:
    """How to learn a tool's version: a command, and/or a pattern on a capture's output.

    Attributes:
        argv: the version command (None: the tool prints its version in its own output).
        pattern: a regular expression whose groups are the version, searched in the version
            command's output, else in ``fallback_step``'s stdout.
        fallback_step: the capture read when the command fails (old nvidia-smi has no
            ``--version``: its ``-q`` header names the driver).
        labels: names of the pattern's groups in the recorded version string.
    """

    argv: tuple[str, ...] | None
    pattern: str
    fallback_step: str | None = None
    labels: tuple[str, ...] = ()

    def render(self, text: str) -> str | None:
        """The version found in ``text`` (``"driver 550.54.15, CUDA 12.4"``), or None."""
        m = re.search(self.pattern, text)
        if not m:
            return None
        groups = [g for g in m.groups() if g]
        if self.labels:
            return ", ".join(f"{label} {g}" for label, g in zip(self.labels, groups, strict=False))
        return " ".join(groups)


def version_probes() -> dict[str, VersionProbe]:
    """Per tool: how the kit records its version."""
    return {
        "nvidia-smi": VersionProbe(
            ("nvidia-smi", "--version"),
            r"(?:DRIVER|Driver) [Vv]ersion\s*:\s*(\S+)(?:.|\n)*?CUDA [Vv]ersion\s*:\s*(\S+)",
            "nvidia-smi-q",
            ("driver", "CUDA"),
        ),
        "lspci": VersionProbe(("lspci", "--version"), r"lspci version (\S+)"),
        "dcgmi": VersionProbe(("dcgmi", "--version"), r"[Vv]ersion\s*:?\s*(\S+)"),
        "nvbandwidth": VersionProbe(None, r"nvbandwidth Version:\s*(\S+)", "nvbandwidth"),
    }


def capture_steps() -> list[Step]:
    """The read-only captures of the field's tools (the same in both forms)."""
    smi = [
        ("nvidia-smi", (), ".txt"),
        ("nvidia-smi-q", ("-q",), ".txt"),
        ("nvidia-smi-q-x", ("-q", "-x"), ".xml"),
        ("nvidia-smi-topo-m", ("topo", "-m"), ".txt"),
        ("nvidia-smi-nvlink-s", ("nvlink", "-s"), ".txt"),
        ("nvidia-smi-nvlink-e", ("nvlink", "-e"), ".txt"),
        ("nvidia-smi-query-gpu", (f"--query-gpu={','.join(QUERY_GPU_FIELDS)}", "--format=csv"), ".csv"),
        ("nvidia-smi-query-gpu-fabric", (f"--query-gpu={','.join(FABRIC_QUERY)}", "--format=csv"), ".csv"),
    ]
    steps = [
        Step(
            name,
            "capture",
            "nvidia-smi",
            ("nvidia-smi", *args),
            30.0,
            f"captures/{name}{ext}",
            empty_reason="nvidia-smi reports no NVLink" if "nvlink" in name else None,
            drop_invalid_fields=name == "nvidia-smi-query-gpu",
        )
        for name, args, ext in smi
    ]
    steps += [
        Step(
            "lspci-nvidia",
            "capture",
            "lspci",
            ("lspci", "-vvv", "-nn", "-D", "-d", "10de:"),
            30.0,
            "captures/lspci-nvidia.txt",
            empty_reason="lspci lists no NVIDIA (vendor 10de) PCI function",
        ),
        Step(
            "lspci-mellanox",
            "capture",
            "lspci",
            ("lspci", "-vvv", "-nn", "-D", "-d", "15b3:"),
            30.0,
            "captures/lspci-mellanox.txt",
            empty_reason="lspci lists no Mellanox (vendor 15b3) PCI function: no ConnectX HCA",
        ),
        Step(
            "dcgmi-discovery-l",
            "capture",
            "dcgmi",
            ("dcgmi", "discovery", "-l"),
            30.0,
            "captures/dcgmi-discovery-l.txt",
        ),
        Step("dcgmi-diag-r1", "capture", "dcgmi", ("dcgmi", "diag", "-r", "1"), 120.0, "captures/dcgmi-diag-r1.txt"),
        Step("nvbandwidth", "capture", "nvbandwidth", ("nvbandwidth",), 120.0, "captures/nvbandwidth.txt"),
    ]
    return steps


def probe_steps(probes: Path, *, short: bool, gpus: int, python: str = sys.executable) -> list[Step]:
    """The probes alone, each printing its one JSON document (docs/probes.md).

    ``gpus`` (from ``nvidia-smi -q -x``; 0 without a GPU) sets the collective probe's ranks:
    one per GPU, or 2 CPU ranks on gloo. ``inference_probe.py`` runs where this nvtest has
    it, with the device probes' common ``--device auto``; else the step is recorded as
    absent.
    """
    dtypes = "fp64,fp32,tf32,fp16,bf16,fp8"
    # GPU: the probe's 8192^3 default; CPU: it grows the size until a product takes 0.1 s
    size = ("--size", "256", "--min-seconds", "0.05") if short else ("--min-seconds", "1")
    specs: list[tuple[str, str, tuple[str, ...], float, str | None]] = [
        (
            "gemm",
            "gemm_probe.py",
            ("--device", "auto", "--dtypes", dtypes, *size, "--timeout-s", "50" if short else "150"),
            60 if short else 180,
            None,
        ),
        (
            "devmem",
            "devmem_probe.py",
            (
                "--device",
                "auto",
                "--array-mib",
                "16" if short else "1024",
                "--reps",
                "3" if short else "20",
                "--timeout-s",
                "40" if short else "90",
            ),
            50 if short else 120,
            None,
        ),
        (
            "h2d",
            "h2d_probe.py",
            ("--no-nvbandwidth", "--mib", "8" if short else "256", "--reps", "2" if short else "10"),
            50 if short else 120,
            None,
        ),
        ("h2d-nvbandwidth", "h2d_probe.py", ("--timeout-s", "120"), 150, "nvbandwidth"),
        (
            "collectives",
            "collective_probe.py",
            (
                "--device",
                "auto",
                "--nproc",
                str(gpus or 2),
                "--ops",
                "all_reduce,all_gather,reduce_scatter,alltoall",
                *(("--sizes", "65536", "--iters", "2") if short else ()),
                "--timeout-s",
                "50" if short else "100",
            ),
            60 if short else 120,
            None,
        ),
        ("inference", "inference_probe.py", ("--device", "auto"), 60 if short else 150, None),
    ]
    return [
        Step(
            name,
            "probe",
            script,
            (python, str(probes / script), *args),
            float(deadline),
            f"probes/{name}.json",
            needs=needs,
        )
        for name, script, args, deadline, needs in specs
    ]


def run_steps(out: Path, *, short: bool, python: str = sys.executable) -> list[Step]:
    """``nvtest run`` of the delivery suite, then of the burn-in suite, on this node."""
    base = (python, "-m", "nvtest.cli", "run", "--backend", "local", "--progress", "plain")
    subset: tuple[str, ...] = ("-k", DELIVERY_SHORT_K) if short else ()
    delivery = (*base, "--suite", "delivery", "--out", str(out / "runs" / "delivery"), *subset)
    seconds = 3 if short else 120
    burnin = (*base, "--suite", "burnin", "--duration", str(seconds), "--out", str(out / "runs" / "burnin"))
    return [
        Step(
            "delivery",
            "run",
            "nvtest",
            delivery,
            90.0 if short else 300.0,
            "runs/delivery.console.txt",
            min_start_s=30.0,
        ),
        Step(
            "burnin",
            "run",
            "nvtest",
            burnin,
            60.0 if short else seconds + 90.0,
            "runs/burnin.console.txt",
            min_start_s=30.0,
        ),
    ]


def fit_burnin(step: Step, left_s: float, overhead_s: float = 60.0) -> Step | None:
    """The burn-in run shortened to fit ``left_s`` seconds: its ``--duration`` cut so that
    duration + ``overhead_s`` (inventory, health, report) fits, at least 30 s of load;
    None when even that does not fit. Other steps come back unchanged."""
    if step.name != "burnin" or "--duration" not in step.argv:
        return step
    i = step.argv.index("--duration") + 1
    asked = float(step.argv[i])
    if asked + overhead_s <= left_s or asked < 30:
        return step
    fitted = left_s - overhead_s
    if fitted < 30:
        return None
    argv = (*step.argv[:i], f"{fitted:.0f}", *step.argv[i + 1 :])
    return replace(step, argv=argv, deadline_s=fitted + overhead_s)
