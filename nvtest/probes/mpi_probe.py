"""MPI probe: rank -> host map, barrier latency and allreduce bandwidth over MPI (mpi4py).

Run under a launcher, one process per rank::

    mpirun -np 4 --host n1:2,n2:2 python3 mpi_probe.py --sizes 1024,1048576,67108864
    srun --mpi=pmix -N2 --ntasks-per-node=2 python3 mpi_probe.py

Rank 0 prints the one JSON document (the contract of ``_contract.py``); the other ranks print
theirs on stderr. Keys beyond the contract:

``world_size``
    ``MPI.COMM_WORLD.Get_size()``.
``ranks``
    one entry per rank, gathered on rank 0: ``{"rank", "host", "processor_name",
    "slurm_node", "ssh_server", "local_rank", "pid"}``. ``host`` is ``gethostname()``;
    ``slurm_node`` is ``$SLURMD_NODENAME`` (the Slurm node name, set under srun);
    ``ssh_server`` the server address of ``$SSH_CONNECTION`` (the address the rank's node
    was reached at when the launcher started it over ssh, inherited from Open MPI's
    ``orted``). The controller maps a rank to an inventory node with these.
``barrier``
    ``{"n", "median_us", "min_us", "max_us"}``: per barrier, the slowest rank's time
    (``MPI.Wtime`` around ``Barrier``, microseconds), over ``--barriers`` barriers after
    ``--warmup`` untimed ones; the median is what the check judges.
``results``
    one entry per size: ``{"op": "all_reduce", "size_bytes", "count", "dtype": "float64",
    "iters", "time_s", "algbw_gbps", "busbw_gbps", "wrong"}``.

Bandwidths follow nccl-tests (doc/PERFORMANCE.md): ``algbw = S / t`` with ``S`` the buffer
size in bytes and ``t`` the median over iterations of the slowest rank's time, in GB/s
(10^9 B/s); ``busbw = algbw * 2 (n - 1) / n`` for all_reduce, ``n`` the number of ranks.

Verification is exact: in iteration ``i`` rank ``r`` sends ``r + 1 + i`` in every element,
so every element of the sum is ``n (n + 1) / 2 + n i``, a small integer that float64 holds
exactly whatever the reduction order; ``wrong`` counts the elements that differ (all
iterations, checked outside the timed region).

No mpi4py on the node: status ``skip`` with the import error. Uses numpy for the buffers
when present, else ``array.array('d')``.
"""

from __future__ import annotations

import os
import sys
from array import array
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _contract as contract  # noqa: E402
import _libraries as libs  # noqa: E402
import _timing as timing  # noqa: E402

PROBE = "mpi"
DEFAULT_SIZES = "1024,1048576,67108864"

#: Environment variables that carry a launcher's rank before MPI is initialised (Open MPI,
#: PMIx, Slurm, MPICH/PMI): the rank that prints the document when mpi4py is missing.
RANK_ENV = ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID", "PMI_RANK")

_rank = 0


def env_rank() -> int:
    """The launcher's rank of this process from :data:`RANK_ENV` (0 when none is set)."""
    for name in RANK_ENV:
        value = os.environ.get(name, "")
        if value.isdigit():
            return int(value)
    return 0


def busbw_factor(nranks: int) -> float:
    """all_reduce bus bandwidth factor ``2 (n - 1) / n`` (nccl-tests doc/PERFORMANCE.md)."""
    return 2.0 * (nranks - 1) / nranks if nranks > 0 else 0.0


def rank_identity(rank: int) -> dict[str, Any]:
    """What tells this rank's node apart: host name, Slurm node name, ssh server address."""
    ssh = os.environ.get("SSH_CONNECTION", "").split()
    local = os.environ.get("OMPI_COMM_WORLD_LOCAL_RANK") or os.environ.get("SLURM_LOCALID")
    return {
        "rank": rank,
        "host": contract.hostname(),
        "slurm_node": os.environ.get("SLURMD_NODENAME") or None,
        "ssh_server": ssh[2] if len(ssh) >= 4 else None,
        "local_rank": int(local) if local and local.isdigit() else None,
        "pid": os.getpid(),
    }


class Buffers:
    """float64 send/receive buffers of ``count`` elements (numpy when present, else array)."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.np, _ = libs.optional_import("numpy")
        if self.np is not None:
            self.send = self.np.empty(count, dtype=self.np.float64)
            self.recv = self.np.empty(count, dtype=self.np.float64)
        else:
            self.send = array("d", bytes(8 * count))
            self.recv = array("d", bytes(8 * count))

    def fill(self, value: float) -> None:
        """Every element of the send buffer = ``value``; the receive buffer is poisoned (-1)."""
        if self.np is not None:
            self.send.fill(value)
            self.recv.fill(-1.0)
        else:
            self.send[:] = array("d", [value]) * self.count
            self.recv[:] = array("d", [-1.0]) * self.count

    def wrong(self, expected: float) -> int:
        """Elements of the receive buffer that are not exactly ``expected``."""
        if self.np is not None:
            return int(self.np.count_nonzero(self.recv != expected))
        if self.recv == array("d", [expected]) * self.count:
            return 0
        return sum(1 for x in self.recv if x != expected)


def measure_barrier(mpi: Any, comm: Any, n: int, warmup: int) -> dict[str, Any]:
    """Median, min and max over ``n`` barriers of the slowest rank's barrier time (us)."""
    for _ in range(warmup):
        comm.Barrier()
    times = []
    for _ in range(n):
        t0 = mpi.Wtime()
        comm.Barrier()
        times.append(mpi.Wtime() - t0)
    per_rank = comm.allgather(times)
    slowest = [max(col) * 1e6 for col in zip(*per_rank)]  # noqa: B905 (py<3.10 nodes)
    s = timing.stats(slowest)
    return {"n": n, "median_us": s["median"], "min_us": s["min"], "max_us": s["max"]}


def measure_allreduce(mpi: Any, comm: Any, size_bytes: int, iters: int) -> dict[str, Any]:
    """One size: ``iters`` timed allreduces (one untimed first), verified exactly."""
    n, rank = comm.Get_size(), comm.Get_rank()
    count = max(1, size_bytes // 8)
    buf = Buffers(count)
    times, wrong = [], 0
    for i in range(-1, iters):  # i = -1: warm-up (connections, buffers), checked, not timed
        buf.fill(float(rank + 1 + max(i, 0)))
        comm.Barrier()
        t0 = mpi.Wtime()
        comm.Allreduce(buf.send, buf.recv, op=mpi.SUM)
        dt = mpi.Wtime() - t0
        wrong += buf.wrong(n * (n + 1) / 2 + n * max(i, 0))
        if i >= 0:
            times.append(comm.allreduce(dt, op=mpi.MAX))
    wrong = comm.allreduce(wrong, op=mpi.SUM)
    t = timing.stats(times)["median"]
    algbw = timing.gbps(count * 8, t)
    return {
        "op": "all_reduce",
        "size_bytes": count * 8,
        "count": count,
        "dtype": "float64",
        "iters": iters,
        "time_s": t,
        "algbw_gbps": algbw,
        "busbw_gbps": algbw * busbw_factor(n),
        "wrong": wrong,
    }


def body(args: Any, doc: dict[str, Any]) -> None:
    global _rank
    _rank = env_rank()
    mpi4py = libs.require("mpi4py")
    from mpi4py import MPI  # MPI_Init_thread happens here

    comm = MPI.COMM_WORLD
    _rank, n = comm.Get_rank(), comm.Get_size()
    doc["library"] = libs.library_label(mpi4py)
    doc["mpi_library"] = MPI.Get_library_version().strip("\x00 \n").splitlines()[0]
    doc["world_size"] = n
    doc["ranks"] = comm.gather(rank_identity(_rank), root=0)
    doc["barrier"] = measure_barrier(MPI, comm, args.barriers, args.warmup)
    doc["results"] = [measure_allreduce(MPI, comm, s, args.iters) for s in args.sizes]


def parser() -> contract.ProbeArgumentParser:
    p = contract.ProbeArgumentParser(prog="mpi_probe.py", description=__doc__.splitlines()[0])
    p.add_argument(
        "--sizes",
        type=contract.parse_index_list,
        default=contract.parse_index_list(DEFAULT_SIZES),
        help=f"allreduce buffer sizes in bytes, comma list (default {DEFAULT_SIZES})",
    )
    p.add_argument("--iters", type=int, default=5, help="timed allreduces per size (default 5)")
    p.add_argument("--barriers", type=int, default=200, help="timed barriers (default 200)")
    p.add_argument("--warmup", type=int, default=10, help="untimed barriers first (default 10)")
    return p


def main(argv: list[str] | None = None) -> int:
    rc = contract.run(PROBE, parser(), body, argv, emit=lambda _args: _rank == 0)
    if rc != contract.EXIT_OK and "mpi4py.MPI" in sys.modules:
        comm = sys.modules["mpi4py.MPI"].COMM_WORLD
        if comm.Get_size() > 1:  # the other ranks may wait in a collective: end the job
            comm.Abort(rc)
    return rc


if __name__ == "__main__":
    sys.exit(main())
