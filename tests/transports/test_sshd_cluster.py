"""The simulated cluster itself: real sshd per node, usable by OpenSSH's own client."""

from __future__ import annotations

import subprocess
from collections.abc import Callable

import pytest

from nvtest.testing.sshd_cluster import SSHDCluster

pytestmark = pytest.mark.sshd


def test_nodes_listen_on_distinct_loopback_addresses(sshd_cluster: SSHDCluster) -> None:
    addresses = [node.address for node in sshd_cluster.nodes]
    assert sshd_cluster.names == ["node01", "node02", "node03", "node04"]
    assert len(set(addresses)) == 4
    assert all(address.startswith("127.") for address in addresses)
    assert sshd_cluster.hostlist == "node[01-04]"


def test_openssh_client_reaches_a_node_with_the_generated_files(sshd_cluster: SSHDCluster) -> None:
    node = sshd_cluster.node("node03")
    proc = subprocess.run(
        ["ssh", "-F", str(sshd_cluster.ssh_config_path), "node03", "echo $SSH_CONNECTION"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split()[2:] == [node.address, str(node.port)]


def test_inventory_file_lists_every_node(sshd_cluster: SSHDCluster) -> None:
    inventory = sshd_cluster.inventory()
    assert inventory.names() == sshd_cluster.names
    first = inventory.nodes[0]
    assert (first.address, first.port) == (
        sshd_cluster.nodes[0].address,
        sshd_cluster.nodes[0].port,
    )
    assert first.key_file == str(sshd_cluster.user_key_path)


def test_stop_and_start_node(make_cluster: Callable[[int], SSHDCluster]) -> None:
    cluster = make_cluster(1)
    name = cluster.names[0]
    ssh = ["ssh", "-F", str(cluster.ssh_config_path), "-o", "ConnectTimeout=5", name, "true"]
    cluster.stop_node(name)
    assert not cluster.is_running(name)
    assert subprocess.run(ssh, capture_output=True, timeout=30).returncode == 255
    cluster.start_node(name)
    assert subprocess.run(ssh, capture_output=True, timeout=30).returncode == 0


def test_stop_removes_every_sshd(make_cluster: Callable[[int], SSHDCluster]) -> None:
    cluster = make_cluster(2)
    pids = [proc.pid for proc in cluster._procs.values()]
    cluster.stop()
    for pid in pids:
        state = subprocess.run(["ps", "-o", "stat=", "-p", str(pid)], capture_output=True, text=True)
        assert state.stdout.strip() in ("", "Z")
    assert not cluster.dir.exists()


def test_node_homes_give_each_node_its_own_home(make_cluster: Callable[..., SSHDCluster]) -> None:
    cluster = make_cluster(2, node_homes=True)
    homes = []
    for name in cluster.names:
        proc = subprocess.run(
            ["ssh", "-F", str(cluster.ssh_config_path), name, 'echo "$HOME"'],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert proc.returncode == 0, proc.stderr
        homes.append(proc.stdout.strip())
    assert homes == [str(node.dir / "home") for node in cluster.nodes]
