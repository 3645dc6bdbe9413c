"""Wording of the report after an interrupted run, and of a fleet outlier's reason."""

from __future__ import annotations

from nvtest.report.html import render_html
from nvtest.results import summarize
from nvtest.testing.synthetic import synthetic_doc


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


def test_the_nodes_drain_failed_did_not_drain_are_listed_with_why():
    """Issue 24, class 5: --drain-failed says per node why it did not drain (run.not_drained)."""
    why = "not drained: gpus failed on every node of the SKU (3 or more): systemic <b>x</b>"
    html = render_html(_clean_doc(not_drained={"gpu0001": why}))
    assert 'id="not-drained"' in html and "gpu0001" in html
    assert "systemic &lt;b&gt;x&lt;/b&gt;" in html and "<b>x</b>" not in html
    assert 'id="not-drained"' not in render_html(_clean_doc())
