"""One torchrun job over the check's nodes, and each node's share of it.

The first node hosts the rendezvous (static, ``--master-addr`` = its inventory address, a
port free there asked with ``tcp_bw_probe.py free-port``); every node runs its own torchrun
(``--nnodes N --node-rank i``) through one :meth:`Transport.run` with a per-node command
mapping, which the local, ssh and slurm transports all start at once. Rank 0 prints the
probe's JSON document on the first node; a node whose torchrun did not finish, or exited
non-zero, is named in its own item.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from nvtest.check import NodeError, parse_probe_json
from nvtest.errors import ProbeError
from nvtest.interconnect.fleet import address, check_nodes, fleet_cache, probe_argv, run_commands
from nvtest.interconnect.launch import torchrun_commands, torchrun_rank_map
from nvtest.inventory import Node
from nvtest.transports.base import CommandResult

if TYPE_CHECKING:
    from nvtest.context import RunContext

__all__ = ["TorchrunJob", "node_share", "run_torchrun"]


@dataclass(frozen=True)
class TorchrunJob:
    """A finished torchrun job: per-node results, rank 0's document, the rank -> node map."""

    key: str
    nodes: tuple[str, ...]
    results: dict[str, CommandResult]
    doc: dict[str, Any] | None
    doc_error: str | None
    rank_nodes: dict[int, str]
    master: str


def run_torchrun(
    ctx: RunContext,
    check: str,
    script: str,
    args: Sequence[str],
    *,
    nproc_per_node: int,
    timeout_s: float,
) -> TorchrunJob:
    """Launch ``script args`` with torchrun on the check's nodes, once per run (cached)."""

    def compute() -> TorchrunJob:
        nodes = check_nodes(ctx, check)
        if not nodes:
            raise NodeError("no reachable node for this check")
        first = nodes[0]
        port_res = run_commands(
            ctx,
            f"{check}.port",
            [first],
            {
                first.name: probe_argv(
                    ctx, first, "tcp_bw_probe.py", "free-port", "--start", "29500"
                )
            },
            timeout_s=60,
        )[first.name]
        try:
            port = int(parse_probe_json(port_res)["results"][0]["port"])
        except (ProbeError, KeyError, IndexError, ValueError) as exc:
            raise NodeError(
                f"no free rendezvous port on {first.name}: {port_res.error or exc}"
            ) from None
        cmds = torchrun_commands(
            nodes,
            lambda n: probe_argv(ctx, n, script, *args)[1:],
            nproc_per_node=nproc_per_node,
            master_addr=address(first),
            master_port=port,
        )
        results = run_commands(
            ctx,
            check,
            nodes,
            cmds,
            timeout_s=timeout_s,
            env={"OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"},
        )
        doc, err = None, None
        try:
            doc = parse_probe_json(results[first.name])
        except ProbeError as exc:
            err = str(exc)
        return TorchrunJob(
            check,
            tuple(n.name for n in nodes),
            results,
            doc,
            err,
            torchrun_rank_map(nodes, nproc_per_node),
            first.name,
        )

    return fleet_cache(ctx).get(f"torchrun:{check}", compute)


def node_share(job: TorchrunJob, node: Node) -> dict[str, Any]:
    """Rank 0's document, when this node's part of the job finished; else NodeError/ProbeError.

    Raises:
        NodeError: the node was not in the job, or its torchrun did not finish (timeout:
            "ranks did not finish within the timeout").
        ProbeError: its torchrun exited non-zero (the tail of its stderr), or rank 0 printed
            no document, or the document's status is not ``ok``.
    """
    res = job.results.get(node.name)
    if res is None:
        raise NodeError(f"{node.name} was not part of the torchrun job (down at the start?)")
    if not res.completed:
        raise NodeError(f"ranks on {node.name} did not finish: {res.error}")
    if res.exit_code != 0:
        tail = " | ".join(res.stderr.strip().splitlines()[-3:])[-400:]
        raise ProbeError(f"torchrun on {node.name} exited {res.exit_code}: {tail}")
    if job.doc is None:
        raise ProbeError(f"rank 0 on {job.master} printed no result: {job.doc_error}")
    if job.doc.get("status") != "ok":
        raise ProbeError(f"rank 0 on {job.master}: {job.doc.get('reason')}")
    return job.doc
