"""Multi-node launch command lines: mpirun (Open MPI), and torchrun per node (pure).

mpirun (Open MPI 4.1, Debian ``openmpi-bin``)::

    mpirun --allow-run-as-root -np 4 --host n1:2,n2:2 --map-by slot --bind-to none \
        --mca plm_rsh_args "-F /tmp/nvtest-RUN/ssh-TAG/config" --mca btl_tcp_if_include lo \
        -x NCCL_DEBUG PROGRAM...

Ranks fill the hosts in order (``--map-by slot``): ranks 0..s1-1 on the first host, and so on,
so rank -> host follows from the host list. ``plm_rsh_agent`` is how mpirun reaches the other
nodes (Open MPI's ``orte_rsh_agent``; default ``ssh : rsh``) and ``plm_rsh_args`` what it adds
to that command: over the ssh transport, ``-F`` with the run's generated ssh config, so the
node names of the host list reach what the inventory says (address, port, user, key, known
hosts) whatever the nodes' own DNS knows; environment variables are exported to the ranks by
name with ``-x``.

torchrun (``python -m torch.distributed.run``, torch >= 1.10), one command per node, static
rendezvous on the first node::

    python -m torch.distributed.run --nnodes N --node-rank I --nproc-per-node P \
        --master-addr ADDR --master-port PORT --max-restarts 0 SCRIPT ARGS...

Global rank = node rank x P + local rank (torch.distributed.elastic static rendezvous), which
gives the rank -> node map without asking the ranks.

The same command with ``launcher="ft_launcher"`` starts nvidia-resiliency-ext's
fault-tolerance launcher (``python -m nvidia_resiliency_ext.fault_tolerance.launcher``, a
torchrun derivative that takes the same options); ``rdzv="c10d"`` replaces the static
rendezvous with torch's dynamic one, which a restarting job needs (a restarted node rejoins
a new round; ft_launcher accepts only c10d)::

    python -m torch.distributed.run --nnodes N --nproc-per-node P --rdzv-backend c10d \
        --rdzv-endpoint ADDR:PORT --rdzv-id ID --rdzv-conf is_host=1|0 --local-addr NODE_ADDR \
        --max-restarts R SCRIPT ARGS...

``is_host`` is 1 on the first node only: it hosts the rendezvous store on ``ADDR:PORT``
(several simulated nodes on one machine would otherwise all claim the loopback address).
``--local-addr`` is the address the other nodes reach this one at (rank 0's workers host
the job's store there). Under c10d the rendezvous numbers the nodes (sorted by their
address), so :func:`torchrun_rank_map` does not apply: ask the ranks.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from nvtest.config.inventory import Node

__all__ = [
    "LAUNCHER_MODULES",
    "MpiOptions",
    "mpirun_argv",
    "rank_hosts",
    "torchrun_commands",
    "torchrun_rank_map",
]

#: ``python -m`` module of each launcher :func:`torchrun_commands` knows.
LAUNCHER_MODULES = {
    "torchrun": "torch.distributed.run",
    "ft_launcher": "nvidia_resiliency_ext.fault_tolerance.launcher",
}


@dataclass(frozen=True)
class MpiOptions:
    """Site options of mpirun.

    Attributes:
        mpirun: the launcher binary.
        rsh_agent: ``plm_rsh_agent`` (e.g. ``ssh -F /etc/nvtest/ssh_config``); None: Open MPI's.
        rsh_args: ``plm_rsh_args``, added to the agent's command (``-F <the run's ssh
            config>``); None: none.
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
    rsh_args: str | None = None


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
    if o.rsh_args:
        mca["plm_rsh_args"] = o.rsh_args
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
    launcher: str = "torchrun",
    rdzv: str = "static",
    max_restarts: int = 0,
    launcher_args: Sequence[str] = (),
    rdzv_id: str = "nvtest",
    local_addr: Callable[[Node], str] | None = None,
) -> dict[str, list[str]]:
    """node name -> its launcher command (node rank = position in ``nodes``).

    ``script(node)`` gives the training script's path on that node and its arguments.
    ``launcher``: a key of :data:`LAUNCHER_MODULES`. ``rdzv``: ``static`` (``--node-rank``,
    ``--master-addr/--master-port``) or ``c10d`` (rendezvous store on
    ``master_addr:master_port``, hosted by the first node; ``rdzv_id`` names the job;
    ``local_addr(node)``, when given, is passed as ``--local-addr``). ``max_restarts``: worker
    group restarts each node's launcher may make. ``launcher_args``: more launcher options,
    put before the script.

    Raises:
        ValueError: unknown launcher or rendezvous.
    """
    if launcher not in LAUNCHER_MODULES:
        raise ValueError(f"unknown launcher {launcher!r}; known: {sorted(LAUNCHER_MODULES)}")
    if rdzv not in ("static", "c10d"):
        raise ValueError(f"unknown rendezvous {rdzv!r}: static or c10d")
    n = len(nodes)
    host = f"[{master_addr}]" if ":" in master_addr else master_addr
    out = {}
    for i, node in enumerate(nodes):
        if rdzv == "static":
            where = [
                "--node-rank",
                str(i),
                "--master-addr",
                master_addr,
                "--master-port",
                str(master_port),
            ]
        else:
            where = [
                "--rdzv-backend",
                "c10d",
                "--rdzv-endpoint",
                f"{host}:{master_port}",
                "--rdzv-id",
                rdzv_id,
                "--rdzv-conf",
                f"is_host={1 if i == 0 else 0}",
                *(["--local-addr", local_addr(node)] if local_addr else []),
            ]
        out[node.name] = [
            node.python,
            "-m",
            LAUNCHER_MODULES[launcher],
            "--nnodes",
            str(n),
            "--nproc-per-node",
            str(nproc_per_node),
            *where,
            "--max-restarts",
            str(max_restarts),
            *launcher_args,
            *script(node),
        ]
    return out


def torchrun_rank_map(nodes: Sequence[Node], nproc_per_node: int) -> dict[int, str]:
    """global rank -> node name of :func:`torchrun_commands` (static rendezvous order)."""
    return {i * nproc_per_node + local: node.name for i, node in enumerate(nodes) for local in range(nproc_per_node)}
