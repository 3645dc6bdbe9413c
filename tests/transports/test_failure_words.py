"""Each cause of a transport failure gets its own words and its own next step, and a
configuration mistake is not retried: every cause made for real against the sshd cluster,
worded as a down node's reason, then diagnosed by the Playbook."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from nvtest.config.inventory import Node
from nvtest.playbook.diagnosis import diagnose
from nvtest.session.context import DOWN_WORDS, NodeState
from nvtest.session.phase import cause_of
from nvtest.testing.sshd_cluster import SSHDCluster, generate_ed25519
from nvtest.testing.standin import StandInTools
from nvtest.transports.base import FAILURES, CommandResult
from nvtest.transports.ssh import SSHTransport

from .helpers import free_port

pytestmark = pytest.mark.sshd


def _encrypted_key(path: Path) -> Path:
    key = Ed25519PrivateKey.generate()
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.OpenSSH,
            serialization.BestAvailableEncryption(b"a passphrase"),
        )
    )
    path.chmod(0o600)
    return path


def _words(res: CommandResult) -> tuple[str, str | None]:
    """The reason an item of this node gets, as the run words it (``NodeError: <words>``),
    and its cause key."""
    state = NodeState(Node(res.node), down_reason=res.error, down_kind=res.failure)
    return f"NodeError: {state.down_message}", state.down_error().cause


def _attempt(nodes: list[Node], command: str, **options: object) -> tuple[dict[str, CommandResult], float, list[str]]:
    lines: list[str] = []
    transport = SSHTransport(log=lines.append, **options)  # type: ignore[arg-type]
    t0 = time.monotonic()
    try:
        return transport.run(nodes, command, timeout_s=1.0), time.monotonic() - t0, lines
    finally:
        transport.close()


def test_each_cause_has_its_own_words_and_next_step(sshd_cluster: SSHDCluster, tmp_path: Path) -> None:
    sim = sshd_cluster.nodes[0]
    key = str(sshd_cluster.user_key_path)
    kh = str(sshd_cluster.known_hosts_path)
    empty_kh = tmp_path / "empty_known_hosts"
    empty_kh.write_text("")
    stranger_key = tmp_path / "stranger"  # a key the node does not know
    generate_ed25519(stranger_key)
    at = {"address": sim.address, "port": sim.port}
    cases = {
        # name: (node, options, expected failure kind, diagnosis rule, class, retried?)
        "refused": (
            Node("refused", address="127.0.0.1", port=free_port(), key_file=key),
            {"known_hosts": kh},
            "unreachable",
            "node_unreachable",
            "RETEST",
            True,
        ),
        "dns": (
            Node("dns", address="no-such-node.invalid", key_file=key),
            {"known_hosts": kh},
            "resolve",
            "name_does_not_resolve",
            "CONFIG",
            False,
        ),
        "key_missing": (
            Node("key_missing", key_file=str(tmp_path / "no_such_key"), **at),
            {"known_hosts": kh},
            "config",
            "ssh_key_missing",
            "CONFIG",
            False,
        ),
        "passphrase": (
            Node("passphrase", key_file=str(_encrypted_key(tmp_path / "locked")), **at),
            {"known_hosts": kh},
            "auth",
            "ssh_key_passphrase",
            "CONFIG",
            False,
        ),
        "key_refused": (
            Node("key_refused", key_file=str(stranger_key), **at),
            {"known_hosts": kh},
            "auth",
            "ssh_auth",
            "CONFIG",
            False,
        ),
        "host_key": (
            Node("host_key", key_file=key, **at),
            {"known_hosts": str(empty_kh)},
            "host_key",
            "ssh_host_key",
            "CONFIG",
            False,
        ),
        # the node answers but the inventory probe's command hangs (a python: wrapper that hangs)
        "hang": (
            Node("hang", key_file=key, **at),
            {"known_hosts": kh},
            "timeout",
            "inventory_probe_hung",
            "CONFIG",
            False,
        ),
    }
    rules: dict[str, str] = {}
    for name, (node, options, kind, rule, cls, retried) in cases.items():
        command = "sleep 30" if name == "hang" else "true"
        results, took, log = _attempt([node], command, connect_retries=2, **options)
        res = results[node.name]
        assert res.failure == kind, (name, res)
        words, cause = _words(res)
        assert cause is not None and cause.startswith(f"transport:{kind}"), (name, cause)
        assert words.startswith(f"NodeError: {DOWN_WORDS[kind]}: "), (name, words)
        assert DOWN_WORDS[kind] == FAILURES[kind] or kind == "timeout"
        assert node.key_file not in words, (name, words)  # never a key file path
        diag = diagnose({"check": "inventory", "verdict": "error", "reason": words, "cause": cause})
        assert diag is not None and (diag.rule, diag.cls) == (rule, cls), (name, words, diag)
        rules[name] = diag.rule
        was_retried = any("retrying" in line for line in log)
        assert was_retried == retried, (name, log)
        if not retried and name != "hang":
            assert took < 2.0, f"{name}: a configuration mistake took {took:.1f} s (retried?)"
    assert len(set(rules.values())) == len(rules), rules  # no two causes share a diagnosis
    # the same hang in a later check (the node was up): a timeout, its own next step
    res = _attempt([cases["hang"][0]], "sleep 30", known_hosts=kh)[0]["hang"]
    diag = diagnose(
        {"check": "stream", "verdict": "error", "reason": f"NodeError: {res.error}", "cause": cause_of(res)}
    )
    assert diag is not None and diag.rule == "probe_timeout", (res.error, diag)


def test_staging_that_cannot_work_is_its_own_cause(make_cluster, tmp_path: Path) -> None:
    """No SFTP subsystem and no tar on the node: the probes cannot be copied; the node's
    commands that need them say so (not "unreachable"), with the staging next step."""
    tools = StandInTools(tmp_path / "bin")
    tools.add_missing("tar")
    cluster: SSHDCluster = make_cluster(1, no_sftp=["fault01"], node_env={"fault01": {"PATH": tools.path_prefix()}})
    node = cluster.inventory().nodes[0]
    probes = tmp_path / "probes"
    probes.mkdir()
    (probes / "p.py").write_text("print(1)\n")
    transport = SSHTransport(known_hosts=str(cluster.known_hosts_path))
    try:
        remote = transport.stage([node], probes)[node.name]
        assert "tar over the exec channel" in transport.stage_errors[node.name]
        res = transport.run([node], ["python3", f"{remote}/p.py"], timeout_s=10)[node.name]
    finally:
        transport.close()
    assert res.failure == "staging" and res.error and res.error.startswith("files not staged: ")
    diag = diagnose(
        {"check": "stream", "verdict": "error", "reason": f"NodeError: {res.error}", "cause": cause_of(res)}
    )
    assert diag is not None and diag.rule == "staging_failed" and diag.cls == "CONFIG", diag
