"""Slurm's client commands as calls: one function that runs a command and returns its
stdout, and :class:`SlurmClient`, the batch-job calls the transport and the drills use.

Every argv comes from :mod:`nvtest.transports._slurm_cmd` (golden-tested) and every
output is read by :mod:`nvtest.transports._slurm_parse`.
"""

from __future__ import annotations

import shlex
import subprocess
from collections.abc import Callable, Sequence

from nvtest.errors import TransportError
from nvtest.transports._slurm_cmd import (
    release_hold_argv,
    requeue_argv,
    sbatch_argv,
    scancel_argv,
    squeue_jobs_argv,
)
from nvtest.transports._slurm_parse import parse_sbatch_job_id, parse_squeue_fields
from nvtest.transports._slurm_step import run_client

__all__ = ["SQUEUE_FIELDS", "SlurmCall", "SlurmClient", "call_client"]

#: A Slurm client call: argv -> stdout; raises :class:`TransportError` when it fails.
SlurmCall = Callable[[list[str]], str]

#: The squeue fields a batch job is followed by (``-O``, each ended by ``|``).
SQUEUE_FIELDS = ("JobID", "State", "RestartCnt", "EligibleTime", "Reason")


def call_client(argv: Sequence[str], what: str = "", timeout_s: float = 60.0) -> str:
    """Run a short Slurm client command (sinfo, scontrol, squeue, sbatch, scancel); its stdout.

    Raises:
        TransportError: it is not installed, ran past ``timeout_s`` or exited non-zero
            (the message quotes the command and the tail of its stderr).
    """
    prefix = f"{what}: " if what else ""
    try:
        proc = run_client(argv, timeout_s=timeout_s)
    except (OSError, subprocess.SubprocessError) as exc:
        raise TransportError(f"{prefix}{shlex.join(argv)}: {exc}") from exc
    if proc.returncode != 0:
        msg = (proc.stderr or proc.stdout).strip()[-500:]
        raise TransportError(f"{prefix}{shlex.join(argv)} exited {proc.returncode}: {msg}")
    return proc.stdout


def _call(argv: list[str]) -> str:
    return call_client(argv)


class SlurmClient:
    """Batch-job calls: submit, follow with squeue, requeue, release a hold, cancel.

    Args:
        call: runs one client argv and returns its stdout (default: the real
            commands); tests give a scripted Slurm.
    """

    def __init__(self, call: SlurmCall = _call) -> None:
        self.call = call

    def submit(self, script: str) -> str:
        """``sbatch --parsable SCRIPT``; the job id.

        Raises:
            TransportError: sbatch failed or printed no job id.
        """
        out = self.call(sbatch_argv(script))
        try:
            return parse_sbatch_job_id(out)
        except ValueError as exc:
            raise TransportError(str(exc)) from exc

    def queue(self, jobs: Sequence[str], fields: Sequence[str] = SQUEUE_FIELDS) -> dict[str, dict[str, str]]:
        """The squeue ``fields`` of the ``jobs`` Slurm still knows, in any state (``{}``: none).

        Raises:
            TransportError: squeue failed otherwise (a busy controller).
        """
        try:
            out = self.call(squeue_jobs_argv(jobs, fields))
        except TransportError as exc:
            if "Invalid job id" in str(exc):  # every one of them has left slurmctld's memory
                return {}
            raise
        return parse_squeue_fields(out, fields)

    def requeue(self, job: str) -> None:
        """``scontrol requeue JOB``.

        Raises:
            TransportError: scontrol refused.
        """
        self.call(requeue_argv(job))

    def release_hold(self, job: str) -> None:
        """Set a pending job's begin time to now (``scontrol update JobId=J StartTime=now``).

        Raises:
            TransportError: scontrol refused (the job left PENDING, a busy controller).
        """
        self.call(release_hold_argv(job))

    def cancel(self, job: str) -> bool:
        """``scancel JOB``; False when it failed (the job already gone)."""
        try:
            self.call(scancel_argv(job))
        except TransportError:
            return False
        return True
