"""The requeue drill's controller logic against a scripted Slurm (no daemons): how it follows
the job through squeue, when it releases Slurm's hold, what it reports when the job never
comes back, and how the check judges the figures against the recipe target."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from nvtest.checks.api import Judge
from nvtest.checks.resilience.requeue import (
    DrillSpec,
    RequeueFigures,
    batch_script,
    judge_requeue,
    run_requeue_drill,
    run_requeue_drills,
)
from nvtest.errors import NodeError, TransportError
from nvtest.transports.slurm import SQUEUE_FIELDS, SlurmClient, parse_squeue_fields
from nvtest.verdict import Verdict


def _emit(workdir: Path, ev: str, inc: int, **fields) -> None:
    d = workdir / "events"
    d.mkdir(parents=True, exist_ok=True)
    rec = {"t": time.time(), "ev": ev, "rank": 0, "incarnation": inc, **fields}
    with (d / "rank0.jsonl").open("a") as fh:
        fh.write(json.dumps(rec) + "\n")


class FakeSlurm:
    """sbatch / squeue / scontrol / scancel of one job, scripted.

    ``relaunch``: what a release does: "runs" (the next incarnation trains to the end),
    "revoked" (Slurm refuses the launch: FAILED, nothing runs).  ``finish_early``: the job
    ends COMPLETED before it logs its hold.  ``busy_polls``: so many squeue calls fail first
    (a busy controller).
    """

    def __init__(self, relaunch: str = "runs", finish_early: bool = False, busy_polls: int = 0) -> None:
        self.relaunch = relaunch
        self.finish_early = finish_early
        self.busy_polls = busy_polls
        self.calls: list[tuple[float, list[str]]] = []
        self.state, self.reason, self.restarts = "PENDING", "None", 0
        self.workdir = Path()
        self.t_requeue = 0.0
        self.pending_polls = 0
        self.purged = False

    def _row(self) -> str:
        return f"7|{self.state}|{self.restarts}|2030-01-01T00:00:00|{self.reason}|\n"

    def __call__(self, argv: list[str]) -> str:
        self.calls.append((time.time(), argv))
        cmd = argv[0]
        if cmd == "sbatch":
            self.workdir = Path(argv[-1]).parent
            self.state = "RUNNING"
            _emit(self.workdir, "start", 0)
            for s in range(1, 7):
                _emit(self.workdir, "step", 0, step=s)
            _emit(self.workdir, "ckpt", 0, step=4)
            if self.finish_early:
                self.state, self.reason = "COMPLETED", "None"
            else:
                _emit(self.workdir, "hold", 0, step=6)
            return "7\n"
        if cmd == "squeue":
            if self.busy_polls:
                self.busy_polls -= 1
                raise TransportError("squeue ... exited 1: Socket timed out on send/recv operation")
            if self.purged:
                raise TransportError("squeue ... exited 1: slurm_load_jobs error: Invalid job id specified")
            row = self._row()
            if self.state == "COMPLETING":
                self.state, self.reason = "PENDING", "BeginTime"
            elif self.state in ("COMPLETED", "FAILED"):
                self.purged = True  # MinJobAge passes
            return row
        if argv[:2] == ["scontrol", "requeue"]:
            self.state, self.restarts, self.t_requeue = "COMPLETING", 1, time.time()
            _emit(self.workdir, "sigterm", 0, signal=15)
            return ""
        if argv[:2] == ["scontrol", "update"]:
            if self.relaunch == "revoked":
                self.state, self.reason = "FAILED", "NonZeroExitCode"
                return ""
            self.state, self.reason = "RUNNING", "None"
            _emit(self.workdir, "start", 1)
            _emit(self.workdir, "ready", 1)
            _emit(self.workdir, "resume", 1, step=4)
            for s in range(5, 13):
                _emit(self.workdir, "step", 1, step=s)
            _emit(self.workdir, "done", 1)
            self.state = "COMPLETED"
            return ""
        if cmd == "scancel":
            self.state = "CANCELLED"
            return ""
        raise AssertionError(argv)

    def commands(self, *prefix: str) -> list[tuple[float, list[str]]]:
        return [(t, a) for t, a in self.calls if a[: len(prefix)] == list(prefix)]


def _drill(tmp_path: Path, slurm: FakeSlurm, **kw) -> RequeueFigures:
    return run_requeue_drill(
        "node2",
        "python3",
        "/probes",
        tmp_path / "rq",
        steps=12,
        ckpt_every=4,
        requeue_step=6,
        timeout_s=30,
        poll_s=0.01,
        client=SlurmClient(slurm),
        **kw,
    )


def test_parse_squeue_reads_pipe_separated_rows() -> None:
    text = "7|PENDING|1|2026-11-29T19:16:15|BeginTime|\n8|RUNNING|0|2026-11-29T19:10:00|None|\n"
    rows = parse_squeue_fields(text, SQUEUE_FIELDS)
    assert rows["7"] == {
        "JobID": "7",
        "State": "PENDING",
        "RestartCnt": "1",
        "EligibleTime": "2026-11-29T19:16:15",
        "Reason": "BeginTime",
    }
    assert rows["8"]["State"] == "RUNNING"
    assert parse_squeue_fields("", SQUEUE_FIELDS) == {}


def test_batch_script_holds_the_first_incarnation_and_carries_job_options(tmp_path: Path) -> None:
    text = batch_script(
        "python3",
        "/p",
        "node1",
        tmp_path,
        40,
        5,
        0.2,
        29650,
        hold_at_step=7,
        hold_s=600,
        sbatch_options=["--partition=gpu", "--time=10"],
    )
    assert "--hold-at-step 7 --hold-s 600" in text
    assert "#SBATCH --partition=gpu\n#SBATCH --time=10\n" in text
    assert "#SBATCH --requeue" in text and "#SBATCH --nodelist=node1" in text


def test_release_waits_past_the_revocation_second_and_the_job_is_followed_to_its_end(
    tmp_path: Path,
) -> None:
    slurm = FakeSlurm()
    fig = _drill(tmp_path, slurm, release_hold=True)
    (t_update, _), *_ = slurm.commands("scontrol", "update")
    assert t_update >= int(slurm.t_requeue) + 2 - 1e-6  # never in the requeue's second (nor the next)
    assert fig.completed and fig.resumed_from_step == 4 and fig.steps_lost == 2
    assert 0 < fig.running_again_s <= fig.resumed_s <= fig.training_s
    assert fig.restarts == 1 and fig.hold_released_s is not None and fig.hold_released_s >= 1.0
    assert fig.final_state.startswith("COMPLETED")
    assert [s["state"] for s in fig.states][:3] == ["RUNNING", "COMPLETING", "PENDING"]
    assert not slurm.commands("scancel")


def test_a_relaunch_refused_by_slurm_is_reported_not_raised(tmp_path: Path) -> None:
    slurm = FakeSlurm(relaunch="revoked")
    fig = _drill(tmp_path, slurm, release_hold=True)
    assert not fig.completed and fig.running_again_s is None and fig.resumed_from_step is None
    assert fig.final_state.startswith("FAILED (reason NonZeroExitCode, restarts 1)"), fig.final_state


def test_without_release_the_hold_is_left_to_slurm(tmp_path: Path) -> None:
    slurm = FakeSlurm()
    spec = DrillSpec("node1", "python3", "/p", tmp_path / "a", steps=12, ckpt_every=4, requeue_step=6)
    fig = run_requeue_drills([spec], timeout_s=1.0, poll_s=0.01, client=SlurmClient(slurm))["node1"]
    assert isinstance(fig, RequeueFigures) and not fig.completed and fig.running_again_s is None
    assert fig.final_state.startswith("still PENDING (reason BeginTime"), fig.final_state
    assert not slurm.commands("scontrol", "update")
    assert slurm.commands("scancel"), "a job still pending at the deadline is cancelled"


def test_a_job_that_ends_before_its_hold_is_an_error_naming_its_state(tmp_path: Path) -> None:
    with pytest.raises(NodeError, match=r"ended before step 6: COMPLETED"):
        _drill(tmp_path, FakeSlurm(finish_early=True))


def _fig(training_s: float | None) -> RequeueFigures:
    return RequeueFigures(
        job_id="7",
        node="n1",
        requeue_step=6,
        running_again_s=1.0,
        resumed_s=2.0,
        training_s=training_s,
        resumed_from_step=4,
        steps_lost=2,
        completed=True,
        final_state="COMPLETED",
    )


def test_training_again_past_the_recipe_target_warns() -> None:
    judge = Judge(None, "requeue", "n1", None)
    judge_requeue(judge, _fig(150.0), 120.0, hold_released=False)
    assert judge.verdict == Verdict.WARN
    assert judge.details["training_again_s_target"]["within"] is False
    assert "past the target of 120 s" in judge.summary()


def test_without_a_target_the_figure_is_kept_and_not_judged() -> None:
    judge = Judge(None, "requeue", "n1", None)
    judge_requeue(judge, _fig(150.0), None, hold_released=True)
    assert judge.verdict == Verdict.PASS
    tgt = judge.details["training_again_s_target"]
    assert tgt["target_s"] is None and tgt["within"] is None and "none by default" in tgt["source"]
    assert judge.details["requeue"]["release_hold"] is True


def test_a_busy_controller_costs_polls_not_the_drill(tmp_path: Path) -> None:
    fig = _drill(tmp_path, FakeSlurm(busy_polls=3), release_hold=True)
    assert fig.completed and fig.steps_lost == 2


def test_side_jobs_carry_the_runs_placement_but_never_exclusive(monkeypatch) -> None:
    from nvtest.transports.slurm import SlurmTransport

    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    t = SlurmTransport(
        partition="gpu",
        account="acct",
        reservation="r",
        qos="q",
        exclusive=True,
        gpus_per_node=8,
        time_limit="2:00:00",
    )
    assert t.side_job_options(601) == [
        "--partition=gpu",
        "--time=11",
        "--account=acct",
        "--reservation=r",
        "--qos=q",
    ]
    assert t.side_job_options() == [
        "--partition=gpu",
        "--account=acct",
        "--reservation=r",
        "--qos=q",
    ]
    assert t.holds_nodes_exclusively
    assert not SlurmTransport(exclusive=True, allocate=False).holds_nodes_exclusively
    assert not SlurmTransport().holds_nodes_exclusively
    monkeypatch.setenv("SLURM_JOB_ID", "42")
    assert SlurmTransport(exclusive=True, allocate=False).holds_nodes_exclusively
