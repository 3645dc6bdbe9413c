"""Job-level drill under Slurm: the smoke training job requeued, and the time until it runs again.

One batch job per node (pinned with ``--nodelist``, ``--requeue``) runs one rank
of the drill training (``probes/resilience_train.py train``) with checkpoints
and an event log in a directory the controller can read (the run directory,
which a Slurm run keeps on a filesystem the nodes share).  The job pauses
after ``requeue_step`` (and that step's checkpoint, if any) in its first
incarnation, so it cannot finish before the requeue lands; the controller
sees the ``hold`` event, calls ``scontrol requeue JOBID`` and measures, from
the event log::

    running_again_s = t(first "start" event of the next incarnation) - t(requeue)
    resumed_s       = t("resume" event, next incarnation)           - t(requeue)
    training_s      = t(first step, next incarnation)              - t(requeue)
    steps_lost      = last step before the requeue - step resumed from

``t(requeue)`` is when ``scontrol requeue`` returned.  The incarnation is
``SLURM_RESTART_COUNT`` (0 for the first run).  The job is followed with one
``squeue --states=all -j <all drill jobs> -O JobID,State,RestartCnt,...`` per
poll (through :class:`nvtest.transports.slurm.SlurmClient`; not by its presence in the queue:
a requeued job is briefly COMPLETING,
and a finished one leaves the queue after ``MinJobAge``).

Slurm's hold of a requeued job, and releasing it early
-----------------------------------------------------

When a requeued batch job is pending again, Slurm moves its begin time
``cred_expire + 1`` seconds ahead (121 s by default).  The reason: at the
requeue every slurmd of the job *revokes* the job's credential, and a slurmd
refuses to launch the job with a credential not created in a later second
than that revocation ("Job N already killed, do not launch batch job"; the
controller then logs "Killing non-startable batch JobId=N: Job credential
revoked" and the job ends FAILED, ExitCode 1:0, without running again).
``release_hold`` sets the begin time to now (``scontrol update JobId=J
StartTime=now``) once the job is PENDING again, but never before the second
after the requeue's has begun (between 1 and 2 s after it): released at once,
the job was relaunched within the revocation's second about half the time on
the test cluster and failed that way.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, cast

from nvtest.checks.api import Fleet, Judge, Node, ProbeSkip, SkuProfile
from nvtest.checks.resilience.drills import judge_target
from nvtest.checks.resilience.recipe import resilience_recipe
from nvtest.config.resources import probes_dir
from nvtest.errors import NodeError, TransportError
from nvtest.jobs.base import check_nodes, profile_of, require_up
from nvtest.session.phase import path_part
from nvtest.transports.capture import read_capped
from nvtest.transports.slurm import SlurmClient, SlurmTransport, requeue_batch_script

__all__ = [
    "drill",
    "DrillSpec",
    "RequeueFigures",
    "batch_script",
    "figures_from_events",
    "judge_requeue",
    "run_requeue_drill",
    "run_requeue_drills",
]

#: Job states after which a job does not run again by itself.
TERMINAL_STATES = frozenset(
    {
        "BOOT_FAIL",
        "CANCELLED",
        "COMPLETED",
        "DEADLINE",
        "FAILED",
        "NODE_FAIL",
        "OUT_OF_MEMORY",
        "PREEMPTED",
        "REVOKED",
        "SPECIAL_EXIT",
        "TIMEOUT",
    }
)

#: States of a job held back until someone releases it (a launch failure, ``scontrol requeuehold``).
HELD_STATES = frozenset({"REQUEUE_HOLD", "REQUEUE_FED", "STOPPED", "SUSPENDED"})

#: Seconds between two ``StartTime=now`` updates of a job that is still pending.
RELEASE_RETRY_S = 2.0


@dataclass(frozen=True)
class RequeueFigures:
    """One requeue: seconds after ``t(requeue)`` and steps (None where the event never came).

    ``states`` is the job's state timeline as the controller saw it (``t_s`` from the
    requeue, negative before it; ``state``, ``reason``, ``restarts``); ``restarts`` is
    Slurm's restart count when last seen; ``hold_released_s`` when the drill released
    Slurm's hold (None: not released, the hold is part of the figures).
    """

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
    restarts: int | None = None
    hold_released_s: float | None = None
    states: tuple[dict[str, Any], ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The figures as a JSON-able dict (the item's ``requeue`` detail)."""
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
    *,
    hold_at_step: int = 0,
    hold_s: float = 0.0,
    sbatch_options: Sequence[str] = (),
) -> str:
    """The sbatch script of one node's job (one rank, gloo world of 1, requeueable).

    ``hold_at_step``/``hold_s``: the first incarnation pauses ``hold_s`` seconds after that
    step (0: no pause).  ``sbatch_options``: extra ``#SBATCH`` options (``--partition=...``).
    The script itself is :func:`nvtest.transports._slurm_cmd.requeue_batch_script`.
    """
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
    if hold_at_step:
        train += ["--hold-at-step", str(hold_at_step), "--hold-s", f"{hold_s:g}"]
    return requeue_batch_script(
        name=f"nvtest-requeue-{node}",
        node=node,
        output=f"{workdir}/slurm-%j.out",
        argv=train,
        env={"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)},
        options=sbatch_options,
    )


def _events(workdir: Path) -> list[dict[str, Any]]:
    path = workdir / "events" / "rank0.jsonl"
    out = []
    if path.exists():
        for line in read_capped(path).take().decode("utf-8", "replace").splitlines():
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
    **extra: Any,
) -> RequeueFigures:
    """Figures of the incarnation after ``t_requeue`` (pure; ``extra``: the other fields)."""
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
        **extra,
    )


def _queue(client: SlurmClient, jobs: Sequence[str]) -> dict[str, dict[str, str]] | str:
    """The squeue fields of ``jobs`` that Slurm still knows ({} when it knows none), or the
    error of an squeue that failed otherwise (a busy controller: this poll saw nothing)."""
    try:
        return client.queue(jobs)
    except TransportError as exc:
        return str(exc)


@dataclass(frozen=True)
class DrillSpec:
    """One node's drill job: where it runs, what it trains (seconds, steps), and whether
    the drill releases Slurm's hold of the requeued job (``release_hold``, see the module
    docstring; False: the hold is measured)."""

    node: str
    python: str
    probe_dir: str
    workdir: Path
    steps: int = 40
    ckpt_every: int = 5
    requeue_step: int = 12
    step_s: float = 0.2
    port: int = 29650
    release_hold: bool = False


@dataclass
class _Job:
    spec: DrillSpec
    job_id: str = ""
    phase: str = "running"  # running -> requeued -> over
    t_requeue: float | None = None
    released_at: float | None = None
    first_release: float | None = None
    seen: dict[str, str] = field(default_factory=dict)
    states: list[dict[str, Any]] = field(default_factory=list)
    final_state: str = ""
    error: str | None = None

    def observe(self, rec: dict[str, str] | None, now: float) -> None:
        view = (
            {
                "state": rec["State"],
                "reason": rec.get("Reason", ""),
                "restarts": _int(rec.get("RestartCnt")),
            }
            if rec
            else {"state": "gone", "reason": "", "restarts": None}
        )
        if not self.states or {k: self.states[-1][k] for k in view} != view:
            self.states.append({"t": now, **view})
        if rec:
            self.seen = rec

    def describe(self) -> str:
        if not self.seen:
            return "never seen in squeue"
        r = self.seen
        return f"{r['State']} (reason {r.get('Reason') or 'none'}, restarts {r.get('RestartCnt')})"


def run_requeue_drills(
    specs: Sequence[DrillSpec],
    *,
    timeout_s: float = 600.0,
    sbatch_options: Sequence[str] = (),
    poll_s: float = 0.5,
    client: SlurmClient | None = None,
) -> dict[str, RequeueFigures | NodeError]:
    """Run the drill of every spec at once (one job per node): node -> figures or error.

    Each job is submitted, requeued when it has logged its ``hold`` at ``requeue_step``,
    and followed until it ends (or leaves Slurm's memory), with one ``squeue`` per
    ``poll_s`` seconds for all jobs together.  ``timeout_s``: for the whole drill, seconds;
    a job still there at the end is cancelled.  ``sbatch_options``: extra options of every
    job (``--partition=...``).

    Returns, per node, :class:`RequeueFigures` (also when the job did not run again:
    ``final_state`` and the None figures say so) or a NodeError: sbatch failed, or the
    job ended or was still short of ``requeue_step`` at the deadline (the message gives
    its state and pending reason), or ``scontrol requeue`` failed.
    """
    client = client or SlurmClient()
    jobs: list[_Job] = []
    for spec in specs:
        if not 0 < spec.requeue_step < spec.steps:
            raise ValueError(f"requeue_step {spec.requeue_step} must be within 1..{spec.steps - 1}")
        spec.workdir.mkdir(parents=True, exist_ok=True)
        script = spec.workdir / "requeue.sbatch"
        script.write_text(
            batch_script(
                spec.python,
                spec.probe_dir,
                spec.node,
                spec.workdir,
                spec.steps,
                spec.ckpt_every,
                spec.step_s,
                spec.port,
                hold_at_step=spec.requeue_step,
                hold_s=timeout_s,
                sbatch_options=sbatch_options,
            ),
            encoding="utf-8",
        )
        job = _Job(spec)
        try:
            job.job_id = client.submit(str(script))
        except TransportError as exc:
            job.phase, job.error = "over", str(exc)
        jobs.append(job)
    deadline = time.monotonic() + timeout_s
    poll_error = ""
    while any(j.phase != "over" for j in jobs) and time.monotonic() < deadline:
        active = [j for j in jobs if j.phase != "over"]
        queue = _queue(client, [j.job_id for j in active])
        if isinstance(queue, str):
            poll_error = queue
            time.sleep(poll_s)
            continue
        now = time.time()
        for job in active:
            rec = queue.get(job.job_id)
            job.observe(rec, now)
            _step(job, rec, client)
        time.sleep(poll_s)
    out: dict[str, RequeueFigures | NodeError] = {}
    for job in jobs:
        spec = job.spec
        if job.phase != "over":
            client.cancel(job.job_id)
            if job.phase == "running":
                job.error = (
                    f"job {job.job_id} on {spec.node} did not reach step {spec.requeue_step} "
                    f"within {timeout_s:g} s: {job.describe()}"
                    + (f"; last squeue error: {poll_error}" if poll_error else "")
                )
            job.final_state = f"still {job.describe()} after {timeout_s:g} s (cancelled)"
        if job.error or job.t_requeue is None:
            out[spec.node] = NodeError(job.error or f"job {job.job_id} was never requeued")
            continue
        t0 = job.t_requeue
        out[spec.node] = figures_from_events(
            _events(spec.workdir),
            t0,
            job.job_id,
            spec.node,
            spec.requeue_step,
            job.final_state,
            restarts=_int(job.seen.get("RestartCnt")),
            hold_released_s=None if job.first_release is None else job.first_release - t0,
            states=tuple({**s, "t": round(s["t"] - t0, 3)} for s in job.states),
        )
    return out


def _int(text: str | None) -> int | None:
    return int(text) if text and text.isdigit() else None


def _step(job: _Job, rec: dict[str, str] | None, client: SlurmClient) -> None:
    """Advance one job's drill by what this poll saw (``rec``: its squeue fields, None: gone)."""
    spec = job.spec
    state = rec["State"] if rec else "gone"
    if job.phase == "running":
        if any(e.get("ev") == "hold" and int(e.get("incarnation", 0)) == 0 for e in _events(spec.workdir)):
            try:
                client.requeue(job.job_id)
            except TransportError as exc:
                client.cancel(job.job_id)
                job.phase, job.error = (
                    "over",
                    f"requeue of job {job.job_id} on {spec.node} failed: {exc}",
                )
                return
            job.t_requeue = time.time()
            job.phase = "requeued"
        elif rec is None or state in TERMINAL_STATES:
            out = spec.workdir / f"slurm-{job.job_id}.out"
            tail = read_capped(out).take().decode(errors="replace").strip().splitlines()[-3:] if out.exists() else []
            job.phase = "over"
            job.error = (
                f"job {job.job_id} on {spec.node} ended before step {spec.requeue_step}: "
                f"{job.describe()}{': ' + ' | '.join(tail) if tail else ''}"
            )
        return
    # requeued: wait for the next incarnation to end
    if rec is None:
        job.phase, job.final_state = "over", f"gone (last seen {job.describe()})"
    elif state in TERMINAL_STATES:
        job.phase, job.final_state = "over", job.describe()
    elif state in HELD_STATES or "held" in rec.get("Reason", "").lower():
        client.cancel(job.job_id)
        job.phase, job.final_state = "over", f"{job.describe()}: held, cancelled"
    elif spec.release_hold and state == "PENDING" and job.t_requeue is not None:
        now = time.time()
        # not in the second of the requeue's credential revocation (module docstring)
        if now >= math.floor(job.t_requeue) + 2 and (
            job.released_at is None or now - job.released_at >= RELEASE_RETRY_S
        ):
            try:
                client.release_hold(job.job_id)
            except TransportError:
                pass  # it left PENDING meanwhile, or the controller was busy: next poll
            job.released_at = now
            if job.first_release is None:
                job.first_release = now


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
    sbatch_options: Sequence[str] = (),
    poll_s: float = 0.5,
    client: SlurmClient | None = None,
) -> RequeueFigures:
    """One node's drill (:func:`run_requeue_drills` with one spec): submit the job, requeue it
    at ``requeue_step``, follow it until it ends; the figures (seconds, steps).

    Slurm holds a requeued batch job back (its begin time moves ``cred_expire + 1`` s,
    121 s by default, ahead) and that hold is part of ``running_again_s`` unless
    ``release_hold`` sets the begin time to now once it is safe (1-2 s after the requeue):
    what an operator, or a job-level restart policy, can do to skip it.

    Raises:
        ValueError: ``requeue_step`` is not within ``1..steps-1``.
        NodeError: a Slurm command failed, or the job did not reach ``requeue_step``
            within ``timeout_s`` seconds (the message gives its state and pending reason),
            or it ended before.
    """
    spec = DrillSpec(
        node,
        python,
        probe_dir,
        workdir,
        steps,
        ckpt_every,
        requeue_step,
        step_s,
        port,
        release_hold,
    )
    result = run_requeue_drills(
        [spec],
        timeout_s=timeout_s,
        sbatch_options=sbatch_options,
        poll_s=poll_s,
        client=client,
    )[node]
    if isinstance(result, NodeError):
        raise result
    return result


def judge_requeue(judge: Judge, fig: RequeueFigures, target_s: float | None, *, hold_released: bool) -> None:
    """Judge one node's requeue: the figures (s, steps) as metrics, the drill's record in
    the details, failures when the job did not resume or finish, and ``training_again_s``
    beside its target (recipe ``resilience.targets.requeue_training_again_s``, seconds;
    None: no target set, recorded but not judged), a warning past it."""
    judge("running_again_s", fig.running_again_s, "s")
    judge("resumed_s", fig.resumed_s, "s")
    judge("training_again_s", fig.training_s, "s")
    judge("steps_lost", fig.steps_lost, "steps")
    judge.detail("requeue", {**fig.to_json(), "release_hold": hold_released})
    if fig.resumed_from_step is None:
        judge.fail(f"job {fig.job_id} did not resume from a checkpoint after the requeue")
    if not fig.completed:
        judge.fail(f"job {fig.job_id} did not finish after the requeue (state {fig.final_state})")
    judge_target(judge, "training_again_s", fig.training_s, target_s, "requeue_training_again_s")


def _drills(fleet: Fleet) -> dict[str, RequeueFigures | NodeError]:
    """Every node's drill, all at once (the check's first item runs it; the others wait). Drill
    ports start at the recipe's ``resilience.requeue_port``, one per node (the test cluster's
    nodes share one host)."""
    ctx = fleet.ctx
    nodes = check_nodes(ctx, "requeue")
    index = {name: i for i, name in enumerate(sorted(n.name for n in ctx.nodes))}
    specs = []
    for n in nodes:
        rec = resilience_recipe(profile_of(ctx, n))
        specs.append(
            DrillSpec(
                node=n.name,
                python=n.python,
                probe_dir=ctx.probe_dirs.get(n.name, str(probes_dir())),
                workdir=ctx.run_dir / "requeue" / path_part(n.name),
                steps=int(rec["steps"]) + 10,
                ckpt_every=int(rec["ckpt_every"]),
                requeue_step=int(rec["ckpt_every"]) + 2,
                port=int(rec["requeue_port"]) + index[n.name],
                release_hold=bool(rec["requeue_release_hold"]),
            )
        )
    timeout = 600 * ctx.config.timeout_scale
    transport = cast(SlurmTransport, ctx.transport)  # the backend is slurm: drill() checked it
    return run_requeue_drills(specs, timeout_s=timeout, sbatch_options=transport.side_job_options(timeout))


def drill(fleet: Fleet, node: Node, sku: SkuProfile | None, judge: Judge) -> None:
    """Check ``requeue`` on ``node``: its requeue drill's figures (every node's drill runs at
    once, when the check's first item asks), judged by :func:`judge_requeue`.

    Raises:
        ProbeSkip: the run is not under Slurm (the drill is Slurm's ``scontrol requeue``), or
            its allocation holds the nodes exclusively.
        NodeError: the node was down at the start.
    """
    ctx = fleet.ctx
    if ctx.config.backend != "slurm":  # the drill is Slurm's own requeue, not a launch
        raise ProbeSkip(f"needs the slurm backend (this run: {ctx.config.backend})")
    require_up(ctx, node)
    if cast(SlurmTransport, ctx.transport).holds_nodes_exclusively:
        raise ProbeSkip(
            "the run's allocation holds the nodes exclusively (--exclusive): the drill's own "
            "batch jobs could not start beside it; run the requeue check without --exclusive"
        )
    rec = resilience_recipe(sku)
    result = fleet.once("requeue", lambda: _drills(fleet)).get(node.name)
    if result is None:
        judge.fail(f"no requeue drill ran on {node.name}")
        return
    if isinstance(result, NodeError):
        judge.fail(str(result))
        return
    judge_requeue(
        judge,
        result,
        rec["targets"].get("requeue_training_again_s"),
        hold_released=bool(rec.get("requeue_release_hold")),
    )
