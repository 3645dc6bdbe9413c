"""Diagnosis picks the most specific cause the evidence names (rule 6, diagnosis half).

Walks every rule of the Playbook: each rule's example evidence (the tool's own words, or the
reason nvtest writes with the cause key it carries) is diagnosed as that rule, alone and with the example of any less
specific (later) rule beside it; so no rule is shadowed by an earlier one and a named cause
always beats a symptom it comes with.
"""

from __future__ import annotations

import pytest

from nvtest.playbook.diagnosis import CLASSES, RULES, SYMPTOMS, Rule, diagnose
from tests.conftest import DATA


def _result(rule: Rule, reason: str) -> dict:
    """A result of ``rule``'s check and verdict with ``reason``, and the cause key its
    example carries (a rule of a cause key's)."""
    check = sorted(rule.checks)[0] if rule.checks else "gpus"
    verdict = "fail" if "fail" in rule.verdicts else "error"
    return {"check": check, "verdict": verdict, "reason": reason, "cause": rule.example_cause}


@pytest.mark.parametrize("rule", RULES, ids=[r.name for r in RULES])
def test_every_rule_diagnoses_its_own_example(rule):
    assert rule.example, f"{rule.name} has no example of its evidence"
    assert rule.cls in CLASSES and rule.action
    d = diagnose(_result(rule, rule.example))
    assert d is not None and d.rule == rule.name, (rule.name, d)


@pytest.mark.parametrize("rule", RULES, ids=[r.name for r in RULES])
def test_a_named_cause_beats_every_less_specific_rule_beside_it(rule):
    later = RULES[RULES.index(rule) + 1 :]
    for other in later:
        if rule.checks and other.checks and not (rule.checks & other.checks):
            continue
        reason = f"{other.example}; {rule.example}"
        d = diagnose(_result(rule, reason))
        assert d is not None and d.rule == rule.name, (rule.name, other.name, d)


#: (the tool's real words, the symptom nvtest reports with them, the cause to name)
FIELD = [
    ("standin/nvidia-smi-nvml-driver-library-mismatch.txt", "GPU lost", "driver_library_mismatch"),
    ("standin/nvidia-smi-driver-not-loaded.txt", "8 GPUs visible to nvidia-smi", "driver_not_loaded"),
    ("standin/torch-cuda-init-error-802-system-not-yet-initialized.txt", "CUDA cannot start", "fabric_manager"),
]


@pytest.mark.parametrize(("rel", "symptom", "rule"), FIELD, ids=[r for _, _, r in FIELD])
def test_real_tool_words_name_the_cause_not_the_symptom(rel, symptom, rule):
    words = " ".join((DATA / rel).read_text().split())
    d = diagnose({"check": "gpus", "verdict": "fail", "reason": f"nvidia-smi reports 0: {symptom}; {words}"})
    assert d is not None and d.rule == rule, d


def test_systemic_wins_only_over_a_symptom():
    fail = {"check": "gemm", "verdict": "fail", "reason": "bf16_tflops: 512.3 TFLOP/s < min 660 TFLOP/s"}
    assert "below_floor" in SYMPTOMS
    assert diagnose(fail, systemic=True).rule == "systemic"
    named = {
        **fail,
        "reason": "nvidia-smi -q -x exited 9: NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.",
    }
    assert diagnose(named, systemic=True).rule == "driver_not_loaded"
