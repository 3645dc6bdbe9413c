"""Run one ``srun`` (or ``salloc``) client process with a wall limit, reading its
output as it comes, and cancel its step through Slurm when the limit passes.

Private to :mod:`nvtest.transports.slurm`.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from nvtest.transports._slurm_cmd import scancel_argv
from nvtest.transports._slurm_parse import SrunLog
from nvtest.transports.capture import BoundedCapture, capture_limit, joined_note

__all__ = ["SrunOutcome", "SrunProcess", "client_env", "run_client"]

#: srun input variables (``man srun``, INPUT ENVIRONMENT VARIABLES) that an
#: enclosing allocation or batch job sets and that would override nvtest's own
#: task layout; they are removed from every srun nvtest starts.
STEP_LAYOUT_VARS = (
    "SLURM_NTASKS",
    "SLURM_NPROCS",
    "SLURM_NTASKS_PER_NODE",
    "SLURM_NTASKS_PER_CORE",
    "SLURM_NTASKS_PER_SOCKET",
    "SLURM_NTASKS_PER_GPU",
    "SLURM_CPUS_PER_TASK",
    "SLURM_DISTRIBUTION",
    "SLURM_GPUS_PER_TASK",
    "SLURM_TRES_PER_TASK",
    "SLURM_EXCLUSIVE",
)

#: Seconds to wait for srun to exit after its step was cancelled, before SIGKILL.
CANCEL_GRACE_S = 15.0


def client_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment minus :data:`STEP_LAYOUT_VARS`, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if k not in STEP_LAYOUT_VARS}
    env.update(extra or {})
    return env


def run_client(argv: Sequence[str], *, timeout_s: float = 60.0) -> subprocess.CompletedProcess[str]:
    """Run a short Slurm client command (sinfo, scontrol, scancel, sbatch) and capture it.

    It runs in its own process group, killed whole at ``timeout_s``: a wrapper script's
    children (a site's ``scontrol`` shim, a stand-in) never outlive the deadline.

    Raises:
        OSError: the command is not installed.
        subprocess.TimeoutExpired: it ran past ``timeout_s``.
    """
    with subprocess.Popen(
        list(argv),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=client_env(),
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    ) as proc:
        try:
            out, err = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
        return subprocess.CompletedProcess(list(argv), proc.returncode, out, err)


@dataclass
class SrunOutcome:
    """What one srun did.

    Attributes:
        returncode: srun's exit status; None when it was killed by nvtest.
        stdout: srun's stdout, raw bytes (labelled with ``--label``).
        task_stderr: srun's stderr lines that are not srun's own (``srun: ...``), raw bytes.
        log: what srun said about the job, step, tasks and their exit statuses.
        timed_out: the wall limit passed and the step was cancelled.
        interrupted: :meth:`SrunProcess.cancel` was called by an interrupt.
        cancelled: the ``<job>[.<step>]`` that was cancelled, if any.
        started_at: seconds since the epoch; duration_s: wall seconds.
        truncated: what the capture limit (per task, times the tasks) dropped of stdout
            and the tasks' stderr; None when nothing.
    """

    returncode: int | None
    stdout: bytes
    task_stderr: bytes
    log: SrunLog
    timed_out: bool = False
    interrupted: bool = False
    cancelled: str | None = None
    started_at: float = 0.0
    duration_s: float = 0.0
    start_error: str | None = None
    srun_lines: list[str] = field(default_factory=list)
    truncated: str | None = None


class SrunProcess:
    """One srun client process whose step can be cancelled from another thread.

    Args:
        argv: the srun argv (with ``--verbose``, so the step id is printed).
        own_job: True when srun creates its own job (no ``--jobid``): a
            cancellation before the step starts cancels that job.
        tasks: how many tasks' output shares srun's pipes: each stream is captured up to
            this many times the capture limit (:mod:`nvtest.transports.capture`).
    """

    def __init__(self, argv: Sequence[str], *, own_job: bool, tasks: int = 1) -> None:
        self.argv = list(argv)
        self.own_job = own_job
        self.log = SrunLog()
        self._proc: subprocess.Popen[bytes] | None = None
        limit = capture_limit() * max(1, tasks)
        self._out = BoundedCapture(limit)
        self._err = BoundedCapture(limit)
        self._srun_lines: list[str] = []
        self._lock = threading.Lock()
        self._cancelled: str | None = None
        self.interrupted = False

    def run(
        self,
        timeout_s: float,
        *,
        on_cancel: Callable[[str], None] | None = None,
        before_cancel: Callable[[], None] | None = None,
    ) -> SrunOutcome:
        """Run to the end or to ``timeout_s``; at the limit call ``before_cancel`` (the
        transport kills the tasks' processes there and notes what ran), then cancel the
        step (scancel)."""
        started = time.time()
        t0 = time.monotonic()
        try:
            self._proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                env=client_env(),
            )
        except OSError as exc:
            return SrunOutcome(
                None,
                b"",
                b"",
                self.log,
                started_at=started,
                start_error=f"cannot start srun: {exc}",
            )
        readers = [
            threading.Thread(target=self._read_out, daemon=True),
            threading.Thread(target=self._read_err, daemon=True),
        ]
        for r in readers:
            r.start()
        timed_out = False
        try:
            self._proc.wait(timeout=max(0.0, timeout_s))
        except subprocess.TimeoutExpired:
            timed_out = not self.interrupted
            if before_cancel is not None and timed_out:
                before_cancel()
            target = self.cancel()
            if on_cancel and target:
                on_cancel(target)
        for r in readers:
            r.join(timeout=5.0)
        with self._lock:
            truncated = joined_note(self._out, self._err)
            stdout = self._out.take()
            task_err = self._err.take()
            srun_lines = list(self._srun_lines)
        return SrunOutcome(
            returncode=None if (timed_out or self._cancelled) else self._proc.returncode,
            stdout=stdout,
            task_stderr=task_err,
            log=self.log,
            timed_out=timed_out,
            interrupted=self.interrupted,
            cancelled=self._cancelled,
            started_at=started,
            duration_s=time.monotonic() - t0,
            srun_lines=srun_lines,
            truncated=truncated,
        )

    def cancel(self, *, interrupted: bool = False) -> str | None:
        """Cancel the step (``scancel <job>.<step>``), or the job srun made when no
        step started yet; wait for srun to exit, SIGKILL it after a grace.

        Returns the cancelled ``<job>[.<step>]``, or None when none was known.
        """
        self.interrupted = self.interrupted or interrupted
        proc = self._proc
        if proc is None:
            return None
        target = None
        with self._lock:
            job, step = self.log.job_id, self.log.step_id
        if job and step is not None:
            target = f"{job}.{step}"
            argv = scancel_argv(job, step)
        elif job and self.own_job:
            target = job
            argv = scancel_argv(job)
        if target:
            with contextlib.suppress(OSError, subprocess.SubprocessError):
                run_client(argv, timeout_s=30.0)
            self._cancelled = target
        try:
            proc.wait(timeout=CANCEL_GRACE_S if target else 1.0)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5.0)
        return target

    def _read_out(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        stream = self._proc.stdout
        for chunk in iter(lambda: os.read(stream.fileno(), 65536), b""):
            with self._lock:
                self._out.add(chunk)

    def _read_err(self) -> None:
        assert self._proc is not None and self._proc.stderr is not None
        stream = self._proc.stderr
        # bounded reads: a task printing one endless line never becomes one huge bytes object
        for raw in iter(lambda: stream.readline(65536), b""):
            with self._lock:
                if raw.startswith(b"srun: "):
                    line = raw.decode("utf-8", "replace")
                    self.log.feed(line)
                    self._srun_lines.append(line)
                else:
                    self._err.add(raw)
