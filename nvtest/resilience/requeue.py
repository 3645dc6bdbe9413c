"""Job-level drill under Slurm: the smoke training job requeued, and the time until it runs again.

One batch job per node (pinned with ``-w``, ``--requeue``) runs one rank of
the drill training (``probes/resilience_train.py train``) with checkpoints and
an event log in a directory the controller can read (the run directory, which
a Slurm run keeps on a filesystem the nodes share).  When the job has logged
``requeue_step`` steps the controller calls ``scontrol requeue JOBID`` and
measures, from the event log and ``squeue``::

    running_again_s = t(first "start" event of the next incarnation) - t(requeue)
    resumed_s       = t("resume" event, next incarnation)           - t(requeue)
    training_s      = t(first step, next incarnation)              - t(requeue)
    steps_lost      = last step before the requeue - step resumed from

The incarnation is ``SLURM_RESTART_COUNT`` (0 for the first run).
"""

from __future__ import annotations

import json
import shlex
import subprocess
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

__all__ = ["RequeueFigures", "batch_script", "figures_from_events", "run_requeue_drill"]

SlurmCall = Callable[[list[str]], str]


def _slurm(argv: list[str]) -> str:
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        raise RuntimeError(
            f"{shlex.join(argv)} exited {proc.returncode}: {(proc.stderr or proc.stdout).strip()[-300:]}"
        )
    return proc.stdout


@dataclass(frozen=True)
class RequeueFigures:
    """One requeue, seconds and steps (None where the event never came)."""

    job_id: str
    node: str
    requeue_step: int
    running_again_s: float | None
    resumed_s: float | None
    training_s: float | None
    resumed_from_step: int | None
    steps_lost: int | None
    completed: bool
    final_state: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def batch_script(
    python: str,
    probe_dir: str,
    node: str,
    workdir: Path,
    steps: int,
    ckpt_every: int,
    step_s: float,
    port: int,
) -> str:
    """The sbatch script of one node's job (one rank, gloo world of 1, requeueable)."""
    train = [
        python,
        f"{probe_dir}/resilience_train.py",
        "train",
        "--steps",
        str(steps),
        "--ckpt-every",
        str(ckpt_every),
        "--ckpt-dir",
        str(workdir / "ckpt"),
        "--events-dir",
        str(workdir / "events"),
        "--slow-rank",
        "0",
        "--slow-s",
        str(step_s),
    ]
    return "\n".join(
        [
            "#!/bin/sh",
            f"#SBATCH --job-name=nvtest-requeue-{node}",
            f"#SBATCH --nodelist={node}",
            "#SBATCH --nodes=1",
            "#SBATCH --ntasks=1",
            "#SBATCH --requeue",
            f"#SBATCH --output={workdir}/slurm-%j.out",
            "export RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1",
            f"export MASTER_PORT={port}",
            f"exec {shlex.join(train)}",
            "",
        ]
    )


def _events(workdir: Path) -> list[dict[str, Any]]:
    path = workdir / "events" / "rank0.jsonl"
    out = []
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return out


def figures_from_events(
    events: list[dict[str, Any]],
    t_requeue: float,
    job_id: str,
    node: str,
    requeue_step: int,
    final_state: str,
) -> RequeueFigures:
    """Figures of the incarnation after ``t_requeue`` (pure)."""
    before = [int(e["step"]) for e in events if e.get("ev") == "step" and e.get("incarnation") == 0]
    later = [e for e in events if int(e.get("incarnation", 0)) > 0]

    def first(ev: str) -> dict[str, Any] | None:
        return next((e for e in later if e.get("ev") == ev), None)

    start, resume, step = first("start"), first("resume"), first("step")
    resumed = int(resume["step"]) if resume else None
    return RequeueFigures(
        job_id=job_id,
        node=node,
        requeue_step=requeue_step,
        running_again_s=float(start["t"]) - t_requeue if start else None,
        resumed_s=float(resume["t"]) - t_requeue if resume else None,
        training_s=float(step["t"]) - t_requeue if step else None,
        resumed_from_step=resumed,
        steps_lost=(max(before) - resumed) if before and resumed is not None else None,
        completed=any(e.get("ev") == "done" for e in later),
        final_state=final_state,
    )


#: Polls (0.2 s apart) without the job in squeue before it counts as gone.
GONE_POLLS = 15


def run_requeue_drill(
    node: str,
    python: str,
    probe_dir: str,
    workdir: Path,
    *,
    steps: int = 40,
    ckpt_every: int = 5,
    requeue_step: int = 12,
    step_s: float = 0.2,
    port: int = 29650,
    timeout_s: float = 600.0,
    release_hold: bool = False,
    slurm: SlurmCall = _slurm,
) -> RequeueFigures:
    """Submit the job, requeue it at ``requeue_step``, wait for it to finish; the figures.

    Slurm holds a requeued batch job back (its begin time moves some two minutes
    ahead, Slurm 22.05), and that hold is part of ``running_again_s``.
    ``release_hold`` sets the begin time to now right after the requeue
    (``scontrol update JobId=J StartTime=now``): what an operator, or a
    job-level restart policy, can do to skip it.

    Raises:
        RuntimeError: a Slurm command failed, or the job did not reach ``requeue_step``
            (or finish) within ``timeout_s``.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    script = workdir / "requeue.sbatch"
    script.write_text(
        batch_script(python, probe_dir, node, workdir, steps, ckpt_every, step_s, port)
    )
    job = slurm(["sbatch", "--parsable", str(script)]).strip().split(";")[0]
    deadline = time.monotonic() + timeout_s
    t_requeue = None
    while t_requeue is None:
        if time.monotonic() > deadline:
            slurm(["scancel", job])
            raise RuntimeError(
                f"job {job} on {node} did not reach step {requeue_step} within {timeout_s:g} s"
            )
        steps_done = [e for e in _events(workdir) if e.get("ev") == "step"]
        if steps_done and int(steps_done[-1]["step"]) >= requeue_step:
            slurm(["scontrol", "requeue", job])
            t_requeue = time.time()
        time.sleep(0.1)
    state = ""
    absent = 0  # consecutive polls without the job: right after a requeue squeue can miss it briefly
    while time.monotonic() < deadline:
        state = slurm(["squeue", "-h", "-j", job, "-o", "%T"]).strip()
        absent = 0 if state else absent + 1
        if (
            release_hold and state == "PENDING"
        ):  # the begin time is set once the job is pending again
            slurm(["scontrol", "update", f"JobId={job}", "StartTime=now"])
        if absent >= GONE_POLLS or any(
            e.get("ev") == "done" and int(e.get("incarnation", 0)) > 0 for e in _events(workdir)
        ):
            break
        time.sleep(0.2)
    else:
        slurm(["scancel", job])
    return figures_from_events(
        _events(workdir), t_requeue, job, node, requeue_step, state or "gone (finished)"
    )
