"""SSHTransport on a real simulated cluster: fan-out, env, per-node commands, staging."""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from nvtest.config.inventory import Node
from nvtest.testing.sshd_cluster import SSHDCluster
from nvtest.transports import get_transport
from nvtest.transports.ssh import SSHTransport

from .conftest import LoggedSSHTransport
from .helpers import open_fd_count, server_endpoint

pytestmark = pytest.mark.sshd


def test_each_node_runs_on_its_own_sshd(sshd_cluster: SSHDCluster, ssh_transport: LoggedSSHTransport) -> None:
    nodes = sshd_cluster.inventory().nodes
    results = ssh_transport.run(nodes, "echo $SSH_CONNECTION; uname -r", timeout_s=20)
    assert sorted(results) == sshd_cluster.names
    for sim in sshd_cluster.nodes:
        result = results[sim.name]
        assert result.completed and result.exit_code == 0, result
        first, kernel = result.stdout.splitlines()
        assert server_endpoint(first) == (sim.address, sim.port)
        assert kernel == os.uname().release
        assert "__nvtest_pgid__" not in result.stdout + result.stderr


def test_four_nodes_run_concurrently(sshd_cluster: SSHDCluster, ssh_transport: LoggedSSHTransport) -> None:
    """4 x ``sleep 1``: every node's sleep overlaps every other's, and the whole takes
    well under the 4 s a serial run needs (2.5 s on an idle machine; 3.5 s allowed
    because the nodes' sshd share this machine's CPUs with whatever else runs)."""
    nodes = sshd_cluster.inventory().nodes
    ssh_transport.run(nodes, "true", timeout_s=20)  # connect first: the timing is of the commands
    t0 = time.monotonic()
    results = ssh_transport.run(nodes, "date +%s.%N; sleep 1; date +%s.%N", timeout_s=20)
    elapsed = time.monotonic() - t0
    assert all(r.exit_code == 0 for r in results.values()), results
    spans = [tuple(float(x) for x in r.stdout.split()) for r in results.values()]
    assert max(start for start, _ in spans) < min(end for _, end in spans), f"sleeps did not overlap: {spans}"
    assert elapsed < 3.5, f"4 x sleep 1 took {elapsed:.2f} s: not concurrent"
    assert all(r.duration_s >= 1.0 for r in results.values())


def test_one_connection_per_node_is_reused(sshd_cluster: SSHDCluster, ssh_transport: LoggedSSHTransport) -> None:
    nodes = sshd_cluster.inventory().nodes[:2]
    first = ssh_transport.run(nodes, "echo $SSH_CONNECTION", timeout_s=20)
    second = ssh_transport.run(nodes, "echo $SSH_CONNECTION", timeout_s=20)
    for node in nodes:
        # same client port: the same TCP connection carried both commands
        assert first[node.name].stdout.split()[1] == second[node.name].stdout.split()[1]


def test_env_values_arrive_verbatim(
    sshd_cluster: SSHDCluster, ssh_transport: LoggedSSHTransport, tmp_path: Path
) -> None:
    pwned = tmp_path / "pwned"
    value = f"a b 'c' $(touch {pwned}) `touch {pwned}`; touch {pwned}"
    results = ssh_transport.run(
        sshd_cluster.inventory().nodes,
        ["sh", "-c", 'printf "%s|%s" "$NVTEST_A" "$NVTEST_B"'],
        timeout_s=20,
        env={"NVTEST_A": value, "NVTEST_B": "2"},
    )
    for result in results.values():
        assert result.stdout == f"{value}|2"
    assert not pwned.exists()


def test_exit_code_and_stderr_are_kept(sshd_cluster: SSHDCluster, ssh_transport: LoggedSSHTransport) -> None:
    node = sshd_cluster.inventory().nodes[0]
    result = ssh_transport.run([node], "echo out; echo err >&2; exit 3", timeout_s=20)[node.name]
    assert (result.stdout, result.stderr, result.exit_code, result.error) == (
        "out\n",
        "err\n",
        3,
        None,
    )
    assert result.command == "echo out; echo err >&2; exit 3"


def test_per_node_command_mapping(sshd_cluster: SSHDCluster, ssh_transport: LoggedSSHTransport) -> None:
    nodes = sshd_cluster.inventory().nodes[:3]
    commands = {
        nodes[0].name: "echo server",
        nodes[1].name: ["echo", "client", "a b"],
        nodes[2].name: "exit 4",
    }
    results = ssh_transport.run(nodes, commands, timeout_s=20)
    assert results[nodes[0].name].stdout == "server\n"
    assert results[nodes[1].name].stdout == "client a b\n"
    assert results[nodes[2].name].exit_code == 4
    with pytest.raises(ValueError, match="no command"):
        ssh_transport.run(nodes, {nodes[0].name: "true"}, timeout_s=5)


def test_large_and_binary_output(sshd_cluster: SSHDCluster, ssh_transport: LoggedSSHTransport) -> None:
    node = sshd_cluster.inventory().nodes[0]
    big = ssh_transport.run([node], "head -c 3000000 /dev/zero | tr '\\0' a", timeout_s=30)[node.name]
    assert big.exit_code == 0 and len(big.stdout) == 3_000_000
    garbage = ssh_transport.run([node], "head -c 20000 /dev/urandom; printf '\\377\\376\\n'", timeout_s=20)
    result = garbage[node.name]
    assert result.completed and result.exit_code == 0 and result.error is None
    assert "\ufffd" in result.stdout  # undecodable bytes replaced, never an exception


def test_stage_copies_once_and_close_removes(sshd_cluster: SSHDCluster, tmp_path: Path) -> None:
    probes = tmp_path / "probes"
    (probes / "sub").mkdir(parents=True)
    script = probes / "probe.py"
    script.write_text("import json, sys\nprint(json.dumps({'ok': True, 'argv': sys.argv[1:]}))\n")
    script.chmod(0o755)
    (probes / "sub" / "data.txt").write_text("data\n")
    (probes / "__pycache__").mkdir()
    (probes / "__pycache__" / "x.pyc").write_bytes(b"\0")
    nodes = list(sshd_cluster.inventory().nodes[:2]) + [
        Node(
            name="shared",
            address=sshd_cluster.nodes[2].address,
            port=sshd_cluster.nodes[2].port,
            key_file=str(sshd_cluster.user_key_path),
            probe_dir="/opt/shared/probes",
        )
    ]
    transport = SSHTransport(known_hosts=str(sshd_cluster.known_hosts_path), run_id="stage-test")
    try:
        dirs = transport.stage(nodes, probes)
        assert dirs["shared"] == "/opt/shared/probes"
        remote = dirs[nodes[0].name]
        root = transport.remote_root
        assert root.startswith("/tmp/nvtest-stage-test-") and remote == f"{root}/probes"
        assert transport.stage(nodes, probes) == dirs  # once per run
        results = transport.run(
            nodes[:2],
            {n.name: ["python3", f"{dirs[n.name]}/probe.py", "x"] for n in nodes[:2]},
            timeout_s=20,
        )
        for result in results.values():
            assert result.stdout.strip() == '{"ok": true, "argv": ["x"]}', result
        listing = transport.run(nodes[:1], f"cat {remote}/sub/data.txt; ls -a {remote}", timeout_s=20)[nodes[0].name]
        assert listing.stdout.splitlines()[0] == "data"
        assert "__pycache__" not in listing.stdout
        # the simulated nodes are this machine: look at the copy directly
        assert stat.S_IMODE(os.stat(f"{remote}/probe.py").st_mode) == 0o755
        assert stat.S_IMODE(os.stat(root).st_mode) == 0o700
        assert transport.stage_methods == {n.name: "sftp" for n in nodes[:2]}
    finally:
        transport.close()
    assert not Path(root).exists()
    assert transport.stage_errors == {}


def _probe_dir(tmp_path: Path) -> Path:
    probes = tmp_path / "probes"
    (probes / "sub").mkdir(parents=True)
    script = probes / "probe.py"
    script.write_text("import json, sys\nprint(json.dumps({'ok': True, 'argv': sys.argv[1:]}))\n")
    script.chmod(0o750)
    (probes / "sub" / "data.txt").write_text("data\n")
    (probes / "__pycache__").mkdir()
    (probes / "__pycache__" / "x.pyc").write_bytes(b"\0")
    return probes


def test_two_runs_at_once_with_one_run_id_stage_apart(sshd_cluster: SSHDCluster, tmp_path: Path) -> None:
    """Two runs against the same nodes, even under one run id (``nvtest inventory`` used a
    fixed one): each stages into its own directory and removing one leaves the other."""
    probes = _probe_dir(tmp_path)
    nodes = sshd_cluster.inventory().nodes[:2]
    kh = str(sshd_cluster.known_hosts_path)
    first, second = SSHTransport(known_hosts=kh, run_id="same"), SSHTransport(known_hosts=kh, run_id="same")
    try:
        a, b = first.stage(nodes, probes), second.stage(nodes, probes)
        assert first.remote_root != second.remote_root
        assert all(a[n.name] != b[n.name] for n in nodes)
        first.close()  # the first run ends while the second is still running
        assert not Path(first.remote_root).exists()
        results = second.run(nodes, {n.name: ["python3", f"{b[n.name]}/probe.py", "y"] for n in nodes}, timeout_s=20)
        assert all(r.stdout.strip() == '{"ok": true, "argv": ["y"]}' for r in results.values()), results
    finally:
        first.close()
        second.close()
    assert not Path(second.remote_root).exists()


def test_a_node_without_sftp_is_staged_over_the_exec_channel(
    make_cluster: Callable[..., SSHDCluster], tmp_path: Path
) -> None:
    """Hardened sites remove ``Subsystem sftp``: the copy falls back to a tar stream on the
    exec channel's stdin, keeps modes, leaves caches out, and says which way it went."""
    cluster = make_cluster(1, no_sftp=["fault01"])
    probes = _probe_dir(tmp_path)
    node = cluster.inventory().nodes[0]
    lines: list[str] = []
    transport = SSHTransport(known_hosts=str(cluster.known_hosts_path), log=lines.append)
    try:
        remote = transport.stage([node], probes)[node.name]
        assert transport.stage_errors == {}, transport.stage_errors
        assert transport.stage_methods == {node.name: "exec channel (tar on stdin)"}
        assert transport.staging_method(node.name) == "exec channel (tar on stdin)"
        assert any("SFTP subsystem was refused" in line and "tar on stdin" in line for line in lines), lines
        res = transport.run(
            [node],
            f"python3 {remote}/probe.py z && cat {remote}/sub/data.txt && ls -a {remote}",
            timeout_s=20,
        )[node.name]
        assert res.exit_code == 0, res
        assert res.stdout.splitlines()[:2] == ['{"ok": true, "argv": ["z"]}', "data"]
        assert "__pycache__" not in res.stdout and ".stage-" not in res.stdout
        assert stat.S_IMODE(os.stat(f"{remote}/probe.py").st_mode) == 0o750
        assert stat.S_IMODE(os.stat(transport.remote_root).st_mode) == 0o700
    finally:
        transport.close()
    assert not Path(transport.remote_root).exists()


def test_get_transport_builds_ssh_with_cli_options(sshd_cluster: SSHDCluster) -> None:
    transport = get_transport(
        "ssh",
        parallel=8,
        connect_timeout_s=5.0,
        insecure_host_keys=False,
        ssh_config=str(sshd_cluster.ssh_config_path),
        known_hosts=None,
        connect_retries=0,
        run_id="abc",
        log=None,
    )
    try:
        assert isinstance(transport, SSHTransport)
        result = transport.run([Node("node01")], "echo ok", timeout_s=20)["node01"]
        assert result.stdout == "ok\n"
    finally:
        transport.close()


def test_bad_options_are_refused(sshd_cluster: SSHDCluster) -> None:
    with pytest.raises(ValueError):
        SSHTransport(run_id="../etc")
    with pytest.raises(ValueError):
        SSHTransport(parallel=0)
    from nvtest.errors import ConfigError

    with pytest.raises(ConfigError, match="not found"):
        SSHTransport(ssh_config="/nonexistent/ssh_config")


def test_no_descriptor_leak_over_many_commands(sshd_cluster: SSHDCluster, ssh_transport: LoggedSSHTransport) -> None:
    nodes = sshd_cluster.inventory().nodes[:2]
    ssh_transport.run(nodes, "true", timeout_s=20)
    before = open_fd_count()
    for _ in range(6):  # each command opens a channel and a select pipe: 12 of each
        ssh_transport.run(nodes, "true", timeout_s=20)
    assert open_fd_count() <= before + 2
