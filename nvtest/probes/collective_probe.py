"""Collective bandwidth with torch.distributed (the fallback when nccl-tests is absent).

Usage::

    python3 collective_probe.py [--nproc 2] [--ops all_reduce,all_gather,reduce_scatter,alltoall]
        [--sizes 1048576,67108864] [--iters 5] [--device auto|cpu|cuda]
    torchrun --nnodes N --nproc-per-node G ... collective_probe.py [same options]

Launched (RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT set by torchrun) the process is that rank;
standalone it spawns ``--nproc`` local ranks on a free port of 127.0.0.1. Backend ``nccl`` on
GPUs (rank -> cuda:LOCAL_RANK), ``gloo`` on CPU. Rank 0 prints the JSON document.

Per operation and size (bytes of float32, as nccl-tests counts them: the whole buffer, i.e.
the gathered output of all_gather and the input of reduce_scatter):

- ``time_us``: the slowest rank's mean time per call over ``--iters`` calls after one warm-up;
- ``algbw_gbps`` = size / time / 1e9;
- ``busbw_gbps`` = algbw x factor(op, n), nccl-tests' bus-bandwidth factors
  (NVIDIA/nccl-tests doc/PERFORMANCE.md; alltoall from src/alltoall.cu):
  all_reduce 2(n-1)/n; all_gather, reduce_scatter, alltoall (n-1)/n; broadcast, reduce 1;
- ``wrong``: elements that differ from the exact expected result of a check call made
  before timing (inputs are small integers in float32, so sums are exact), over all ranks.

An operation the backend does not implement is reported with ``skipped`` and the reason.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import datetime  # noqa: E402
import socket  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

import _contract as contract  # noqa: E402
import _cuda_start as cs  # noqa: E402
import _devices as hw  # noqa: E402
import _libraries as libs  # noqa: E402
import _ports as ports  # noqa: E402

PROBE = "collectives"
OPS = ("all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast")


def bus_factor(op: str, n: int) -> float:
    """nccl-tests' busbw / algbw factor for ``op`` over ``n`` ranks."""
    if op == "all_reduce":
        return 2.0 * (n - 1) / n
    if op in ("all_gather", "reduce_scatter", "alltoall"):
        return (n - 1) / n
    if op in ("broadcast", "reduce"):
        return 1.0
    raise ValueError(f"unknown operation {op!r}")


def expected_wrong(torch: Any, op: str, out: Any, n: int, rank: int) -> int:
    """Elements of ``out`` (after the check call) that differ from the exact result."""
    if op == "all_reduce":
        want = torch.full_like(out, n * (n + 1) / 2)
    elif op == "all_gather":
        want = torch.arange(1, n + 1, dtype=out.dtype, device=out.device).repeat_interleave(out.numel() // n)
    elif op == "reduce_scatter":
        want = torch.full_like(out, (rank + 1) * n)
    elif op == "alltoall":
        want = torch.arange(1, n + 1, dtype=out.dtype, device=out.device).repeat_interleave(out.numel() // n)
    else:  # broadcast from rank 0
        want = torch.full_like(out, 1.0)
    return int((out != want).sum())


def make_call(torch: Any, dist: Any, op: str, count: int, n: int, rank: int, device: Any) -> tuple[Any, Any, Any]:
    """(call, reset, output) for ``op`` on ``count`` float32 elements (a multiple of n)."""
    f32 = torch.float32
    if op == "all_reduce":
        buf = torch.empty(count, dtype=f32, device=device)
        return (lambda: dist.all_reduce(buf)), (lambda: buf.fill_(rank + 1)), buf
    if op == "all_gather":
        inp = torch.full((count // n,), float(rank + 1), dtype=f32, device=device)
        out = torch.empty(count, dtype=f32, device=device)
        return (lambda: dist.all_gather_into_tensor(out, inp)), (lambda: out.zero_()), out
    if op == "reduce_scatter":
        # input chunk j = (j + 1) on every rank: rank r receives n * (r + 1)
        inp = torch.arange(1, n + 1, dtype=f32, device=device).repeat_interleave(count // n)
        out = torch.empty(count // n, dtype=f32, device=device)
        return (lambda: dist.reduce_scatter_tensor(out, inp)), (lambda: out.zero_()), out
    if op == "alltoall":
        inp = torch.full((count,), float(rank + 1), dtype=f32, device=device)
        out = torch.empty(count, dtype=f32, device=device)
        return (lambda: dist.all_to_all_single(out, inp)), (lambda: out.zero_()), out
    buf = torch.empty(count, dtype=f32, device=device)
    return (lambda: dist.broadcast(buf, 0)), (lambda: buf.fill_(1.0 if rank == 0 else 0.0)), buf


def measure(torch: Any, dist: Any, op: str, size: int, iters: int, n: int, rank: int, device: Any) -> dict[str, Any]:
    count = max(n, (size // 4) // n * n)
    nbytes = count * 4
    call, reset, out = make_call(torch, dist, op, count, n, rank, device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    try:
        reset()
        call()
        sync()
    except (RuntimeError, NotImplementedError, ValueError) as exc:
        return {"op": op, "size_bytes": nbytes, "skipped": f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"}
    wrong = torch.tensor([expected_wrong(torch, op, out, n, rank)], dtype=torch.float64, device=device)
    dist.all_reduce(wrong)
    reset()
    call()  # warm-up
    sync()
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(iters):
        call()
    sync()
    elapsed = torch.tensor([(time.perf_counter() - t0) / iters], dtype=torch.float64, device=device)
    dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
    t = float(elapsed)
    algbw = nbytes / t / 1e9
    return {"op": op, "size_bytes": nbytes, "count": count, "time_us": t * 1e6, "algbw_gbps": algbw,
            "busbw_gbps": algbw * bus_factor(op, n), "bus_factor": bus_factor(op, n), "wrong": int(float(wrong))}


def run_rank(rank: int, world: int, local_rank: int, opts: dict[str, Any]) -> dict[str, Any]:
    """All operations and sizes as one rank; rank 0's document body."""
    torch = libs.require("torch")
    import torch.distributed as dist

    cuda = opts["device"] == "cuda"
    if cuda:
        torch.cuda.set_device(local_rank)
    device = torch.device("cuda", local_rank) if cuda else torch.device("cpu")
    backend = "nccl" if cuda else "gloo"
    dist.init_process_group(backend, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=opts["timeout_s"]))
    try:
        results = [measure(torch, dist, op, size, opts["iters"], world, rank, device)
                   for op in opts["ops"] for size in opts["sizes"]]
        ranks: list[Any] = [None] * world
        dist.all_gather_object(ranks, {"rank": rank, "host": socket.gethostname(), "local_rank": local_rank,
                                       "device": str(device)})
    finally:
        dist.destroy_process_group()
    return {"backend": backend, "world_size": world, "results": results, "ranks": ranks}


def _spawned(local: int, world: int, port: int, opts: dict[str, Any], queue: Any) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    out = run_rank(local, world, local, opts)
    if local == 0:
        queue.put(out)


def launched_rank() -> tuple[int, int, int] | None:
    """(rank, world, local rank) under torchrun, else None."""
    env = os.environ
    if "RANK" in env and "WORLD_SIZE" in env and "MASTER_ADDR" in env:
        return int(env["RANK"]), int(env["WORLD_SIZE"]), int(env.get("LOCAL_RANK", "0"))
    return None


def build_parser() -> contract.ProbeArgumentParser:
    parser = contract.ProbeArgumentParser(prog="collective_probe.py", description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    parser.add_argument("--nproc", type=int, default=2, help="standalone: local ranks to spawn")
    parser.add_argument("--ops", type=contract.parse_name_list, default=list(OPS[:4]))
    parser.add_argument("--sizes", type=contract.parse_index_list, default=[1 << 20, 1 << 26],
                        help="comma list of sizes in bytes")
    parser.add_argument("--iters", type=int, default=5)
    parser.add_argument("--timeout-s", type=float, default=300.0)
    return parser


def body(args: Any, doc: dict[str, Any]) -> None:
    torch = libs.require("torch")
    bad = [o for o in args.ops if o not in OPS]
    if bad:
        raise contract.ProbeError(f"usage error: unknown operation(s) {bad}; known: {', '.join(OPS)}")
    device = args.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():  # asked for the GPUs: an error
        raise contract.ProbeError(cs.cuda_failure("torch.cuda.is_available() is False"), cs.CAUSE)
    opts = {"device": device, "ops": args.ops, "sizes": args.sizes, "iters": max(1, args.iters),
            "timeout_s": args.timeout_s}
    doc.update(library=libs.library_label(torch), device=device)
    launched = launched_rank()
    if launched:
        rank, world, local = launched
        doc.update(mode="launched", rank=rank)
        doc.update(run_rank(rank, world, local, opts))
        return
    if device == "cpu":
        torch.set_num_threads(max(1, hw.available_cpus() // max(1, args.nproc)))
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    mp.start_processes(_spawned, args=(args.nproc, ports.free_port(), opts, queue), nprocs=args.nproc,
                       join=True, start_method="spawn")
    doc.update(mode="standalone", rank=0)
    doc.update(queue.get())


def _is_rank0(_args: Any) -> bool:
    launched = launched_rank()
    return launched is None or launched[0] == 0


if __name__ == "__main__":
    sys.exit(contract.run(PROBE, build_parser(), body, emit=_is_rank0))
