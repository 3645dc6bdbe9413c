"""Every results.json nvtest writes validates against docs/results.schema.json."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from nvtest.testing.synthetic import synthetic_doc
from tests.report.conftest import SCHEMA


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft202012Validator:
    schema = json.loads(SCHEMA.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def _errors(validator: jsonschema.Draft202012Validator, doc: dict) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message[:200]}" for e in validator.iter_errors(doc)]


def test_schema_version_is_1(validator):
    assert validator.schema["properties"]["schema_version"] == {"const": 1}


def test_real_delivery_run_validates(validator, delivery_dir: Path):
    doc = json.loads((delivery_dir / "results.json").read_text())
    assert _errors(validator, doc) == []


@pytest.mark.parametrize("nodes,hostile", [(1, False), (64, False), (16, True)])
def test_synthetic_runs_validate(validator, nodes, hostile):
    doc = synthetic_doc(nodes, hostile=hostile)
    assert _errors(validator, doc) == []
    # the fields other parts of nvtest add are in it
    assert any(m.get("fleet") for r in doc["results"] for m in r["metrics"]) or nodes == 1
    if nodes >= 8:
        assert doc["run"]["drained"] and any(n["down_reason"] for n in doc["nodes"].values())
        assert any(r["diagnosis"] for r in doc["results"])


def test_schema_rejects_what_it_should(validator):
    doc = synthetic_doc(4)
    doc["results"][0]["verdict"] = "maybe"
    assert _errors(validator, doc)
    doc = synthetic_doc(4)
    doc["schema_version"] = 2
    assert _errors(validator, doc)
    doc = synthetic_doc(4)
    del doc["results"][0]["metrics"][0]["unit"]
    assert _errors(validator, doc)


def test_the_cause_key_is_optional_and_a_key(validator):
    """results.json's ``cause``: a key where the run knew it, absent in files written before it
    (they still validate and load), never prose."""
    from nvtest.playbook.diagnosis import CAUSES
    from nvtest.results import CheckResult
    from nvtest.verdict import Verdict

    doc = synthetic_doc(4)
    assert any(r.get("cause") == "threshold:below_floor" for r in doc["results"])  # the run sets it
    for r in doc["results"]:  # a file written before the field: no cause anywhere
        r.pop("cause", None)
    assert _errors(validator, doc) == []
    for key in CAUSES:
        doc["results"][0]["cause"] = key
        assert _errors(validator, doc) == [], key
    doc["results"][0]["cause"] = "node unreachable: connection refused"
    assert _errors(validator, doc)
    bad = CheckResult("gpus", "n1", Verdict.ERROR, "NodeError: node unreachable", cause="transport:unreachable")
    assert bad.to_json()["cause"] == "transport:unreachable"
    assert "cause" not in CheckResult("gpus", "n1", Verdict.PASS).to_json()


def test_a_real_runs_causes_are_keys_of_the_playbook(delivery_dir: Path):
    from nvtest.playbook.diagnosis import CAUSES

    doc = json.loads((delivery_dir / "results.json").read_text())
    causes = {r["cause"] for r in doc["results"] if r.get("cause")}
    assert causes <= CAUSES.keys(), causes
    assert all(r["verdict"] in ("fail", "error") for r in doc["results"] if r.get("cause"))
