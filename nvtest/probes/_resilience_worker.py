"""One rank of the drill training run: the smoke model, periodic checkpoints, resume, events.

Run by a launcher (``ft_launcher`` or ``torchrun``) through
``resilience_train.py train``; the launcher sets RANK, WORLD_SIZE, LOCAL_RANK,
MASTER_ADDR/PORT and TORCHELASTIC_RESTART_COUNT (under a requeued Slurm job,
SLURM_RESTART_COUNT gives the incarnation).  The model, the data walk and
the loss are those of ``train_smoke.py`` (imported, not copied).

Determinism (what makes "same loss trajectory after the resume" testable):
the batch of step ``s`` on rank ``r`` is drawn from a generator seeded with
``seed * 1_000_003 + r * 10_007 + s`` (a function of the step, not of the
history), one intra-op thread, deterministic algorithms, gloo on CPU.  A
checkpoint holds the model and AdamW state after step ``s``; a resumed run
loads the newest one and continues with step ``s + 1``.

Sections timed per step (seconds, ``time.perf_counter``): ``data`` (batch),
``forward`` (forward + loss: no communication), ``backward`` (includes the DDP
gradient all-reduce: a fast rank waits here for a slow one), ``optimizer``.
An injected straggler sleeps inside ``forward`` of its rank.
"""

from __future__ import annotations

import datetime
import os
import signal
import socket
import time
from typing import Any

import _libraries as libs
import _resilience_events as rev
import _resilience_straggler as rs
import train_smoke as smoke

#: Sections that contain a collective: a fast rank waits in them for the slow one.
COMM_SECTIONS = ("backward",)


def batch_seed(seed: int, rank: int, step: int) -> int:
    """Seed of the batch of ``step`` on ``rank`` (a pure function: replays are identical)."""
    return seed * 1_000_003 + rank * 10_007 + step


def checkpoint_steps(ckpt_dir: str) -> list[int]:
    """Steps of the complete checkpoints ``step_<n>.pt`` in ``ckpt_dir``, ascending ([] if none)."""
    if not os.path.isdir(ckpt_dir):
        return []
    steps = []
    for name in os.listdir(ckpt_dir):
        if name.startswith("step_") and name.endswith(".pt"):
            try:
                steps.append(int(name[5:-3]))
            except ValueError:
                continue
    return sorted(steps)


def latest_checkpoint(ckpt_dir: str) -> tuple[int, str] | None:
    """``(step, path)`` of the newest complete checkpoint ``step_<n>.pt`` in ``ckpt_dir``."""
    steps = checkpoint_steps(ckpt_dir)
    return (steps[-1], os.path.join(ckpt_dir, f"step_{steps[-1]}.pt")) if steps else None


def agreed_resume_step(torch: Any, dist: Any, ckpt_dir: str) -> int:
    """The step every rank resumes from: the smallest of the ranks' newest checkpoints (0: none).

    Each rank reads its own checkpoint directory (node-local ones differ when a node
    lost its last save to the kill); the MIN all-reduce makes every rank load the same
    step, which every directory still holds (two are kept).
    """
    steps = checkpoint_steps(ckpt_dir) if ckpt_dir else []
    mine = torch.tensor([steps[-1] if steps else 0], dtype=torch.int64)
    dist.all_reduce(mine, op=dist.ReduceOp.MIN)
    return int(mine.item())


def save_checkpoint(torch: Any, ckpt_dir: str, step: int, state: dict[str, Any], keep: int = 2) -> float:
    """Write ``state`` atomically (tmp, fsync, rename) as ``step_<step>.pt``; seconds taken.

    Older checkpoints beyond the newest ``keep`` are removed.
    """
    t0 = time.perf_counter()
    os.makedirs(ckpt_dir, exist_ok=True)
    final = os.path.join(ckpt_dir, f"step_{step}.pt")
    tmp = final + f".tmp{os.getpid()}"
    with open(tmp, "wb") as fh:
        torch.save(state, fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, final)
    steps = sorted(int(n[5:-3]) for n in os.listdir(ckpt_dir) if n.startswith("step_") and n.endswith(".pt"))
    for old in steps[:-keep]:
        try:
            os.remove(os.path.join(ckpt_dir, f"step_{old}.pt"))
        except FileNotFoundError:
            pass
    return time.perf_counter() - t0


def agreed_generation(store: Any, rank: int) -> int:
    """The worker group's generation, the same number on every rank of one incarnation.

    The launchers' restart counts differ between nodes of one job (an agent restarted
    for a membership change does not count it), so the ranks agree through the store:
    ``nvtest/generation`` holds the current generation ``g``; a rank that finds its own
    ``nvtest/g<g>/joined/<rank>`` key already set belongs to the next incarnation and
    moves the counter to ``g + 1`` (compare-and-set: the first such rank does it, the
    others read the result).  A store that is new per incarnation (ft_launcher's) gives 0.
    """
    gen = int(store.add("nvtest/generation", 0))
    if store.check([f"nvtest/g{gen}/joined/{rank}"]):
        store.compare_set("nvtest/generation", str(gen), str(gen + 1))
        gen = int(store.add("nvtest/generation", 0))
    store.set(f"nvtest/g{gen}/joined/{rank}", "1")
    return gen


def incarnation_store(dist: Any, rank: int, world: int, timeout: Any) -> tuple[Any, int]:
    """The launcher's store under a prefix of its own per incarnation; ``(store, generation)``.

    Without it, the gloo ranks of a restarted group can read the previous
    incarnation's addresses from the shared store and fail to connect
    ("Connection refused"), as seen with torchrun 2.13 restarts.  Under an
    elastic agent (``TORCHELASTIC_USE_AGENT_STORE=True``) the agent hosts the
    store; otherwise rank 0 does.  The generation is :func:`agreed_generation`.
    """
    agent = os.environ.get("TORCHELASTIC_USE_AGENT_STORE", "").lower() == "true"
    base = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), world,
                         is_master=not agent and rank == 0, timeout=timeout)
    gen = agreed_generation(base, rank)
    return dist.PrefixStore(f"nvtest/incarnation{gen}", base), gen


class Heartbeat:
    """Heartbeats to ft_launcher's rank monitor when the worker runs under it; else no-ops.

    One heartbeat is an IPC round trip to the rank monitor (about 2 ms on a busy
    CPU node), so :meth:`beat` sends at most one per ``interval_s`` seconds (the
    launcher's rank heartbeat timeout is 30 s in the drills).
    """

    def __init__(self, enabled: bool, interval_s: float = 1.0) -> None:
        self.interval_s = interval_s
        self._last = float("-inf")
        self.sent = 0
        self.client: Any = None
        self.reason: str | None = None
        if not enabled:
            self.reason = "not under ft_launcher"
            return
        mod, why = libs.optional_import("nvidia_resiliency_ext.fault_tolerance")
        if mod is None:
            self.reason = why
            return
        try:
            self.client = mod.RankMonitorClient()
            self.client.init_workload_monitoring()
        except Exception as exc:  # noqa: BLE001 - heartbeats are optional to the drill
            self.client, self.reason = None, f"{type(exc).__name__}: {exc}"

    def beat(self) -> None:
        if self.client is None:
            return
        now = time.monotonic()
        if now - self._last >= self.interval_s:
            self.client.send_heartbeat()
            self._last = now
            self.sent += 1

    def close(self) -> None:
        if self.client is not None:
            try:
                self.client.shutdown_workload_monitoring()
            except Exception:  # noqa: BLE001
                pass


def train(opts: dict[str, Any]) -> dict[str, Any]:
    """Train as the launched rank; returns this rank's summary (rank 0's holds the losses).

    ``opts``: steps, seed, lr, ckpt_dir, ckpt_every, events_dir, machinery (bool),
    slow_rank, slow_s, under_ft (bool), timeout_s, report_every; optional hold_at (step) and
    hold_s (seconds): in incarnation 0, after step ``hold_at`` and its checkpoint, every rank
    logs a ``hold`` event and sleeps ``hold_s`` seconds (the requeue drill requeues the job
    there, so the job cannot finish before the requeue lands).
    """
    t_start = time.time()
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    incarnation = int(os.environ.get("TORCHELASTIC_RESTART_COUNT") or os.environ.get("SLURM_RESTART_COUNT") or 0)
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    log = rev.EventLog(opts["events_dir"], rank, incarnation) if opts["events_dir"] else None
    if log:
        log.emit("start", t=t_start, local_rank=local_rank, group_rank=int(os.environ.get("GROUP_RANK", 0)),
                 host=socket.gethostname())

    def on_sigterm(signum: int, _frame: Any) -> None:
        if log:
            log.emit("sigterm", signal=signum)
        os._exit(128 + signum)

    signal.signal(signal.SIGTERM, on_sigterm)
    torch = libs.require("torch")
    import torch.distributed as dist

    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    hb = Heartbeat(opts["machinery"] and opts["under_ft"])
    timeout = datetime.timedelta(seconds=opts["timeout_s"])
    store, generation = incarnation_store(dist, rank, world, timeout)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world, timeout=timeout)
    timer = rs.SectionTimer(enabled=opts["machinery"])
    # who writes checkpoints: local rank 0 of every node into its node's directory ("node"),
    # or global rank 0 alone into a directory every node reads ("job")
    saver = rank == 0 if opts.get("ckpt_scope") == "job" else local_rank == 0
    try:
        if log:
            log.emit("ready", generation=generation)
        torch.manual_seed(smoke.SEED)
        perm = torch.randperm(smoke.VOCAB, generator=torch.Generator().manual_seed(smoke.SEED))
        model = smoke.build_model(torch)
        ddp = torch.nn.parallel.DistributedDataParallel(model)
        opt = torch.optim.AdamW(ddp.parameters(), lr=opts["lr"])
        start_step = 0
        resume_at = agreed_resume_step(torch, dist, opts["ckpt_dir"])
        found = (resume_at, os.path.join(opts["ckpt_dir"], f"step_{resume_at}.pt")) if resume_at else None
        if found:
            t0 = time.perf_counter()
            state = torch.load(found[1], weights_only=True)
            model.load_state_dict(state["model"])
            opt.load_state_dict(state["optimizer"])
            start_step = int(state["step"])
            if log:
                log.emit("resume", step=start_step, load_s=time.perf_counter() - t0, path=found[1])
        losses: dict[int, float] = {}
        step_times: list[float] = []
        machinery_s = 0.0  # seconds spent in heartbeats and the per-step event (outside dt)
        slow = opts["slow_s"] if opts["slow_rank"] == rank else 0.0
        for step in range(start_step + 1, opts["steps"] + 1):
            t0 = time.perf_counter()
            with timer.section("data"):
                gen = torch.Generator().manual_seed(batch_seed(opts["seed"], rank, step))
                batch = smoke.make_batch(torch, gen, perm, smoke.BATCH, smoke.SEQ)
            with timer.section("forward"):
                logits = ddp(batch[:, :-1])
                loss = torch.nn.functional.cross_entropy(logits.reshape(-1, smoke.VOCAB),
                                                         batch[:, 1:].reshape(-1))
                if slow:
                    time.sleep(slow)
            with timer.section("backward"):
                opt.zero_grad(set_to_none=True)
                loss.backward()
            with timer.section("optimizer"):
                opt.step()
            mean = loss.detach().clone()
            dist.all_reduce(mean)
            losses[step] = float(mean) / world
            dt = time.perf_counter() - t0
            step_times.append(dt)
            t_m = time.perf_counter()
            hb.beat()
            if log and opts["machinery"]:
                log.emit("step", step=step, loss=losses[step], dt=dt)
            machinery_s += time.perf_counter() - t_m
            if opts["ckpt_dir"] and opts["ckpt_every"] and step % opts["ckpt_every"] == 0 and saver:
                save_s = save_checkpoint(torch, opts["ckpt_dir"], step,
                                         {"model": model.state_dict(), "optimizer": opt.state_dict(),
                                          "step": step})
                if log:
                    log.emit("ckpt", step=step, save_s=save_s)
            if opts.get("hold_at") and step == opts["hold_at"] and incarnation == 0:
                if log:
                    log.emit("hold", step=step, hold_s=opts.get("hold_s", 0.0))
                time.sleep(float(opts.get("hold_s", 0.0)))
        scores = rs.gather_scores(torch, dist, timer, rank, world, exclude=COMM_SECTIONS) if opts["machinery"] else None
        dist.barrier()
        if log:
            log.emit("done", steps=len(step_times))
    except Exception as exc:
        if log:
            log.emit("error", reason=f"{type(exc).__name__}: {exc}"[:500])
        raise
    finally:
        hb.close()
    # No destroy_process_group(): with gloo under an elastic agent it can block after the peer
    # has exited; the process exits right after writing its summary (worker_main).
    return {
        "rank": rank, "world_size": world, "incarnation": incarnation, "start_step": start_step,
        "losses": {str(k): v for k, v in losses.items()}, "step_times_s": step_times,
        "machinery_s_per_step": machinery_s / max(1, len(step_times)),
        "heartbeats": hb.client is not None, "heartbeats_sent": hb.sent, "heartbeat_reason": hb.reason, "straggler": scores,
    }
