"""Fail closed in the check API: a check that took the Judge and recorded no judgement (no
metric, finding, warning, outcome or ``judge.passed``) is an ``error`` keyed
``check:judged_nothing``, never a pass; ``judge.passed(reason)`` is how a check that judges no
figure says it looked and found nothing wrong."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from nvtest.checks.api import Judge
from nvtest.checks.health import Outcome, apply
from tests.conftest import run_nvtest

SITE = '''"""Site checks: one that loops over an empty listing, one that says what it looked at."""

from __future__ import annotations

import pytest


@pytest.mark.check("site_empty_loop", area="config", title="Every mount judged (none listed)")
def test_site_empty_loop(node, judge):
    for mount in []:  # the tool listed nothing: the loop never judges
        judge.fail(f"{mount} missing")


@pytest.mark.check("site_looked", area="config", title="Nothing wrong, said so")
def test_site_looked(node, judge):
    judge.passed("no stale mount in the 3 the site lists")
'''


def run_site_module(tmp_path: Path, source: str) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """``nvtest run`` of a suite of one site module (``source``, by its absolute path) on this
    machine: the process and the run's results by check name."""
    module = tmp_path / "test_site_module.py"
    module.write_text(source)
    suite = tmp_path / "site.yaml"
    suite.write_text(f"name: site\ndescription: site checks\nchecks:\n  - {module}\n")
    proc = run_nvtest(
        "run", "--suite", str(suite), "--out", str(tmp_path / "reports"), "--progress", "plain", timeout=120
    )
    doc = json.loads((tmp_path / "reports" / "latest" / "results.json").read_text())
    return proc, {r["check"]: r for r in doc["results"]}


def test_a_check_that_judges_nothing_is_an_error_not_a_pass(tmp_path: Path) -> None:
    proc, by = run_site_module(tmp_path, SITE)
    empty, looked = by["site_empty_loop"], by["site_looked"]
    assert empty["verdict"] == "error" and "judged nothing" in empty["reason"], empty
    assert empty["cause"] == "check:judged_nothing" and empty["diagnosis"]["rule"] == "judged_nothing"
    assert looked["verdict"] == "pass" and looked["details"]["passed"] == ["no stale mount in the 3 the site lists"]
    assert proc.returncode != 0, proc.stdout[-1500:]


def test_a_judgement_without_words_is_never_a_silent_pass() -> None:
    j = Judge(None, "x", "n1", None)
    with pytest.raises(ValueError, match="needs the words of what the check looked at"):
        j.passed("  ")
    assert not j.judged
    j.fail("")
    assert j.failures == ["the check failed without saying why (judge.fail with no reason)"]


def test_what_counts_as_a_judgement() -> None:
    j = Judge(None, "x", "n1", None)
    assert not j.judged
    apply(Outcome(), j)  # a health function that looked and found nothing wrong
    assert j.judged and j.details["passed"] == ["the check's findings: none"]
    j.restart("the pair re-run replaces the launch")  # a second measurement must judge again
    assert not j.judged
    j.warn("one HCA idle")
    assert j.judged
