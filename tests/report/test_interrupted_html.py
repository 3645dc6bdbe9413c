"""Wording of the report after an interrupted run, and of a fleet outlier's reason."""

from __future__ import annotations

from nvtest.report.html import render_html
from nvtest.report.synthetic import synthetic_doc
from nvtest.results import summarize


def _clean_doc(**run: object) -> dict:
    doc = synthetic_doc(4)
    doc["results"] = [r for r in doc["results"] if r["verdict"] in ("pass", "skip")]
    for r in doc["results"]:
        r.pop("diagnosis", None)
    for nd in doc["nodes"].values():
        nd.pop("down_reason", None)
        nd.pop("verdict", None)
    doc["run"].update(run)
    summarize(doc)
    return doc


def test_interrupted_run_does_not_say_nothing_failed():
    html = render_html(_clean_doc(interrupted=True, interrupt_signal="SIGINT"))
    assert "Nothing failed: no diagnosis needed" not in html
    assert "The run was interrupted" in html
    assert "the diagnosis covers only what was measured" in html


def test_finished_clean_run_says_nothing_failed():
    html = render_html(_clean_doc(interrupted=False))
    assert "Nothing failed: no diagnosis needed" in html
    assert "diagnosis covers only what was measured" not in html
