"""Multi-node launch command lines: mpirun (Open MPI), and torchrun per node (pure).

mpirun (Open MPI 4.1, Debian ``openmpi-bin``)::

    mpirun --allow-run-as-root -np 4 --host n1:2,n2:2 --map-by slot --bind-to none \
        --mca plm_rsh_agent "ssh -F cfg" --mca btl_tcp_if_include lo -x NCCL_DEBUG PROGRAM...

Ranks fill the hosts in order (``--map-by slot``): ranks 0..s1-1 on the first host, and so on,
so rank -> host follows from the host list. ``plm_rsh_agent`` is how mpirun reaches the other
nodes (Open MPI's ``orte_rsh_agent``; default ``ssh : rsh``); environment variables are
exported to the ranks by name with ``-x``.

torchrun (``python -m torch.distributed.run``, torch >= 1.10), one command per node, static
rendezvous on the first node::

    python -m torch.distributed.run --nnodes N --node-rank I --nproc-per-node P \
        --master-addr ADDR --master-port PORT --max-restarts 0 SCRIPT ARGS...

Global rank = node rank x P + local rank (torch.distributed.elastic static rendezvous), which
gives the rank -> node map without asking the ranks.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from nvtest.inventory import Node

__all__ = ["MpiOptions", "mpirun_argv", "rank_hosts", "torchrun_commands"]


@dataclass(frozen=True)
class MpiOptions:
    """Site options of mpirun.

    Attributes:
        mpirun: the launcher binary.
        rsh_agent: ``plm_rsh_agent`` (e.g. ``ssh -F /etc/nvtest/ssh_config``); None: Open MPI's.
        tcp_if_include: interfaces for Open MPI's own TCP traffic (``btl_tcp_if_include`` and
            ``oob_tcp_if_include``), e.g. ``eth0`` or ``lo``; None: Open MPI's choice.
        mca: other ``--mca NAME VALUE`` settings.
        allow_run_as_root: add ``--allow-run-as-root`` (Open MPI refuses root without it).
    """

    mpirun: str = "mpirun"
    rsh_agent: str | None = None
    tcp_if_include: str | None = None
    mca: Mapping[str, str] = field(default_factory=dict)
    allow_run_as_root: bool = True


def mpirun_argv(
    hosts: Sequence[tuple[str, int]],
    program: Sequence[str],
    *,
    export: Sequence[str] = (),
    opts: MpiOptions | None = None,
) -> list[str]:
    """The mpirun command line for ``program`` with ``slots`` ranks on each (host, slots).

    Raises:
        ValueError: no host, or a host with fewer than one slot.
    """
    o = opts or MpiOptions()
    if not hosts or any(s < 1 for _, s in hosts):
        raise ValueError(f"mpirun needs hosts with at least one slot each: {list(hosts)}")
    np = sum(s for _, s in hosts)
    argv = [o.mpirun]
    if o.allow_run_as_root:
        argv.append("--allow-run-as-root")
    argv += ["-np", str(np), "--host", ",".join(f"{h}:{s}" for h, s in hosts)]
    argv += ["--map-by", "slot", "--bind-to", "none"]
    mca = dict(o.mca)
    if o.rsh_agent:
        mca["plm_rsh_agent"] = o.rsh_agent
    if o.tcp_if_include:
        mca.setdefault("btl_tcp_if_include", o.tcp_if_include)
        mca.setdefault("oob_tcp_if_include", o.tcp_if_include)
    for key in sorted(mca):
        argv += ["--mca", key, str(mca[key])]
    for name in sorted(set(export)):
        argv += ["-x", name]
    return [*argv, *program]


def rank_hosts(hosts: Sequence[tuple[str, int]]) -> list[str]:
    """rank -> host of a ``--map-by slot`` launch over ``hosts``."""
    return [h for h, s in hosts for _ in range(s)]


def torchrun_commands(
    nodes: Sequence[Node],
    script: Callable[[Node], Sequence[str]],
    *,
    nproc_per_node: int,
    master_addr: str,
    master_port: int,
) -> dict[str, list[str]]:
    """node name -> its torchrun command (node rank = position in ``nodes``).

    ``script(node)`` gives the training script's path on that node and its arguments.
    """
    n = len(nodes)
    return {
        node.name: [
            node.python,
            "-m",
            "torch.distributed.run",
            "--nnodes",
            str(n),
            "--node-rank",
            str(i),
            "--nproc-per-node",
            str(nproc_per_node),
            "--master-addr",
            master_addr,
            "--master-port",
            str(master_port),
            "--max-restarts",
            "0",
            *script(node),
        ]  # fmt: skip
        for i, node in enumerate(nodes)
    }


def torchrun_rank_map(nodes: Sequence[Node], nproc_per_node: int) -> dict[int, str]:
    """global rank -> node name of :func:`torchrun_commands` (static rendezvous order)."""
    return {
        i * nproc_per_node + local: node.name
        for i, node in enumerate(nodes)
        for local in range(nproc_per_node)
    }
