"""``nvtest inventory`` over the real sshd cluster: two inventories at once against the same
nodes each stage apart and remove only their own files; a node without SFTP is staged over
the exec channel and the output says so."""

from __future__ import annotations

import glob
import json
import os
import subprocess
from pathlib import Path

import pytest

from nvtest.testing.sshd_cluster import SSHDCluster, sshd_unavailable_reason
from tests.conftest import NVTEST, REPO

pytestmark = pytest.mark.sshd


def _inventory(cluster: SSHDCluster) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            *NVTEST,
            "inventory",
            "--backend",
            "ssh",
            "--inventory",
            str(cluster.inventory_path),
            "--known-hosts",
            str(cluster.known_hosts_path),
            "--json",
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
    )


def test_two_inventories_at_once_against_the_same_nodes(tmp_path: Path) -> None:
    reason = sshd_unavailable_reason()
    if reason:
        pytest.skip(reason)
    before = set(glob.glob("/tmp/nvtest-inventory-*"))
    with SSHDCluster(2, prefix="inv", no_sftp=["inv02"]) as cluster:
        procs = [_inventory(cluster), _inventory(cluster)]  # both at once
        outs = [p.communicate(timeout=300) for p in procs]
    for proc, (out, err) in zip(procs, outs, strict=True):
        assert proc.returncode == 0, err[-2000:]
        data = json.loads(out)
        for name, node in data["nodes"].items():
            assert node["down_reason"] is None, (name, node)  # a healthy node is never "down"
            assert node["inventory"]["cores"] >= 1
        assert data["nodes"]["inv01"]["staging"] == "sftp"
        assert data["nodes"]["inv02"]["staging"] == "exec channel (tar on stdin)"
    assert set(glob.glob("/tmp/nvtest-inventory-*")) == before  # each run removed its own
