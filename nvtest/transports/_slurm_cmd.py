"""Pure builders of every Slurm command line and batch script nvtest generates.

Each function returns an argv list (or the text of a script); nothing here runs
anything, so each output is compared with a golden file in ``tests/slurm/golden``.
Options follow Slurm 22.05's ``srun``/``salloc``/``sbatch``/``scancel``/``scontrol``
(the long ``--option=value`` forms, stable since Slurm 20.11).
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Mapping, Sequence

from nvtest.config.inventory import fold_hostlist
from nvtest.text import one_line
from nvtest.transports._deadline import TASK_ENV
from nvtest.transports.options import SlurmOptions, slurm_job_argv

__all__ = [
    "batch_script",
    "drain_argv",
    "job_name",
    "node_dispatch_command",
    "release_hold_argv",
    "requeue_argv",
    "requeue_batch_script",
    "resume_argv",
    "salloc_argv",
    "sbatch_argv",
    "scancel_argv",
    "srun_multi_argv",
    "squeue_jobs_argv",
    "show_node_argv",
    "srun_phase_argv",
    "step_minutes",
    "sweep_batch_script",
    "task_shell",
]


#: Slurm's defaults for every job option.
NO_OPTIONS = SlurmOptions()


def job_name(run_id: str) -> str:
    """The Slurm job name of every job and step of a run: ``nvtest-<run-id>``."""
    return f"nvtest-{run_id}"


def step_minutes(timeout_s: float) -> int:
    """A step's ``--time`` in whole minutes: ``timeout_s`` rounded up, at least 1."""
    return max(1, math.ceil(timeout_s / 60.0))


def salloc_argv(opts: SlurmOptions, nodes: Sequence[str], *, name: str) -> list[str]:
    """``salloc --no-shell`` for exactly ``nodes``; it prints ``Granted job allocation <id>``."""
    return [
        "salloc",
        "--no-shell",
        f"--job-name={name}",
        f"--nodes={len(nodes)}",
        f"--nodelist={fold_hostlist(list(nodes))}",
        *slurm_job_argv(opts, time_limit=opts.time_limit),
    ]


def _step_placement(opts: SlurmOptions, *, timeout_s: float, job_id: str | None) -> list[str]:
    """In an allocation: ``--jobid --overlap``; else the job options of a new job."""
    minutes = str(step_minutes(timeout_s))
    if job_id:
        return [f"--jobid={job_id}", "--overlap", f"--time={minutes}"]
    return slurm_job_argv(opts, time_limit=minutes)


def srun_phase_argv(
    nodes: Sequence[str],
    shell_command: str,
    *,
    timeout_s: float,
    name: str,
    opts: SlurmOptions = NO_OPTIONS,
    job_id: str | None = None,
) -> list[str]:
    """One step running ``shell_command`` once on each of ``nodes`` (a per-node phase).

    ``--verbose`` makes srun name the step and each task's node and exit status on
    stderr; ``--label`` prefixes each output line with its task id, so the output
    splits per node. ``--kill-on-bad-exit=0`` keeps one failing node from
    killing the others. ``--time`` is ``timeout_s`` in minutes, rounded up.
    """
    return [
        "srun",
        "--verbose",
        "--label",
        "--kill-on-bad-exit=0",
        f"--job-name={name}",
        f"--nodes={len(nodes)}",
        "--ntasks-per-node=1",
        f"--nodelist={fold_hostlist(list(nodes))}",
        *_step_placement(opts, timeout_s=timeout_s, job_id=job_id),
        "/bin/sh",
        "-c",
        shell_command,
    ]


def task_shell(shell_command: str, token: str) -> str:
    """``shell_command`` with the task token exported first: every process of the step's
    tasks carries ``NVTEST_TASK=<token>``, by which a deadline finds the ones Slurm's
    process tracking lost (see :mod:`nvtest.transports._deadline`)."""
    return f"export {TASK_ENV}={shlex.quote(token)}; {shell_command}"


def srun_multi_argv(
    nodes: Sequence[str],
    shell_command: str,
    *,
    ntasks_per_node: int,
    timeout_s: float,
    name: str,
    gpus_per_task: int | None = None,
    opts: SlurmOptions = NO_OPTIONS,
    job_id: str | None = None,
) -> list[str]:
    """One multi-node launch: ``len(nodes) * ntasks_per_node`` ranks, block layout.

    Adds ``--mpi=<plugin>`` when ``opts.mpi`` is set, ``--gpus-per-task`` when
    given, and pyxis's ``--container-image``/``--container-mounts`` when set (the ranks
    run in the image; per-node phases stay on the host). Output is not labelled (rank 0
    of an MPI tool prints the table).
    """
    argv = [
        "srun",
        "--verbose",
        "--kill-on-bad-exit=1",
        f"--job-name={name}",
        f"--nodes={len(nodes)}",
        f"--ntasks={len(nodes) * ntasks_per_node}",
        f"--ntasks-per-node={ntasks_per_node}",
        "--distribution=block",
        f"--nodelist={fold_hostlist(list(nodes))}",
    ]
    if gpus_per_task:
        argv.append(f"--gpus-per-task={gpus_per_task}")
    if opts.mpi:
        argv.append(f"--mpi={opts.mpi}")
    if opts.container_image:
        argv.append(f"--container-image={opts.container_image}")
    if opts.container_mounts:
        argv.append(f"--container-mounts={opts.container_mounts}")
    argv += _step_placement(opts, timeout_s=timeout_s, job_id=job_id)
    return [*argv, "/bin/sh", "-c", shell_command]


def node_dispatch_command(commands: Mapping[str, str]) -> str:
    """One shell command that runs ``commands[$SLURMD_NODENAME]`` on each node.

    This is how a mapping {node: command} (a pair test: a server here, a client
    there) runs as ONE srun step: every task reads the node name Slurm gives it
    and runs that node's command; a node not in the mapping exits 127.
    """
    arms = [f"  {shlex.quote(node)}) {cmd}\n    ;;" for node, cmd in sorted(commands.items())]
    return (
        'case "$SLURMD_NODENAME" in\n'
        + "\n".join(arms)
        + '\n  *) echo "nvtest: no command for node $SLURMD_NODENAME" >&2; exit 127\n    ;;\nesac'
    )


def scancel_argv(job_id: str, step_id: str | None = None) -> list[str]:
    """Cancel a step (``<job>.<step>``) or a whole job."""
    return ["scancel", f"{job_id}.{step_id}" if step_id is not None else job_id]


def drain_argv(node: str, reason: str) -> list[str]:
    """``scontrol update`` that drains ``node`` with ``reason`` (one argv element, no shell;
    on one line, a tool's control characters as escapes: ``sinfo -R`` shows it as text)."""
    return ["scontrol", "update", f"nodename={node}", "state=drain", f"reason={one_line(reason)}"]


def resume_argv(node: str) -> list[str]:
    """``scontrol update`` that returns a drained ``node`` to service (``state=resume``;
    Slurm clears the drain reason)."""
    return ["scontrol", "update", f"nodename={node}", "state=resume"]


def show_node_argv(node: str) -> list[str]:
    """``scontrol show node -o NODE``: one node's record on one line (state, reason...)."""
    return ["scontrol", "show", "node", "-o", node]


def squeue_jobs_argv(jobs: Sequence[str], fields: Sequence[str]) -> list[str]:
    """``squeue`` of ``jobs`` in any state, one line per job: the ``fields`` each ended by ``|``."""
    fmt = ",".join(f"{f}:|" for f in fields)
    return ["squeue", "--states=all", "-h", "-j", ",".join(jobs), "-O", fmt]


def requeue_argv(job_id: str) -> list[str]:
    """``scontrol requeue`` of a batch job (it runs again, ``SLURM_RESTART_COUNT`` + 1)."""
    return ["scontrol", "requeue", job_id]


def release_hold_argv(job_id: str) -> list[str]:
    """Move a pending job's begin time to now (Slurm holds a requeued job ``cred_expire + 1`` s)."""
    return ["scontrol", "update", f"JobId={job_id}", "StartTime=now"]


def requeue_batch_script(
    *,
    name: str,
    node: str,
    output: str,
    argv: Sequence[str],
    env: Mapping[str, str],
    options: Sequence[str] = (),
) -> str:
    """A one-task requeueable batch job pinned to ``node`` that execs ``argv``.

    ``output``: the ``--output`` path (``%j`` is the job id); ``env``: variables exported
    first, in this order; ``options``: extra job options (``--partition=...``).
    """
    return _one_task_script(name, node, output, argv, env, ["--requeue"], [f"#SBATCH {opt}" for opt in options])


def _one_task_script(
    name: str,
    node: str,
    output: str,
    argv: Sequence[str],
    env: Mapping[str, str],
    flags: Sequence[str],
    after: Sequence[str],
) -> str:
    """A batch script of one task on ``node``: the job's directives with ``flags``
    (``#SBATCH`` each) before ``--output``, then the lines ``after`` (the caller's own
    directives and comments), ``env`` exported in its order, and ``argv`` exec'd."""
    exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    lines = [
        "#!/bin/sh",
        f"#SBATCH --job-name={name}",
        f"#SBATCH --nodelist={node}",
        "#SBATCH --nodes=1",
        "#SBATCH --ntasks=1",
        *(f"#SBATCH {flag}" for flag in flags),
        f"#SBATCH --output={output}",
        *after,
    ]
    if exports:
        lines.append(f"export {exports}")
    lines.append(f"exec {shlex.join(list(argv))}")
    return "\n".join(lines) + "\n"


def sbatch_argv(script_path: str) -> list[str]:
    """Submit a batch script; ``--parsable`` makes sbatch print only ``<job-id>[;cluster]``."""
    return ["sbatch", "--parsable", script_path]


def _directive_quote(arg: str) -> str:
    """Quote one ``#SBATCH`` argument the way sbatch reads it (Slurm 22.05
    ``_get_argument``): double quotes group, a backslash escapes, ``#`` starts a
    comment, single quotes are literal."""
    if arg and not any(c.isspace() or c in '"\\#' for c in arg):
        return arg
    return '"' + arg.replace("\\", "\\\\").replace('"', '\\"') + '"'


def batch_script(
    opts: SlurmOptions,
    *,
    nodes: Sequence[str] | None,
    node_count: int | None,
    name: str,
    run_dir: str,
    workdir: str,
    nvtest_argv: Sequence[str],
    env: Mapping[str, str] | None = None,
) -> str:
    """The sbatch script of ``nvtest submit``: ``nvtest run --backend slurm ...`` in its own allocation.

    The script runs on the allocation's first node; ``nvtest run`` there picks
    the allocation up from ``SLURM_JOB_ID``/``SLURM_JOB_NODELIST`` and runs each
    phase as a step. Slurm writes the job's stdout/stderr to
    ``<run_dir>/slurm-<jobid>.out``.

    Args:
        nodes: exact nodes (``--nodelist``), or None to let Slurm pick ``node_count``.
        node_count: ``--nodes`` when ``nodes`` is None.
        nvtest_argv: the full ``nvtest run ...`` argv to execute.
        env: variables exported before the run (quoted).

    Raises:
        ValueError: neither ``nodes`` nor ``node_count`` given.
    """
    if not nodes and not node_count:
        raise ValueError("a batch job needs nodes or a node count")
    directives = [
        f"--job-name={name}",
        f"--nodes={len(nodes) if nodes else node_count}",
        "--ntasks-per-node=1",
    ]
    if nodes:
        directives.append(f"--nodelist={fold_hostlist(list(nodes))}")
    directives += slurm_job_argv(opts, time_limit=opts.time_limit)
    directives += [f"--output={run_dir}/slurm-%j.out", f"--chdir={workdir}"]
    lines = ["#!/bin/bash"]
    lines += [f"#SBATCH {_directive_quote(d)}" for d in directives]
    lines += [
        "# generated by nvtest submit: one nvtest run inside this allocation",
        "set -euo pipefail",
        f"export NVTEST_RUN_DIR={shlex.quote(run_dir)}",
        'echo "nvtest: job $SLURM_JOB_ID on $SLURM_JOB_NODELIST; report: $NVTEST_RUN_DIR/report.html"',
    ]
    for key, value in sorted((env or {}).items()):
        lines.append(f"export {key}={shlex.quote(value)}")
    lines.append("exec " + shlex.join(list(nvtest_argv)))
    return "\n".join(lines) + "\n"


def sweep_batch_script(
    *,
    name: str,
    node: str,
    output: str,
    argv: Sequence[str],
    env: Mapping[str, str],
    options: Sequence[str] = (),
) -> str:
    """The batch job of ``nvtest sweep`` on one idle ``node``: the whole node
    (``--exclusive``), never requeued (a preempted sweep is a lost measurement, not a job to
    run again), exec'ing ``argv`` (``nvtest run --backend local ...``) after exporting ``env``.

    ``output``: the ``--output`` path (``%j`` is the job id); ``options``: the site's job
    options, in order (``--nice=N``, ``--qos=...``, ``--reservation=...``, ``--partition=...``,
    ``--time=...``).
    """
    after = [f"#SBATCH {_directive_quote(opt)}" for opt in options]
    after.append("# generated by nvtest sweep: the active suite on one idle node")
    return _one_task_script(name, node, output, argv, env, ["--exclusive", "--no-requeue"], after)
