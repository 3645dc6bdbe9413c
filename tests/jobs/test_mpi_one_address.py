"""Several nodes behind one address (NAT, port forwarding) with one host name (issue 24,
class 7): the ranks' evidence (``gethostname()``, the address ssh reached) fits every node, so
where a rank ran is "not identifiable", never blamed on the first node that fits ("rank 1 ran on
node1, not node2"). Pure rules first, then the ``mpi`` check for real over two sshd nodes on
127.0.0.1 with different ports (SSHDCluster ``distinct_addresses=False``), which share this
machine's host name."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from nvtest.config.inventory import Node
from nvtest.jobs.mpi import blame_from_output, node_for_token, resolve_rank_nodes
from nvtest.testing.sshd_cluster import SSHDCluster, sshd_unavailable_reason
from tests.jobs.conftest import PYTHON, by_check
from tests.jobs.test_mpi_cluster import _run

NAT = [Node("node1", address="192.0.2.10", port=2201), Node("node2", address="192.0.2.10", port=2202)]


def test_evidence_that_fits_several_nodes_names_none():
    ranks = [
        {"rank": 0, "host": "gpu-host", "ssh_server": "192.0.2.10"},
        {"rank": 1, "host": "gpu-host", "ssh_server": "192.0.2.10"},
        {"rank": 2, "host": "node2", "ssh_server": "192.0.2.10"},  # a node's own name still tells
    ]
    assert resolve_rank_nodes(ranks, NAT) == {0: None, 1: None, 2: "node2"}
    assert node_for_token("192.0.2.10", NAT) is None and node_for_token("node1", NAT) == "node1"
    # a launcher line naming the shared address blames no node either
    text = "ssh: connect to host 192.0.2.10 port 22: Connection refused\n"
    assert blame_from_output(text, NAT, {0: "node1", 1: "node2"}) == {}


@pytest.fixture(scope="module")
def one_address() -> Iterator[SSHDCluster]:
    reason = sshd_unavailable_reason()
    if reason:
        pytest.skip(reason)
    with SSHDCluster(2, prefix="nat", python=PYTHON, distinct_addresses=False) as cluster:
        yield cluster


@pytest.mark.sshd
@pytest.mark.slow
@pytest.mark.skipif(shutil.which("mpirun") is None, reason="mpirun not installed (openmpi-bin)")
def test_mpi_on_two_nodes_behind_one_address_blames_neither(one_address: SSHDCluster, tmp_path: Path) -> None:
    proc, doc = _run(one_address, tmp_path)
    res = by_check(doc, "mpi")
    assert set(res) == {"nat01", "nat02"}, proc.stdout[-3000:] + proc.stderr[-3000:]
    blamed = {node: r["reason"] for node, r in res.items() if "ran on" in r["reason"]}
    assert not blamed, blamed  # was: nat02 "rank 1 ran on nat01, not nat02"
    for node, r in sorted(res.items()):
        assert r["verdict"] == "pass", (node, r)
        assert "not identifiable" in r["details"]["placement"], r["details"]
        assert r["details"]["world_size"] == 2
