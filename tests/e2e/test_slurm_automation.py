"""Automation acts on its own findings (issue 24, class 5), on a real Slurm of three
``slurmd`` nodes (node1-node3, partition ``nvt``) started on this machine.

- ``--drain-failed`` drains none of three nodes whose shared failure the run flagged
  systemic (each declared an 8-GPU H100 in the inventory: ``gpus`` fails on every one, no
  GPU here), and exactly the one node of a single node's real failure; each node's
  decision is in the console and results.json.
- ``nvtest submit --partition``: a node Slurm drained before the submission ("gres/gpu
  count reported lower than configured (0 < 8)", as slurmctld words it) is in the batch
  job's results.json with Slurm's reason, its items ``error``, and the run is not a pass.
  (``nvtest run --partition`` itself: the field case ``slurm-drained-node-dropped-silently``,
  tests/field_cases, on the same real Slurm.)
"""

from __future__ import annotations

import json
import re
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from nvtest.testing.slurm_cluster import SlurmCluster
from tests.conftest import run_nvtest, started_slurm_cluster

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

NODES = ("node1", "node2", "node3")
#: The words slurmctld drains a node with when it reports fewer GPUs than gres.conf says.
GRES_REASON = "gres/gpu count reported lower than configured (0 < 8)"


@pytest.fixture(scope="module")
def cluster() -> Iterator[SlurmCluster]:
    with started_slurm_cluster(nodes=NODES) as sim:
        yield sim


@pytest.fixture
def clean(cluster: SlurmCluster) -> Iterator[SlurmCluster]:
    yield cluster
    cluster.client("scancel", "--user=root")
    cluster.client("scontrol", "update", "nodename=node[1-3]", "state=resume")


def _run(cluster: SlurmCluster, out: Path, *extra: str) -> tuple[int, str, dict]:
    proc = run_nvtest(
        "run", "--backend", "slurm", "--partition", "nvt", "--time", "10", "--suite", "delivery",
        "-k", "host or gpus", "--out", str(out), "--progress", "plain", *extra,
        env=cluster.env, timeout=600,
    )  # fmt: skip
    doc = json.loads(((out / "latest").resolve() / "results.json").read_text())
    return proc.returncode, proc.stdout + proc.stderr, doc


def _inventory(tmp_path: Path, h100: str) -> Path:
    inv = tmp_path / "inventory.yaml"
    inv.write_text(
        f"cluster: sim\ndefaults: {{python: {sys.executable}}}\nnodes:\n  - names: node[1-3]\n"
        f"  - names: {h100}\n    sku: h100-sxm-80gb\n"
    )
    return inv


def _drained(cluster: SlurmCluster) -> list[str]:
    return cluster.client("sinfo", "-R", "-h", "-o", "%N|%E").stdout.strip().splitlines()


def test_systemic_failure_drains_none_and_one_nodes_failure_drains_it(clean: SlurmCluster, tmp_path: Path) -> None:
    code, output, doc = _run(clean, tmp_path / "a", "--inventory", str(_inventory(tmp_path, "node[1-3]")), "--drain-failed")
    assert code == 1, output
    assert {r["node"] for r in doc["results"] if r["check"] == "gpus" and r["verdict"] == "fail"} == set(NODES)
    assert [s["check"] for s in doc["fleet"]["systemic"]] == ["gpus"], doc["fleet"]
    assert _drained(clean) == [], output
    assert doc["run"]["drained"] == {}
    assert sorted(doc["run"]["not_drained"]) == list(NODES)
    for node in NODES:
        assert "systemic" in doc["run"]["not_drained"][node]
        assert f"drain: {node}: not drained: gpus failed on every node" in output, output

    code, output, doc = _run(clean, tmp_path / "b", "--inventory", str(_inventory(tmp_path, "node2")), "--drain-failed")
    assert code == 1, output
    assert _drained(clean) == [f"node2|{doc['run']['drained']['node2']}"]
    assert doc["run"]["drained"]["node2"].startswith(f"nvtest {doc['run']['run_id']}: gpus ")
    assert "drain: node2: drained: " in output and "drain: 2 node(s) not drained: nothing failed" in output, output


def test_submit_lists_the_node_slurm_drained_with_its_reason(clean: SlurmCluster, tmp_path: Path) -> None:
    """``nvtest submit --partition``: the batch job's run lists the node too."""
    clean.client("scontrol", "update", "nodename=node3", "state=drain", f"reason={GRES_REASON}")
    proc = run_nvtest(
        "submit", "--partition", "nvt", "--time", "10", "--suite", "delivery", "-k", "host",
        "--out", str(tmp_path), env=clean.env, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # node1 and node2 (one may be missing where this busy machine's slurmd answered late: it is
    # then listed as excluded too, with its own state)
    assert re.search(r"job \d+: [12] node\(s\)", proc.stdout), proc.stdout
    deadline = time.monotonic() + 300
    while clean.client("squeue", "-h").stdout.strip() and time.monotonic() < deadline:
        time.sleep(0.5)
    runs = [p.parent for p in tmp_path.rglob("results.json")]
    assert len(runs) == 1, (runs, proc.stdout)
    doc = json.loads((runs[0] / "results.json").read_text())
    assert GRES_REASON in str(doc["nodes"]["node3"].get("down_reason")), doc["nodes"].get("node3")
    assert {r["verdict"] for r in doc["results"] if r["node"] == "node3"} == {"error"}
    assert doc["summary"]["verdict"] == "error"
