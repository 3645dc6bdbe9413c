"""Each fault becomes that node's CommandResult with ``error`` set, and the run goes on."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from nvtest.config.inventory import Node
from nvtest.testing.sshd_cluster import SSHDCluster, generate_ed25519
from nvtest.transports.ssh import SSHTransport

from .conftest import LoggedSSHTransport
from .helpers import free_port, pid_alive, read_pids, wait_until

pytestmark = pytest.mark.sshd


def test_connection_refused(sshd_cluster: SSHDCluster) -> None:
    good = sshd_cluster.inventory().nodes[0]
    dead = Node(name="dead01", address="127.0.0.1", port=free_port(), key_file=good.key_file)
    lines: list[str] = []
    transport = SSHTransport(known_hosts=str(sshd_cluster.known_hosts_path), connect_retries=1, log=lines.append)
    try:
        results = transport.run([good, dead], "echo up", timeout_s=20)
        assert results[good.name].stdout == "up\n"
        assert results["dead01"].exit_code is None
        assert "connection refused" in (results["dead01"].error or "")
        assert any("dead01" in line and "retrying" in line for line in lines), lines  # connect was retried
        # a node that could not be reached fails its later commands at once
        t0 = time.monotonic()
        again = transport.run([dead], "echo up", timeout_s=20)["dead01"]
        assert "connection refused" in (again.error or "") and time.monotonic() - t0 < 0.5
    finally:
        transport.close()


def test_key_not_accepted(sshd_cluster: SSHDCluster, tmp_path: Path) -> None:
    other_key = tmp_path / "other_key"
    generate_ed25519(other_key)
    sim = sshd_cluster.nodes[0]
    stranger = Node(name="stranger", address=sim.address, port=sim.port, key_file=str(other_key))
    good = sshd_cluster.inventory().nodes[1]
    transport = SSHTransport(known_hosts=str(sshd_cluster.known_hosts_path))
    try:
        t0 = time.monotonic()
        results = transport.run([stranger, good], "true", timeout_s=20)
        error = results["stranger"].error or ""
        assert "authentication failed" in error
        assert str(other_key) not in error  # never a key file path
        assert results[good.name].exit_code == 0
        assert time.monotonic() - t0 < 5, "an auth failure must not be retried"
    finally:
        transport.close()


def test_hung_command_is_killed_on_the_node(
    sshd_cluster: SSHDCluster, ssh_transport: LoggedSSHTransport, tmp_path: Path
) -> None:
    pids = tmp_path / "pids"
    nodes = sshd_cluster.inventory().nodes[:2]
    hang = f"sleep 300 & echo $! >> {pids}; echo $$ >> {pids}; wait"
    t0 = time.monotonic()
    results = ssh_transport.run(nodes, {nodes[0].name: hang, nodes[1].name: "echo fine"}, timeout_s=1.5)
    elapsed = time.monotonic() - t0
    hung = results[nodes[0].name]
    assert hung.timed_out and hung.exit_code is None
    assert hung.error is not None and "timed out after 1.5 s" in hung.error and "killed" in hung.error
    assert results[nodes[1].name].stdout == "fine\n"
    assert elapsed < 8
    written = read_pids(pids)
    assert len(written) == 2
    assert wait_until(lambda: not any(pid_alive(pid) for pid in written), 5), "remote processes survived"


def test_node_drops_mid_command(make_cluster: Callable[[int], SSHDCluster], tmp_path: Path) -> None:
    cluster = make_cluster(2)
    nodes = cluster.inventory().nodes
    victim, survivor = nodes
    pidfile = tmp_path / "victim.pid"
    transport = SSHTransport(known_hosts=str(cluster.known_hosts_path), connect_retries=0)
    box: dict[str, object] = {}
    try:
        worker = threading.Thread(
            target=lambda: box.update(
                transport.run(
                    nodes,
                    {
                        victim.name: f"echo $$ > {pidfile}; sleep 60",
                        survivor.name: "sleep 2; echo done",
                    },
                    timeout_s=30,
                )
            )
        )
        worker.start()
        assert wait_until(pidfile.exists, 10)
        cluster.stop_node(victim.name)
        worker.join(20)
        assert not worker.is_alive()
        dropped = box[victim.name]
        assert "connection lost" in (dropped.error or ""), dropped  # type: ignore[attr-defined]
        assert box[survivor.name].stdout == "done\n"  # type: ignore[attr-defined]
        assert not pid_alive(int(pidfile.read_text()))
        # the node is gone: its next command fails fast with a connect error
        after = transport.run([victim], "true", timeout_s=5)[victim.name]
        assert after.error and "refused" in after.error
    finally:
        transport.close()


def test_garbage_output_is_just_stdout(sshd_cluster: SSHDCluster, ssh_transport: LoggedSSHTransport) -> None:
    node = sshd_cluster.inventory().nodes[0]
    result = ssh_transport.run([node], "printf 'NaN GB/s \\033[31m\\n{{{\\0\\001'; exit 0", timeout_s=10)[node.name]
    assert result.completed and result.error is None
    assert result.stdout.startswith("NaN GB/s \x1b[31m\n{{{")


def test_interrupt_kills_remote_processes(sshd_cluster: SSHDCluster, tmp_path: Path) -> None:
    nodes = sshd_cluster.inventory().nodes
    transport = SSHTransport(known_hosts=str(sshd_cluster.known_hosts_path))
    box: dict[str, object] = {}
    try:
        transport.run(nodes, "true", timeout_s=20)
        commands = {n.name: f"sleep 120 & echo $! > {tmp_path}/{n.name}.pid; wait" for n in nodes}
        worker = threading.Thread(target=lambda: box.update(transport.run(nodes, commands, timeout_s=120)))
        worker.start()
        assert wait_until(lambda: all(read_pids(tmp_path / f"{n.name}.pid") for n in nodes), 15)
        pids = [read_pids(tmp_path / f"{n.name}.pid")[0] for n in nodes]
        assert all(pid_alive(pid) for pid in pids)
        t0 = time.monotonic()
        transport.interrupt()
        worker.join(15)
        assert not worker.is_alive() and time.monotonic() - t0 < 10
        assert all(box[n.name].error == "interrupted" for n in nodes), box  # type: ignore[attr-defined]
        assert wait_until(lambda: not any(pid_alive(pid) for pid in pids), 5), "remote sleeps survived"
        t0 = time.monotonic()
        later = transport.run(nodes, "true", timeout_s=20)
        assert all(r.error == "interrupted" for r in later.values())
        assert time.monotonic() - t0 < 0.5
    finally:
        transport.close()
    closed = transport.run(nodes, "true", timeout_s=5)
    assert all(r.error == "transport closed" for r in closed.values())
