"""Host keys, shell injection, and the user's ssh config (aliases, Include, ProxyJump)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from nvtest.config.inventory import Node
from nvtest.testing.sshd_cluster import SSHDCluster, generate_ed25519
from nvtest.transports.ssh import SSHTransport

from .helpers import server_endpoint

pytestmark = pytest.mark.sshd


def _run(transport: SSHTransport, nodes: list[Node], command: str = "echo $SSH_CONNECTION") -> dict:
    try:
        return transport.run(nodes, command, timeout_s=20)
    finally:
        transport.close()


def test_unknown_host_key_is_rejected_by_default(sshd_cluster: SSHDCluster, tmp_path: Path) -> None:
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    nodes = list(sshd_cluster.inventory().nodes[:2])
    results = _run(SSHTransport(known_hosts=str(empty), connect_retries=0), nodes)
    for node in nodes:
        error = results[node.name].error or ""
        assert "host key for [" in error and "not in known_hosts" in error, error
        assert results[node.name].exit_code is None


def test_changed_host_key_is_rejected(sshd_cluster: SSHDCluster, tmp_path: Path) -> None:
    sim = sshd_cluster.nodes[0]
    impostor = generate_ed25519(tmp_path / "impostor")
    known = tmp_path / "known_hosts"
    known.write_text(f"{sim.known_hosts_name} {impostor}\n")
    node = sshd_cluster.inventory().nodes[0]
    lines: list[str] = []
    error = _run(SSHTransport(known_hosts=str(known), log=lines.append), [node])[node.name].error or ""
    assert "does not match known_hosts" in error
    assert not lines  # strict mode logs nothing as accepted


def test_insecure_host_keys_accepts_and_warns(sshd_cluster: SSHDCluster, tmp_path: Path) -> None:
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    nodes = list(sshd_cluster.inventory().nodes[:2])
    lines: list[str] = []
    transport = SSHTransport(known_hosts=str(empty), insecure_host_keys=True, log=lines.append)
    results = _run(transport, nodes)
    assert all(r.exit_code == 0 for r in results.values()), results
    for node in nodes:
        warnings = [line for line in lines if node.name in line and "WARNING" in line]
        assert len(warnings) == 1 and "not in known_hosts" in warnings[0] and "accepted" in warnings[0]
        assert "SHA256:" in warnings[0]
    assert str(sshd_cluster.user_key_path) not in "\n".join(lines)


def test_inventory_values_never_reach_a_shell(sshd_cluster: SSHDCluster, tmp_path: Path) -> None:
    pwned = tmp_path / "pwned"
    sim = sshd_cluster.nodes[0]
    key = str(sshd_cluster.user_key_path)
    nodes = [
        Node(name=f"node1;touch {pwned}"),  # resolved as a host name: fails, runs nothing
        Node(name=f"node2$(touch {pwned})", address=sim.address, port=sim.port, key_file=key),
        Node(name="node3", address=f"127.0.0.1;touch {pwned}", port=sim.port, key_file=key),
        Node(
            name="node4",
            address=sim.address,
            port=sim.port,
            user=f"root;touch {pwned}",
            key_file=key,
        ),
    ]
    transport = SSHTransport(known_hosts=str(sshd_cluster.known_hosts_path), connect_retries=0)
    try:
        results = transport.run(nodes, ["echo", f"$(touch {pwned})", f"; touch {pwned}"], timeout_s=20)
    finally:
        transport.close()
    assert results[nodes[0].name].error
    assert results[nodes[1].name].stdout == f"$(touch {pwned}) ; touch {pwned}\n"
    assert results[nodes[2].name].error and results[nodes[3].name].error
    assert not pwned.exists()


def test_ssh_config_alias_is_honoured(sshd_cluster: SSHDCluster, tmp_path: Path) -> None:
    sim = sshd_cluster.node("node02")
    bare = [Node(name="node02")]  # no address, port, user or key: only the ssh config knows them
    results = _run(SSHTransport(ssh_config=str(sshd_cluster.ssh_config_path)), bare)
    assert server_endpoint(results["node02"].stdout) == (sim.address, sim.port)
    # without that config the same name does not resolve to a node
    empty = tmp_path / "empty_config"
    empty.write_text("")
    missing = _run(
        SSHTransport(ssh_config=str(empty), known_hosts=str(sshd_cluster.known_hosts_path), connect_retries=0),
        bare,
    )
    assert missing["node02"].error


def test_inventory_overrides_ssh_config(sshd_cluster: SSHDCluster) -> None:
    other = sshd_cluster.node("node04")
    node = Node(name="node02", address=other.address, port=other.port)
    results = _run(SSHTransport(ssh_config=str(sshd_cluster.ssh_config_path)), [node])
    assert server_endpoint(results["node02"].stdout) == (other.address, other.port)


def test_include_and_proxyjump(sshd_cluster: SSHDCluster, tmp_path: Path) -> None:
    jump = sshd_cluster.node("node01")
    target = sshd_cluster.node("node03")
    config = tmp_path / "config"
    config.write_text(
        "Host behind-jump\n"
        f"    HostName {target.address}\n"
        f"    Port {target.port}\n"
        "    ProxyJump node01\n"
        f"Include {sshd_cluster.ssh_config_path}\n"
        "Host behind-jump\n"
        f"    User {sshd_cluster.user}\n"
        f"    IdentityFile {sshd_cluster.user_key_path}\n"
        f"    UserKnownHostsFile {sshd_cluster.known_hosts_path}\n"
    )
    transport = SSHTransport(ssh_config=str(config))
    try:
        result = transport.run([Node(name="behind-jump")], "echo $SSH_CONNECTION", timeout_s=20)["behind-jump"]
        assert result.exit_code == 0, result
        client_port = result.stdout.split()[1]
        assert server_endpoint(result.stdout) == (target.address, target.port)
        # the TCP connection into the target belongs to the jump node's sshd, not to us
        owner = subprocess.run(
            ["ss", "-tnpH", "state", "established", f"( sport = :{client_port} )"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert "sshd" in owner and "python" not in owner, owner
        assert transport._jumps and all(c.target.port == jump.port for c in transport._jumps.values())
    finally:
        transport.close()
