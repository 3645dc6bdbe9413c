#!/usr/bin/env python3
"""Resilience drills on one node: the smoke training under a restarting launcher, with faults.

Usage::

    python3 resilience_train.py drill injob [--nproc 2] [--steps 30] [--ckpt-every 5]
                                            [--kill-rank 1] [--kill-step random|N] [--launcher auto]
    python3 resilience_train.py drill straggler [--slow-rank 1] [--slow-s 0.05]
    python3 resilience_train.py drill overhead
    python3 resilience_train.py drill inprocess
    python3 resilience_train.py drill launchers [--launcher auto]   # which launcher this node has
    python3 resilience_train.py drill node --node-name N [--kill-local-rank L --kill-step S]
                                           [--remove-dir D] -- LAUNCHER ARGV...
    python3 resilience_train.py train ...      # one rank, started by the launcher

``drill`` is the probe (one JSON document on stdout, as ``_contract.py``
defines it); ``train`` is what the launcher starts per rank.

``injob``: a reference run without a fault, then the same run (same seed) in
which rank ``--kill-rank`` is killed with SIGKILL at a random step; the
launcher (``ft_launcher``, else ``torchrun --max-restarts``) restarts the
worker group, which resumes from the newest checkpoint.  The document carries
both runs' per-step losses and every rank's events; the controller derives
detection, restart, reload and total recovery times, steps lost, and the loss
comparison from them (``nvtest.checks.resilience.timeline``).

``launchers`` and ``node``: this node's part of an in-job drill whose ranks span nodes
(``_resilience_span``; the controller builds every node's launcher command and joins the
nodes' documents).

``straggler``: one run in which ``--slow-rank`` sleeps ``--slow-s`` seconds in
its forward section each step; per-rank section scores (``_resilience_straggler``).

``overhead``: the same run with the drill machinery off (no events, heartbeats,
section timers) and on; median step time of each, and the seconds per step the
ranks spent in heartbeats and event writes (timed directly, so it does not
drown in the noise of a busy machine).
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import argparse  # noqa: E402
import json  # noqa: E402
import random  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

import _contract as contract  # noqa: E402
import _libraries as libs  # noqa: E402
import _timing as timing  # noqa: E402

PROBE = "resilience_train"


# --------------------------------------------------------------------------- worker


def worker_main(argv: list[str]) -> int:
    """Entry of one launched rank: train, write ``summary_rank<R>_inc<I>.json`` into the events dir."""
    p = argparse.ArgumentParser(prog="resilience_train.py train")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--ckpt-dir", default="")
    p.add_argument("--ckpt-every", type=int, default=5)
    p.add_argument("--events-dir", default=os.environ.get("NVTEST_DRILL_EVENTS_DIR", ""))
    p.add_argument("--ckpt-scope", choices=("node", "job"), default="node",
                   help="node: local rank 0 of each node saves into --ckpt-dir; job: rank 0 alone (shared dir)")
    p.add_argument("--machinery", choices=("on", "off"), default="on")
    p.add_argument("--under-ft", action="store_true")
    p.add_argument("--slow-rank", type=int, default=-1)
    p.add_argument("--slow-s", type=float, default=0.0)
    p.add_argument("--timeout-s", type=float, default=120.0)
    p.add_argument("--hold-at-step", type=int, default=0,
                   help="first incarnation only: after this step (and its checkpoint) wait --hold-s seconds")
    p.add_argument("--hold-s", type=float, default=0.0)
    a = p.parse_args(argv)
    import _resilience_worker as rw

    opts = {"steps": a.steps, "seed": a.seed, "lr": a.lr, "ckpt_dir": a.ckpt_dir, "ckpt_every": a.ckpt_every,
            "events_dir": a.events_dir, "ckpt_scope": a.ckpt_scope, "machinery": a.machinery == "on", "under_ft": a.under_ft,
            "slow_rank": a.slow_rank, "slow_s": a.slow_s, "timeout_s": a.timeout_s,
            "hold_at": a.hold_at_step, "hold_s": a.hold_s}
    summary = rw.train(opts)
    if a.events_dir:
        name = f"summary_rank{summary['rank']}_inc{summary['incarnation']}.json"
        with open(os.path.join(a.events_dir, name), "w", encoding="utf-8") as fh:
            json.dump(summary, fh)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # skip interpreter teardown of the gloo process group (see _resilience_worker.train)


# --------------------------------------------------------------------------- drills


def _summaries(events_dir: str) -> dict[tuple[int, int], dict[str, Any]]:
    import _resilience_events as rev

    return rev.read_summaries(events_dir)


def _one_run(args: argparse.Namespace, workdir: str, name: str, launcher: str, *, machinery: bool = True,
             kill_step: int | None = None, slow_rank: int = -1, slow_s: float = 0.0) -> dict[str, Any]:
    """Launch one training run under ``launcher``; its summary as a JSON-able dict."""
    import _resilience_launch as rl

    run_dir = os.path.join(workdir, name)
    events_dir = os.path.join(run_dir, "events")
    ckpt_dir = os.path.join(args.ckpt_root or run_dir, f"ckpt-{name}-{os.getpid()}")
    os.makedirs(events_dir, exist_ok=True)
    script = ["--steps", str(args.steps), "--seed", str(args.seed), "--ckpt-dir", ckpt_dir,
              "--ckpt-every", str(args.ckpt_every), "--events-dir", events_dir,
              "--machinery", "on" if machinery else "off", "--slow-rank", str(slow_rank),
              "--slow-s", str(slow_s), "--timeout-s", str(args.timeout_s)]
    if launcher == "ft_launcher":
        script.append("--under-ft")
    max_restarts = 1 if kill_step is not None else 0
    argv = rl.launcher_argv(launcher, args.nproc, max_restarts, None, script)
    res = rl.run_launch(argv, events_dir, os.path.join(run_dir, "launcher.log"), args.timeout_s,
                        kill_rank=args.kill_rank if kill_step is not None else None, kill_step=kill_step)
    shutil.rmtree(ckpt_dir, ignore_errors=True)
    summaries = _summaries(events_dir)
    final_inc = max((inc for (_r, inc) in summaries), default=None)
    rank0 = summaries.get((0, final_inc)) if final_inc is not None else None
    losses: dict[str, float] = {}
    for (r, _inc), s in sorted(summaries.items()):
        if r == 0:
            losses.update(s["losses"])
    return {
        "name": name, "launcher": launcher, "exit_code": res.exit_code, "wall_s": res.wall_s,
        "argv": res.argv, "kill": res.kill, "events": res.events, "losses": losses,
        "final_incarnation": final_inc, "completed": res.exit_code == 0 and rank0 is not None,
        "straggler": rank0.get("straggler") if rank0 else None,
        "heartbeats": rank0.get("heartbeats") if rank0 else None,
        "heartbeat_reason": rank0.get("heartbeat_reason") if rank0 else None,
        "step_times_s": {str(r): s["step_times_s"] for (r, inc), s in summaries.items() if inc == final_inc},
        "machinery_s_per_step": max((s.get("machinery_s_per_step", 0.0) for (r, inc), s in summaries.items()
                                     if inc == final_inc), default=None),
        "log_tail": res.log_tail if res.exit_code != 0 else "",
    }


def _kill_step(args: argparse.Namespace) -> int:
    """The step at which the rank is killed: ``--kill-step`` or random in (first checkpoint, steps - 2]."""
    if args.kill_step != "random":
        return int(args.kill_step)
    lo = args.ckpt_every + 1
    hi = max(lo, args.steps - 3)
    return random.Random(args.kill_seed if args.kill_seed is not None else time.time_ns()).randint(lo, hi)


def drill_injob(args: argparse.Namespace, doc: dict[str, Any], workdir: str, launcher: str) -> dict[str, Any]:
    ref = _one_run(args, workdir, "reference", launcher)
    if not ref["completed"]:
        raise contract.ProbeError(f"reference run failed (exit {ref['exit_code']}): {ref['log_tail'][-400:]}")
    step = _kill_step(args)
    fault = _one_run(args, workdir, "fault", launcher, kill_step=step)
    return {"drill": "injob", "kill_step_planned": step, "kill_rank": args.kill_rank, "reference": ref,
            "fault": fault, "ckpt_every": args.ckpt_every, "steps": args.steps, "nproc": args.nproc}


def drill_straggler(args: argparse.Namespace, doc: dict[str, Any], workdir: str, launcher: str) -> dict[str, Any]:
    run = _one_run(args, workdir, "straggler", launcher, slow_rank=args.slow_rank, slow_s=args.slow_s)
    if not run["completed"]:
        raise contract.ProbeError(f"straggler run failed (exit {run['exit_code']}): {run['log_tail'][-400:]}")
    run.pop("events")
    return {"drill": "straggler", "slow_rank": args.slow_rank, "slow_s": args.slow_s, "run": run,
            "nproc": args.nproc, "steps": args.steps}


def drill_overhead(args: argparse.Namespace, doc: dict[str, Any], workdir: str, launcher: str) -> dict[str, Any]:
    """Plain run (machinery off) and drill run (on), ``--repeats`` pairs in ABBA order
    (off, on, then on, off, ...) so that a drift of the machine's speed cancels; each
    mode's figure is the median over its runs of the run's median step time (s)."""
    runs: dict[str, list[float]] = {"off": [], "on": []}
    direct: list[float] = []
    for i in range(args.repeats):
        for mode in ("off", "on") if i % 2 == 0 else ("on", "off"):
            r = _one_run(args, workdir, f"overhead-{mode}", launcher, machinery=mode == "on")
            if not r["completed"]:
                raise contract.ProbeError(f"overhead run ({mode}) failed: {r['log_tail'][-400:]}")
            times = [t for ts in r["step_times_s"].values() for t in ts[1:]]
            runs[mode].append(timing.stats(times)["median"])
            if mode == "on":
                direct.append(r["machinery_s_per_step"] or 0.0)
    off, on = timing.stats(runs["off"])["median"], timing.stats(runs["on"])["median"]
    per_step = timing.stats(direct)["median"]
    return {"drill": "overhead", "launcher": launcher, "step_median_s": runs, "off_s": off, "on_s": on,
            "overhead_pct": 100.0 * (on - off) / off, "machinery_s_per_step": per_step,
            "direct_overhead_pct": 100.0 * per_step / (off + per_step)}


def drill_inprocess(args: argparse.Namespace, doc: dict[str, Any], workdir: str, launcher: str) -> dict[str, Any]:
    import _resilience_inprocess as rip

    return rip.drill(args, workdir)


DRILLS = {"injob": drill_injob, "straggler": drill_straggler, "overhead": drill_overhead,
          "inprocess": drill_inprocess}
#: Kinds for a job spanning nodes (``_resilience_span``): this node's launcher, this node's share.
SPAN_KINDS = ("launchers", "node")


def build_parser() -> contract.ProbeArgumentParser:
    p = DrillParser(prog="resilience_train.py drill", description=__doc__.splitlines()[0])
    p.add_argument("kind", choices=sorted([*DRILLS, *SPAN_KINDS]))
    p.add_argument("--nproc", type=int, default=2)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--ckpt-every", type=int, default=5)
    p.add_argument("--ckpt-root", default="", help="checkpoint directory parent (default: the drill's work dir)")
    p.add_argument("--kill-rank", type=int, default=1)
    p.add_argument("--kill-step", default="random")
    p.add_argument("--kill-seed", type=int, default=None)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--slow-rank", type=int, default=1)
    p.add_argument("--slow-s", type=float, default=0.05)
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--launcher", choices=("auto", "ft_launcher", "torchrun"), default="auto")
    p.add_argument("--timeout-s", type=float, default=300.0)
    p.add_argument("--workdir", default="", help="keep the drill's files here (default: a temporary dir, removed)")
    p.add_argument("--node-name", default="", help="node: this node's inventory name (stamped on its events)")
    p.add_argument("--kill-local-rank", type=int, default=-1, help="node: SIGKILL this local rank at --kill-step")
    p.add_argument("--remove-dir", action="append", default=[],
                   help="node: remove this directory at the end, and its parent if then empty")
    return p


class DrillParser(contract.ProbeArgumentParser):
    """The drill's options; everything after the first ``--`` is ``launch`` (``node``: the launcher argv)."""

    def parse_args(self, args: Any = None, namespace: Any = None) -> Any:  # type: ignore[override]
        argv = list(sys.argv[1:] if args is None else args)
        launch: list[str] = []
        if "--" in argv:
            cut = argv.index("--")
            argv, launch = argv[:cut], argv[cut + 1:]
        ns = super().parse_args(argv, namespace)
        ns.launch = launch
        return ns


def body(args: argparse.Namespace, doc: dict[str, Any]) -> None:
    if args.kind in SPAN_KINDS:
        import _resilience_span as span

        doc["results"] = [span.launchers(args, doc) if args.kind == "launchers" else span.node_share(args, doc)]
        return
    torch = libs.require("torch")
    doc["library"] = libs.library_label(torch)
    if args.kill_rank >= args.nproc or args.slow_rank >= args.nproc:
        raise contract.ProbeError(f"usage error: --kill-rank/--slow-rank must be < --nproc {args.nproc}")
    import _resilience_launch as rl

    launcher, why = rl.pick_launcher(args.launcher)
    nvrx, _ = libs.optional_import("nvidia_resiliency_ext")
    doc.update(launcher=launcher, launcher_fallback_reason=why,
               nvrx_version=_nvrx_version() if nvrx is not None else None, device="cpu", backend="gloo")
    workdir = args.workdir or tempfile.mkdtemp(prefix="nvtest-drill-")
    try:
        doc["results"] = [DRILLS[args.kind](args, doc, workdir, launcher)]
    finally:
        if not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)


def _nvrx_version() -> str | None:
    import _resilience_span as span

    return span.nvrx_version()


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "train":
        sys.exit(worker_main(sys.argv[2:]))
    if len(sys.argv) > 1 and sys.argv[1] == "inprocess-train":
        import _resilience_inprocess

        sys.exit(_resilience_inprocess.worker_main(sys.argv[2:]))
    argv = sys.argv[2:] if len(sys.argv) > 1 and sys.argv[1] == "drill" else sys.argv[1:]
    sys.exit(contract.run(PROBE, build_parser(), body, argv=argv))
