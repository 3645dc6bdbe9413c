"""The shared judging of training smoke results."""

from __future__ import annotations

from nvtest.checks.api import Judge
from nvtest.checks.workload.training import final_loss_ratio, judge_training_result
from nvtest.verdict import Verdict


def _result(**over):
    r = {
        "losses": [4.0, 4.0, 4.0, 4.0, 4.0, 1.0, 1.0, 1.0, 1.0, 1.0],
        "first_loss": 4.0,
        "last_loss": 1.0,
        "loss_fell": True,
        "any_nan": False,
        "step_time_median_s": 0.2,
        "tokens_per_s": 5000.0,
        "world_size": 2,
        "ranks": [{"rank": 0, "host": "n1"}, {"rank": 1, "host": "n2"}],
    }
    r.update(over)
    return r


def test_ratio():
    assert final_loss_ratio([4, 4, 4, 4, 4, 1, 1, 1, 1, 1]) == 0.25
    assert final_loss_ratio([]) is None


def test_healthy_run_passes_and_keeps_rank_map():
    j = Judge(None, "train_smoke", "n1", None)
    judge_training_result(j, _result())
    assert j.verdict is Verdict.PASS
    assert {m.name for m in j.metrics} == {"final_loss_ratio", "step_time_s", "tokens_per_s"}
    assert j.details["ranks"][1]["host"] == "n2"


def test_nan_and_flat_loss_fail():
    j = Judge(None, "train_smoke", "n1", None)
    judge_training_result(j, _result(any_nan=True))
    assert j.verdict is Verdict.FAIL and "NaN" in j.summary()
    j = Judge(None, "train_smoke", "n1", None)
    judge_training_result(j, _result(loss_fell=False))
    assert j.verdict is Verdict.FAIL and "did not fall" in j.summary()
