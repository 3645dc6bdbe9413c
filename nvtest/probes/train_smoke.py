"""Training smoke probe: a tiny causal transformer trained with DDP for a few steps.

Usage::

    torchrun --nnodes N --nproc-per-node G ... train_smoke.py [--steps 30] [--timeout-s 300]
    srun ... python3 train_smoke.py ...           # RANK/WORLD_SIZE or SLURM_PROCID/NTASKS
    python3 train_smoke.py [--nproc 2] [--device auto|cpu|cuda] [--steps 30]

Launched (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT in the environment, or
Slurm's SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID with MASTER_ADDR/PORT), the
process runs as that rank; standalone it spawns ``--nproc`` local ranks on a
free port of 127.0.0.1.  Backend nccl on GPUs (rank -> cuda:LOCAL_RANK), gloo
on CPU.  Rank 0 prints the JSON; other ranks write theirs to stderr.

Data: token sequences that walk a fixed random permutation of the vocabulary
(x[i+1] = perm[x[i]]) from a random start, seeded per rank; the next token is
a function of the current one, so a working model and optimizer must drive
the loss from ln(vocab) towards 0 within a few dozen steps.

``loss_fell``: mean of the last 5 losses < (1 - ``--min-drop``) x mean of the
first 5, and no NaN/inf.  Losses are averaged over ranks (all_reduce) per step.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import datetime  # noqa: E402
import math  # noqa: E402
import time  # noqa: E402
from collections.abc import Sequence  # noqa: E402
from typing import Any  # noqa: E402

import _contract as contract  # noqa: E402
import _cuda_start as cs  # noqa: E402
import _device_pool as pool  # noqa: E402
import _devices as hw  # noqa: E402
import _libraries as libs  # noqa: E402
import _ports as ports  # noqa: E402
import _timing as timing  # noqa: E402

PROBE = "train_smoke"
VOCAB, D_MODEL, HEADS, LAYERS, SEQ, BATCH = 64, 64, 4, 2, 32, 16
SEED = 1234
LOSS_WINDOW = 5


def loss_fell(losses: Sequence[float], min_drop: float, window: int = LOSS_WINDOW) -> bool:
    """mean(last ``window``) < (1 - min_drop) * mean(first ``window``), all finite."""
    if len(losses) < 2 * window or not all(math.isfinite(x) for x in losses):
        return False
    first = sum(losses[:window]) / window
    last = sum(losses[-window:]) / window
    return last < (1.0 - min_drop) * first


def launch_env(env: dict[str, str]) -> tuple[int, int, int] | None:
    """``(rank, world_size, local_rank)`` when launched by torchrun/srun, else None."""
    if not ("MASTER_ADDR" in env and "MASTER_PORT" in env):
        return None
    if "RANK" in env and "WORLD_SIZE" in env:
        return int(env["RANK"]), int(env["WORLD_SIZE"]), int(env.get("LOCAL_RANK", "0"))
    if "SLURM_PROCID" in env and "SLURM_NTASKS" in env:
        return int(env["SLURM_PROCID"]), int(env["SLURM_NTASKS"]), int(env.get("SLURM_LOCALID", "0"))
    return None


def build_model(torch: Any) -> Any:
    """Embedding + position embedding, LAYERS x (causal self-attention + MLP), LM head."""
    nn = torch.nn

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(D_MODEL), nn.LayerNorm(D_MODEL)
            self.attn = nn.MultiheadAttention(D_MODEL, HEADS, batch_first=True)
            self.mlp = nn.Sequential(nn.Linear(D_MODEL, 4 * D_MODEL), nn.GELU(),
                                     nn.Linear(4 * D_MODEL, D_MODEL))

        def forward(self, x: Any, mask: Any) -> Any:
            h = self.ln1(x)
            x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
            return x + self.mlp(self.ln2(x))

    class TinyLM(nn.Module):
        """tokens (batch, seq) int64 -> logits (batch, seq, VOCAB)."""

        def __init__(self) -> None:
            super().__init__()
            self.tok = nn.Embedding(VOCAB, D_MODEL)
            self.pos = nn.Embedding(SEQ, D_MODEL)
            self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
            self.ln = nn.LayerNorm(D_MODEL)
            self.head = nn.Linear(D_MODEL, VOCAB)

        def forward(self, tokens: Any) -> Any:
            t = tokens.shape[1]
            pos = torch.arange(t, device=tokens.device)
            x = self.tok(tokens) + self.pos(pos)
            mask = torch.ones(t, t, dtype=torch.bool, device=tokens.device).triu(1)  # True: hidden
            for block in self.blocks:
                x = block(x, mask)
            return self.head(self.ln(x))

    return TinyLM()


def make_batch(torch: Any, gen: Any, perm: Any, batch: int, seq: int) -> Any:
    """(batch, seq + 1) int64 tokens walking ``perm`` from random starts."""
    x = torch.empty(batch, seq + 1, dtype=torch.long)
    x[:, 0] = torch.randint(0, VOCAB, (batch,), generator=gen)
    for i in range(seq):
        x[:, i + 1] = perm[x[:, i]]
    return x


def train_rank(rank: int, world: int, local_rank: int, opts: dict[str, Any]) -> dict[str, Any]:
    """Run the smoke training as one rank; returns rank 0's result entry (others: their own)."""
    torch = libs.require("torch")
    import torch.distributed as dist

    cuda = opts["device"] == "cuda"
    if cuda:
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")
        torch.set_num_threads(max(1, hw.available_cpus() // max(1, opts.get("local_world", 1))))
    backend = "nccl" if cuda else "gloo"
    dist.init_process_group(backend, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=opts["timeout_s"]))
    try:
        torch.manual_seed(SEED)
        perm = torch.randperm(VOCAB, generator=torch.Generator().manual_seed(SEED))
        gen = torch.Generator().manual_seed(SEED + 1 + rank)
        model = build_model(torch).to(device)
        ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local_rank] if cuda else None)
        opt = torch.optim.AdamW(ddp.parameters(), lr=opts["lr"])
        losses, times = [], []
        for _ in range(opts["steps"]):
            batch = make_batch(torch, gen, perm, BATCH, SEQ).to(device)
            t0 = time.perf_counter()
            logits = ddp(batch[:, :-1])
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), batch[:, 1:].reshape(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            mean = loss.detach().clone()
            dist.all_reduce(mean)
            losses.append(float(mean) / world)
            times.append(time.perf_counter() - t0)
        ranks: list[Any] = [None] * world
        me = {"rank": rank, "host": contract.hostname(), "local_rank": local_rank, "device": str(device)}
        dist.all_gather_object(ranks, me)
    finally:
        dist.destroy_process_group()
    step_times = times[1:] or times  # step 0 includes DDP's first bucket set-up
    median = timing.stats(step_times)["median"]
    return {
        "device": opts["device"],
        "backend": backend,
        "world_size": world,
        "steps": len(losses),
        "losses": losses,
        "first_loss": losses[0],
        "last_loss": losses[-1],
        "loss_fell": loss_fell(losses, opts["min_drop"]),
        "any_nan": not all(math.isfinite(x) for x in losses),
        "step_time_median_s": median,
        "tokens_per_s": world * BATCH * SEQ / median,
        "ranks": sorted(ranks, key=lambda r: r["rank"]),
        "model": {"vocab": VOCAB, "d_model": D_MODEL, "heads": HEADS, "layers": LAYERS,
                  "seq": SEQ, "batch_per_rank": BATCH},
    }


def _rank_worker(device: str, payload: dict[str, Any]) -> dict[str, Any]:
    """Spawned standalone rank (``device`` = ``"rank:N"``): rendezvous env, then train."""
    rank, world = int(device.split(":")[1]), payload["world"]
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(payload["port"]), RANK=str(rank),
                      WORLD_SIZE=str(world), LOCAL_RANK=str(rank))
    return train_rank(rank, world, rank, payload["opts"])


def run_standalone(nproc: int, opts: dict[str, Any]) -> dict[str, Any]:
    """Spawn ``nproc`` local ranks; rank 0's entry, or ProbeError naming the failing ranks."""
    ctx = libs.require("torch.multiprocessing").get_context("spawn")
    payload = {"world": nproc, "port": ports.free_port(), "opts": {**opts, "local_world": nproc}}
    ranks = [f"rank:{r}" for r in range(nproc)]
    answers = pool.run_per_device(_rank_worker, ranks, payload, opts["timeout_s"] + 60, context=ctx)
    problems = [f"{a['device']}: {a['reason']}" for a in answers if a.get("status") in ("error", "skip")]
    if problems:
        raise contract.ProbeError("; ".join(problems))
    return answers[0]


def build_parser() -> contract.ProbeArgumentParser:
    parser = contract.ProbeArgumentParser(prog="train_smoke.py", description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    parser.add_argument("--nproc", type=int, default=2, help="standalone: local ranks to spawn")
    parser.add_argument("--steps", type=int, default=30, help="training steps (>= 20)")
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--min-drop", type=float, default=0.1,
                        help="required relative fall of the loss, last 5 vs first 5 steps")
    parser.add_argument("--timeout-s", type=float, default=300.0,
                        help="per rank: process-group timeout and standalone wait")
    return parser


def body(args: Any, doc: dict[str, Any]) -> None:
    if args.steps < 2 * LOSS_WINDOW:
        raise contract.ProbeError(f"usage error: --steps must be >= {2 * LOSS_WINDOW} (20 recommended)")
    torch = libs.require("torch")
    device = args.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():  # asked for the GPUs: an error
        raise contract.ProbeError(cs.cuda_failure("torch.cuda.is_available() is False"), cs.CAUSE)
    opts = {"device": device, "steps": args.steps, "lr": args.lr, "min_drop": args.min_drop,
            "timeout_s": args.timeout_s}
    doc.update(library=libs.library_label(torch), device=device)
    launch = launch_env(dict(os.environ))
    if launch:
        rank, world, local_rank = launch
        doc.update(mode="launched", rank=rank)
        result = train_rank(rank, world, local_rank, opts)
    else:
        if device == "cuda" and args.nproc > torch.cuda.device_count():
            raise contract.ProbeError(f"--nproc {args.nproc} > {torch.cuda.device_count()} visible GPUs")
        doc.update(mode="standalone", rank=0)
        result = run_standalone(args.nproc, opts)
    doc["results"] = [result]


def _is_rank0(_args: Any) -> bool:
    launch = launch_env(dict(os.environ))
    return launch is None or launch[0] == 0


if __name__ == "__main__":
    code = contract.run(PROBE, build_parser(), body, emit=_is_rank0)
    if launch_env(dict(os.environ)):
        # under torchrun the document is out and the process group destroyed: leave without
        # the interpreter's teardown, where torch/gloo threads still joinable at exit abort
        # the rank ("terminate called without an active exception", SIGABRT) after a
        # complete, correct run, and torchrun reports the run failed
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)
