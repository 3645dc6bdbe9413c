"""nccl-tests: recipes, command lines and verdicts (pure; no I/O, no transport).

Command: ``<dir>/<op>_perf -b MIN -e MAX -f 2 -g G -c 1 [-n ITERS] [-w WARMUP]``, one NCCL rank
per GPU (``-g G`` ranks in one process inside a node; under mpirun/srun one process per GPU
with ``-g 1``). Binaries come from the recipe's ``tests_dir``, else ``$NVTEST_NCCL_TESTS_DIR``
on the controller, else the node's PATH.

Verdict of one run (:func:`judge_run`), in this order, whatever the bandwidth:

1. ``#wrong > 0`` in any row, or ``Out of bounds values`` non-zero or FAILED: **fail**. Wrong
   results are final: nothing retries them into a pass.
2. A failure line (``Test NCCL failure common.cu:959 'internal error'``): **fail**, with the
   error site, host and message, and the ``NCCL WARN`` lines, in the reason. An ``NCCL WARN``
   line that names a fault on the network path (a port that went down, completions with
   retry-exceeded status 12, :func:`nvtest.playbook.signatures.path_faults`) is **fail** naming
   the line, also when the collective completed (NCCL may fail over to another NIC, nccl#2157).
3. No result row: **error**. Fewer ranks listed than expected: **error**. The correctness gate
   switched off (``validation: 0`` in the tool's parameter line, ``-c 0``): **error**, never a
   pass (``#wrong`` was not checked). The tool moved its own maximum below the threshold's
   point (``# Reducing maxBytes to N due to memory limitation``, nccl-tests 2.x) or the sweep
   stopped before the requested maximum size: **error** naming the gap and its cause (the
   plateau was never measured).
4. The path NCCL says it took (its ``NCCL_DEBUG=INFO`` lines, :class:`~nvtest.parsers.nccl_tests.NcclPath`),
   when the traffic must cross the network (across nodes, or NICs only) and the SKU has RDMA
   NICs (``expect.ib_hcas``), whatever the bandwidth: ``Using network Socket`` (TCP sockets,
   IB verbs saw no HCA) is **fail** naming NCCL's line; ``GPU Direct RDMA Disabled for HCA``
   on any HCA is **fail** naming the line (the SKU's NICs are GPUDirect NICs); no line saying
   which network NCCL used is **error** (nothing proves the path). ``effective.nccl_path``
   records the transport, HCAs, GDR per HCA and channel transports. A channel over the RDMA
   network without ``/GDRDMA`` (``via NET/IB/0``) where no HCA said Disabled is **fail** naming
   the channel line (NCCL staged that traffic through host memory).
   NVLink SHARP and CollNet where the SKU expects them (``expect.nvls``, ``expect.collnet``;
   :func:`nvls_collnet_fails`), for all_reduce inside a node or across nodes, whatever the
   bandwidth: an NVLS ``NCCL WARN`` (``Failed to bind NVLink SHARP (NVLS) Multicast memory``, a
   CUDA failure at ``transport/nvls.cc``), and on a log taken at ``NCCL_DEBUG=INFO`` (nvtest sets
   it) a ``NVLS multicast support is not available on dev N`` line, is **fail** naming NCCL's
   line; a log with INFO lines and no NVLS line at all
   (NCCL < 2.17, two GPUs or fewer, ``NCCL_NVLS_ENABLE=0``) is a note in
   ``effective.nvls_note``, not a failure. With ``expect.collnet``, a multi-node all_reduce at
   INFO with no CollNet connected line fails.
5. Otherwise **pass**, and the plateau busbw is judged against the SKU threshold.

The verdict is the one outcome record, :class:`~nvtest.verdict.Outcome` (:func:`nccl_outcome`:
failures, or an error, the metrics ``<op>_busbw_gbps`` and ``wrong``, the details the report
reads). What ran is recorded beside what was asked (its details ``effective`` and
``requested``): the sizes swept, validation, iterations, ranks and hosts, the
GPUs and the data type.

The plateau is the rows at or above the recipe's ``plateau_bytes`` (default: the largest size
the recipe names, ``max_bytes``); its busbw is the mean out-of-place busbw of those rows, in
GB/s (nccl-tests prints 10^9 bytes/s). Not "Avg bus bandwidth", which averages every size
from 8 bytes up (nccl-tests doc/PERFORMANCE.md: busbw is meaningful at large sizes).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from nvtest.config.inventory import Node
from nvtest.errors import ParseError
from nvtest.parsers import nccl_tests
from nvtest.parsers.nccl_tests import NcclTestRun
from nvtest.playbook.signatures import path_faults
from nvtest.text import last_words
from nvtest.verdict import Outcome

__all__ = [
    "NCCL_OPS",
    "NICS_ONLY_ENV",
    "PASSTHROUGH_ENV",
    "VALIDATION_OFF",
    "VALIDATION_OFF_REASON",
    "WRONG_RESULTS",
    "NcclRecipe",
    "judge_output",
    "judge_run",
    "nccl_outcome",
    "inventory_nccl_env",
    "nvls_collnet_fails",
    "nvls_switched_off",
    "nccl_env",
    "perf_argv",
]

#: operation -> nccl-tests binary name.
NCCL_OPS: dict[str, str] = {
    "all_reduce": "all_reduce_perf",
    "all_gather": "all_gather_perf",
    "reduce_scatter": "reduce_scatter_perf",
    "alltoall": "alltoall_perf",
    "sendrecv": "sendrecv_perf",
    "broadcast": "broadcast_perf",
    "reduce": "reduce_perf",
}

#: NCCL variables copied from the controller's environment to the nodes when set there.
PASSTHROUGH_ENV = (
    "NCCL_IB_HCA",
    "NCCL_SOCKET_IFNAME",
    "NCCL_IB_GID_INDEX",
    "NCCL_IB_TC",
    "NCCL_NET_GDR_LEVEL",
    "NCCL_CROSS_NIC",
    "NCCL_NET",
    "NCCL_TOPO_FILE",
    "NCCL_ALGO",
    "NCCL_PROTO",
    "NCCL_DEBUG_SUBSYS",
)

#: The NICs-only variant: no NVLink/PCIe peer-to-peer, no shared memory; traffic through the NICs.
NICS_ONLY_ENV: dict[str, str] = {"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1"}

GIB = 1024**3


@dataclass(frozen=True)
class NcclRecipe:
    """One SKU's nccl-tests recipe (``recipe.nccl`` or ``recipe.nccl_multinode`` in its YAML).

    Attributes:
        ops: operations (keys of :data:`NCCL_OPS`).
        min_bytes, max_bytes: the sweep, bytes (``-b``/``-e``).
        step_factor: ``-f``.
        plateau_bytes: smallest size of the plateau, bytes; None: ``max_bytes``.
        iters, warmup_iters: ``-n``/``-w``; None: the tool's defaults.
        tests_dir: where the ``*_perf`` binaries are; None: ``$NVTEST_NCCL_TESTS_DIR`` or PATH.
        env: extra environment for the tool.
    """

    ops: tuple[str, ...] = ("all_reduce",)
    min_bytes: int = 8
    max_bytes: int = 8 * GIB
    step_factor: int = 2
    plateau_bytes: int | None = None
    iters: int | None = None
    warmup_iters: int | None = None
    tests_dir: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_recipe(cls, recipe: Mapping[str, Any] | None, **defaults: Any) -> NcclRecipe:
        """Build from a recipe mapping; ``defaults`` fill what it leaves out.

        Raises:
            ValueError: an unknown operation or key (the message lists the known ones).
        """
        data = {**defaults, **dict(recipe or {})}
        data.pop("pairs", None)  # nccl_multinode's pair schedule: read by the pair job, not nccl-tests
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown nccl recipe key(s) {unknown}; known: {sorted(known)}")
        if "ops" in data:
            ops = tuple(data["ops"])
            bad = [o for o in ops if o not in NCCL_OPS]
            if bad:
                raise ValueError(f"unknown nccl operation(s) {bad}; known: {', '.join(NCCL_OPS)}")
            data["ops"] = ops
        for key in (
            "min_bytes",
            "max_bytes",
            "step_factor",
            "plateau_bytes",
            "iters",
            "warmup_iters",
        ):
            if data.get(key) is not None:
                data[key] = int(data[key])
        data["env"] = {str(k): str(v) for k, v in dict(data.get("env") or {}).items()}
        return cls(**data)

    @property
    def plateau_from(self) -> int:
        """Smallest size counted in the plateau, bytes."""
        return self.plateau_bytes if self.plateau_bytes is not None else self.max_bytes


def binary(op: str, tests_dir: str | None) -> str:
    """The binary path (``<dir>/<op>_perf``) or name (PATH lookup)."""
    name = NCCL_OPS[op]
    return f"{tests_dir.rstrip('/')}/{name}" if tests_dir else name


def perf_argv(op: str, recipe: NcclRecipe, gpus_per_process: int, tests_dir: str | None = None) -> list[str]:
    """``<op>_perf -b MIN -e MAX -f F -g G -c 1 [-n N] [-w W]``."""
    argv = [
        binary(op, tests_dir or recipe.tests_dir),
        "-b",
        str(recipe.min_bytes),
        "-e",
        str(recipe.max_bytes),
        "-f",
        str(recipe.step_factor),
        "-g",
        str(gpus_per_process),
        "-c",
        "1",
    ]
    if recipe.iters is not None:
        argv += ["-n", str(recipe.iters)]
    if recipe.warmup_iters is not None:
        argv += ["-w", str(recipe.warmup_iters)]
    return argv


def inventory_nccl_env(nodes: Sequence[Node]) -> dict[str, str]:
    """``NCCL_SOCKET_IFNAME`` and ``NCCL_IB_HCA`` from the inventory's ``socket_ifname`` and
    ``ib_hca`` of ``nodes``, in NCCL's exact-match form (``=eth0``, ``=mlx5_0,mlx5_1``).

    One launch has one environment: over several nodes it names the union of their names,
    in inventory order (nodes that name their interfaces alike get exactly theirs). A
    variable no node sets is left out. Form: NCCL ``src/misc/socket.cc`` (``=`` exact,
    ``^`` exclude, else prefixes; a comma list).
    """
    env: dict[str, str] = {}
    for var, attr in (("NCCL_SOCKET_IFNAME", "socket_ifname"), ("NCCL_IB_HCA", "ib_hca")):
        names: list[str] = []
        for n in nodes:
            names += [x for x in getattr(n, attr) if x not in names]
        if names:
            env[var] = "=" + ",".join(names)
    return env


def nccl_env(
    recipe: NcclRecipe,
    environ: Mapping[str, str],
    *,
    nics_only: bool = False,
    nodes: Sequence[Node] = (),
) -> dict[str, str]:
    """The tool's environment: the variables of :data:`PASSTHROUGH_ENV` set in ``environ``,
    the recipe's ``env``, the inventory's interfaces of ``nodes`` (:func:`inventory_nccl_env`:
    a node's own setting wins), the NICs-only switches, and ``NCCL_DEBUG=INFO`` last, whatever
    the recipe says (the path rules read NCCL's INFO lines: a site's ``NCCL_DEBUG: WARN`` would
    switch them off). The checks record it as their effective environment."""
    env = {k: environ[k] for k in PASSTHROUGH_ENV if environ.get(k)}
    env.update(recipe.env)
    env.update(inventory_nccl_env(nodes))
    if nics_only:
        env.update(NICS_ONLY_ENV)
    env["NCCL_DEBUG"] = "INFO"
    return env


def nvls_switched_off(env: Mapping[str, str], recipe: NcclRecipe, where: str = "recipe.nccl") -> str | None:
    """The setting of ``env`` (the effective environment, :func:`nccl_env`) that keeps NCCL
    from using NVLink SHARP, named by where it came from (``recipe.nccl.env.NCCL_NVLS_ENABLE=0``
    where ``recipe.env`` set it, ``environment NCCL_ALGO=Ring,Tree`` where the caller's
    environment did), or None. Off: ``NCCL_NVLS_ENABLE=0``, or ``NCCL_ALGO`` that excludes
    NVLS (``^NVLS,...``) or lists algorithms without NVLS (``Ring,Tree``; NCCL's env docs:
    a comma list, ``^`` excludes, a ``func:`` prefix per collective)."""
    for key in ("NCCL_NVLS_ENABLE", "NCCL_ALGO"):
        value = env.get(key)
        if value is None:
            continue
        off = value.strip() == "0" if key == "NCCL_NVLS_ENABLE" else _algo_excludes_nvls(value)
        if off:
            src = f"{where}.env." if recipe.env.get(key) == value else "environment "
            return f"{src}{key}={value}"
    return None


def _algo_excludes_nvls(value: str) -> bool:
    """True where ``NCCL_ALGO`` leaves NVLS out of all_reduce (``^nvls``, ``Ring,Tree``,
    ``allreduce:ring``); a per-collective list for other collectives only does not."""
    spec = value.strip()
    parts = [p.strip() for p in spec.split(";") if p.strip()]
    for part in parts:
        func, _, algos = part.rpartition(":")
        if func and func.strip().lower() not in ("allreduce", "all_reduce"):
            continue
        names = algos.strip()
        excluded = names.startswith("^")
        listed = {a.strip().lower() for a in names.lstrip("^").split(",") if a.strip()}
        if excluded == ("nvls" in listed):
            return True
    return False


def nccl_outcome(
    op: str,
    status: Literal["pass", "fail", "error"],
    *,
    reasons: Sequence[str] = (),
    busbw_gbps: float | None = None,
    plateau_sizes: Sequence[int] = (),
    wrong: int = 0,
    ranks: int = 0,
    hosts: Sequence[str] = (),
    max_size_bytes: int | None = None,
    nccl_warnings: Sequence[str] = (),
    failure_site: str | None = None,
    requested: Mapping[str, Any] | None = None,
    effective: Mapping[str, Any] | None = None,
    logged_by: str | None = None,
    keys: Mapping[str, str] | None = None,
) -> Outcome:
    """The :class:`~nvtest.verdict.Outcome` of one nccl-tests run.

    ``status`` ``fail``: ``reasons`` are its failures; ``error``: its error (the reasons
    joined with ``; ``); ``pass``: the bandwidth is still to be judged against the SKU.
    The metrics are ``<op>_busbw_gbps`` (GB/s, the plateau busbw, None without plateau rows;
    labelled with the plateau's largest size) and ``wrong`` (count, the total ``#wrong`` over
    all rows, labelled with ``op``). The details, for the report, are
    ``op, status, busbw_gbps, plateau_sizes, wrong, ranks, hosts, max_size_bytes, reasons,
    nccl_warnings, failure_site`` (``common.cu:959`` of the first failure line),
    ``requested`` (what the command asked: ``max_bytes, plateau_bytes, ranks``), ``effective``
    (what the tool says it ran: sizes, validation, iterations, ranks, dtype) and
    ``logged_by`` (the one host whose process printed the failure, None when none or several did).
    ``keys``: the cause key of a reason where the judge knows it (:data:`WRONG_RESULTS`,
    :data:`VALIDATION_OFF`); the outcome's ``cause`` is the first reason's that has one.
    """
    out = Outcome(
        details={
            "op": op,
            "status": status,
            "busbw_gbps": busbw_gbps,
            "plateau_sizes": list(plateau_sizes),
            "wrong": wrong,
            "ranks": ranks,
            "hosts": list(hosts),
            "max_size_bytes": max_size_bytes,
            "reasons": list(reasons),
            "nccl_warnings": list(nccl_warnings),
            "failure_site": failure_site,
            "requested": dict(requested or {}),
            "effective": dict(effective or {}),
            "logged_by": logged_by,
        }
    )
    keys = keys or {}
    if status == "fail":
        for reason in reasons:
            out.fail(reason, keys.get(reason))
    elif status == "error":
        out.error = "; ".join(reasons)
        out.cause = next((keys[r] for r in reasons if r in keys), None)
    out.measure(f"{op}_busbw_gbps", busbw_gbps, "GB/s", size_bytes=max(plateau_sizes, default=0))
    out.measure("wrong", wrong, "count", op=op)
    return out


#: The cause keys the judge gives its own findings: results nccl-tests counted wrong
#: (``#wrong``, out-of-bounds values) and a run with nccl-tests' correctness check off (``-c 0``).
WRONG_RESULTS = "results:wrong"
VALIDATION_OFF = "nccl:validation_off"

#: nccl-tests' own line when it lowers the sweep's maximum (src/common.cu, nccl-tests 2.x).
REDUCED_RE = re.compile(r"Reducing maxBytes to (\d+) due to ([^\n]+)")


def _effective(run: NcclTestRun, reduced_to: int | None) -> dict[str, Any]:
    return {
        "min_bytes": run.min_bytes,
        "max_bytes": reduced_to if reduced_to is not None else run.max_bytes,
        "max_size_reached": run.max_size_bytes,
        "sizes": len(run.rows),
        "validation": run.validation,
        "iters": run.iters,
        "warmup_iters": run.warmup_iters,
        "gpus_per_process": run.n_gpus,
        "ranks": len(run.ranks),
        "hosts": list(run.hostnames),
        "gpus": list(run.gpu_names),
        "dtypes": sorted({r.dtype for r in run.rows}),
        "nccl_path": run.path.record(),
    }


def _path_fails(run: NcclTestRun, rdma_nics: int) -> tuple[list[str], list[str]]:
    """(fails, errors) of the path NCCL took where the SKU has ``rdma_nics`` RDMA NICs and the
    traffic must cross them (rule 4 of the module docstring)."""
    path, fails, errors = run.path, [], []
    where = f"the SKU has {rdma_nics} RDMA NICs (expect.ib_hcas)"
    if path.net_transport is None:
        errors.append(
            f"NCCL did not say which network it used (no 'Using network' or 'via NET/' line "
            f"with NCCL_DEBUG=INFO); {where}: the path is unproven"
        )
    elif path.net_transport == "Socket":
        line = path.socket_line or path.no_ib_device
        said = f"'{line.text}' (line {line.line})" if line else "channels via NET/Socket"
        why = f"; '{path.no_ib_device.text}'" if path.no_ib_device and line is not path.no_ib_device else ""
        fails.append(f"NCCL used TCP sockets, not RDMA: {said}{why}; {where}")
    for hca, line in path.gdr_disabled:
        fails.append(f"GPUDirect RDMA disabled on {hca}: '{line.text}' (line {line.line}); {where}, GPUDirect expected")
    staged = path.net_without_gdrdma
    if staged is not None and not path.gdr_disabled:
        fails.append(
            f"GPUDirect RDMA not used on an RDMA channel (no /GDRDMA): '{staged.text}' (line "
            f"{staged.line}); {where}, GPUDirect expected (NCCL_NET_GDR_LEVEL, the GPU-NIC PCIe "
            "distance)"
        )
    return fails, errors


def nvls_collnet_fails(run: NcclTestRun, op: str, *, nvls: bool, collnet: bool) -> tuple[list[str], str | None]:
    """(fails, note) of NVLink SHARP and CollNet for a run of ``op`` on a SKU that expects them
    (``nvls``: ``expect.nvls``; ``collnet``: ``expect.collnet``), from NCCL's INFO and WARN
    lines (:class:`~nvtest.parsers.nccl_tests.NcclPath`).

    The rule: only ``all_reduce``. An NVLS ``NCCL WARN`` (bind or CUDA failure of the multicast
    memory; NCCL prints it at WARN level too) fails, naming the line. The rest only on a log taken
    at ``NCCL_DEBUG=INFO`` (at least one ``NCCL INFO`` line; without one, the note says so): a
    ``not available on dev N`` line fails, naming the line. A log with INFO lines and no NVLS
    line at all (an NCCL older than 2.17 prints none; nor does one with ``NCCL_NVLS_ENABLE=0``
    or two GPUs or fewer) is a note, not a failure. CollNet: a multi-node run with no CollNet
    connected line fails.
    """
    path = run.path
    if op != "all_reduce" or not (nvls or collnet):
        return [], None
    said = " the SKU expects NVLink SHARP (expect.nvls)"
    # NCCL prints its WARN lines at WARN level too: a failure of NVLS is judged at any level
    fails = [f"NVLS failed: '{ln.text}' (line {ln.line});{said}" for ln in path.nvls_failures[:2] if nvls]
    if not path.info_lines:
        return fails, "NCCL printed no INFO line (NCCL_DEBUG not INFO): NVLS/CollNet availability not judged"
    note = None
    if nvls:
        for dev, line in path.nvls_unavailable[:2]:
            fails.append(f"NVLS not available on {dev}: '{line.text}' (line {line.line});{said}")
        if not path.nvls and not path.nvls_failures and path.nvls_channels is None:
            note = "NCCL printed no NVLS line (NCCL < 2.17, <= 2 GPUs or NCCL_NVLS_ENABLE=0): NVLS unproven"
        elif not path.nvls and not path.nvls_used and path.nvls_channels is not None:
            # NCCL >= 2.17 skips its availability line where NVLS is switched off or there are
            # <= 2 GPUs, and still prints its channel counts: "0 nvls channels"
            note = (
                f"NCCL set up 0 nvls channels and printed no NVLS availability line (<= 2 GPUs or "
                f"NCCL_NVLS_ENABLE=0): NVLS unproven ('{path.nvls_channels[1].text}', line {path.nvls_channels[1].line})"
            )
    if collnet and len(run.hostnames) > 1 and not path.collnet:
        plugin = f" ('{path.collnet_plugin.text}')" if path.collnet_plugin else " (no collnet plugin loaded)"
        fails.append(
            f"CollNet not connected across nodes{plugin}; the site expects the IB SHARP plugin (expect.collnet)"
        )
    return fails, note


#: The error of a run with nccl-tests' correctness check switched off.
VALIDATION_OFF_REASON = (
    "correctness gate switched off: nccl-tests ran with 'validation: 0' (-c 0), so #wrong was never checked"
)


def _gaps(
    run: NcclTestRun, requested: int | None, plateau_from: int | None, reduced: tuple[int, str] | None
) -> list[str]:
    """Why the threshold's point was not measured, naming the cause; or why no gate ran."""
    out = []
    if run.validation == 0:
        out.append(VALIDATION_OFF_REASON)
    if reduced is not None and plateau_from is not None and reduced[0] < plateau_from:
        out.append(
            f"the threshold's point ({plateau_from} bytes) was not measured: nccl-tests reduced "
            f"maxBytes to {reduced[0]} ('Reducing maxBytes to {reduced[0]} due to {reduced[1].strip()}'); "
            f"the sweep reached {run.max_size_bytes}"
        )
    elif run.rows and requested is not None and (run.max_size_bytes or 0) * 2 <= requested:
        out.append(
            f"the sweep stopped at {run.max_size_bytes} bytes before the requested {requested} "
            "(no line of the tool says why)"
        )
    return out


#: The host of an NCCL line: ``gpu-node-0001:6899:6960 [0] ...`` (host:pid:tid).
_HOST_RE = re.compile(r"^([\w.-]+):\d+:\d+ \[")


def _host_of(line: str) -> str | None:
    m = _HOST_RE.match(line.strip())
    return m.group(1) if m else None


def path_fails_of(run: NcclTestRun, rdma_nics: int | None) -> bool:
    """True when the path NCCL took fails the run (a finding of the whole launch, no one host's)."""
    return bool(rdma_nics and run.rows and _path_fails(run, rdma_nics)[0])


def judge_run(
    run: NcclTestRun,
    *,
    op: str,
    max_bytes: int | None = None,
    plateau_bytes: int | None = None,
    expected_ranks: int | None = None,
    reduced: tuple[int, str] | None = None,
    rdma_nics: int | None = None,
    nvls: bool = False,
    collnet: bool = False,
) -> Outcome:
    """Judge one parsed run (see the module docstring for the order of the rules).

    ``reduced``: (bytes, cause) of the tool's own ``Reducing maxBytes to N due to <cause>``.
    ``rdma_nics``: the SKU's RDMA NIC count when this run's traffic must cross the network
    (across nodes, NICs only); None or 0 leaves the path unjudged (rule 4).
    ``nvls``, ``collnet``: the SKU's ``expect.nvls`` / ``expect.collnet`` (rule 4,
    :func:`nvls_collnet_fails`).
    """
    requested = max_bytes if max_bytes is not None else run.max_bytes
    plateau_from = plateau_bytes if plateau_bytes is not None else requested
    warns = tuple(run.nccl_warnings[:20])
    common: dict[str, Any] = {
        "op": op,
        "wrong": run.wrong_total,
        "ranks": len(run.ranks),
        "hosts": run.hostnames,
        "max_size_bytes": run.max_size_bytes,
        "nccl_warnings": warns,
        "requested": {"max_bytes": requested, "plateau_bytes": plateau_from, "ranks": expected_ranks},
        "effective": _effective(run, reduced[0] if reduced else None),
    }
    plateau = [r for r in run.rows if plateau_from is not None and r.size_bytes * 2 > plateau_from]
    if plateau:
        common["plateau_sizes"] = tuple(r.size_bytes for r in plateau)
        common["busbw_gbps"] = sum(r.out_of_place.busbw_gbps for r in plateau) / len(plateau)
    fails: list[str] = []
    keys: dict[str, str] = {VALIDATION_OFF_REASON: VALIDATION_OFF}
    if run.wrong_total:
        bad = [r.size_bytes for r in run.rows if r.wrong]
        fails.append(f"#wrong = {run.wrong_total} (sizes {', '.join(map(str, bad[:5]))}): wrong results")
        keys[fails[-1]] = WRONG_RESULTS
    if run.oob_values or run.oob_ok is False:
        fails.append(f"out of bounds values: {run.oob_values} FAILED")
        keys[fails[-1]] = WRONG_RESULTS
    site = None
    if run.failures:
        f = run.failures[0]
        site = f.site
        where = f" on {f.host}" if f.host else ""
        # the first WARN says why (a generic "unhandled cuda error" does not): it leads with it
        why = f" after NCCL WARN '{warns[0].split('NCCL WARN', 1)[-1].strip()[:100]}'" if warns else ""
        fails.append(f"{f.kind} failure at {f.site}{where}{why}: {(f.message or 'no message').strip()}")
    path_errors: list[str] = []
    if rdma_nics and run.rows:
        path_fails, path_errors = _path_fails(run, rdma_nics)
        fails += path_fails
    nvls_fails, nvls_note = nvls_collnet_fails(run, op, nvls=nvls, collnet=collnet)
    fails += nvls_fails
    if nvls_note:
        common["effective"]["nvls_note"] = nvls_note
    faults = path_faults(run.nccl_warnings)
    fails += [f"NCCL WARN during the run: {w}" for w in faults[:2]]
    if fails:
        if warns and warns[0] not in faults[:2]:
            fails.append(f"NCCL WARN: {warns[0]}")
        logged = {f.host for f in run.failures if f.host} | {h for w in faults if (h := _host_of(w))}
        return nccl_outcome(
            status="fail",
            reasons=fails,
            failure_site=site,
            logged_by=logged.pop() if len(logged) == 1 and not path_fails_of(run, rdma_nics) else None,
            keys=keys,
            **common,
        )
    errors: list[str] = []
    if run.failure is not None:  # a launcher's words, or a table cut before its summary
        errors.append(f"nccl-tests: {run.failure.reason}")
    if not run.rows:
        errors.append("no result row")
    if expected_ranks is not None and run.ranks and len(run.ranks) < expected_ranks:
        errors.append(f"{len(run.ranks)} ranks listed, {expected_ranks} expected")
    errors += _gaps(run, requested, plateau_from, reduced)
    errors += path_errors
    if errors:
        if warns:
            errors.append(f"NCCL WARN: {warns[0]}")
        return nccl_outcome(status="error", reasons=errors, keys=keys, **common)
    return nccl_outcome(status="pass", **common)


def judge_output(
    text: str,
    *,
    op: str,
    max_bytes: int | None = None,
    plateau_bytes: int | None = None,
    expected_ranks: int | None = None,
    rdma_nics: int | None = None,
    nvls: bool = False,
    collnet: bool = False,
) -> Outcome:
    """Parse nccl-tests output and judge its first test (the one this command ran).

    Output that is not nccl-tests at all gives an ``error`` verdict naming the parse problem.
    ``rdma_nics``, ``nvls``, ``collnet``: see :func:`judge_run`.
    """
    try:
        log = nccl_tests.parse(text)
    except ParseError as exc:  # the tool's own last words first: why it printed no table
        return nccl_outcome(op, "error", reasons=(f"nccl-tests printed no report: {last_words(text)} ({exc})",))
    m = REDUCED_RE.search(text)
    return judge_run(
        log.tests[0],
        op=op,
        max_bytes=max_bytes,
        plateau_bytes=plateau_bytes,
        expected_ranks=expected_ranks,
        reduced=(int(m.group(1)), m.group(2)) if m else None,
        rdma_nics=rdma_nics,
        nvls=nvls,
        collnet=collnet,
    )


def expected_ranks_of(gpus_per_node: Sequence[int]) -> int:
    """Ranks a launch over nodes with these GPU counts must list (one per GPU)."""
    return sum(gpus_per_node)
