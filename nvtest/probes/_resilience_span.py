"""One node's share of a drill job whose ranks span nodes (``resilience_train.py drill node``).

The controller builds this node's launcher command line (``ft_launcher`` or ``torchrun``
with a c10d rendezvous on the first node: ``nvtest.jobs.launch.torchrun_commands``)
and passes it after ``--``.  This driver runs it with a fresh event directory for the ranks
(``NVTEST_DRILL_EVENTS_DIR``, read by ``resilience_train.py train``), SIGKILLs the chosen
local rank once it has logged the chosen step (when told to: one node of the job is), and
returns its ranks' events, each stamped with ``node``, and the summaries of the ranks that
finished.  The controller joins the nodes' documents into the job's timeline.

``drill launchers`` answers which launcher this node can run (``ft_launcher`` when
nvidia-resiliency-ext imports, else ``torchrun``), so that every node of the job runs the same.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
from typing import Any

import _contract as contract
import _libraries as libs
import _resilience_events as rev
import _resilience_launch as rl

EVENTS_ENV = "NVTEST_DRILL_EVENTS_DIR"


def launchers(args: argparse.Namespace, doc: dict[str, Any]) -> dict[str, Any]:
    """This node's launcher for ``--launcher`` (auto | ft_launcher | torchrun), and why not ft_launcher."""
    torch = libs.require("torch")
    doc["library"] = libs.library_label(torch)
    launcher, why = rl.pick_launcher(args.launcher)
    return {"launcher": launcher, "launcher_fallback_reason": why, "nvrx_version": nvrx_version()}


def node_share(args: argparse.Namespace, doc: dict[str, Any]) -> dict[str, Any]:
    """Run this node's launcher (``args.launch``) to its exit; kill a local rank if asked."""
    if not args.launch:
        raise contract.ProbeError("usage error: the launcher command goes after --")
    workdir = args.workdir or tempfile.mkdtemp(prefix="nvtest-span-")
    events_dir = os.path.join(workdir, "events")
    os.makedirs(events_dir, exist_ok=True)
    kill = args.kill_local_rank >= 0
    try:
        res = rl.run_launch(list(args.launch), events_dir, os.path.join(workdir, "launcher.log"), args.timeout_s,
                            kill_rank=args.kill_local_rank if kill else None,
                            kill_step=int(args.kill_step) if kill else None,
                            by_local_rank=True, env={EVENTS_ENV: events_dir})
        summaries = list(rev.read_summaries(events_dir).values())
    finally:
        for d in args.remove_dir:
            shutil.rmtree(d, ignore_errors=True)
            try:
                os.rmdir(os.path.dirname(d.rstrip("/")))  # its parent (the drill's own), once empty
            except OSError:
                pass
        if not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    return {
        "node": args.node_name, "exit_code": res.exit_code, "wall_s": res.wall_s, "argv": res.argv,
        "kill": {**res.kill, "node": args.node_name} if res.kill else None,
        "kill_planned": {"local_rank": args.kill_local_rank, "step": int(args.kill_step)} if kill else None,
        "events": [{**e, "node": args.node_name} for e in res.events],
        "summaries": summaries,
        "log_tail": res.log_tail if res.exit_code != 0 else res.log_tail[-800:],
    }


def nvrx_version() -> str | None:
    """The installed nvidia-resiliency-ext version (None: not installed)."""
    try:
        from importlib.metadata import version

        return version("nvidia-resiliency-ext")
    except Exception:  # noqa: BLE001
        return None
