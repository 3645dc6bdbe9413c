"""SSHTransport on a real simulated cluster: fan-out, env, per-node commands, staging."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest

from nvtest.config.inventory import Node
from nvtest.testing.sshd_cluster import SSHDCluster
from nvtest.transports import get_transport
from nvtest.transports.ssh import SSHTransport

from .conftest import LoggedSSHTransport
from .helpers import open_fd_count, server_endpoint

pytestmark = pytest.mark.sshd


def test_each_node_runs_on_its_own_sshd(
    sshd_cluster: SSHDCluster, ssh_transport: LoggedSSHTransport
) -> None:
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


def test_four_nodes_run_concurrently(
    sshd_cluster: SSHDCluster, ssh_transport: LoggedSSHTransport
) -> None:
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
    assert max(start for start, _ in spans) < min(end for _, end in spans), (
        f"sleeps did not overlap: {spans}"
    )
    assert elapsed < 3.5, f"4 x sleep 1 took {elapsed:.2f} s: not concurrent"
    assert all(r.duration_s >= 1.0 for r in results.values())


def test_one_connection_per_node_is_reused(
    sshd_cluster: SSHDCluster, ssh_transport: LoggedSSHTransport
) -> None:
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


def test_exit_code_and_stderr_are_kept(
    sshd_cluster: SSHDCluster, ssh_transport: LoggedSSHTransport
) -> None:
    node = sshd_cluster.inventory().nodes[0]
    result = ssh_transport.run([node], "echo out; echo err >&2; exit 3", timeout_s=20)[node.name]
    assert (result.stdout, result.stderr, result.exit_code, result.error) == (
        "out\n",
        "err\n",
        3,
        None,
    )
    assert result.command == "echo out; echo err >&2; exit 3"


def test_per_node_command_mapping(
    sshd_cluster: SSHDCluster, ssh_transport: LoggedSSHTransport
) -> None:
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


def test_large_and_binary_output(
    sshd_cluster: SSHDCluster, ssh_transport: LoggedSSHTransport
) -> None:
    node = sshd_cluster.inventory().nodes[0]
    big = ssh_transport.run([node], "head -c 3000000 /dev/zero | tr '\\0' a", timeout_s=30)[
        node.name
    ]
    assert big.exit_code == 0 and len(big.stdout) == 3_000_000
    garbage = ssh_transport.run(
        [node], "head -c 20000 /dev/urandom; printf '\\377\\376\\n'", timeout_s=20
    )
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
        assert remote == "/tmp/nvtest-stage-test/probes"
        assert transport.stage(nodes, probes) == dirs  # once per run
        results = transport.run(
            nodes[:2],
            {n.name: ["python3", f"{dirs[n.name]}/probe.py", "x"] for n in nodes[:2]},
            timeout_s=20,
        )
        for result in results.values():
            assert result.stdout.strip() == '{"ok": true, "argv": ["x"]}', result
        listing = transport.run(
            nodes[:1], f"cat {remote}/sub/data.txt; ls -a {remote}", timeout_s=20
        )[nodes[0].name]
        assert listing.stdout.splitlines()[0] == "data"
        assert "__pycache__" not in listing.stdout
        # the simulated nodes are this machine: look at the copy directly
        assert stat.S_IMODE(os.stat(f"{remote}/probe.py").st_mode) == 0o755
        assert stat.S_IMODE(os.stat("/tmp/nvtest-stage-test").st_mode) == 0o700
    finally:
        transport.close()
    assert not Path("/tmp/nvtest-stage-test").exists()
    assert transport.stage_errors == {}


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


def test_no_descriptor_leak_over_many_commands(
    sshd_cluster: SSHDCluster, ssh_transport: LoggedSSHTransport
) -> None:
    nodes = sshd_cluster.inventory().nodes[:2]
    ssh_transport.run(nodes, "true", timeout_s=20)
    before = open_fd_count()
    for _ in range(6):  # each command opens a channel and a select pipe: 12 of each
        ssh_transport.run(nodes, "true", timeout_s=20)
    assert open_fd_count() <= before + 2
