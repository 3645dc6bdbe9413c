"""The MPI probe for real (mpirun -np 2 on this machine), and the pure parts of the MPI job:
the MPMD command line, rank -> node resolution, and naming the node whose ranks did not start
from Open MPI's and ssh's own messages (recorded from Open MPI 4.1.4, OpenSSH 9.2)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from nvtest.config.inventory import Node
from nvtest.jobs.launch import MpiOptions
from nvtest.jobs.mpi import (
    blame_from_output,
    mpmd_argv,
    resolve_rank_nodes,
    slurm_mpirun_env,
)
from tests.jobs.conftest import PROBES

PY = sys.executable
NODES = [Node("sim01", address="127.0.0.2"), Node("sim02", address="127.0.0.3")]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("mpirun") is None, reason="mpirun not installed (openmpi-bin)")
def test_probe_under_mpirun_two_ranks() -> None:
    pytest.importorskip("mpi4py")
    argv = [
        "mpirun",
        "--allow-run-as-root",
        "--oversubscribe",
        "-np",
        "2",
        "--bind-to",
        "none",
        PY,
        str(PROBES / "mpi_probe.py"),
        "--sizes",
        "8000,262144",
        "--iters",
        "2",
        "--barriers",
        "20",
    ]
    env = {**os.environ, "OMPI_MCA_mpi_yield_when_idle": "1"}
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=240, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = [x for x in proc.stdout.splitlines() if x.strip()]
    assert len(lines) == 1, proc.stdout  # rank 0 alone prints on stdout
    doc = json.loads(lines[0])
    assert doc["probe"] == "mpi" and doc["status"] == "ok", doc
    assert doc["world_size"] == 2 and doc["mpi_library"].startswith("Open MPI")
    assert [r["rank"] for r in doc["ranks"]] == [0, 1]
    assert {r["host"] for r in doc["ranks"]} == {doc["host"]}
    assert doc["ranks"][0]["pid"] != doc["ranks"][1]["pid"]
    b = doc["barrier"]
    assert b["n"] == 20 and 0 < b["min_us"] <= b["median_us"] <= b["max_us"]
    assert [r["size_bytes"] for r in doc["results"]] == [8000, 262144]
    for r in doc["results"]:
        assert r["wrong"] == 0 and r["count"] == r["size_bytes"] // 8 and r["iters"] == 2
        assert r["algbw_gbps"] == pytest.approx(r["size_bytes"] / r["time_s"] / 1e9)
        assert r["busbw_gbps"] == pytest.approx(r["algbw_gbps"])  # 2 (n-1)/n = 1 for n = 2
    # the other rank's document went to stderr
    assert '"probe": "mpi"' in proc.stderr


def test_probe_without_mpi4py_skips() -> None:
    env = {**os.environ, "NVTEST_PROBE_DISABLE": "mpi4py"}
    proc = subprocess.run([PY, str(PROBES / "mpi_probe.py")], capture_output=True, text=True, timeout=60, env=env)
    doc = json.loads(proc.stdout)
    assert proc.returncode == 0
    assert doc["status"] == "skip" and "mpi4py" in doc["reason"]


def test_busbw_factor() -> None:
    sys.path.insert(0, str(PROBES))
    try:
        import mpi_probe
    finally:
        sys.path.remove(str(PROBES))
    assert [mpi_probe.busbw_factor(n) for n in (1, 2, 4, 8)] == [0.0, 1.0, 1.5, 1.75]


def test_mpmd_command_line() -> None:
    opts = MpiOptions(rsh_agent="ssh -F /c", tcp_if_include="lo")
    argv = mpmd_argv(
        [
            ("sim01", 2, [PY, "/p/mpi_probe.py", "--iters", "3"]),
            ("sim02", 2, ["/py2", "/q/mpi_probe.py"]),
        ],
        export=["A"],
        opts=opts,
    )
    assert argv == [
        "mpirun",
        "--allow-run-as-root",
        "--map-by",
        "slot",
        "--bind-to",
        "none",
        "--mca",
        "btl_tcp_if_include",
        "lo",
        "--mca",
        "oob_tcp_if_include",
        "lo",
        "--mca",
        "plm_rsh_agent",
        "ssh -F /c",
        "-x",
        "A",
        "-np",
        "2",
        "--host",
        "sim01:2",
        PY,
        "/p/mpi_probe.py",
        "--iters",
        "3",
        ":",
        "-np",
        "2",
        "--host",
        "sim02:2",
        "/py2",
        "/q/mpi_probe.py",
    ]


def test_slurm_env_prefix() -> None:
    text = slurm_mpirun_env(["node1", "node2"], 2)
    assert "SLURM_JOB_NODELIST='node[1-2]'" in text and "SLURM_TASKS_PER_NODE='2(x2)'" in text
    assert "SLURM_NNODES=2" in text and "unset SLURM_NTASKS" in text and text.endswith("exec ")


def test_rank_nodes_from_slurm_host_or_ssh_address() -> None:
    ranks = [
        {"rank": 0, "host": "vm", "ssh_server": "127.0.0.2"},
        {"rank": 1, "host": "vm", "ssh_server": "127.0.0.3"},
        {"rank": 2, "host": "sim02.cluster.local"},
        {"rank": 3, "host": "vm", "slurm_node": "sim01", "ssh_server": "127.0.0.3"},
        {"rank": 4, "host": "elsewhere"},
    ]
    assert resolve_rank_nodes(ranks, NODES) == {
        0: "sim01",
        1: "sim02",
        2: "sim02",
        3: "sim01",
        4: None,
    }
    assert resolve_rank_nodes([{"rank": 0, "host": "vm"}], NODES[:1]) == {0: "sim01"}


EXEC_FAILED = """[vm:10068] PMIX ERROR: ERROR in file gds_ds12_lock_pthread.c at line 169
--------------------------------------------------------------------------
mpirun was unable to launch the specified application as it could not access
or execute an executable:

Executable: /nonexistent/python3
Node: sim02

while attempting to start process rank 1.
--------------------------------------------------------------------------
"""

SSH_REFUSED = """ssh: connect to host 127.0.0.3 port 1: Connection refused
--------------------------------------------------------------------------
ORTE was unable to reliably start one or more daemons.
--------------------------------------------------------------------------
ORTE does not know how to route a message to the specified daemon
located on the indicated node:

  my node:   vm
  target node:  sim01
--------------------------------------------------------------------------
"""

RANK_EXITED = """--------------------------------------------------------------------------
mpirun detected that one or more processes exited with non-zero status, thus causing
the job to be terminated. The first process to do so was:

  Process name: [[25641,1],1]
  Exit code:    127
--------------------------------------------------------------------------
"""


@pytest.mark.parametrize(
    ("text", "named"),
    [
        (EXEC_FAILED, "Node: sim02"),
        (SSH_REFUSED, "127.0.0.3 port 1"),
        (RANK_EXITED, "[[25641,1],1]"),
    ],
)
def test_launcher_output_names_the_node(text: str, named: str) -> None:
    blamed = blame_from_output(text, NODES, {0: "sim01", 1: "sim02"})
    assert list(blamed) == ["sim02"], blamed  # never sim01 ("target node: sim01" is noise)
    assert named in blamed["sim02"]


def test_srun_task_lines_name_nodes_only_for_an_srun_job() -> None:
    text = "srun: error: sim02: task 1: Exited with exit code 127\nsrun: error: sim01: task 0: Killed\n"
    assert blame_from_output(text, NODES, {}) == {}
    assert list(blame_from_output(text, NODES, {}, srun=True)) == ["sim02"]
