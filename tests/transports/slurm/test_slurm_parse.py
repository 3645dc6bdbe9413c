"""The pure readers of Slurm 22.05 client output (no cluster needed)."""

from __future__ import annotations

import pytest

from nvtest.transports._slurm_parse import (
    SlurmNodeState,
    SrunLog,
    parse_job_id,
    parse_node_records,
    parse_sbatch_job_id,
    parse_task_ids,
    split_labelled,
    states_from_records,
)

# ``scontrol show node -o`` of Slurm 22.05.8: OS= holds spaces, Reason= holds '=' and ends the line
SCONTROL = (
    "NodeName=node1 Arch=x86_64 CoresPerSocket=1  CPUAlloc=0 CPUEfctv=4 CPUTot=4 CPULoad=0.28 "
    "AvailableFeatures=(null) ActiveFeatures=(null) Gres=(null) NodeAddr=127.0.0.1 NodeHostName=localhost "
    "Port=16821 Version=22.05.8 OS=Linux 6.18.44-fc-v782 #1 SMP PREEMPT_DYNAMIC @0  RealMemory=1000 "
    "State=IDLE ThreadsPerCore=1 Partitions=nvt  CfgTRES=cpu=4,mem=1000M,billing=4 AllocTRES= "
    "CapWatts=n/a ExtSensorsTemp=n/s\n"
    "NodeName=gpu017 Arch=x86_64 AvailableFeatures=h100,ib ActiveFeatures=h100,ib Gres=gpu:h100:8(S:0-1) "
    "OS=Linux 5.15.0 #1 SMP State=IDLE+DRAIN ThreadsPerCore=2 Partitions=gpu "
    "Reason=nvtest r1: gemm low=3 TFLOP/s [root@2026-11-29T15:56:45]\n"
    "NodeName=gpu018 State=DOWN*+NOT_RESPONDING Reason=Not responding [slurm@2026-11-29T10:00:00]\n"
    "NodeName=gpu019 State=MIXED Reason=no user stamp here\n"
)


def test_scontrol_records_keep_spaces_and_reason() -> None:
    recs = parse_node_records(SCONTROL)
    assert [r["NodeName"] for r in recs] == ["node1", "gpu017", "gpu018", "gpu019"]
    assert recs[0]["OS"] == "Linux 6.18.44-fc-v782 #1 SMP PREEMPT_DYNAMIC @0"
    assert recs[0]["CfgTRES"] == "cpu=4,mem=1000M,billing=4"
    assert recs[0]["AllocTRES"] == ""
    assert recs[1]["Reason"] == "nvtest r1: gemm low=3 TFLOP/s"
    assert recs[1]["ReasonUser"] == "root"
    assert recs[3]["Reason"] == "no user stamp here"


def test_states_and_availability() -> None:
    states = states_from_records(parse_node_records(SCONTROL))
    assert states["node1"] == SlurmNodeState("IDLE", "", (), "", address="127.0.0.1")
    assert states["node1"].available
    assert states["gpu017"] == SlurmNodeState(
        "IDLE+DRAIN", "nvtest r1: gemm low=3 TFLOP/s", ("h100", "ib"), "gpu:h100:8(S:0-1)"
    )
    assert not states["gpu017"].available
    assert not states["gpu018"].available and "DOWN" in states["gpu018"].flags
    assert states["gpu019"].available


@pytest.mark.parametrize(
    ("state", "available"),
    [
        ("IDLE", True),
        ("MIXED", True),
        ("ALLOCATED", True),
        ("IDLE*", False),
        ("DRAINING", False),
        ("ALLOCATED+DRAIN", False),
        ("FAIL", False),
        ("IDLE+POWERED_DOWN", False),
        ("NOT_FOUND", False),
    ],
)
def test_availability_flags(state: str, available: bool) -> None:
    assert SlurmNodeState(state).available is available


# srun --verbose --label of Slurm 22.05.8: node2's task exits 3, node1's completes
SRUN_ERR = """\
srun: defined options
srun: -------------------- --------------------
srun: label               : set
srun: end of defined options
srun: jobid 5: nodes(2):`node[1-2]', cpu counts: 1(x2)
srun: launch/slurm: launch_p_step_launch: CpuBindType=(null type)
srun: launching StepId=5.0 on host node1, 1 tasks: 0
srun: launching StepId=5.0 on host node2, 1 tasks: 1
srun: launch/slurm: _task_start: Node node1, 1 tasks started
srun: launch/slurm: _task_finish: Received task exit notification for 1 task of StepId=5.0 (status=0x0300).
srun: error: node2: task 1: Exited with exit code 3
srun: launch/slurm: _task_finish: Received task exit notification for 1 task of StepId=5.0 (status=0x0000).
srun: launch/slurm: _task_finish: node1: task 0: Completed
"""


def _log(text: str) -> SrunLog:
    log = SrunLog()
    for line in text.splitlines():
        log.feed(line)
    return log


def test_srun_log_reads_step_tasks_and_statuses() -> None:
    log = _log(SRUN_ERR)
    assert (log.job_id, log.step_id) == ("5", "0")
    assert log.node_tasks() == {"node1": [0], "node2": [1]}
    assert {t: s.exit_code for t, s in log.status.items()} == {0: 0, 1: 3}
    assert log.status[1].message == "node2: task 1: Exited with exit code 3"
    assert log.messages == []


def test_srun_log_several_tasks_signals_and_errors() -> None:
    log = _log(
        "srun: job 9 queued and waiting for resources\n"
        "srun: launching StepId=9.2 on host node1, 2 tasks: [0-1]\n"
        "srun: launching StepId=9.2 on host node2, 2 tasks: [2-3]\n"
        "srun: error: node2: task 2: Killed\n"
        "srun: error: node1: tasks 0-1: Exited with exit code 4\n"
        "srun: launch/slurm: _task_finish: node2: task 3: Completed\n"
        "srun: error: node2: task 3: Segmentation fault (core dumped)\n"
        "srun: Force Terminated StepId=9.2\n"
    )
    assert (log.job_id, log.step_id) == ("9", "2")
    assert log.node_tasks() == {"node1": [0, 1], "node2": [2, 3]}
    assert {t: s.exit_code for t, s in log.status.items()} == {0: 4, 1: 4, 2: 137, 3: 139}
    assert log.messages == ["srun: Force Terminated StepId=9.2"]


def test_srun_log_failure_before_launch() -> None:
    log = _log(
        "srun: error: invalid partition specified: nope\n"
        "srun: error: Unable to allocate resources: Invalid partition name specified\n"
    )
    assert log.job_id is None and not log.task_node
    assert len(log.messages) == 2


def test_srun_log_keeps_its_option_errors() -> None:
    # srun 22.05 without pyxis: getopt's words, then srun's hint
    log = _log(
        "srun: unrecognized option '--container-image=nvcr.io#nvidia/pytorch:24.05-py3'\n"
        'Try "srun --help" for more information\n'
    )
    assert log.messages == ["srun: unrecognized option '--container-image=nvcr.io#nvidia/pytorch:24.05-py3'"]


def test_split_labelled() -> None:
    tasks, rest = split_labelled(b" 0: a\n10: b\n 0: \n 0:\nplain\n 1: x: y\n")
    assert tasks == {0: "a\n\n\n", 10: "b\n", 1: "x: y\n"}
    assert rest == "plain\n"


def test_split_labelled_joins_long_lines_split_by_srun() -> None:
    # srun 22.05 --label, a 3000-byte line then a 1024-byte line: pieces of 1024 bytes
    x, y = b"x" * 3000, "é".encode() * 512
    data = b"0: short\n" + b"".join(b"0: " + x[i : i + 1024] + b"\n" for i in range(0, 3000, 1024))
    data += b"1: " + y + b"\n1: \n0: tail\n"
    tasks, _ = split_labelled(data)
    assert tasks[0] == "short\n" + "x" * 3000 + "\ntail\n"
    assert tasks[1] == "é" * 512 + "\n"


def test_task_ids_and_job_ids() -> None:
    assert parse_task_ids("0") == [0]
    assert parse_task_ids("[0-1]") == [0, 1]
    assert parse_task_ids("[2,4-5]") == [2, 4, 5]
    assert parse_job_id("salloc: Granted job allocation 7\n") == "7"
    assert parse_job_id("salloc: Pending job allocation 8\nsalloc: job 8 queued") == "8"
    assert parse_job_id("salloc: error: nope") is None
    assert parse_sbatch_job_id("123\n") == "123"
    assert parse_sbatch_job_id("124;cluster\n") == "124"
    with pytest.raises(ValueError):
        parse_sbatch_job_id("sbatch: error: Batch job submission failed\n")
