"""Every multi-node launch command line of ``nvtest.jobs`` against golden files:
mpirun, MPMD app contexts, torchrun / ft_launcher per node, the pair launchers
(ib_write_bw server/client, the TCP probe pair, nccl-tests over mpirun)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from nvtest.config.inventory import Node
from nvtest.jobs.launch import MpiOptions, mpirun_argv, torchrun_commands
from nvtest.jobs.mpi import mpmd_argv, slurm_mpirun_env
from nvtest.jobs.nccl import NcclRecipe, perf_argv
from nvtest.jobs.pair_jobs import NcclPairJob, PerftestPairJob, TcpPairJob
from nvtest.transports._ssh_config import SSHTarget, launcher_config, launcher_known_hosts
from nvtest.transports.local import LocalTransport
from tests.golden import assert_golden, lines, stale_goldens

GOLDEN = Path(__file__).resolve().parent / "golden"

N1 = Node(name="gpu001", python="/opt/venv/bin/python3", address="10.0.0.1")
N2 = Node(name="gpu002", python="/opt/venv/bin/python3", address="10.0.0.2")
SITE = MpiOptions(rsh_agent="ssh -F /etc/nvtest/ssh_config", tcp_if_include="eth0", mca={"pml": "ucx"})
#: what the pair jobs need of a run context to build their command lines (the transport says
#: where a node is reached: here its inventory address)
CTX: Any = SimpleNamespace(
    probe_dirs={"gpu001": "/tmp/nvtest-r1/probes", "gpu002": "/tmp/nvtest-r1/probes"},
    transport=LocalTransport(),
)
#: the run's generated ssh config (nvtest.transports.ssh.SSHTransport.launcher_ssh_config)
RUN_SSH = MpiOptions(rsh_args="-F /tmp/nvtest-20260101-120000-abcd-0123abcd/ssh-89abcdef/config", tcp_if_include="eth0")


def _launcher_config() -> str:
    """The generated config: inventory address/port/user/key; ssh-config HostName and
    IdentityFile; a node the controller reaches through a jump host (HostName only)."""
    inv = SSHTarget(
        "gpu001", "10.0.0.1", 2222, "acceptance", ("/home/acceptance/.ssh/id_ed25519",), True, key_source="inventory"
    )
    cfg = SSHTarget("gpu002", "gpu002.ib.cluster", 22, "root", ("/root/.ssh/id_rsa",))
    jumped = SSHTarget("gpu003", "10.0.0.3", 22, "root", (), proxy_jump="login01")
    kh = "/tmp/nvtest-r1-0123abcd/ssh-89abcdef/known_hosts"
    text = launcher_config(
        [("gpu001", inv, "~/.ssh/id_ed25519"), ("gpu002", cfg, None), ("gpu003", jumped, None)], kh, run_id="r1"
    )
    known = launcher_known_hosts(
        [(inv, "ssh-ed25519", "AAAAC3NzaC1lZDI1NTE5AAAAIA"), (cfg, "ssh-rsa", "AAAAB3NzaC1yc2E")]
    )
    return text + "\n# known_hosts\n" + known


def _script(node: Node) -> list[str]:
    return ["/tmp/nvtest-r1/probes/train_smoke.py", "--steps", "20", "--node", node.name]


def _torchrun(**kw: Any) -> str:
    cmds = torchrun_commands([N1, N2], _script, nproc_per_node=8, master_addr="10.0.0.1", master_port=29500, **kw)
    return lines(*cmds.values())


def _perftest() -> str:
    job = PerftestPairJob(
        CTX, hcas=lambda n: ["mlx5_0", "mlx5_3"], recipe=lambda n: {"gid_index": 3, "use_cuda": True}, gpus=lambda n: 8
    )
    return lines(job.server(N1, N2, "mlx5_3", 18515), job.client(N2, N1, "mlx5_3", 18515))


def _tcp() -> str:
    job = TcpPairJob(CTX, seconds=2.5, streams=4)
    return lines(job.server(N1, N2, "tcp", 40100), job.client(N2, N1, "tcp", 40100))


def _nccl_pair() -> str:
    recipe = NcclRecipe(max_bytes=1 << 30, iters=20, tests_dir="/opt/nccl-tests/build")
    job = NcclPairJob(
        CTX,
        check="nccl_multinode",
        op="all_reduce",
        recipe=recipe,
        gpus=lambda n: 8,
        env={"NCCL_IB_HCA": "=mlx5_0,mlx5_3", "NCCL_SOCKET_IFNAME": "=eth0"},
        mpi=SITE,
    )
    return str(job.launcher(N1, N2, "pair")) + "\n"


CASES: dict[str, Callable[[], str]] = {
    "mpirun": lambda: lines(
        mpirun_argv(
            [("gpu001", 8), ("gpu002", 8)],
            ["/opt/nccl-tests/build/all_reduce_perf", "-g", "1"],
            export=["NCCL_DEBUG", "NCCL_IB_HCA"],
            opts=SITE,
        ),
        mpirun_argv([("node1", 1)], ["hostname"], opts=MpiOptions(allow_run_as_root=False)),
    ),
    "mpmd": lambda: lines(
        mpmd_argv(
            [("gpu001", 8, ["/p/mpi_probe.py", "--node", "gpu001"]), ("gpu002", 4, ["/p/mpi_probe.py"])],
            export=["OMP_NUM_THREADS"],
            opts=SITE,
        ),
    ),
    "mpirun_run_ssh_config": lambda: lines(
        mpirun_argv([("gpu001", 8), ("gpu002", 8)], ["/opt/nccl-tests/build/all_reduce_perf"], opts=RUN_SSH),
    ),
    "launcher_ssh_config": _launcher_config,
    "slurm_mpirun_env": lambda: slurm_mpirun_env(["gpu001", "gpu002", "gpu003"], 8) + "mpirun ...\n",
    "nccl_perf": lambda: lines(
        perf_argv("all_reduce", NcclRecipe(), 8),
        perf_argv("alltoall", NcclRecipe(min_bytes=1024, max_bytes=1 << 28, iters=50, warmup_iters=5), 1, "/opt/nt"),
    ),
    "torchrun_static": lambda: _torchrun(),
    "torchrun_c10d_ft_launcher": lambda: _torchrun(
        launcher="ft_launcher",
        rdzv="c10d",
        max_restarts=3,
        rdzv_id="nvtest-r1",
        launcher_args=["--ft-param-initial_rank_heartbeat_timeout=60"],
        local_addr=lambda n: n.address or n.name,
    ),
    "pair_ib_write_bw": _perftest,
    "pair_tcp_bw": _tcp,
    "pair_nccl_mpirun": _nccl_pair,
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_matches_golden(case: str) -> None:
    assert_golden(GOLDEN, case, CASES[case]())


def test_no_stale_golden_files() -> None:
    assert not stale_goldens(GOLDEN, CASES)
