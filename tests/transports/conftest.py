"""Fixtures for transport tests: a real simulated cluster of sshd processes on loopback.

- ``sshd_cluster``: 4 nodes (``node01``..``node04``), started once per session.
- ``make_cluster``: a factory for a private cluster of N nodes that a test may
  break (stop nodes); torn down after the test.
- ``ssh_transport``: an :class:`SSHTransport` on ``sshd_cluster``'s known_hosts,
  whose log lines are collected in ``ssh_transport.log_lines``.

Every test using them needs ``/usr/sbin/sshd``; without it they skip and say why.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from nvtest.testing.sshd_cluster import SSHDCluster, sshd_unavailable_reason
from nvtest.transports.ssh import SSHTransport


def _require_sshd() -> None:
    reason = sshd_unavailable_reason()
    if reason:
        print(f"skipping sshd tests: {reason}")
        pytest.skip(reason)


@pytest.fixture(scope="session")
def sshd_cluster() -> Iterator[SSHDCluster]:
    _require_sshd()
    with SSHDCluster(4) as cluster:
        yield cluster


@pytest.fixture
def make_cluster() -> Iterator[Callable[[int], SSHDCluster]]:
    _require_sshd()
    clusters: list[SSHDCluster] = []

    def make(n: int, **options: Any) -> SSHDCluster:
        cluster = SSHDCluster(n, **{"prefix": "fault", **options}).start()
        clusters.append(cluster)
        return cluster

    yield make
    for cluster in clusters:
        cluster.stop()


class LoggedSSHTransport(SSHTransport):
    log_lines: list[str]


@pytest.fixture
def ssh_transport(sshd_cluster: SSHDCluster) -> Iterator[LoggedSSHTransport]:
    lines: list[str] = []
    transport = LoggedSSHTransport(known_hosts=str(sshd_cluster.known_hosts_path), log=lines.append)
    transport.log_lines = lines
    yield transport
    transport.close()
