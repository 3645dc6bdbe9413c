"""SlurmTransport on a real Slurm: munged, slurmctld and two slurmd (node1, node2)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from nvtest.config.inventory import Node
from nvtest.testing.slurm_cluster import SlurmCluster
from nvtest.transports import get_transport
from nvtest.transports.slurm import SlurmTransport, discover_nodes, node_states
from tests.transports.slurm.conftest import run, squeue, wait_for

pytestmark = pytest.mark.slurm

NODES = [Node("node1"), Node("node2")]
WHO = 'echo "$SLURMD_NODENAME $SLURM_JOB_ID.$SLURM_STEP_ID"'


def test_one_srun_runs_on_both_nodes_with_per_node_results(cluster: SlurmCluster) -> None:
    with SlurmTransport(run_id="t-phase", allocate=False) as t:
        res = t.run(
            NODES,
            WHO + '; echo "err $SLURMD_NODENAME" >&2; [ "$SLURMD_NODENAME" = node2 ] && exit 3; true',
            timeout_s=60,
        )
    assert sorted(res) == ["node1", "node2"]
    names = {n: r.stdout.split()[0] for n, r in res.items()}
    assert names == {"node1": "node1", "node2": "node2"}
    steps = {r.stdout.split()[1] for r in res.values()}
    assert len(steps) == 1, f"one step for the whole phase, got {steps}"
    assert res["node1"].exit_code == 0 and res["node2"].exit_code == 3
    assert res["node1"].stderr == "err node1\n"
    assert res["node2"].stderr.startswith("err node2\n")
    assert res["node1"].command == res["node2"].command and res["node1"].command.startswith("srun ")
    assert all(r.error is None and not r.timed_out for r in res.values())


def test_long_lines_and_bytes_come_back_whole(cluster: SlurmCluster) -> None:
    script = (
        "import sys; o = sys.stdout.buffer; o.write(b'{' + b'x' * 5000 + b'}\\n' + b'y' * 1024 + b'\\n');"
        "o.write('\\u00e9'.encode() * 700 + b'\\n'); sys.stderr.write('e' * 2000 + '\\n')"
    )
    with SlurmTransport(run_id="t-long", allocate=False) as t:
        res = t.run(NODES, ["python3", "-c", script], timeout_s=60)
    for r in res.values():
        assert r.exit_code == 0, r
        assert r.stdout == "{" + "x" * 5000 + "}\n" + "y" * 1024 + "\n" + "\u00e9" * 700 + "\n"
        assert r.stderr == "e" * 2000 + "\n"


def test_node_mapping_is_one_step_with_each_nodes_command(cluster: SlurmCluster) -> None:
    with get_transport("slurm", run_id="t-map") as t:
        assert isinstance(t, SlurmTransport)
        res = t.run(
            NODES,
            {"node1": ["sh", "-c", WHO + "; echo server"], "node2": WHO + "; echo client"},
            timeout_s=60,
            env={"NVTEST_X": "it's"},
        )
        job = t.allocation
    assert job is not None
    assert res["node1"].stdout.splitlines()[1] == "server"
    assert res["node2"].stdout.splitlines()[1] == "client"
    assert res["node1"].stdout.split()[1] == res["node2"].stdout.split()[1] == f"{job}.0"


def test_hung_step_times_out_and_is_cancelled(cluster: SlurmCluster) -> None:
    with SlurmTransport(run_id="t-hang") as t:
        t0 = time.monotonic()
        res = t.run(NODES, "echo started; sleep 300", timeout_s=3)
        took = time.monotonic() - t0
        job = t.allocation
        assert job is not None
        for r in res.values():
            assert r.timed_out and r.exit_code is None
            assert r.error is not None and r.error.startswith("timed out after 3 s; step cancelled")
            assert f"scancel {job}.0" in r.error
            assert r.stdout == "started\n"  # what was printed before the limit is kept
        assert took < 25
        wait_for(
            lambda: f"{job}.0" not in squeue(cluster, "-s", "-o", "%i"),
            15,
            "the step to leave squeue -s",
        )
        # the allocation lives on: the next phase runs in it
        again = t.run(NODES, "true", timeout_s=30)
        assert all(r.exit_code == 0 for r in again.values())
    wait_for(
        lambda: not squeue(cluster, "-j", job, "-o", "%i %T").strip(),
        15,
        "the allocation to be released",
    )


def test_drained_node_is_reported_and_left_out(cluster: SlurmCluster) -> None:
    run(cluster, "scontrol", "update", "nodename=node2", "state=drain", "reason=bad DIMM = slot 3")
    states = node_states(["node1", "node2", "nosuch"])
    assert states["node1"].available
    assert "DRAIN" in states["node2"].flags and not states["node2"].available
    assert states["node2"].reason == "bad DIMM = slot 3"
    assert states["nosuch"].state == "NOT_FOUND"
    assert discover_nodes(partition="nvt") == ["node1"]
    assert discover_nodes() == ["node1"]
    assert discover_nodes(nodelist="node[1-2]") == ["node1"]
    assert discover_nodes(partition="nvt", include_unavailable=True) == ["node1", "node2"]


def test_drain_drains_exactly_the_given_node(cluster: SlurmCluster) -> None:
    reason = "nvtest 20260101-000000-abcd: gemm fp32 0.1 TFLOP/s < 5"
    SlurmTransport(allocate=False).drain("node2", reason)
    listed = run(cluster, "sinfo", "-R", "-h", "-o", "%N|%E").stdout.strip().splitlines()
    assert listed == [f"node2|{reason}"]
    assert node_states(["node1"])["node1"].state == "IDLE"
    run(cluster, "scontrol", "update", "nodename=node2", "state=resume")
    assert run(cluster, "sinfo", "-R", "-h").stdout.strip() == ""


def test_allocation_acquired_and_released_at_close(cluster: SlurmCluster) -> None:
    t = SlurmTransport(run_id="t-alloc", partition="nvt", time_limit="10")
    res = t.run(NODES, "true", timeout_s=30)
    assert all(r.exit_code == 0 for r in res.values())
    job = t.allocation
    assert job is not None
    row = squeue(cluster, "-j", job, "-o", "%j %T %N").split()
    assert row == ["nvtest-t-alloc", "RUNNING", "node[1-2]"]
    t.close()
    assert t.allocation is None
    wait_for(
        lambda: not squeue(cluster, "-j", job, "-o", "%i").strip(),
        15,
        "the allocation to leave squeue",
    )


def test_inside_an_allocation_steps_use_it_and_leave_it(cluster: SlurmCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    out = run(cluster, "salloc", "--no-shell", "-N2", "-J", "outer")
    job = out.stderr.split()[-1]
    monkeypatch.setenv("SLURM_JOB_ID", job)
    monkeypatch.setenv("SLURM_JOB_NODELIST", "node[1-2]")
    monkeypatch.setenv("SLURM_NTASKS", "7")  # an enclosing job's layout must not leak into the steps
    assert discover_nodes() == ["node1", "node2"]
    with SlurmTransport(run_id="t-outer") as t:
        res = t.run(NODES, WHO, timeout_s=30)
    assert {r.stdout.split()[1] for r in res.values()} == {f"{job}.0"}
    assert squeue(cluster, "-j", job, "-o", "%T").strip() == "RUNNING"


def test_launch_multi_task_layout_and_mpi(cluster: SlurmCluster) -> None:
    with SlurmTransport(run_id="t-multi", exclusive=True, mpi="pmi2") as t:
        res = t.launch_multi(NODES, 'echo "$SLURM_PROCID $SLURMD_NODENAME ${PMI_RANK-none}"', 2, timeout_s=60)
    assert res.error is None and res.exit_code == 0, res.stderr
    assert res.node == "node[1-2]" and "--mpi=pmi2" in res.command
    rows = sorted(tuple(line.split()) for line in res.stdout.splitlines())
    assert rows == [
        ("0", "node1", "0"),
        ("1", "node1", "1"),
        ("2", "node2", "2"),
        ("3", "node2", "3"),
    ]


def test_srun_failure_is_an_error_result_not_an_exception(cluster: SlurmCluster) -> None:
    with SlurmTransport(partition="nosuch", allocate=False) as t:
        res = t.run(NODES, "true", timeout_s=30)
    for r in res.values():
        assert r.exit_code is None and r.error is not None
        assert "invalid partition" in r.error.lower()
    with SlurmTransport(partition="nosuch") as t:
        res = t.run(NODES, "true", timeout_s=30)
    assert all(r.error and r.error.startswith("allocation failed") for r in res.values())


def test_interrupt_cancels_steps_and_allocation_keeps_results(cluster: SlurmCluster) -> None:
    t = SlurmTransport(run_id="t-int")
    first = t.run(NODES, "echo measured", timeout_s=30)
    job = t.allocation
    assert job is not None
    box: dict[str, object] = {}
    th = threading.Thread(target=lambda: box.setdefault("res", t.run(NODES, "echo begun; sleep 300", timeout_s=120)))
    th.start()
    wait_for(lambda: f"{job}.1" in squeue(cluster, "-s", "-o", "%i"), 20, "the step to start")
    t.interrupt()
    th.join(30)
    assert not th.is_alive()
    res = box["res"]
    assert isinstance(res, dict)
    for r in res.values():
        assert r.error is not None and r.error.startswith("interrupted")
    assert first["node1"].stdout == "measured\n"
    wait_for(
        lambda: not squeue(cluster, "-j", job, "-o", "%i").strip(),
        15,
        "the allocation to leave squeue",
    )
    after = t.run(NODES, "true", timeout_s=30)
    assert all(r.error == "interrupted before start" for r in after.values())
    t.close()


def test_node_address_is_slurms_nodeaddr_unless_the_inventory_gives_one(cluster: SlurmCluster) -> None:
    t = SlurmTransport(run_id="t-addr")
    assert t.node_address(Node("node1")) == "127.0.0.1"  # NodeAddr of the test cluster
    assert t.node_address(Node("node2", address="10.9.8.7")) == "10.9.8.7"
    assert t.node_address(Node("not-a-slurm-node")) == "not-a-slurm-node"
    t.close()


def test_stage_paths(cluster: SlurmCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    probes = tmp_path / "probes"
    probes.mkdir()
    (probes / "p.py").write_text("print(1)\n")
    nodes = [Node("node1", probe_dir="/opt/nvtest/probes"), Node("node2")]
    warnings: list[str] = []
    monkeypatch.delenv("NVTEST_SHARED_DIR", raising=False)
    t = SlurmTransport(run_id="t-stage", log=warnings.append)
    assert t.stage(nodes, probes) == {"node1": "/opt/nvtest/probes", "node2": str(probes)}
    assert len(warnings) == 1 and "NVTEST_SHARED_DIR" in warnings[0]
    shared = tmp_path / "shared"
    monkeypatch.setenv("NVTEST_SHARED_DIR", str(shared))
    staged = t.stage(nodes, probes)
    root = Path(staged["node2"]).parent
    assert root.parent == shared and root.name.startswith("nvtest-t-stage-")
    assert staged["node2"] == str(root / "probes")
    # a second run with the same run id stages apart, and each removes only its own copy
    other = SlurmTransport(run_id="t-stage", log=warnings.append)
    theirs = Path(other.stage(nodes, probes)["node2"]).parent
    assert theirs != root and theirs.name.startswith("nvtest-t-stage-")
    res = t.run([Node("node2")], ["cat", f"{staged['node2']}/p.py"], timeout_s=30)
    assert res["node2"].stdout == "print(1)\n"
    t.close()
    assert not root.exists() and (theirs / "probes" / "p.py").is_file()
    other.close()
    assert not theirs.exists()


def test_submit_runs_the_batch_script(cluster: SlurmCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    workdir = tmp_path / "work dir #1"
    workdir.mkdir()
    monkeypatch.chdir(workdir)
    run_dir = tmp_path / "run"
    t = SlurmTransport(run_id="t-submit", partition="nvt", time_limit="5")
    script = t.write_batch_script(
        run_dir,
        [
            "/bin/sh",
            "-c",
            'srun --overlap -N2 --ntasks-per-node=1 -l printenv SLURMD_NODENAME > "$NVTEST_RUN_DIR/out"; pwd > "$NVTEST_RUN_DIR/pwd"',
        ],
        nodes=["node1", "node2"],
    )
    assert Path(script) == run_dir / "nvtest-submit.sbatch"
    job = t.submit(script)
    assert job.isdigit()
    wait_for(
        lambda: (run_dir / "pwd").exists() and not squeue(cluster, "-j", job, "-o", "%i").strip(),
        30,
        "the batch job",
    )
    assert sorted((run_dir / "out").read_text().splitlines()) == ["0: node1", "1: node2"]
    assert (run_dir / "pwd").read_text().strip() == str(workdir)
    log = (run_dir / f"slurm-{job}.out").read_text()
    assert f"nvtest: job {job} on node[1-2]; report: {run_dir}/report.html" in log


def test_the_cluster_name_is_slurm_s(cluster: SlurmCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    """The history's cluster of a --backend slurm run: ``$SLURM_CLUSTER_NAME``, else
    ``ClusterName`` of ``scontrol show config`` (the test cluster's slurm.conf says nvtest)."""
    monkeypatch.delenv("SLURM_CLUSTER_NAME", raising=False)
    with SlurmTransport(run_id="t-cluster", allocate=False) as t:
        assert t.cluster_name() == "nvtest"
        monkeypatch.setenv("SLURM_CLUSTER_NAME", "from-job")
        assert t.cluster_name() == "from-job"


def test_a_flooding_task_is_capped_per_task(cluster: SlurmCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two tasks each printing 20 MB in lines through one srun: the step's pipes keep at most
    the capture limit per task, and every node's result says what was dropped."""
    monkeypatch.setenv("NVTEST_CAPTURE_BYTES", "1MiB")
    flood = "yes 0123456789012345678901234567890123456789012345678 | head -c 20000000; echo end"
    with SlurmTransport(run_id="t-flood", allocate=False) as t:
        res = t.run(NODES, flood, timeout_s=120)
    for r in res.values():
        assert r.exit_code == 0, r
        assert (
            r.truncated
            and r.truncated.startswith("stdout of ")
            and "exceeded the capture limit of 2 MiB" in r.truncated
        )
        assert len(r.stdout) < 2 * 1024 * 1024 + 200
