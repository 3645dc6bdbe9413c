"""The run copies a result's cause key from where the check knew it: the exception raised
(its ``cause``), else the Judge's (``judge.cause``, set by ``apply`` from an outcome); a
passing item has none, and the Playbook diagnoses by the key. One pytester run on this machine."""

from __future__ import annotations

import pytest

from nvtest.playbook.diagnosis import CAUSES
from tests.run.test_plugin import HOST, _results, _run


def test_the_result_carries_the_cause_the_check_knew(pytester: pytest.Pytester) -> None:
    _, run_dir = _run(
        pytester,
        """
from nvtest.checks.health import Outcome, apply
from nvtest.errors import NodeError, ProbeError


@pytest.mark.check("missing", area="demo", title="A tool not on the PATH")
def test_missing(node, judge):
    raise ProbeError("gpu_burn not found on the node's PATH (gpu-burn): nothing measured", cause="tool:missing")


@pytest.mark.check("judged", area="demo", title="A check's own cause, on its Judge")
def test_judged(node, judge):
    apply(Outcome(failures=["8 NVIDIA GPU(s) expected; nvidia-smi cannot report on them"],
                  cause="hardware:unreported"), judge)


@pytest.mark.check("unkeyed", area="demo", title="A node error with no key")
def test_unkeyed(node, judge):
    raise NodeError("something nvtest has no key for")


@pytest.mark.check("ok", area="demo", title="A pass")
def test_ok(node, judge):
    judge.cause = "hardware:unreported"  # a pass keeps no cause
    judge("v_count", 1, "count")
""",
    )
    got = _results(run_dir)
    missing, judged = got[("missing", HOST)], got[("judged", HOST)]
    assert (missing["verdict"], missing["cause"]) == ("error", "tool:missing")
    assert missing["diagnosis"]["rule"] in CAUSES["tool:missing"]
    assert (judged["verdict"], judged["cause"]) == ("fail", "hardware:unreported")
    assert judged["diagnosis"]["rule"] in CAUSES["hardware:unreported"]
    assert got[("unkeyed", HOST)]["verdict"] == "error" and "cause" not in got[("unkeyed", HOST)]
    assert got[("ok", HOST)]["verdict"] == "pass" and "cause" not in got[("ok", HOST)]
