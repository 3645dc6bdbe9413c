"""One launcher job over the check's nodes (torchrun, or ft_launcher), and each node's share.

The first node hosts the rendezvous (a port free there asked with ``tcp_bw_probe.py
free-port``; static: ``--master-addr`` = its address; c10d: the rendezvous store on that
address). Its address is the inventory's ``address``, else what the transport resolved the
name to (ssh: the client config's HostName), never a bare name only the controller knows.
Before the launch, a preflight (:func:`~nvtest.jobs.preflight.rendezvous_preflight`) checks
in seconds that every node resolves and reaches that address and port; a node that cannot
fails naming what it could not reach, and nothing is launched. Every node then runs its own
launcher (``--nnodes N``) through one :meth:`Transport.run` with a per-node command mapping,
which the local, ssh and slurm transports all start at once. Rank 0 prints the probe's JSON
document on the first node; a node whose launcher did not finish, or exited non-zero, is
named in its own item.

A node-side driver can be put before each node's launcher command (``wrap``): it runs the
launcher given after it and prints a document of its own on every node (the in-job restart
drill's, which kills a rank and collects its node's events); those are in ``docs``.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from nvtest.config.inventory import Node
from nvtest.errors import CheckFailed, NodeError, NodeWedged, ProbeError
from nvtest.jobs.base import (
    address,
    launch_nodes,
    pin_unkillable,
    probe_argv,
    run_commands,
)
from nvtest.jobs.launch import torchrun_commands, torchrun_rank_map
from nvtest.jobs.preflight import rendezvous_preflight
from nvtest.session.phase import cause_of
from nvtest.session.probe import parse_probe_json
from nvtest.transports.base import CommandResult

if TYPE_CHECKING:
    from nvtest.session.context import RunContext

__all__ = ["TorchrunJob", "node_doc", "node_share", "rendezvous_port", "run_torchrun"]


@dataclass(frozen=True)
class TorchrunJob:
    """A finished launcher job: per-node results, rank 0's document, the rank -> node map.

    ``rank_nodes`` is the static rendezvous' map (empty under c10d, where the rendezvous
    numbers the nodes: the ranks say where they ran). ``docs``: every node's document
    (None where it printed none; the reason in ``doc_errors``).
    """

    key: str
    nodes: tuple[str, ...]
    results: dict[str, CommandResult]
    doc: dict[str, Any] | None
    doc_error: str | None
    rank_nodes: dict[int, str]
    master: str
    launcher: str = "torchrun"
    rdzv: str = "static"
    docs: dict[str, dict[str, Any] | None] = field(default_factory=dict)
    doc_errors: dict[str, str] = field(default_factory=dict)
    unreachable: dict[str, str] = field(default_factory=dict)


#: Ports above the base a rendezvous may start its search from: two runs that share a node
#: (two runs of a CI, an operator's run beside a sweep) start from different ports, so the
#: port one found free is not taken by the other between the probe and the launch.
PORT_SPREAD = 1024


def rendezvous_port(ctx: RunContext, key: str, node: Node, start: int = 29500) -> int:
    """A TCP port free on ``node`` now, asked in phase ``<key>.port``: the first free one from
    ``start`` plus an offset below :data:`PORT_SPREAD` fixed by the run id and ``key``.

    Raises:
        NodeError: the node did not answer with a port.
    """
    start += zlib.crc32(f"{ctx.config.run_id}:{key}".encode()) % PORT_SPREAD
    res = run_commands(
        ctx,
        f"{key}.port",
        [node],
        {node.name: probe_argv(ctx, node, "tcp_bw_probe.py", "free-port", "--start", str(start))},
        timeout_s=60,
    )[node.name]
    try:
        return int(parse_probe_json(res)["results"][0]["port"])
    except (ProbeError, KeyError, IndexError, ValueError) as exc:
        raise NodeError(f"no free rendezvous port on {node.name}: {res.error or exc}", cause=cause_of(res)) from None


def run_torchrun(
    ctx: RunContext,
    check: str,
    script: str,
    args: Sequence[str] | Callable[[Node], Sequence[str]],
    *,
    nproc_per_node: int,
    timeout_s: float,
    key: str | None = None,
    launcher: str = "torchrun",
    rdzv: str = "static",
    max_restarts: int = 0,
    launcher_args: Sequence[str] = (),
    wrap: Callable[[Node], Sequence[str]] | None = None,
    env: dict[str, str] | None = None,
) -> TorchrunJob:
    """Launch ``script args`` on the check's nodes (less those an earlier check failed or hung
    on: :func:`~nvtest.jobs.base.launch_nodes`), once per run and ``key`` (cached).

    ``args``: the script's argv, or node -> argv (per-node paths). ``key``: phase and cache
    key (default ``check``; two launches of one check need two keys). ``launcher``,
    ``rdzv``, ``max_restarts``, ``launcher_args``: see
    :func:`~nvtest.jobs.launch.torchrun_commands` (c10d: rendezvous id = the key,
    ``--local-addr`` = each node's inventory address). ``wrap(node)``: argv put before that
    node's launcher command (see the module text). ``timeout_s``: seconds, for every node's
    command (scaled by ``--timeout-scale``). ``env``: added to the commands' environment.

    Raises:
        NodeError: no reachable node, or no free port on the first one.
    """
    key = key or check

    def compute() -> TorchrunJob:
        nodes = launch_nodes(ctx, check)
        if not nodes:
            raise NodeError("no reachable node for this check")
        first = nodes[0]
        port = rendezvous_port(ctx, key, first)
        master = address(ctx, first)
        unreachable = rendezvous_preflight(ctx, key, nodes, first, master, port)
        if unreachable:
            return TorchrunJob(
                key,
                tuple(n.name for n in nodes),
                {},
                None,
                "not launched",
                {},
                first.name,
                launcher,
                rdzv,
                unreachable=unreachable,
            )

        def script_argv(n: Node) -> list[str]:
            extra = args(n) if callable(args) else args
            return probe_argv(ctx, n, script, *extra)[1:]

        cmds = torchrun_commands(
            nodes,
            script_argv,
            nproc_per_node=nproc_per_node,
            master_addr=master,
            master_port=port,
            launcher=launcher,
            rdzv=rdzv,
            max_restarts=max_restarts,
            launcher_args=launcher_args,
            rdzv_id=f"nvtest-{key}".replace(".", "-"),
            local_addr=lambda n: address(ctx, n),
        )
        if wrap is not None:
            cmds = {n.name: [*wrap(n), *cmds[n.name]] for n in nodes}
        results = run_commands(
            ctx,
            key,
            nodes,
            cmds,
            timeout_s=timeout_s,
            env={"OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", **(env or {})},
            needs=("gpu",),  # the ranks run on the GPUs where there are any
            mark=False,  # every node waits for the slowest: a deadline is the job's ...
        )
        for res in results.values():  # ... a process that survived SIGKILL is its node's
            pin_unkillable(ctx, key, res, ("gpu",))
        docs: dict[str, dict[str, Any] | None] = {}
        errors: dict[str, str] = {}
        for n in nodes:
            try:
                docs[n.name] = parse_probe_json(results[n.name])
            except (ProbeError, KeyError) as exc:
                docs[n.name], errors[n.name] = None, str(exc)
        return TorchrunJob(
            key,
            tuple(n.name for n in nodes),
            results,
            docs[first.name],
            errors.get(first.name),
            torchrun_rank_map(nodes, nproc_per_node) if rdzv == "static" else {},
            first.name,
            launcher,
            rdzv,
            docs,
            errors,
        )

    return ctx.fleet_cache.get(f"torchrun:{key}", compute)


def _finished(job: TorchrunJob, node: Node) -> CommandResult:
    """This node's result when its command finished with exit 0; else NodeError/ProbeError
    (or AssertionError: a ``fail``, for a node the rendezvous preflight named)."""
    if job.unreachable:
        if node.name in job.unreachable:
            raise CheckFailed(job.unreachable[node.name], cause="launch:rendezvous")
        named = ", ".join(sorted(job.unreachable))
        raise NodeError(
            f"{job.launcher} not launched: the rendezvous preflight failed on {named}", cause="launch:rendezvous"
        )
    res = job.results.get(node.name)
    if res is None:
        raise NodeError(f"{node.name} was not part of the {job.launcher} job (down at the start?)")
    if res.failure == "unkillable":
        raise NodeWedged(f"ranks on {node.name}: {res.error}", cause=res.cause)
    wedged = sorted(n for n, r in job.results.items() if r.failure == "unkillable" and n != node.name)
    if not res.completed and res.failure == "timeout" and wedged:
        # its ranks waited for a node whose process survived SIGKILL: that node's fault, named
        raise NodeError(
            f"not judged: the job hung on {', '.join(wedged)} (a process there survived SIGKILL); "
            f"the ranks on {node.name} waited for it until the deadline",
            cause="launch:peer_wedged",
        )
    if not res.completed:
        raise NodeError(f"ranks on {node.name} did not finish: {res.error}", cause=cause_of(res))
    if res.exit_code != 0:
        tail = " | ".join(res.stderr.strip().splitlines()[-3:])[-400:]
        raise ProbeError(f"{job.launcher} on {node.name} exited {res.exit_code}: {tail}")
    return res


def node_share(job: TorchrunJob, node: Node) -> dict[str, Any]:
    """Rank 0's document, when this node's part of the job finished; else NodeError/ProbeError.

    Raises:
        NodeError: the node was not in the job, or its launcher did not finish (timeout:
            "ranks did not finish within the timeout").
        ProbeError: its launcher exited non-zero (the tail of its stderr), or rank 0 printed
            no document, or the document's status is not ``ok``.
    """
    _finished(job, node)
    if job.doc is None:
        raise ProbeError(f"rank 0 on {job.master} printed no result: {job.doc_error}")
    if job.doc.get("status") != "ok":
        raise ProbeError(f"rank 0 on {job.master}: {job.doc.get('reason')}")
    return job.doc


def node_doc(job: TorchrunJob, node: Node) -> dict[str, Any]:
    """The document ``node`` printed itself (a ``wrap`` driver's), its status ``ok``.

    Raises:
        NodeError, ProbeError: as :func:`node_share`, for this node's own document.
    """
    _finished(job, node)
    doc = job.docs.get(node.name)
    if doc is None:
        raise ProbeError(f"{node.name} printed no result: {job.doc_errors.get(node.name)}")
    if doc.get("status") != "ok":
        raise ProbeError(f"{node.name}: {doc.get('reason')}")
    return doc
