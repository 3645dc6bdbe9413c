"""One MPI job over the check's nodes (``mpi_probe.py``), and each node's share of it.

How the job starts, by transport:

- ``ssh`` (and any transport without a multi-node launcher of its own,
  :meth:`~nvtest.transports.base.Transport.multi_launcher`): mpirun on the first node, one
  app context per node (MPMD), so each node's ranks run that node's own Python and probe
  directory::

      mpirun --allow-run-as-root --map-by slot --bind-to none [--mca ...] \\
          -np k --host n1:k PY1 DIR1/mpi_probe.py ARGS : -np k --host n2:k PY2 DIR2/mpi_probe.py ARGS

  Open MPI numbers ranks in app-context order, so ranks ``i*k .. i*k+k-1`` are on node
  ``i``. mpirun's own ssh to the other nodes reads the run's generated ssh config
  (``--mca plm_rsh_args "-F <config>"``, :meth:`Transport.launcher_ssh_config`: each node's
  address, port, user, key and host key as the inventory and the controller know them), so
  node names that only the controller resolves still work. Before the launch, a preflight
  (:func:`~nvtest.jobs.preflight.ssh_preflight`) sshes from the first node to every node with
  that config; a node it cannot reach fails naming ssh's words and is left out of the
  launch. The rsh agent, interfaces and MCA settings come from ``$NVTEST_MPI_RSH_AGENT`` and
  ``recipe.mpi`` (:func:`mpi_options`).
- one node (``local``): mpirun with ``k`` ranks (default 2) on ``localhost`` of that node.
- ``slurm`` with ``--mpi PLUGIN`` (``pmix``): one srun step with the plugin
  (the transport's :class:`~nvtest.transports.base.MultiLauncher`), ``k`` tasks per node.
- ``slurm`` without a plugin: mpirun inside the allocation, as one task on the first node.
  A task of a step sees the step's one node in ``SLURM_NNODES``, ``SLURM_JOB_NODELIST`` and
  ``SLURM_TASKS_PER_NODE``; they are set back to the job's nodes (:func:`slurm_mpirun_env`)
  so that Open MPI's Slurm launcher starts its daemons with ``srun`` on every node, with
  ``--overlap`` (``plm_slurm_args``; Slurm >= 20.11 steps share no CPUs without it).
  Debian's Open MPI 4.1 has no PMI-2 client, so ``srun --mpi=pmi2`` cannot start its ranks;
  this path works with any Open MPI built with Slurm support.

Rank -> node: the launch layout gives the expected node of each rank; the probe reports
where each rank ran (:func:`resolve_rank_nodes`). A node that cannot start its ranks makes
mpirun fail; :func:`blame_from_output` names it from Open MPI's, ssh's or srun's messages;
when they name none (Open MPI may abort before saying which process failed), each node
runs the probe's ``--help`` with its own Python and a node where that fails is named.
The job is then launched once more without the named nodes (when at least two nodes are
left), so the others are still measured; the named nodes fail with the first launch's line.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from nvtest.config.inventory import Node, fold_hostlist
from nvtest.errors import CheckFailed, NodeError, ProbeError, ProbeSkip
from nvtest.jobs.base import (
    launch_nodes,
    node_recipe,
    pin_unkillable,
    probe_argv,
    run_commands,
    up_nodes,
)
from nvtest.jobs.launch import MpiOptions, mpirun_argv
from nvtest.jobs.preflight import ssh_preflight
from nvtest.parsers.launcher_words import SRUN_EXITED, SRUN_TASK_DIED
from nvtest.session.phase import attribute_unkillable, cause_of
from nvtest.session.probe import parse_probe_json
from nvtest.transports.base import CommandResult, render_command

if TYPE_CHECKING:
    from nvtest.session.context import RunContext

__all__ = [
    "MpiJob",
    "blame_from_output",
    "launcher_ssh_config",
    "mpirun_preflight",
    "mpi_options",
    "mpmd_argv",
    "node_share",
    "resolve_rank_nodes",
    "run_mpi",
    "slurm_mpirun_env",
]

#: What an MPI job's processes touch (the words of one that survives SIGKILL): the network.
MPI_TOUCHES = ("network",)

#: Slurm variables of the step a task runs in; unset before mpirun starts its own steps.
STEP_VARS = (
    "SLURM_NTASKS",
    "SLURM_NPROCS",
    "SLURM_STEP_NODELIST",
    "SLURM_STEP_NUM_NODES",
    "SLURM_STEP_NUM_TASKS",
    "SLURM_STEP_TASKS_PER_NODE",
    "SLURM_CPU_BIND",
    "SLURM_CPU_BIND_LIST",
    "SLURM_CPU_BIND_TYPE",
    "SLURM_CPU_BIND_VERBOSE",
)


def mpi_options(ctx: RunContext, node: Node) -> MpiOptions:
    """mpirun settings: recipe ``mpi`` (``rsh_agent``, ``tcp_if_include``, ``mca``) of
    ``node``'s SKU, ``$NVTEST_MPI_RSH_AGENT`` on the controller (it wins), and
    ``plm_rsh_args -F <config>`` with the transport's ssh config of the run's nodes
    (:func:`launcher_ssh_config`) unless the agent is not ssh or brings its own ``-F``."""
    r = node_recipe(ctx, node, "mpi")
    agent = os.environ.get("NVTEST_MPI_RSH_AGENT") or r.get("rsh_agent")
    config = launcher_ssh_config(ctx)
    own = str(agent or "ssh").split()
    rsh_args = f"-F {config}" if config and own[0].endswith("ssh") and "-F" not in own else None
    return MpiOptions(
        rsh_agent=agent,
        tcp_if_include=r.get("tcp_if_include"),
        mca={str(k): str(v) for k, v in (r.get("mca") or {}).items()},
        rsh_args=rsh_args,
    )


def launcher_ssh_config(ctx: RunContext) -> str | None:
    """The path (the same on every node) of the transport's ssh config of the run's up
    nodes, for launchers that ssh between them; None where the transport has none."""
    return ctx.transport.launcher_ssh_config(up_nodes(ctx))


def mpmd_argv(
    apps: Sequence[tuple[str, int, Sequence[str]]],
    *,
    export: Sequence[str] = (),
    opts: MpiOptions | None = None,
) -> list[str]:
    """mpirun with one app context ``-np k --host h:k PROGRAM`` per (host, k, program).

    Global options are :func:`~nvtest.jobs.launch.mpirun_argv`'s; ranks are
    numbered in app-context order.

    Raises:
        ValueError: no app, or one with fewer than one rank.
    """
    hosts = [(h, k) for h, k, _ in apps]
    argv = mpirun_argv(hosts, [], export=export, opts=opts)
    i = argv.index("-np")
    del argv[i : i + 4]  # the global "-np N --host LIST": each app context has its own
    for j, (host, k, program) in enumerate(apps):
        if j:
            argv.append(":")
        argv += ["-np", str(k), "--host", f"{host}:{k}", *program]
    return argv


def slurm_mpirun_env(nodes: Sequence[str], ranks_per_node: int) -> str:
    """Shell prefix that gives mpirun, started as a step's task, the job's nodes.

    ``SLURM_JOB_NODELIST``/``SLURM_NODELIST`` = the hostlist of ``nodes``, ``SLURM_NNODES``/
    ``SLURM_JOB_NUM_NODES`` = their count, ``SLURM_TASKS_PER_NODE`` = ``k(xN)`` (Slurm's
    format, read by Open MPI's ``ras_slurm``), and the step's own variables unset.
    """
    hl = shlex.quote(fold_hostlist(list(nodes)))
    n = len(nodes)
    tpn = shlex.quote(f"{ranks_per_node}(x{n})")
    return (
        f"export SLURM_JOB_NODELIST={hl} SLURM_NODELIST={hl} SLURM_NNODES={n} "
        f"SLURM_JOB_NUM_NODES={n} SLURM_TASKS_PER_NODE={tpn}; unset {' '.join(STEP_VARS)}; exec "
    )


# -------------------------------------------------------------------- rank -> node (pure)


def _short(name: str) -> str:
    return name.split(".")[0]


def node_for_token(token: str, nodes: Sequence[Node]) -> str | None:
    """The node that ``token`` (a name, a short or fully qualified host name, an address)
    designates, or None: none does, or several do (nodes behind one address, NAT or port
    forwarding, with the same host name). Ambiguous evidence names no node: it is "not
    identifiable", never the first node that fits."""
    token = token.strip().strip("[]").rstrip(":,.")
    for exact in (True, False):
        if exact:
            fits = {n.name for n in nodes if token in (n.name, n.address)}
        else:
            fits = {
                n.name
                for n in nodes
                if _short(token) == _short(n.name) or (n.address and _short(token) == _short(n.address))
            }
        if token in fits:  # a node's own name: names are unique in an inventory
            return token
        if len(fits) == 1:
            return fits.pop()
        if fits:
            return None
    return None


def resolve_rank_nodes(ranks: Sequence[Mapping[str, Any]], nodes: Sequence[Node]) -> dict[int, str | None]:
    """rank -> inventory node name of each rank the probe reported (None: not identifiable).

    Evidence, strongest first: ``slurm_node`` (``$SLURMD_NODENAME``), ``host``
    (``gethostname()``: name, short name or address of a node), ``ssh_server`` (the address
    ssh reached the rank's node at); with a single node, every rank is that node's. Evidence
    that fits several nodes (one address, one host name for all) identifies none
    (:func:`node_for_token`).
    """
    out: dict[int, str | None] = {}
    for r in ranks:
        found = None
        for key in ("slurm_node", "host", "ssh_server"):
            if r.get(key):
                found = node_for_token(str(r[key]), nodes)
                if found:
                    break
        if found is None and len(nodes) == 1:
            found = nodes[0].name
        out[int(r["rank"])] = found
    return out


#: (pattern, what the match group is) of launcher messages that name where ranks failed.
_BLAME_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    # Open MPI: "could not access or execute an executable: ... Node: n2"
    (re.compile(r"^\s*Node:\s*(\S+)", re.M), "host"),
    # ssh: "ssh: connect to host 10.0.0.2 port 22: Connection refused"
    (re.compile(r"ssh: connect to host (\S+) port \d+"), "host"),
    (re.compile(r"ssh: Could not resolve hostname ([^:\s]+)"), "host"),
    (re.compile(r"\S+@(\S+?): Permission denied"), "host"),
    # Open MPI: "Remote daemon: [[1234,0],2] on node n2"
    (re.compile(r"Remote daemon:.*on node (\S+)"), "host"),
    # Open MPI: "Process name: [[1234,1],5]  Exit code: 127" (rank 5)
    (re.compile(r"Process name:\s*\[\[\d+,\d+\],(\d+)\]"), "rank"),
    # Open MPI: "while attempting to start process rank 5."
    (re.compile(r"start process rank (\d+)"), "rank"),
)
_SRUN_TASK = re.compile(SRUN_TASK_DIED)


def blame_from_output(
    text: str, nodes: Sequence[Node], rank_nodes: Mapping[int, str], *, srun: bool = False
) -> dict[str, str]:
    """node -> the launcher line that names it as where ranks could not start or died.

    ``rank_nodes`` is the expected layout (rank -> node) for messages that name a rank.
    ``srun``: the job was one srun step, whose ``task N: Exited with exit code M`` lines name
    the node (in an mpirun started as a step's task they name mpirun's own node instead).
    """
    blamed: dict[str, str] = {}
    for pattern, kind in _BLAME_PATTERNS:
        for m in pattern.finditer(text):
            name = rank_nodes.get(int(m.group(1))) if kind == "rank" else node_for_token(m.group(1), nodes)
            if name and name not in blamed:
                blamed[name] = _line_at(text, m.start())
    if srun:
        for m in _SRUN_TASK.finditer(text):
            code = m.group("code")
            if not code.startswith(SRUN_EXITED) or code[len(SRUN_EXITED)] == "0":
                continue  # a task srun killed (its peers' fault, or the deadline's) names no node
            name = node_for_token(m.group("device"), nodes)
            if name and name not in blamed:
                blamed[name] = " ".join(m.group(0).split())
    return blamed


def _line_at(text: str, pos: int) -> str:
    """The line of ``text`` around ``pos``, whitespace folded, at most 200 characters."""
    end = text.find("\n", pos)
    line = text[text.rfind("\n", 0, pos) + 1 : end if end >= 0 else len(text)]
    return " ".join(line.split())[:200]


def _tail(res: CommandResult, lines: int = 4) -> str:
    text = (res.stderr.strip() or res.stdout.strip()).splitlines()
    useful = [x.strip() for x in text if x.strip() and not set(x.strip()) <= set("-")]
    return " | ".join(useful[-lines:])[-500:]


# -------------------------------------------------------------------- the job


@dataclass(frozen=True)
class MpiJob:
    """A finished MPI job over the check's nodes.

    Attributes:
        check: the check (and evidence key, ``logs/<first node>/<check>.log``).
        nodes: the nodes launched on, in rank order.
        launcher: ``mpirun``, ``mpirun-in-allocation`` or ``srun --mpi=<plugin>``.
        result: the launcher's result (on the first node, or the srun step's).
        doc: rank 0's document, None when it printed none.
        doc_error: why there is no document.
        expected: rank -> node of the launch layout.
        observed: rank -> node the probe reported (None: not identifiable); empty without doc.
        blamed: node -> the launcher line naming it where ranks could not start.
        log_node: the node whose evidence log holds the launcher's output (None: srun step).
        key: the phase key of the launch (its evidence: ``phases.log_path(key, log_node)``).
        first: the launch that named nodes whose ranks could not start, when this job is
            its rerun without them (None otherwise).
        unreachable: node -> why the launching node could not ssh to it (left out of the
            launch; a job with fewer than two nodes left is not launched).
    """

    check: str
    nodes: tuple[str, ...]
    launcher: str
    result: CommandResult
    doc: dict[str, Any] | None
    doc_error: str | None
    expected: dict[int, str]
    observed: dict[int, str | None] = field(default_factory=dict)
    blamed: dict[str, str] = field(default_factory=dict)
    log_node: str | None = None
    key: str = ""
    first: MpiJob | None = None
    unreachable: dict[str, str] = field(default_factory=dict)

    @property
    def excluded(self) -> dict[str, str]:
        """node -> the first launch's line naming it, for the nodes this rerun left out."""
        return self.first.blamed if self.first else {}


def run_mpi(ctx: RunContext, check: str, args: Sequence[str], *, ranks_per_node: int, timeout_s: float) -> MpiJob:
    """Launch ``mpi_probe.py args`` over the check's nodes (less those an earlier check failed
    or hung on: :func:`~nvtest.jobs.base.launch_nodes`), once per run (cached).

    When the launcher names nodes whose ranks could not start and at least two nodes are
    left, the job is launched again without them (phase key ``<check>.rerun``); the
    returned job is that rerun, with the first launch in ``first`` and the left-out nodes
    in ``excluded``.

    Raises:
        NodeError: no node of the check is reachable.
    """

    def compute() -> MpiJob:
        nodes = launch_nodes(ctx, check)
        if not nodes:
            raise NodeError("no reachable node for this check")
        unreachable = mpirun_preflight(ctx, check, nodes)
        able = [n for n in nodes if n.name not in unreachable]
        if unreachable and len(able) < 2:
            res = CommandResult(node=nodes[0].name, command="", error="not launched", failure="launch")
            return MpiJob(
                check, tuple(n.name for n in nodes), "mpirun", res, None, "not launched", {}, unreachable=unreachable
            )
        job = _launch(ctx, check, check, able, args, ranks_per_node, timeout_s)
        job = replace(job, unreachable=unreachable)
        rest = [n for n in able if n.name not in job.blamed]
        if not job.blamed or len(rest) < 2:
            return job
        again = _launch(ctx, check, f"{check}.rerun", rest, args, ranks_per_node, timeout_s)
        return replace(again, first=job, unreachable=unreachable)

    return ctx.fleet_cache.get(f"mpi:{check}", compute)


def mpirun_preflight(ctx: RunContext, key: str, nodes: Sequence[Node]) -> dict[str, str]:
    """node -> why the first node cannot ssh to it, where mpirun will ssh (not under Slurm,
    not on one node); see :func:`~nvtest.jobs.preflight.ssh_preflight`."""
    if len(nodes) < 2 or ctx.transport.multi_launcher() is not None:  # srun starts mpirun's daemons
        return {}
    opts = mpi_options(ctx, nodes[0])
    config = launcher_ssh_config(ctx) if opts.rsh_args else None
    if config is None:
        return {}
    return ssh_preflight(ctx, key, nodes[0], nodes, config)


def _launch(
    ctx: RunContext,
    check: str,
    key: str,
    nodes: Sequence[Node],
    args: Sequence[str],
    ranks_per_node: int,
    timeout_s: float,
) -> MpiJob:
    """One launch of ``mpi_probe.py args`` over ``nodes``, evidence under phase ``key``."""
    first = nodes[0]
    k = ranks_per_node
    expected = {i * k + j: n.name for i, n in enumerate(nodes) for j in range(k)}
    env = {"OMPI_MCA_mpi_yield_when_idle": "1", "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1"}
    opts = mpi_options(ctx, first)
    multi = ctx.transport.multi_launcher()
    log_node: str | None = first.name
    if multi is not None and multi.mpi_plugin:
        launcher = f"{multi.name} --mpi={multi.mpi_plugin}"
        res = multi.launch(
            nodes,
            probe_argv(ctx, first, "mpi_probe.py", *args),
            k,
            None,
            env,
            timeout_s=timeout_s * ctx.config.timeout_scale,
        )
        res = attribute_unkillable(res, MPI_TOUCHES)
        log_node = None
    else:
        apps = [
            (
                n.name if len(nodes) > 1 else "localhost",
                k,
                probe_argv(ctx, n, "mpi_probe.py", *args),
            )
            for n in nodes
        ]
        if multi is not None:  # mpirun inside the launcher's (Slurm's) allocation
            launcher = "mpirun-in-allocation"
            mca = {**opts.mca, "plm_slurm_args": "--overlap"}
            opts = replace(opts, rsh_agent=None, rsh_args=None, mca=mca)
            argv = mpmd_argv(apps, export=sorted(env), opts=opts)
            cmd = slurm_mpirun_env([n.name for n in nodes], k) + render_command(argv, env)
        else:
            launcher = "mpirun"
            argv = mpmd_argv(apps, export=sorted(env), opts=opts)
            cmd = render_command(argv, env)
        res = run_commands(ctx, key, [first], {first.name: cmd}, timeout_s=timeout_s, touches=MPI_TOUCHES)[first.name]
    pin_unkillable(ctx, key, res, MPI_TOUCHES)
    doc, err = None, None
    try:
        doc = parse_probe_json(res)
    except ProbeError as exc:
        err = str(exc)
    # the ranks and the launcher's messages name nodes by host name or by the address they
    # were reached at: what the transport resolved, not only what the inventory wrote
    reached = [replace(n, address=ctx.transport.node_address(n)) for n in nodes]
    observed = resolve_rank_nodes(doc.get("ranks") or [], reached) if doc else {}
    blamed = {}
    if doc is None or doc.get("status") != "ok" or res.exit_code != 0:
        blamed = blame_from_output(res.stdout + "\n" + res.stderr, reached, expected, srun=launcher.startswith("srun"))
    if doc is None and res.completed and not blamed and len(nodes) > 1:
        blamed = _preflight(ctx, key, nodes)
    return MpiJob(
        check,
        tuple(n.name for n in nodes),
        launcher,
        res,
        doc,
        err,
        expected,
        observed,
        blamed,
        log_node,
        key,
    )


def _preflight(ctx: RunContext, key: str, nodes: Sequence[Node]) -> dict[str, str]:
    """node -> why it cannot start the probe, from ``<python> mpi_probe.py --help`` on each
    node (phase ``<key>.preflight``). Used when a launch printed no result and its output
    named no node: Open MPI does not always print which process failed before it aborts."""
    commands = {n.name: probe_argv(ctx, n, "mpi_probe.py", "--help") for n in nodes}
    results = run_commands(ctx, f"{key}.preflight", nodes, commands, timeout_s=120)
    return {
        name: f"`{shlex.join(commands[name])}` failed there: " + (r.error or _tail(r) or f"exit {r.exit_code}")
        for name, r in results.items()
        if not r.completed or r.exit_code != 0
    }


@dataclass(frozen=True)
class NodeShare:
    """This node's part of an :class:`MpiJob`: rank 0's document and the node's ranks;
    ``misplaced``: ranks the evidence puts on another node (a failure); ``unidentified``: ranks
    whose node the evidence cannot tell (several nodes behind one address with one host name,
    or a host name no node has): a note, never blame."""

    doc: dict[str, Any]
    ranks: list[int]
    misplaced: list[str]
    unidentified: list[int] = field(default_factory=list)


def node_share(job: MpiJob, node: Node) -> NodeShare:
    """This node's share of the job, or the reason it has none.

    Raises:
        AssertionError: ranks could not start on this node (the launcher named it, in
            this launch or in the first one before a rerun without it): a ``fail`` verdict.
        AssertionError: also for a node the ssh preflight could not reach.
        NodeError: the node was not in the job, or the launcher did not finish.
        ProbeError: the job failed elsewhere (the nodes the launcher named are in the
            message), rank 0 printed no document, or its status is ``error``.
    """
    res = job.result
    if node.name in job.unreachable:
        raise CheckFailed(job.unreachable[node.name], cause="launch:node_ssh")
    if job.unreachable and res.failure == "launch" and not res.command:
        named = ", ".join(sorted(job.unreachable))
        raise NodeError(
            f"mpirun not launched: the node-to-node ssh preflight failed on {named}", cause="launch:node_ssh"
        )
    if node.name in job.excluded:
        raise AssertionError(
            f"ranks could not start on {node.name}: {job.excluded[node.name]} (the job ran again without it)"
        )
    if node.name not in job.nodes:
        raise NodeError(f"{node.name} was not part of the MPI job (down at the start?)")
    if node.name in job.blamed:
        raise AssertionError(f"ranks could not start on {node.name}: {job.blamed[node.name]}")
    others = ", ".join(f"{n} ({why})" for n, why in sorted(job.blamed.items()))
    if not res.completed:
        where = f"; the launcher named {others}" if others else ""
        raise NodeError(
            f"{job.launcher} over {len(job.nodes)} nodes did not finish: {res.error}{where}",
            cause=cause_of(res),
        )
    if job.blamed:
        raise ProbeError(f"MPI job not measured: ranks could not start on {others}")
    if job.doc is None:
        raise ProbeError(f"{job.launcher} exited {res.exit_code}, no result: {_tail(res) or job.doc_error}")
    if job.doc.get("status") == "skip":
        raise ProbeSkip(str(job.doc.get("reason")))
    if job.doc.get("status") != "ok":
        raise ProbeError(f"rank 0: {job.doc.get('reason')}")
    mine = [r for r, n in sorted(job.expected.items()) if n == node.name]
    misplaced = [
        f"rank {r} ran on {job.observed[r]}, not {node.name}"
        for r in mine
        if job.observed.get(r) is not None and job.observed[r] != node.name
    ]
    unidentified = [r for r in mine if r in job.observed and job.observed[r] is None]
    missing = [r for r in mine if r not in job.observed]
    if missing:
        misplaced.append(f"ranks {missing} missing from the rank map")
    return NodeShare(job.doc, mine, misplaced, unidentified)
