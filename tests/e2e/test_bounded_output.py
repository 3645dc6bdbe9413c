"""End to end: a node that prints 100 MB before its probe's document (issue 23: 300 MB took
the controller to 945 MB RSS and said "Expecting value: line 1 column 1").

The node's python is a stand-in that prints 100 MB (no newline) and then runs the real
python: the inventory probe's JSON is cut off from its start. Over the local backend and over
the real sshd cluster, ``nvtest run`` says what happened in the item's words, the node's log
is capped at the capture limit, and the run states its history's cluster.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from nvtest.testing.sshd_cluster import SSHDCluster, sshd_unavailable_reason
from nvtest.transports.capture import DEFAULT_LIMIT
from tests.conftest import run_nvtest

WORDS = (
    "inventory probe output unreadable: stdout of 100.0 MB exceeded the capture limit of 8 MiB: "
    "first and last 4 MiB kept, 91.6 MB dropped; the probe's JSON document could not be read"
)


def _flood_python(tmp_path: Path) -> Path:
    script = tmp_path / "flood-python"
    script.write_text("#!/bin/sh\nhead -c 100000000 /dev/zero | tr '\\0' x\nexec python3 \"$@\"\n")
    script.chmod(0o755)
    return script


def _check(out: Path, proc_output: str, cluster: str) -> None:
    doc = json.loads((out / "latest" / "results.json").read_text())
    items = doc["results"]
    assert items and all(r["verdict"] == "error" for r in items), proc_output[-3000:]
    assert all(WORDS in r["reason"] for r in items), [r["reason"] for r in items]
    assert "Expecting value" not in json.dumps(doc)
    logs = list((out / "latest" / "logs").glob("*/inventory.log"))
    assert logs and all(p.stat().st_size < DEFAULT_LIMIT + 4096 for p in logs)
    assert "# truncated: stdout of 100.0 MB" in logs[0].read_text(errors="replace")[:4096]
    assert doc["run"]["history_cluster"] == cluster and doc["history"]["cluster"] == cluster


def test_local_node_printing_100_mb(tmp_path: Path) -> None:
    inv = tmp_path / "inv.yaml"
    inv.write_text(
        f"cluster: flood\nnodes:\n  - names: {socket.gethostname().split('.')[0]}\n"
        f"    python: {_flood_python(tmp_path)}\n"
    )
    out = tmp_path / "out"
    proc = run_nvtest(
        "run",
        "--backend",
        "local",
        "--inventory",
        str(inv),
        "--suite",
        "quick",
        "-k",
        "stream",
        "--out",
        str(out),
        "--progress",
        "plain",
        env={"NVTEST_HISTORY": str(tmp_path / "h.sqlite")},
        timeout=300,
    )
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    _check(out, proc.stdout + proc.stderr, "flood")


@pytest.fixture
def flood_cluster(tmp_path: Path) -> Iterator[SSHDCluster]:
    if reason := sshd_unavailable_reason():
        pytest.skip(reason)
    with SSHDCluster(1, prefix="flood", python=str(_flood_python(tmp_path))) as sim:
        yield sim


@pytest.mark.sshd
def test_ssh_node_printing_100_mb(tmp_path: Path, flood_cluster: SSHDCluster) -> None:
    out = tmp_path / "out"
    proc = run_nvtest(
        "run",
        "--backend",
        "ssh",
        "--inventory",
        str(flood_cluster.inventory_path),
        "--suite",
        "quick",
        "-k",
        "stream",
        "--out",
        str(out),
        "--progress",
        "plain",
        env={"HOME": str(flood_cluster.client_home()), "NVTEST_HISTORY": str(tmp_path / "h.sqlite")},
        timeout=300,
    )
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    _check(out, proc.stdout + proc.stderr, "sshd-sim")  # the inventory names its cluster
