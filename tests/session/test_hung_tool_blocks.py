"""Rule 5: a tool that hung on a node blocks that node's later checks needing the same tool
or device at once, with the reason, instead of each waiting out its own timeout: on this
machine (local) and over a real sshd cluster where one node's nvidia-smi hangs. Slurm's case
is in ``tests/transports/slurm/test_slurm_deadlines.py``."""

from __future__ import annotations

from pathlib import Path

import pytest

from nvtest.testing.sshd_cluster import SSHDCluster, sshd_unavailable_reason
from tests.session.hung_tool_case import assert_hung_tool_blocks, context, nvidia_smi


def test_local(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tools = nvidia_smi(tmp_path / "bin", hung=True)
    monkeypatch.setenv("PATH", tools.path_prefix())
    ctx = context(tmp_path / "run", "local")
    assert_hung_tool_blocks(ctx, {ctx.nodes[0].name})


@pytest.mark.sshd
def test_ssh_one_node_hangs(tmp_path: Path) -> None:
    reason = sshd_unavailable_reason()
    if reason:
        pytest.skip(reason)
    hung = nvidia_smi(tmp_path / "hung", hung=True)
    fine = nvidia_smi(tmp_path / "fine", hung=False)
    env = {"hang01": {"PATH": fine.path_prefix()}, "hang02": {"PATH": hung.path_prefix()}}
    with SSHDCluster(2, prefix="hang", node_env=env) as cluster:
        ctx = context(
            tmp_path / "run",
            "ssh",
            inventory=str(cluster.inventory_path),
            backend_options={"known_hosts": str(cluster.known_hosts_path)},
        )
        assert_hung_tool_blocks(ctx, {"hang02"})
    assert len(hung.calls()) == 1, hung.calls()  # the hung node's nvidia-smi ran once, not 3 times
