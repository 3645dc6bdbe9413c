"""Resolving a node through an OpenSSH client config (no sshd needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from nvtest.config.inventory import Node
from nvtest.errors import ConfigError
from nvtest.transports._ssh_config import load_ssh_config, parse_jump, resolve_target
from nvtest.transports.ssh import kill_script, wrap_command


def _config(tmp_path: Path, text: str) -> str:
    path = tmp_path / "config"
    path.write_text(text)
    return str(path)


def test_config_values_and_inventory_overrides(tmp_path: Path) -> None:
    config = load_ssh_config(
        _config(
            tmp_path,
            "Host gpu*\n  HostName %h.cluster\n  Port 2222\n  User ops\n  IdentityFile ~/.ssh/gpu_key\n"
            "  IdentitiesOnly yes\n  ProxyJump bastion\n  UserKnownHostsFile /etc/nv_known /tmp/k2\n",
        )
    )
    target = resolve_target(Node("gpu001"), config)
    assert (target.hostname, target.port, target.user) == ("gpu001.cluster", 2222, "ops")
    assert target.key_files[0].endswith("/.ssh/gpu_key") and target.identities_only
    assert target.proxy_jump == "bastion"
    assert target.known_hosts_files[:2] == ("/etc/nv_known", "/tmp/k2")
    assert target.known_hosts_name == "[gpu001.cluster]:2222"
    node = Node("gpu001", address="10.0.0.1", port=22, user="root", key_file="/keys/k")
    over = resolve_target(node, config, known_hosts="/kh")
    assert (over.hostname, over.port, over.user, over.key_files) == (
        "10.0.0.1",
        22,
        "root",
        ("/keys/k",),
    )
    assert over.known_hosts_files == ("/kh",) and over.known_hosts_name == "10.0.0.1"


def test_unmatched_name_is_its_own_host(tmp_path: Path) -> None:
    target = resolve_target(Node("login1"), load_ssh_config(_config(tmp_path, "Host gpu*\n  Port 2\n")))
    assert (target.hostname, target.port, target.proxy_jump) == ("login1", 22, None)


def test_include_is_expanded(tmp_path: Path) -> None:
    (tmp_path / "conf.d").mkdir()
    (tmp_path / "conf.d" / "a.conf").write_text("Host n1\n  Port 7001\n")
    (tmp_path / "conf.d" / "b.conf").write_text("Host n2\n  Port 7002\n")
    config = load_ssh_config(_config(tmp_path, f"Include {tmp_path}/conf.d/*.conf\nHost *\n  User u\n"))
    assert resolve_target(Node("n1"), config).port == 7001
    assert resolve_target(Node("n2"), config).port == 7002
    assert resolve_target(Node("n2"), config).user == "u"


def test_missing_explicit_config_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        load_ssh_config(str(tmp_path / "nope"))


def test_parse_jump() -> None:
    hops = parse_jump("admin@bastion:2200,[fe80::1]:22,inner")
    assert [(h.name, h.user, h.port) for h in hops] == [
        ("bastion", "admin", 2200),
        ("fe80::1", None, 22),
        ("inner", None, None),
    ]
    with pytest.raises(ConfigError):
        parse_jump("host:notaport")


def test_wrapper_and_kill_script_quote_everything() -> None:
    line = "echo 'a b'; touch x"
    wrapped = wrap_command(line, "t0ken")
    assert wrapped.startswith("exec /bin/sh -c ")
    assert wrapped.endswith(" 'echo '\"'\"'a b'\"'\"'; touch x' t0ken")
    assert "-- -4242" in kill_script(4242, 1.0) and "KILL" in kill_script(4242, 1.0)
    assert "NVTEST_TASK=$t" in kill_script(4242, 1.0, "t0ken") and "t=t0ken;" in kill_script(4242, 1.0, "t0ken")
