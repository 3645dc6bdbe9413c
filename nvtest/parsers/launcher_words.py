"""The launchers' words for a task (rank) of a multi-node job that died: one table.

srun and mpirun, not the tool, say that a rank of the job ended badly and on which node; the
nccl-tests parser (a failure of the run, :data:`nvtest.parsers.nccl_tests.FAILURES`) and the
MPI job (which node to blame, :func:`nvtest.jobs.mpi.blame_from_output`) read the same
lines. Each entry is a regex source (not compiled: each reader anchors it as it reads, a
line at a time or the whole output) whose named groups are ``device`` (the node the
launcher names) and ``code`` (how the task ended, in the launcher's words).

Sources of the wordings: Slurm ``src/srun/libsrun/launch.c`` (``srun: error: node2: task 1:
Exited with exit code 3``, ``...: Killed``, ``...: Terminated``; Slurm 20.11 to 23.11), Open
MPI 4.x/5.x ``help-errmgr-base.txt`` (``mpirun noticed that process rank 3 with PID 4711 on
node n2 exited on signal 9 (Killed).``; ``prterun`` in 5.x) and ``Primary job terminated
normally, but 1 process returned a non-zero exit code``.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["MPIRUN_RANK_DIED", "MPIRUN_RANK_NONZERO", "SRUN_EXITED", "SRUN_TASK_DIED", "TASK_DIED", "TaskDiedWords"]

#: srun: a task of the step ended badly; ``device`` the node, ``code`` how
#: (``Exited with exit code N``, ``Killed``, ``Terminated``).
SRUN_TASK_DIED = (
    r"srun: error: (?P<device>\S+): tasks? [\d,-]+: "
    r"(?P<code>Exited with exit code \d+|Killed|Terminated)"
)
#: The start of ``code`` when the task exited on its own (not killed by a signal).
SRUN_EXITED = "Exited with exit code "
#: mpirun (Open MPI 4.x) or prterun (5.x): a rank died; ``device`` the node.
MPIRUN_RANK_DIED = r"(?:mpirun|prterun) noticed that process rank \d+ with PID \d+ on node (?P<device>\S+) exited"
#: mpirun (Open MPI 4.x): a rank exited non-zero after the job itself ended normally.
MPIRUN_RANK_NONZERO = r"Primary job\s+terminated normally, but \d+ process returned"


class TaskDiedWords(NamedTuple):
    """One launcher's wording: its regex source and where the wording comes from."""

    pattern: str
    source: str


#: Every launcher's "a task died" wording, in the order the readers try them.
TASK_DIED: tuple[TaskDiedWords, ...] = (
    TaskDiedWords(MPIRUN_RANK_DIED, "Open MPI 4.x/5.x"),
    TaskDiedWords(MPIRUN_RANK_NONZERO, "Open MPI 4.x: a rank exited non-zero"),
    TaskDiedWords(SRUN_TASK_DIED, "Slurm srun: a task died"),
)
