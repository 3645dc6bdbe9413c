"""In-process restart drill: nvidia-resiliency-ext's ``inprocess.Wrapper`` around the training loop.

The ranks are started once (``torchrun --max-restarts 0``); the wrapped
function builds the process group from a per-iteration ``PrefixStore``,
restores the model from the newest in-memory snapshot and trains.  At step
``--kill-step`` of iteration 0 rank ``--kill-rank`` raises an exception (a
process that dies cannot restart in-process: the fault here is an exception,
not SIGKILL); the wrapper aborts the process group on every rank and calls the
function again (iteration 1) in the same processes.

``recovery_s`` = (latest first step of iteration 1 over ranks) - (time of the
fault).  ``resumed`` is true when every rank finished all steps.
"""

from __future__ import annotations

import datetime
import os
import time
import typing
from typing import Any

import _contract as contract
import _libraries as libs
import _ports as ports
import _resilience_events as rev

#: gloo process-group timeout, seconds: gloo collectives cannot be aborted, so a healthy rank
#: blocked in one waits this long before the wrapper can restart it.
PG_TIMEOUT_S = 10.0

GLOO_NOTE = ("inprocess.AbortTorchDistributed aborts only ProcessGroupNCCL backends; a gloo collective "
             "cannot be aborted, so a healthy rank blocked in one waits out the process-group timeout "
             f"({PG_TIMEOUT_S:g} s here) before the wrapper restarts it: on CPU the recovery time is bounded "
             "below by that timeout, not by the wrapper")


def worker_main(argv: list[str]) -> int:
    """One rank under torchrun: the wrapped training loop."""
    import argparse

    p = argparse.ArgumentParser(prog="resilience_train.py inprocess-train")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--ckpt-every", type=int, default=5)
    p.add_argument("--kill-rank", type=int, default=1)
    p.add_argument("--kill-step", type=int, default=8)
    p.add_argument("--events-dir", required=True)
    p.add_argument("--pg-timeout-s", type=float, default=PG_TIMEOUT_S)
    a = p.parse_args(argv)
    torch = libs.require("torch")
    inprocess = libs.require("nvidia_resiliency_ext.inprocess")
    import torch.distributed as dist
    import train_smoke as smoke

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.set_num_threads(1)
    snapshot: dict[str, Any] = {}
    base_store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]) + 1, world,
                               is_master=rank == 0, multi_tenant=True, wait_for_workers=True)

    def train(call_wrapper: inprocess.CallWrapper | None = None) -> int:
        it = call_wrapper.iteration if call_wrapper is not None else 0
        log = rev.EventLog(a.events_dir, rank, it)
        log.emit("start")
        store = dist.PrefixStore(f"iter{it}", base_store)
        dist.init_process_group("gloo", store=store, rank=rank, world_size=world,
                                timeout=datetime.timedelta(seconds=a.pg_timeout_s))
        log.emit("ready")
        torch.manual_seed(smoke.SEED)
        perm = torch.randperm(smoke.VOCAB, generator=torch.Generator().manual_seed(smoke.SEED))
        model = smoke.build_model(torch)
        ddp = torch.nn.parallel.DistributedDataParallel(model)
        opt = torch.optim.AdamW(ddp.parameters(), lr=3e-3)
        start = 0
        if snapshot:
            model.load_state_dict(snapshot["model"])
            opt.load_state_dict(snapshot["optimizer"])
            start = snapshot["step"]
            log.emit("resume", step=start, load_s=0.0)
        for step in range(start + 1, a.steps + 1):
            if it == 0 and rank == a.kill_rank and step == a.kill_step:
                log.emit("fault", step=step)
                raise RuntimeError(f"injected fault on rank {rank} at step {step}")
            gen = torch.Generator().manual_seed(1234 * 1_000_003 + rank * 10_007 + step)
            batch = smoke.make_batch(torch, gen, perm, smoke.BATCH, smoke.SEQ)
            loss = torch.nn.functional.cross_entropy(ddp(batch[:, :-1]).reshape(-1, smoke.VOCAB),
                                                     batch[:, 1:].reshape(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            log.emit("step", step=step, loss=float(loss.detach()))
            if step % a.ckpt_every == 0:
                snapshot.update(model={k: v.clone() for k, v in model.state_dict().items()},
                                optimizer=opt.state_dict(), step=step)
        log.emit("done", steps=a.steps - start)
        log.close()
        dist.barrier()
        # Leave here: after a successful return the wrapper's completion path tears the gloo
        # group down with destroy_process_group(), which did not return in our CPU runs.
        os._exit(0)

    # the wrapper finds its argument by the annotation's class: give it the class, not a string
    train.__annotations__["call_wrapper"] = typing.Optional[inprocess.CallWrapper]  # noqa: UP045
    wrapped = inprocess.Wrapper(
        health_check=None,
        soft_timeout=datetime.timedelta(seconds=30), hard_timeout=datetime.timedelta(seconds=40),
        barrier_timeout=datetime.timedelta(seconds=60), completion_timeout=datetime.timedelta(seconds=60),
        heartbeat_timeout=datetime.timedelta(seconds=20),
    )(train)
    wrapped()
    os._exit(0)


def drill(args: Any, workdir: str) -> dict[str, Any]:
    """Run the in-process drill under torchrun; skip with the reason when the wrapper cannot apply."""
    mod, why = libs.optional_import("nvidia_resiliency_ext.inprocess")
    if mod is None:
        raise contract.ProbeSkip(f"in-process restart needs nvidia-resiliency-ext: {why}")
    import _resilience_launch as rl

    events_dir = os.path.join(workdir, "inprocess", "events")
    os.makedirs(events_dir, exist_ok=True)
    kill_step = args.ckpt_every + 2 if args.kill_step == "random" else int(args.kill_step)
    script = ["--steps", str(args.steps), "--ckpt-every", str(args.ckpt_every), "--kill-rank", str(args.kill_rank),
              "--kill-step", str(kill_step), "--events-dir", events_dir]
    argv = rl.launcher_argv("torchrun", args.nproc, 0, ports.free_port(), script)
    argv[argv.index("train")] = "inprocess-train"
    res = rl.run_launch(argv, events_dir, os.path.join(workdir, "inprocess", "launcher.log"), args.timeout_s)
    ev = res.events
    fault = next((e for e in ev if e.get("ev") == "fault"), None)
    firsts = {}
    for e in ev:
        if e.get("ev") == "step" and e.get("incarnation", 0) >= 1:
            firsts.setdefault(e["rank"], e["t"])
    done = {e["rank"] for e in ev if e.get("ev") == "done" and e.get("incarnation", 0) >= 1}
    resumed = fault is not None and len(done) == args.nproc and res.exit_code == 0
    recovery = (max(firsts.values()) - fault["t"]) if fault and len(firsts) == args.nproc else None
    reason = None if resumed else f"launcher exit {res.exit_code}; {res.log_tail[-600:]}"
    return {"drill": "inprocess", "backend": "gloo", "backend_note": GLOO_NOTE, "fault": fault, "recovery_s": recovery, "resumed": resumed,
            "resumed_from_step": next((e["step"] for e in ev if e.get("ev") == "resume"), None),
            "wall_s": res.wall_s, "exit_code": res.exit_code, "reason": reason,
            "events": [e for e in ev if e.get("ev") != "step"], "t_measured": time.time()}
