"""A changed host key accepted with ``--insecure-host-keys`` is said on the console, at once
and in the summary, not only in the report (a real sshd whose key differs from known_hosts)."""

from __future__ import annotations

from pathlib import Path

import pytest

from nvtest.testing.sshd_cluster import SSHDCluster, generate_ed25519, sshd_unavailable_reason
from tests.conftest import run_nvtest

pytestmark = [pytest.mark.sshd, pytest.mark.slow]


def test_an_accepted_changed_host_key_is_on_the_console(tmp_path: Path) -> None:
    reason = sshd_unavailable_reason()
    if reason:
        pytest.skip(reason)
    with SSHDCluster(2, prefix="hk") as cluster:
        other = generate_ed25519(tmp_path / "other_key")  # not the key sshd serves
        first = cluster.node("hk01")
        lines = cluster.known_hosts_path.read_text().splitlines()
        known = tmp_path / "known_hosts"
        known.write_text(
            "\n".join(
                f"{first.known_hosts_name} {other}" if line.startswith(first.known_hosts_name) else line
                for line in lines
            )
            + "\n"
        )
        proc = run_nvtest(
            "run",
            "--backend",
            "ssh",
            "--inventory",
            str(cluster.inventory_path),
            "-k",
            "host",
            "--known-hosts",
            str(known),
            "--insecure-host-keys",
            "--out",
            str(tmp_path / "out"),
            "--progress",
            "plain",
            env={"HOME": str(cluster.client_home())},
            timeout=600,
        )
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    live = [line for line in out.splitlines() if line.startswith("[nvtest] warning: ") and "hk01" in line]
    assert live and "does not match known_hosts" in live[0] and "accepted" in live[0], out
    summary = out[out.index("overall:") :]
    assert "warnings (" in summary and "does not match known_hosts" in summary, summary
    assert "hk02" not in "".join(live), "the node whose key matched was warned about"
