"""End to end: ``nvtest run --backend slurm`` and ``nvtest submit`` on a real Slurm
of two ``slurmd`` nodes (node1, node2, partition ``nvt``) started on this machine.

node2 is declared an 8-GPU H100 node in the inventory, so its ``gpus`` check
fails here (no GPU): ``--drain-failed`` must drain node2 and only node2.
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

#: Checks whose verdict does not depend on how busy this machine is.
CHECKS = "host or gpus or ib_ports"


@pytest.fixture(scope="module")
def cluster() -> Iterator[SlurmCluster]:
    with started_slurm_cluster() as sim:
        yield sim


@pytest.fixture
def clean(cluster: SlurmCluster) -> Iterator[SlurmCluster]:
    yield cluster
    cluster.client("scancel", "--user=root")
    cluster.client("scontrol", "update", "nodename=node[1-2]", "state=resume")


def _inventory(tmp_path: Path, node2_sku: str | None) -> Path:
    inv = tmp_path / "inventory.yaml"
    text = f"cluster: sim\ndefaults: {{python: {sys.executable}}}\nnodes:\n  - names: node[1-2]\n"
    if node2_sku:
        text += f"  - names: node2\n    sku: {node2_sku}\n"
    inv.write_text(text)
    return inv


def _run(cluster: SlurmCluster, out: Path, *extra: str) -> tuple[int, str, dict]:
    proc = run_nvtest(
        "run",
        "--backend",
        "slurm",
        "--partition",
        "nvt",
        "--time",
        "10",
        "--suite",
        "delivery",
        "-k",
        CHECKS,
        "--out",
        str(out),
        "--progress",
        "plain",
        *extra,
        env=cluster.env,
        timeout=600,
    )
    doc = json.loads(((out / "latest").resolve() / "results.json").read_text())
    return proc.returncode, proc.stdout + proc.stderr, doc


def _queue_empty(cluster: SlurmCluster, timeout_s: float = 20) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not cluster.client("squeue", "-h").stdout.strip():
            return True
        time.sleep(0.2)
    return False


def test_delivery_on_two_slurm_nodes_passes(clean: SlurmCluster, tmp_path: Path) -> None:
    code, output, doc = _run(clean, tmp_path, "--inventory", str(_inventory(tmp_path, None)))
    assert code == 0, output
    assert doc["run"]["backend"] == "slurm"
    assert sorted(doc["nodes"]) == ["node1", "node2"]
    host = {r["node"]: r["verdict"] for r in doc["results"] if r["check"] == "host"}
    assert host == {"node1": "pass", "node2": "pass"}
    assert _queue_empty(clean), "the run's allocation was not released"
    assert clean.client("sinfo", "-R", "-h").stdout.strip() == ""


def test_drain_failed_drains_only_the_failed_node(clean: SlurmCluster, tmp_path: Path) -> None:
    inv = _inventory(tmp_path, "h100-sxm-80gb")
    code, output, doc = _run(clean, tmp_path, "--inventory", str(inv), "--drain-failed")
    assert code == 1, output
    verdicts = {(r["check"], r["node"]): r["verdict"] for r in doc["results"]}
    assert verdicts[("gpus", "node2")] == "fail"
    assert "fail" not in {v for (_, n), v in verdicts.items() if n == "node1"}
    drained = clean.client("sinfo", "-R", "-h", "-o", "%N|%E").stdout.strip().splitlines()
    assert len(drained) == 1 and drained[0].startswith(f"node2|nvtest {doc['run']['run_id']}: gpus "), drained
    assert _queue_empty(clean)


def test_submit_runs_the_suite_in_its_own_allocation(clean: SlurmCluster, tmp_path: Path) -> None:
    inv = _inventory(tmp_path, None)
    proc = run_nvtest(
        "submit",
        "--partition",
        "nvt",
        "--time",
        "10",
        "--suite",
        "delivery",
        "--inventory",
        str(inv),
        "-k",
        CHECKS,
        "--out",
        str(tmp_path),
        env=clean.env,
        timeout=120,
    )
    if "No such command" in proc.stderr:
        pytest.skip("nvtest submit is not in this CLI yet")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    m = re.search(r"job (\d+)", proc.stdout)
    assert m, proc.stdout
    assert _queue_empty(clean, 300), f"batch job {m.group(1)} did not finish"
    runs = [p.parent for p in tmp_path.rglob("results.json")]
    assert len(runs) == 1, runs
    run_dir = runs[0]
    assert (run_dir / "nvtest-submit.sbatch").exists() and (run_dir / "report.html").exists()
    doc = json.loads((run_dir / "results.json").read_text())
    assert doc["run"]["backend"] == "slurm" and sorted(doc["nodes"]) == ["node1", "node2"]
    assert doc["summary"]["verdict"] == "pass"


#: The words slurmctld drains a node with when it reports fewer GPUs than gres.conf says.
GRES_REASON = "gres/gpu count reported lower than configured (0 < 8)"


def test_submit_lists_the_node_slurm_drained_with_its_reason(clean: SlurmCluster, tmp_path: Path) -> None:
    """``nvtest submit --partition`` (issue 24, class 5): a node Slurm drained before the
    submission is in the batch job's results.json with Slurm's reason, its items ``error``,
    and the run is not a pass (``nvtest run --partition`` itself: the field case
    ``slurm-drained-node-dropped-silently``)."""
    clean.client("scontrol", "update", "nodename=node2", "state=drain", f"reason={GRES_REASON}")
    proc = run_nvtest(
        "submit",
        "--partition",
        "nvt",
        "--time",
        "10",
        "--suite",
        "delivery",
        "-k",
        "host",
        "--out",
        str(tmp_path),
        env=clean.env,
        timeout=120,
    )
    assert proc.returncode == 0 and re.search(r"job \d+: 1 node\(s\)", proc.stdout), proc.stdout + proc.stderr
    assert _queue_empty(clean, 300)
    runs = [p.parent for p in tmp_path.rglob("results.json")]
    assert len(runs) == 1, (runs, proc.stdout)
    doc = json.loads((runs[0] / "results.json").read_text())
    assert GRES_REASON in str(doc["nodes"]["node2"].get("down_reason")), doc["nodes"].get("node2")
    assert {r["verdict"] for r in doc["results"] if r["node"] == "node2"} == {"error"}
    assert doc["summary"]["verdict"] == "error"
