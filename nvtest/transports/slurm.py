"""The ``slurm`` transport: every phase is one ``srun`` step over all its nodes.

Formats and options are those of Slurm 22.05 (``srun --version``: ``slurm-wlm
22.05.8`` on Debian 12); the options used exist unchanged through Slurm 24.x.

Where the nodes come from (:func:`discover_nodes`): the given node list; else the
partition (``sinfo -p P -h -o %N``); else the current allocation
(``SLURM_JOB_NODELIST`` when nvtest runs inside one); else the default
partition. Nodes that are DOWN, DRAIN(ED/ING), FAIL, NOT_RESPONDING... are left
out, and :func:`node_states` gives their Slurm state and reason for the report.

Where the phases run:

- inside an allocation (``SLURM_JOB_ID`` set: ``salloc``, ``sbatch``, ``nvtest
  submit``): every phase is a step of that job (``srun --jobid --overlap``);
- else, with ``allocate=True`` (the default): nvtest requests one allocation
  for the run's nodes at the first phase (``salloc --no-shell`` with the job
  options) and releases it at :meth:`SlurmTransport.close`;
- else (``allocate=False``): each phase is its own one-step job.

A phase with one command for all nodes is ``srun -N <n> --ntasks-per-node=1
-w <nodes> --label --verbose /bin/sh -c <cmd>``: one task per node, output
split per node by the ``--label`` prefix, task -> node and per-task exit
status read from srun's ``--verbose`` lines. A mapping {node: command} (a pair
test) is the SAME single step: each task runs its node's command chosen by
``$SLURMD_NODENAME`` (:func:`~nvtest.transports._slurm_cmd.node_dispatch_command`),
so server and client start together and one step id covers both.

Timeouts: each step gets ``--time`` (``timeout_s`` in minutes, rounded up)
and a client-side wall limit of ``timeout_s``; at the limit nvtest runs
``scancel <job>.<step>`` and each node's result says
``timed out after N s; step cancelled (scancel J.S)``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import secrets
import shlex
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from nvtest.config.inventory import Node, expand_hostlist, fold_hostlist
from nvtest.errors import ConfigError, TransportError
from nvtest.transports._deadline import KillReport, kill_task_script, new_token, parse_kill_report
from nvtest.transports._slurm_client import SQUEUE_FIELDS, SlurmClient, call_client
from nvtest.transports._slurm_cmd import (
    batch_script,
    drain_argv,
    job_name,
    node_dispatch_command,
    requeue_batch_script,
    salloc_argv,
    scancel_argv,
    srun_multi_argv,
    srun_phase_argv,
    step_minutes,
    task_shell,
)
from nvtest.transports._slurm_parse import (
    SlurmNodeState,
    parse_job_id,
    parse_node_records,
    parse_squeue_fields,
    split_labelled,
    states_from_records,
)
from nvtest.transports._slurm_step import SrunOutcome, SrunProcess, client_env, run_client
from nvtest.transports.base import Command, CommandResult, MultiLauncher, Transport, render_command
from nvtest.transports.options import SlurmOptions, build_options, slurm_job_argv

__all__ = [
    "SQUEUE_FIELDS",
    "SlurmClient",
    "SlurmNodeState",
    "SlurmOptions",
    "SlurmTransport",
    "discover_nodes",
    "node_states",
    "parse_squeue_fields",
    "requeue_batch_script",
]

#: Seconds ``salloc`` may wait for its allocation (env ``NVTEST_SLURM_ALLOC_TIMEOUT``).
ALLOC_TIMEOUT_S = 600.0
#: Seconds between SIGTERM and SIGKILL of what a cancelled step left behind (and after
#: SIGKILL, before a survivor is declared unkillable).
KILL_GRACE_S = 3.0


_client = call_client


def node_states(names: Sequence[str]) -> dict[str, SlurmNodeState]:
    """Slurm's view of each of ``names``, from ``scontrol show node -o``.

    Returns name -> :class:`SlurmNodeState` (state such as ``IDLE+DRAIN``, the
    admin reason, active features, GRES); a name Slurm does not know gets state
    ``NOT_FOUND`` (not available).

    Raises:
        TransportError: scontrol could not run or failed.
    """
    states = states_from_records(parse_node_records(_client(["scontrol", "show", "node", "-o"], "node states")))
    missing = SlurmNodeState(state="NOT_FOUND", reason="not a node of this Slurm cluster")
    return {n: states.get(n, missing) for n in names}


def _partition_nodes(partition: str | None) -> list[str]:
    if partition:
        text = _client(["sinfo", "-h", "-p", partition, "-o", "%N"], f"nodes of partition {partition}")
    else:
        rows = _client(["sinfo", "-h", "-o", "%P %N"], "the default partition").split()
        default = [n for p, n in zip(rows[::2], rows[1::2], strict=False) if p.endswith("*")]
        if not default:
            raise ConfigError("Slurm has no default partition: give --partition or --nodes", field="--partition")
        text = "\n".join(default)
    names: list[str] = []
    for line in text.split():
        if line and line != "n/a":
            names.extend(n for n in expand_hostlist(line) if n not in names)
    if not names:
        raise ConfigError(f"partition {partition!r} has no nodes (or does not exist)", field="--partition")
    return expand_hostlist(fold_hostlist(names))


def discover_nodes(
    partition: str | None = None, nodelist: str | None = None, *, include_unavailable: bool = False
) -> list[str]:
    """The node names a Slurm run targets, sorted as a hostlist sorts.

    Order of sources: ``nodelist`` (a hostlist expression); else ``partition``
    (``sinfo -p P -h -o %N``); else ``SLURM_JOB_NODELIST`` (inside an
    allocation); else the default partition. Unless ``include_unavailable``,
    nodes whose state is DOWN, DRAIN, FAIL, NOT_RESPONDING... are left out
    (:func:`node_states` says why).

    Raises:
        ConfigError: an invalid hostlist, or a partition with no nodes.
        TransportError: sinfo/scontrol could not run.
    """
    if nodelist:
        names = expand_hostlist(nodelist)
    elif partition:
        names = _partition_nodes(partition)
    elif os.environ.get("SLURM_JOB_NODELIST"):
        names = expand_hostlist(os.environ["SLURM_JOB_NODELIST"])
    else:
        names = _partition_nodes(None)
    if include_unavailable:
        return names
    states = node_states(names)
    return [n for n in names if states[n].available]


class SlurmTransport(Transport):
    """Runs each phase as one srun step over its nodes (see the module docstring).

    Args:
        options: the fields of :class:`~nvtest.transports.options.SlurmOptions` (job
            options of the allocation nvtest requests, and of the per-phase jobs when
            ``allocate=False``; ``mpi``: the ``srun --mpi`` plugin of :meth:`launch_multi`).
        allocate: request one allocation for the run (released at :meth:`close`)
            when not already inside one; False: each phase is its own job.
        run_id: names every job and step ``nvtest-<run-id>``.
        log: receives warnings (staging fallback, cleanup failures), one line each.
    """

    name = "slurm"

    def __init__(
        self,
        *,
        allocate: bool = True,
        run_id: str | None = None,
        log: Callable[[str], None] | None = None,
        **options: Any,
    ) -> None:
        self.options = build_options(SlurmOptions, options, where="slurm backend")
        self.allocate = allocate
        self.run_id = run_id or time.strftime("%Y%m%d-%H%M%S") + f"-{os.getpid()}"
        self.job_name = job_name(self.run_id)
        self._log = log or (lambda _msg: None)
        self._lock = threading.Lock()
        self._alloc_lock = threading.Lock()
        #: the enclosing allocation, never released by nvtest
        self.outer_job: str | None = os.environ.get("SLURM_JOB_ID") or None
        #: the allocation nvtest requested, and its nodes
        self.allocation: str | None = None
        self._alloc_nodes: frozenset[str] = frozenset()
        self._alloc_proc: subprocess.Popen[str] | None = None
        self._active: set[SrunProcess] = set()
        self._interrupted = False
        self._staged: list[Path] = []
        self._warned_stage = False
        # two transports never share a staging directory, whatever run ids they were given
        self._root_token = secrets.token_hex(4)
        self._stage_method: str | None = None
        self._addresses: dict[str, str] | None = None
        #: seconds between SIGTERM and SIGKILL of what a cancelled step left behind, and
        #: after SIGKILL before a survivor is declared unkillable
        self.kill_grace_s = KILL_GRACE_S

    # -- allocation ---------------------------------------------------------------------
    def _job_for(self, names: Sequence[str]) -> str | None:
        """The job id the step runs in: the enclosing allocation, nvtest's own, or None."""
        if self.outer_job:
            return self.outer_job
        if not self.allocate:
            return None
        with self._alloc_lock:
            if self.allocation is None:
                self._acquire(names)
            elif not set(names) <= self._alloc_nodes:
                self._log(
                    f"slurm: nodes {fold_hostlist(sorted(set(names) - self._alloc_nodes))} are outside "
                    f"allocation {self.allocation}: this phase runs as its own job"
                )
                return None
            return self.allocation

    def _acquire(self, names: Sequence[str]) -> None:
        argv = salloc_argv(self.options, sorted(names), name=self.job_name)
        timeout = float(os.environ.get("NVTEST_SLURM_ALLOC_TIMEOUT", ALLOC_TIMEOUT_S))
        try:
            proc = subprocess.Popen(
                argv,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                stdin=subprocess.DEVNULL,
                env=client_env(),
                start_new_session=True,
            )
        except OSError as exc:
            raise TransportError(f"cannot start salloc: {exc}") from exc
        self._alloc_proc = proc
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            job = parse_job_id(err)
            if job:
                with contextlib.suppress(OSError, subprocess.SubprocessError):
                    run_client(scancel_argv(job))
            raise TransportError(
                f"no allocation after {timeout:g} s: {shlex.join(argv)}: {err.strip()[-300:]}"
            ) from None
        finally:
            self._alloc_proc = None
        job = parse_job_id(err)
        if proc.returncode != 0 or job is None or self._interrupted:
            if job:
                with contextlib.suppress(OSError, subprocess.SubprocessError):
                    run_client(scancel_argv(job))
            raise TransportError(
                f"allocation failed: {shlex.join(argv)} exited {proc.returncode}: {err.strip()[-500:]}"
            )
        self.allocation = job
        self._alloc_nodes = frozenset(names)

    def release(self) -> None:
        """Cancel the allocation nvtest requested (never the enclosing one)."""
        with self._alloc_lock:
            job, self.allocation = self.allocation, None
            self._alloc_nodes = frozenset()
        if job:
            try:
                _client(scancel_argv(job), f"release allocation {job}")
            except TransportError as exc:
                self._log(f"slurm: {exc}")

    # -- running ------------------------------------------------------------------------
    def _srun(
        self,
        argv: list[str],
        timeout_s: float,
        *,
        own_job: bool,
        tasks: int = 1,
        before_cancel: Callable[[], None] | None = None,
    ) -> SrunOutcome:
        step = SrunProcess(argv, own_job=own_job, tasks=tasks)
        with self._lock:
            if self._interrupted:
                return SrunOutcome(
                    None,
                    b"",
                    b"",
                    step.log,
                    interrupted=True,
                    start_error="interrupted before start",
                )
            self._active.add(step)
        try:
            return step.run(timeout_s, before_cancel=before_cancel)
        finally:
            with self._lock:
                self._active.discard(step)

    def run(
        self,
        nodes: Sequence[Node],
        command: Command | Mapping[str, Command],
        *,
        timeout_s: float,
        env: Mapping[str, str] | None = None,
    ) -> dict[str, CommandResult]:
        """Run ``command`` on every node as ONE srun step; never raises for node failures.

        ``command`` may be a mapping node name -> command: the step then runs each
        node's own command (dispatch on ``$SLURMD_NODENAME``). Returns node name ->
        :class:`CommandResult` whose ``command`` is the srun line; ``stdout`` and
        ``stderr`` are that node's task output (label removed); ``exit_code`` the
        task's exit status (``128+N`` when killed by signal N); ``error`` says
        why there is none (srun could not allocate or launch, timeout, interrupt).
        """
        names = [n.name for n in nodes]
        if not names:
            return {}
        if self._interrupted:
            return {
                n: CommandResult(node=n, command="", error="interrupted before start", failure="interrupted")
                for n in names
            }
        if isinstance(command, Mapping):
            lines = {n: render_command(command[n], env) for n in names}
            shell = next(iter(lines.values())) if len(set(lines.values())) == 1 else node_dispatch_command(lines)
        else:
            shell = render_command(command, env)
        try:
            job = self._job_for(names)
        except TransportError as exc:
            return {n: CommandResult(node=n, command=shell, error=str(exc), failure="start") for n in names}
        token = new_token()
        argv = srun_phase_argv(
            names,
            task_shell(shell, token),
            timeout_s=timeout_s,
            name=self.job_name,
            opts=self.options,
            job_id=job,
        )
        reports: dict[str, KillReport] = {}
        outcome = self._srun(
            argv,
            timeout_s,
            own_job=job is None,
            tasks=len(names),
            before_cancel=(lambda: reports.update(self._kill_task(job, names, token))) if job else None,
        )
        results = _phase_results(names, shlex.join(argv), outcome, timeout_s)
        return {n: _with_report(r, reports.get(n)) for n, r in results.items()}

    def _kill_task(self, job: str, names: Sequence[str], token: str) -> dict[str, KillReport]:
        """At a step's deadline, before ``scancel``: one more step (``--overlap``) that kills,
        on each node, every process of the step's tasks (found by ``token``, so a child that
        double-forked away from Slurm's process tracking too), noting what was running and
        what survived SIGKILL (:func:`~nvtest.transports._deadline.kill_task_script`).

        Returns node -> report; a node whose kill step did not answer is left out.
        """
        script = kill_task_script(None, token, self.kill_grace_s, same_env="SLURMD_NODENAME")
        limit = 2 * self.kill_grace_s + 30.0
        argv = srun_phase_argv(names, script, timeout_s=limit, name=self.job_name, opts=self.options, job_id=job)
        outcome = SrunProcess(argv, own_job=False, tasks=len(names)).run(limit)
        if outcome.timed_out or outcome.start_error:
            self._log(f"slurm: the kill step at a deadline did not finish: {outcome.start_error or 'timed out'}")
        results = _phase_results(names, shlex.join(argv), outcome, limit)
        return {n: parse_kill_report(r.stdout) for n, r in results.items() if r.exit_code == 0}

    def multi_launcher(self) -> MultiLauncher:
        """srun: one step over the nodes (:meth:`launch_multi`), with the run's ``--mpi``
        plugin and container image."""
        return MultiLauncher(
            name="srun",
            launch=self.launch_multi,
            mpi_plugin=self.options.mpi,
            container_image=self.options.container_image,
            image_id=self.options.image_id,
        )

    def launch_multi(
        self,
        nodes: Sequence[Node],
        command: Command,
        ntasks_per_node: int,
        gpus_per_task: int | None = None,
        env: Mapping[str, str] | None = None,
        *,
        timeout_s: float = 600.0,
    ) -> CommandResult:
        """One multi-node launch (an MPI or NCCL job): ``ntasks_per_node`` ranks per
        node, block layout, ``--mpi=<plugin>`` when configured.

        Returns one :class:`CommandResult` whose ``node`` is the hostlist of
        ``nodes``, with srun's raw stdout (unlabelled), the tasks' stderr and
        srun's error lines, and srun's exit status (the worst task's).
        """
        names = [n.name for n in nodes]
        shell = render_command(command, env)
        label = fold_hostlist(names)
        try:
            job = self._job_for(names)
        except TransportError as exc:
            return CommandResult(node=label, command=shell, error=str(exc), failure="start")
        token = new_token()
        argv = srun_multi_argv(
            names,
            task_shell(shell, token),
            ntasks_per_node=ntasks_per_node,
            gpus_per_task=gpus_per_task,
            timeout_s=timeout_s,
            name=self.job_name,
            opts=self.options,
            job_id=job,
        )
        reports: dict[str, KillReport] = {}
        out = self._srun(
            argv,
            timeout_s,
            own_job=job is None,
            before_cancel=(lambda: reports.update(self._kill_task(job, names, token))) if job else None,
        )
        res = CommandResult(
            node=label,
            command=shlex.join(argv),
            stdout=out.stdout.decode("utf-8", "replace"),
            stderr=out.task_stderr.decode("utf-8", "replace")
            + "".join(m if m.endswith("\n") else m + "\n" for m in out.log.messages),
            exit_code=out.returncode,
            duration_s=out.duration_s,
            started_at=out.started_at or time.time(),
            error=_step_error(out, timeout_s),
            timed_out=out.timed_out,
            failure=_step_failure(out),
            truncated=out.truncated,
        )
        if reports:
            res = _with_node_reports(res, reports)
        return res

    # -- staging ------------------------------------------------------------------------
    def stage(self, nodes: Sequence[Node], local_dir: Path) -> dict[str, str]:
        """Put the probes on a path every node sees; node name -> that path.

        ``Node.probe_dir`` when set; else a copy under ``$NVTEST_SHARED_DIR``
        (``<dir>/nvtest-<run-id>-<8 hex digits>/<name of local_dir>``, unique to this
        transport and removed at :meth:`close`);
        else ``local_dir`` itself (right on one machine, or when the checkout
        is on a shared file system), with a warning through ``log``.

        Raises:
            TransportError: the copy to the shared directory failed.
        """
        out: dict[str, str] = {}
        need = [n for n in nodes if not n.probe_dir]
        out.update({n.name: str(n.probe_dir) for n in nodes if n.probe_dir})
        if not need:
            return out
        shared = os.environ.get("NVTEST_SHARED_DIR")
        if shared:
            root = Path(shared) / f"nvtest-{self.run_id}-{self._root_token}"
            dest = root / local_dir.name
            try:
                shutil.copytree(local_dir, dest, dirs_exist_ok=True)
            except OSError as exc:
                raise TransportError(f"cannot copy the probes to {dest}: {exc}") from exc
            with self._lock:
                if root not in self._staged:
                    self._staged.append(root)
            path = str(dest)
            self._stage_method = f"copied to the shared directory {root}"
        else:
            self._stage_method = "in place (NVTEST_SHARED_DIR not set)"
            path = str(local_dir.resolve())
            if not self._warned_stage:
                self._warned_stage = True
                self._log(
                    f"slurm: NVTEST_SHARED_DIR is not set: nodes read the probes at {path}, "
                    "which must be a path every node sees"
                )
        out.update({n.name: path for n in need})
        return out

    def cluster_name(self) -> str | None:
        """``$SLURM_CLUSTER_NAME`` (inside a job), else ``ClusterName`` of ``scontrol show
        config`` (at most 10 s); None when neither answers."""
        env = os.environ.get("SLURM_CLUSTER_NAME", "").strip()
        if env:
            return env
        try:
            text = _client(["scontrol", "show", "config"], "cluster name", 10.0)
        except TransportError:
            return None
        for line in text.splitlines():
            key, sep, value = line.partition("=")
            if sep and key.strip() == "ClusterName" and value.strip():
                return value.strip()
        return None

    def staging_method(self, node_name: str) -> str | None:
        """How the probes reach the nodes (a copy in the shared directory, or in place)."""
        return self._stage_method

    def node_address(self, node: Node) -> str:
        """The inventory's ``address``, else Slurm's ``NodeAddr`` for the node (asked once per
        run with ``scontrol show node -o``), else its name."""
        if node.address:
            return node.address
        with self._lock:
            known = self._addresses
        if known is None:
            try:
                states = states_from_records(
                    parse_node_records(_client(["scontrol", "show", "node", "-o"], "node addresses"))
                )
                known = {name: st.address for name, st in states.items() if st.address}
            except TransportError as exc:
                self._log(f"slurm: node addresses unknown ({exc}): nodes are reached by name")
                known = {}
            with self._lock:
                self._addresses = known
        return known.get(node.name) or node.name

    # -- Slurm state changes (opt-in) ----------------------------------------------------
    def drain(self, node: str, reason: str) -> None:
        """Drain ``node`` with ``reason`` (``scontrol update nodename=X state=drain``).

        The only change nvtest makes to Slurm, and only when asked
        (``--drain-failed``). Raises TransportError when scontrol fails.
        """
        _client(drain_argv(node, reason), f"drain {node}")

    # -- jobs beside the run's allocation ------------------------------------------------
    @property
    def holds_nodes_exclusively(self) -> bool:
        """True when the run's allocation (nvtest's own, or the enclosing one) was asked
        for with ``--exclusive``: no other job can start on its nodes while it lasts."""
        return self.options.exclusive and (self.allocate or self.outer_job is not None)

    def side_job_options(self, timeout_s: float | None = None) -> list[str]:
        """sbatch options of a job nvtest submits beside the run's allocation (the requeue
        drill's jobs): this run's ``--partition``, ``--account``, ``--reservation`` and
        ``--qos``, plus ``--time`` of ``timeout_s`` seconds in whole minutes (rounded up)
        when given; never ``--exclusive`` nor ``--gpus-per-node`` (such a job shares the
        nodes with the run)."""
        shared = dataclasses.replace(self.options, exclusive=False, gpus_per_node=None)
        minutes = None if timeout_s is None else str(step_minutes(timeout_s))
        return slurm_job_argv(shared, time_limit=minutes)

    # -- batch --------------------------------------------------------------------------
    def write_batch_script(
        self,
        run_dir: Path,
        nvtest_argv: Sequence[str],
        *,
        nodes: Sequence[str] | None = None,
        node_count: int | None = None,
        env: Mapping[str, str] | None = None,
    ) -> str:
        """Write ``<run_dir>/nvtest-submit.sbatch`` that runs ``nvtest_argv`` in its
        own allocation (this transport's job options); return the script's path."""
        run_dir.mkdir(parents=True, exist_ok=True)
        text = batch_script(
            self.options,
            nodes=nodes,
            node_count=node_count,
            name=self.job_name,
            run_dir=str(run_dir.resolve()),
            workdir=os.getcwd(),
            nvtest_argv=nvtest_argv,
            env=env,
        )
        path = run_dir / "nvtest-submit.sbatch"
        path.write_text(text, encoding="utf-8")
        path.chmod(0o755)
        return str(path)

    def submit(self, script_path: str) -> str:
        """Submit a batch script with ``sbatch --parsable``; return the job id.

        Raises:
            TransportError: sbatch failed or printed no job id.
        """
        return SlurmClient(lambda argv: _client(argv, "submit")).submit(script_path)

    @staticmethod
    def client() -> SlurmClient:
        """The batch-job calls (submit, squeue, requeue, release, cancel) of the real Slurm."""
        return SlurmClient()

    # -- stopping -----------------------------------------------------------------------
    def interrupt(self) -> None:
        """Cancel every step in flight and nvtest's own allocation; results already
        returned are untouched, steps in flight return with ``error="interrupted..."``."""
        with self._lock:
            self._interrupted = True
            steps = list(self._active)
        alloc = self._alloc_proc
        if alloc is not None and alloc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                alloc.kill()
        threads = [threading.Thread(target=s.cancel, kwargs={"interrupted": True}, daemon=True) for s in steps]
        for t in threads:
            t.start()
        self.release()

    def close(self) -> None:
        """Release nvtest's allocation and remove the probes copied to the shared dir."""
        self.release()
        with self._lock:
            staged, self._staged = self._staged, []
        for root in staged:
            shutil.rmtree(root, ignore_errors=True)


def _with_report(res: CommandResult, report: KillReport | None) -> CommandResult:
    """``res`` of a timed-out step with what the kill step found on its node."""
    if report is None or res.error is None:
        return res
    unkillable = report.unkillable
    return dataclasses.replace(
        res,
        error=f"{res.error}; " + report.describe("the tasks' processes killed")
        if unkillable or report.hung
        else res.error,
        failure="unkillable" if unkillable else res.failure,
        hung=report.hung_names() or res.hung,
    )


def _with_node_reports(res: CommandResult, reports: Mapping[str, KillReport]) -> CommandResult:
    """``res`` of a timed-out multi-node launch with what the kill step found on each node,
    each node's words after its name (``node2: unkillable (still alive after SIGKILL: ...)``),
    so a survivor is attributed to the node that owns it, not to the launch's every node."""
    if res.error is None:
        return res
    said = [f"{n}: {r.describe('the tasks killed')}" for n, r in sorted(reports.items()) if r.hung or r.survivors]
    unkillable = any(r.unkillable for r in reports.values())
    return dataclasses.replace(
        res,
        error=f"{res.error}; " + "; ".join(said) if said else res.error,
        failure="unkillable" if unkillable else res.failure,
        hung=tuple(dict.fromkeys(p for r in reports.values() for p in r.hung_names())) or res.hung,
    )


def _step_failure(out: SrunOutcome) -> str | None:
    """The :data:`~nvtest.transports.base.FAILURES` kind of a step that did not complete."""
    if out.start_error:
        return "start"
    if out.timed_out:
        return "timeout"
    if out.interrupted:
        return "interrupted"
    return None


def _step_error(out: SrunOutcome, timeout_s: float) -> str | None:
    if out.start_error:
        return out.start_error
    if out.timed_out:
        how = f" (scancel {out.cancelled})" if out.cancelled else " (srun killed)"
        return f"timed out after {timeout_s:g} s; step cancelled{how}"
    if out.interrupted:
        return "interrupted; step cancelled" + (f" (scancel {out.cancelled})" if out.cancelled else "")
    return None


def _phase_results(names: Sequence[str], line: str, out: SrunOutcome, timeout_s: float) -> dict[str, CommandResult]:
    """Split one step's labelled output and srun's task report into per-node results."""
    stdout, _ = split_labelled(out.stdout)
    stderr, rest = split_labelled(out.task_stderr)
    node_tasks = out.log.node_tasks()
    failure = _step_error(out, timeout_s)
    srun_msgs = "".join(m if m.endswith("\n") else m + "\n" for m in out.log.messages)
    results = {}
    for name in names:
        tasks = node_tasks.get(name, [])
        error = failure
        kind = _step_failure(out)
        code: int | None = None
        if error is None:
            statuses = [out.log.status[t] for t in tasks if t in out.log.status]
            if not tasks:
                kind = "launch"
                why = " ".join(m.strip() for m in out.log.messages) or rest.strip() or f"srun exited {out.returncode}"
                error = f"srun did not launch a task on {name}: {why[-500:]}"
            elif len(statuses) == len(tasks):
                code = max(s.exit_code for s in statuses)
            elif out.returncode == 0:
                code = 0
            else:
                error = f"srun exited {out.returncode} without {name}'s task status"
                kind = "launch"
        node_err = "".join(stderr.get(t, "") for t in tasks)
        if error is not None or code:
            node_err += rest + srun_msgs
        results[name] = CommandResult(
            node=name,
            command=line,
            stdout="".join(stdout.get(t, "") for t in tasks),
            stderr=node_err,
            exit_code=code,
            duration_s=out.duration_s,
            started_at=out.started_at or time.time(),
            error=error,
            timed_out=out.timed_out,
            failure=kind if error is not None else None,
            truncated=out.truncated,
        )
    return results
