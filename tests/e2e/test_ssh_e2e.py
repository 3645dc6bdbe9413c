"""End to end: ``nvtest run --backend ssh`` on a simulated cluster of 4 real sshd nodes.

The CLI finds the nodes the way a field engineer's login node would: through
``~/.ssh/config`` (here an ``Include`` of the cluster's generated config) and
``~/.ssh/known_hosts``, under a HOME made for the test.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from nvtest.testing.sshd_cluster import SSHDCluster, sshd_unavailable_reason
from tests.conftest import run_nvtest

pytestmark = [pytest.mark.sshd, pytest.mark.slow]

#: Checks whose verdict does not depend on how busy this machine is.
CHECKS = "host or gpus or ib_ports"


@pytest.fixture(scope="module")
def cluster() -> Iterator[SSHDCluster]:
    reason = sshd_unavailable_reason()
    if reason:
        print(f"skipping: {reason}")
        pytest.skip(reason)
    with SSHDCluster(4, prefix="e2e") as sim:
        yield sim


@pytest.fixture(scope="module")
def home(cluster: SSHDCluster) -> Path:
    return cluster.client_home()


def _run(cluster: SSHDCluster, home: Path, out: Path) -> tuple[int, str, Path, dict]:
    proc = run_nvtest(
        "run",
        "--backend",
        "ssh",
        "--inventory",
        str(cluster.inventory_path),
        "--suite",
        "delivery",
        "-k",
        CHECKS,
        "--out",
        str(out),
        "--progress",
        "plain",
        env={"HOME": str(home)},
        timeout=600,
    )
    output = proc.stdout + proc.stderr
    run_dir = (out / "latest").resolve()
    assert (run_dir / "results.json").exists(), f"exit {proc.returncode}, no results.json:\n{output}"
    doc = json.loads((run_dir / "results.json").read_text())
    return proc.returncode, output, run_dir, doc


def test_delivery_over_four_ssh_nodes_passes(cluster: SSHDCluster, home: Path, tmp_path: Path) -> None:
    code, output, run_dir, doc = _run(cluster, home, tmp_path)
    assert code == 0, output
    assert doc["run"]["backend"] == "ssh"
    assert sorted(doc["nodes"]) == cluster.names
    assert doc["summary"]["verdict"] == "pass"
    host = {r["node"]: r for r in doc["results"] if r["check"] == "host"}
    assert sorted(host) == cluster.names and all(r["verdict"] == "pass" for r in host.values())
    assert all(r["verdict"] in ("pass", "skip") for r in doc["results"]), output
    assert (run_dir / "report.html").exists()
    # the probes shipped for this run (by SFTP) were removed from the nodes at the end
    assert all(doc["nodes"][n]["staging"] == "sftp" for n in cluster.names), doc["nodes"]
    assert not list(Path("/tmp").glob(f"nvtest-{doc['run']['run_id']}*"))


def test_a_stopped_node_gets_errors_and_the_rest_finish(cluster: SSHDCluster, home: Path, tmp_path: Path) -> None:
    down = cluster.names[2]
    cluster.stop_node(down)
    try:
        code, output, run_dir, doc = _run(cluster, home, tmp_path)
    finally:
        cluster.start_node(down)
    assert code == 1, output
    assert sorted(doc["nodes"]) == cluster.names
    mine = [r for r in doc["results"] if r["node"] == down]
    others = [r for r in doc["results"] if r["node"] != down]
    assert mine and all(r["verdict"] == "error" for r in mine), mine
    assert any("connection refused" in json.dumps(r) for r in mine)
    assert others and all(r["verdict"] in ("pass", "skip") for r in others), others
    assert {r["node"] for r in others if r["check"] == "host"} == set(cluster.names) - {down}
    assert (run_dir / "report.html").exists()

    # the node is back: --rerun-failed alone reruns its items with the first run's
    # inventory, backend and options (nothing given again on the command line)
    again = run_nvtest(
        "run",
        "--rerun-failed",
        str(run_dir),
        "--out",
        str(tmp_path),
        "--progress",
        "plain",
        env={"HOME": str(home)},
        timeout=600,
    )
    new_dir = (tmp_path / "latest").resolve()
    assert again.returncode == 0, again.stdout + again.stderr
    new = json.loads((new_dir / "results.json").read_text())
    assert new["run"]["rerun_of"] == doc["run"]["run_id"] and new["run"]["backend"] == "ssh"
    assert {r["node"] for r in new["results"]} == {down}
    assert sorted((r["check"], r["node"]) for r in new["results"]) == sorted((r["check"], r["node"]) for r in mine)
    config = json.loads((new_dir / "run_config.json").read_text())
    assert config["inventory"] == str(cluster.inventory_path) and config["nodes"] == down
