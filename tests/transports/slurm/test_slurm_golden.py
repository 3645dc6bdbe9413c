"""Every Slurm command line and batch script nvtest generates, against golden files.

Each case renders argv lists with :func:`shlex.join` (one command per line) or a
script's text into ``tests/slurm/golden/<case>.txt``. Regenerate deliberately
with ``NVTEST_REGEN_GOLDEN=1`` and review the diff before committing.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from nvtest.transports import _slurm_cmd as cmd
from nvtest.transports._deadline import kill_task_script
from nvtest.transports.base import render_command
from nvtest.transports.options import SlurmOptions
from tests.golden import assert_golden, lines, stale_goldens

GOLDEN = Path(__file__).resolve().parent / "golden"

FULL = SlurmOptions(
    partition="gpu",
    time_limit="2:00:00",
    account="acct-42",
    reservation="rack07 acceptance",
    qos="high",
    exclusive=True,
    gpus_per_node=8,
    mpi="pmix",
)
NODES = ["gpu001", "gpu002", "gpu003", "gpu010"]
PROBE = render_command(
    ["python3", "/shared/nvtest/probes/gemm_probe.py", "--dtypes", "fp16,bf16"],
    {"OMP_NUM_THREADS": "8"},
)
NAME = cmd.job_name("20260101-120000-abcd")


_lines = lines


CASES: dict[str, Callable[[], str]] = {
    "srun_phase_in_allocation": lambda: _lines(
        cmd.srun_phase_argv(NODES, PROBE, timeout_s=90, name=NAME, opts=FULL, job_id="4242")
    ),
    "srun_phase_own_job": lambda: _lines(
        cmd.srun_phase_argv(NODES, PROBE, timeout_s=60, name=NAME, opts=FULL),
        cmd.srun_phase_argv(["node1"], "true", timeout_s=0.5, name=NAME),
    ),
    "srun_phase_node_mapping": lambda: _lines(
        cmd.srun_phase_argv(
            ["gpu001", "gpu002"],
            cmd.node_dispatch_command(
                {
                    "gpu001": render_command(["ib_write_bw", "-d", "mlx5_0", "--report_gbits"]),
                    "gpu002": render_command(["ib_write_bw", "-d", "mlx5_0", "--report_gbits", "gpu001"]),
                }
            ),
            timeout_s=120,
            name=NAME,
            job_id="4242",
        )
    ),
    "srun_multi": lambda: _lines(
        cmd.srun_multi_argv(
            NODES,
            render_command(
                [
                    "/opt/nccl-tests/build/all_reduce_perf",
                    "-b",
                    "8",
                    "-e",
                    "8G",
                    "-f",
                    "2",
                    "-g",
                    "1",
                ]
            ),
            ntasks_per_node=8,
            gpus_per_task=1,
            timeout_s=600,
            name=NAME,
            opts=FULL,
            job_id="4242",
        ),
        cmd.srun_multi_argv(["node1", "node2"], "hostname", ntasks_per_node=2, timeout_s=30, name=NAME),
    ),
    # a phase's shell as srun gets it (the task token first), and the kill step a deadline
    # runs before scancel
    "srun_phase_task_token_and_kill_step": lambda: _lines(
        cmd.srun_phase_argv(
            ["node1", "node2"],
            cmd.task_shell(PROBE, "0123456789abcdef"),
            timeout_s=90,
            name=NAME,
            job_id="4242",
        ),
        cmd.srun_phase_argv(
            ["node1", "node2"],
            kill_task_script(None, "0123456789abcdef", 3.0, same_env="SLURMD_NODENAME"),
            timeout_s=36,
            name=NAME,
            job_id="4242",
        ),
    ),
    "srun_multi_container": lambda: _lines(
        cmd.srun_multi_argv(
            ["gpu001", "gpu002"],
            "true",
            ntasks_per_node=8,
            timeout_s=60,
            name=NAME,
            opts=SlurmOptions(
                container_image="nvcr.io#nvidia/pytorch:24.05-py3",
                container_mounts="/shared/nvtest:/shared/nvtest",
                image_id="pytorch-24.05-nvtest",
            ),
            job_id="4242",
        )
    ),
    "salloc": lambda: _lines(
        cmd.salloc_argv(FULL, NODES, name=NAME),
        cmd.salloc_argv(SlurmOptions(), ["node1", "node2"], name=NAME),
    ),
    "scancel_drain_sbatch": lambda: _lines(
        cmd.scancel_argv("4242", "3"),
        cmd.scancel_argv("4242"),
        cmd.drain_argv("gpu002", "nvtest 20260101-120000-abcd: gemm fp16 41.2 TFLOP/s < 600 (h100-sxm-80gb)"),
        cmd.sbatch_argv("/runs/20260101-120000-abcd/nvtest-submit.sbatch"),
    ),
    "batch_script_nodes": lambda: cmd.batch_script(
        FULL,
        nodes=NODES,
        node_count=None,
        name=NAME,
        run_dir="/runs/20260101-120000-abcd",
        workdir="/home/field/rack07",
        nvtest_argv=[
            "nvtest",
            "run",
            "--backend",
            "slurm",
            "--suite",
            "delivery",
            "--out",
            "/runs",
        ],
        env={"NVTEST_SHARED_DIR": "/shared/nvtest tmp"},
    ),
    "batch_script_count": lambda: cmd.batch_script(
        SlurmOptions(partition="debug"),
        nodes=None,
        node_count=2,
        name=NAME,
        run_dir="/runs/x",
        workdir="/tmp",
        nvtest_argv=["/usr/bin/python3", "-m", "nvtest.cli", "run", "--backend", "slurm"],
    ),
    "requeue_batch_script": lambda: cmd.requeue_batch_script(
        name="nvtest-requeue-node2",
        node="node2",
        output="/runs/x/requeue/node2/slurm-%j.out",
        argv=["python3", "/probes/resilience_train.py", "train", "--ckpt-dir", "/runs/x/a b"],
        env={"RANK": "0", "WORLD_SIZE": "1", "MASTER_PORT": "29650"},
        options=["--partition=gpu", "--time=10"],
    ),
    "gate_node_calls": lambda: _lines(
        cmd.show_node_argv("gpu002"),
        cmd.drain_argv("gpu002", "nvtest: gpus lspci lists 8 NVIDIA GPUs but nvidia-smi sees 7: GPU lost"),
        cmd.resume_argv("gpu002"),
    ),
    "sweep_batch_script": lambda: cmd.sweep_batch_script(
        name="nvtest-sweep-20260101-120000-abcd",
        node="gpu017",
        output="/shared/sweeps/20260101-120000-abcd/gpu017/slurm-%j.out",
        argv=["/opt/nvtest/bin/python", "-m", "nvtest.cli", "run", "--backend", "local", "--suite", "quick"],
        env={"NVTEST_RUN_DIR": "/shared/sweeps/20260101-120000-abcd/gpu017", "NVTEST_HISTORY": "off"},
        options=["--nice=10000", "--qos=scavenger", "--partition=gpu", "--time=30", "--comment=nvtest sweep"],
    ),
    "batch_job_calls": lambda: _lines(
        cmd.squeue_jobs_argv(["7", "8"], ("JobID", "State", "RestartCnt", "EligibleTime", "Reason")),
        cmd.requeue_argv("7"),
        cmd.release_hold_argv("7"),
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_matches_golden(case: str) -> None:
    assert_golden(GOLDEN, case, CASES[case]())


def test_no_stale_golden_files() -> None:
    assert not stale_goldens(GOLDEN, CASES)


def test_step_minutes_round_up() -> None:
    assert [cmd.step_minutes(s) for s in (0.1, 59, 60, 60.5, 3600)] == [1, 1, 1, 2, 60]


def test_batch_script_needs_nodes() -> None:
    with pytest.raises(ValueError):
        cmd.batch_script(
            SlurmOptions(),
            nodes=None,
            node_count=None,
            name="x",
            run_dir="/r",
            workdir="/",
            nvtest_argv=["true"],
        )


def test_node_dispatch_runs_each_nodes_command(tmp_path: Path) -> None:
    import subprocess

    script = cmd.node_dispatch_command({"a": "echo A; exit 3", "b'x": render_command(["echo", "it's b"])})
    for node, out, rc in (("a", "A\n", 3), ("b'x", "it's b\n", 0), ("c", "", 127)):
        got = subprocess.run(["/bin/sh", "-c", script], capture_output=True, text=True, env={"SLURMD_NODENAME": node})
        assert (got.stdout, got.returncode) == (out, rc)
