"""A results.json written before results carried cause keys keeps its diagnoses when judged
again (nvtest report, nvtest evaluate); a document with keys is never read by its sentences."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from nvtest.analysis.finish import finish_run
from nvtest.playbook.diagnosis import RULES, TRANSPORT_RULES, diagnose
from nvtest.playbook.legacy import LEGACY_SENTENCES, add_legacy_causes, legacy_cause
from nvtest.results import write_results
from nvtest.testing.synthetic import synthetic_doc

_LEGACY_KEYS = {key for key, _, _ in LEGACY_SENTENCES}
_KEYED = [r for r in (*TRANSPORT_RULES, *RULES) if r.keys & _LEGACY_KEYS and r.example]


@pytest.mark.parametrize("rule", _KEYED, ids=lambda r: r.name)
def test_an_old_sentence_gets_the_key_and_the_diagnosis_it_had(rule) -> None:
    """Every key rule that existed before the keys: its sentence, in a document with no key,
    gets a key and is diagnosed by that rule again (not the generic 'rerun')."""
    result = {"check": min(rule.checks) if rule.checks else "x", "verdict": min(rule.verdicts), "reason": rule.example}
    assert add_legacy_causes({"results": [result]}) == [f"{result['check']}@None"]
    d = diagnose(result)
    assert d is not None and d.rule == rule.name, (rule.name, result["cause"], d)


#: Keys only ``nvtest gate`` sets: its JSON verdict is never judged again (no report, no evaluate).
_GATE_ONLY = frozenset({"disk:full", "gpu:driver_missing"})
_EVERY_KEYED = [r for r in (*TRANSPORT_RULES, *RULES) if r.keys - _GATE_ONLY and r.example]


@pytest.mark.parametrize("rule", _EVERY_KEYED, ids=lambda r: r.name)
def test_every_key_rule_keeps_its_diagnosis_without_the_key(rule) -> None:
    """Every rule that matches by a key (a timeout, a refused login, a missing tool, a check
    that judged nothing, a tool that cannot report): its sentence in an old document, the key
    removed, is diagnosed by that rule again, never the generic 'rerun'."""
    result = {"check": min(rule.checks) if rule.checks else "x", "verdict": min(rule.verdicts), "reason": rule.example}
    add_legacy_causes({"results": [result]})
    d = diagnose(result)
    assert d is not None and d.rule == rule.name, (rule.name, result.get("cause"), d)


def test_a_document_with_keys_is_not_read_by_its_sentences() -> None:
    keyed = {"check": "nccl", "verdict": "fail", "reason": "x", "cause": "threshold:below_floor"}
    old_words = {"check": "nccl", "verdict": "fail", "reason": "all_reduce: #wrong = 3 (sizes 1024): wrong results"}
    doc = {"results": [keyed, old_words]}
    assert add_legacy_causes(doc) == [] and "cause" not in old_words
    assert legacy_cause({**old_words, "verdict": "pass"}) is None  # a pass has no cause
    assert legacy_cause({"check": "gemm", "verdict": "fail", "reason": "nothing known"}) is None


def test_nvtest_report_of_an_old_results_json_keeps_the_rma_diagnosis(tmp_path: Path) -> None:
    """End to end: a stored run written before the keys (its wrong-results item and its
    fabric manager item by their sentences), judged again by ``nvtest report``'s path
    (finish_run, rejudged), gets the diagnoses it had: RMA for wrong results, not 'rerun'."""
    doc = synthetic_doc(2)
    for r in doc["results"]:
        r.pop("cause", None)
        r.pop("diagnosis", None)
    first, second = doc["results"][0], doc["results"][1]
    first.update(check="nccl", verdict="fail", reason="all_reduce: #wrong = 12 (sizes 1048576): wrong results")
    second.update(
        check="fabric_manager",
        verdict="fail",
        reason="nvidia-fabricmanager is failed on an NVSwitch system: CUDA fails with error 802",
    )
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    write_results(run_dir, copy.deepcopy(doc))
    done = finish_run(run_dir, doc=doc, history=False, rejudged="report")
    by = {r["reason"]: r for r in done.doc["results"]}
    wrong = by[first["reason"]]
    assert wrong["cause"] == "results:wrong" and wrong["diagnosis"]["rule"] == "nccl_wrong", wrong
    assert wrong["diagnosis"]["class"] == "RMA"
    assert by[second["reason"]]["diagnosis"]["rule"] == "fabric_manager"
