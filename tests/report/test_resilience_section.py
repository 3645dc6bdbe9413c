"""The report's resilience section: recovery figures beside their targets, tiers, stragglers, the estimate.

``tests/data/resilience_results.json`` is a real ``nvtest run --suite resilience``
(local backend, one node) trimmed to what the report reads; the spanning-job,
shared-tier and requeue cases are built from it with the details the checks write
(``judge_injob_span``, ``aggregate``, ``judge_requeue``).
"""

from __future__ import annotations

import copy
import html as htmllib
import json
import re
from typing import Any

import pytest

from nvtest.checks.resilience.effective import effective_fraction
from nvtest.checks.resilience.recipe import TARGET_SOURCES
from nvtest.report.html import render_html
from nvtest.report.pdf import pdf_html
from nvtest.report.resilience import fmt_pct, resilience_view
from nvtest.testing.synthetic import synthetic_doc
from tests.conftest import DATA as DATA_DIR

DATA = DATA_DIR / "resilience_results.json"


@pytest.fixture
def doc() -> dict[str, Any]:
    return json.loads(DATA.read_text(encoding="utf-8"))


def _section(page: str, start: str = 'id="resilience"') -> str:
    """The resilience section of a rendered page as plain text (tags dropped, entities decoded)."""
    i = page.index(start)
    j = page.index("</section>", i)
    return htmllib.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page[i:j])))


def _item(doc: dict[str, Any], check: str) -> dict[str, Any]:
    return next(r for r in doc["results"] if r["check"] == check)


def _metric(r: dict[str, Any], name: str) -> dict[str, Any]:
    return next(m for m in r["metrics"] if m["name"] == name)


def _statuses(page: str) -> list[str]:
    """The within / over / no target marks of the drill tables, in order."""
    return re.findall(r'<span class="within [a-z-]+">([a-z ]+)</span>', page)


def test_real_run_section_targets_and_estimate(doc):
    page = render_html(doc)
    text = _section(page)
    injob, inproc = _item(doc, "restart_injob"), _item(doc, "restart_inprocess")
    t_job = injob["details"]["recovery_s_target"]
    t_proc = inproc["details"]["recovery_s_target"]
    assert t_job["target_s"] == 120 and t_proc["target_s"] == 20
    assert "recovery_s ≤ 120 s" in text and "recovery_s ≤ 20 s" in text
    assert t_job["source"] in text and t_proc["source"] in text
    assert _statuses(page) == ["within", "within"]
    assert f"rank {injob['details']['recovery']['killed_rank']} killed at step" in text
    for name in ("detect s", "restart s", "reload s", "recovery s", "steps lost", "loss matches"):
        assert name in text
    # checkpoint tiers and stragglers
    assert "Checkpoint tiers" in text and "ckpt_mem" in text and "ckpt_local" in text
    bound = _item(doc, "straggler")["details"]["straggler"]["bound"]
    assert f"relative score of {bound:g}" in text
    # the estimate: formula, symbols, inputs, result as a percentage consistent with its inputs
    est = injob["details"]["effective_time"]
    assert "effective = 1 - C/T - (T/2 + R)/M" in text
    for sym in ("M :", "T :", "C :", "R :"):
        assert sym in text
    assert est["save_source"] in text and est["restart_source"] in text
    expected = effective_fraction(est["interval_s"], est["save_s"], est["restart_s"], est["mtbf_s"])
    assert expected == pytest.approx(est["effective_fraction"])
    assert fmt_pct(expected) in text and fmt_pct(est["effective_at_daly"]) in text
    assert "24 h 00 min" in text and "30 min 00 s" in text  # M and T
    assert "Young's T" in text and "Daly's T" in text


def _spanning(doc: dict[str, Any]) -> dict[str, Any]:
    """Two nodes of one in-job job (node b over its target), a shared tier, a requeue without target."""
    doc = copy.deepcopy(doc)
    base = _item(doc, "restart_injob")
    target = base["details"]["recovery_s_target"]
    job_fig = {**base["details"]["recovery"], "recovery_s": 130.5, "detect_s": 0.07}
    killed = "rank 2 (local rank 0) on b"
    items = []
    for node, rec_s, ranks in (("a", 14.3, [0, 1]), ("b", 130.5, [2, 3])):
        r = copy.deepcopy(base)
        r["node"] = node
        _metric(r, "recovery_s")["value"] = rec_s
        r["details"].update(
            node_ranks=ranks,
            killed=killed,
            kill={"done": {"rank": 2}, "killed": killed},
            job={
                "nodes": ["a", "b"],
                "world_size": 4,
                "launcher": "ft_launcher",
                "recovery": job_fig,
            },
            recovery_s_target={**target, "value": rec_s, "within": rec_s <= target["target_s"]},
        )
        r["verdict"] = "pass" if rec_s <= target["target_s"] else "warn"
        items.append(r)
    shared = {
        "node": "a",
        "check": "ckpt_shared",
        "verdict": "pass",
        "reason": "",
        "metrics": [
            {"name": "write_gbps", "value": 1.5, "unit": "GB/s", "labels": {"tier": "shared"}, "verdict": "pass"},
            {"name": "read_gbps", "value": 2.5, "unit": "GB/s", "labels": {"tier": "shared"}, "verdict": "pass"},
            {"name": "aggregate_write_gbps", "value": 3.25, "unit": "GB/s", "verdict": "pass"},
            {"name": "aggregate_read_gbps", "value": 4.75, "unit": "GB/s", "verdict": "pass"},
        ],
        "details": {"aggregate": {"nodes": 2, "write_gbps": 3.25, "read_gbps": 4.75, "left_out": []}},
    }
    requeue = {
        "node": "a",
        "check": "requeue",
        "verdict": "pass",
        "reason": "",
        "metrics": [
            {"name": "running_again_s", "value": 3.5, "unit": "s", "verdict": "pass"},
            {"name": "resumed_s", "value": 6.0, "unit": "s", "verdict": "pass"},
            {"name": "training_again_s", "value": 6.5, "unit": "s", "verdict": "pass"},
            {"name": "steps_lost", "value": 2, "unit": "steps", "verdict": "pass"},
        ],
        "details": {
            "training_again_s_target": {
                "value": 6.5,
                "target_s": None,
                "within": None,
                "source": TARGET_SOURCES["requeue_training_again_s"],
            }
        },
    }
    doc["results"] = [r for r in doc["results"] if r["check"] not in ("restart_injob", "ckpt_shared", "requeue")]
    doc["results"] += [*items, shared, requeue]
    return doc


def test_spanning_job_row_over_target_shared_aggregate_and_requeue(doc):
    sdoc = _spanning(doc)
    rs = resilience_view(sdoc["results"])
    assert rs is not None
    injob = next(d for d in rs.drills if d.check == "restart_injob")
    job, a, b = injob.rows
    assert job.job and job.scope == "job (4 ranks on 2 nodes)" and job.verdict == "warn"
    assert job.target is not None and job.target.status == "over" and job.target.value == 130.5
    assert a.target.status == "within" and b.target.status == "over"
    requeue = next(d for d in rs.drills if d.check == "requeue")
    assert requeue.rows[0].target.status == "no target"
    page = render_html(sdoc)
    text = _section(page)
    assert "job (4 ranks on 2 nodes)" in text and "killed: rank 2 (local rank 0) on b" in text
    assert _statuses(page) == ["over", "within", "over", "within", "no target"]
    assert "130.5" in text
    assert "all nodes (aggregate)" in text and "3.25" in text and "4.75" in text and "2 nodes at once" in text
    assert "training again s" in text and "no target" in text
    assert TARGET_SOURCES["requeue_training_again_s"] in text


def test_pdf_has_the_section(doc):
    page = pdf_html(_spanning(doc))
    text = _section(page)
    assert "Effective training time" in text and "effective = 1 - C/T - (T/2 + R)/M" in text
    assert "job (4 ranks on 2 nodes)" in text and "over" in _statuses(page)


def test_no_section_without_resilience_results():
    page = render_html(synthetic_doc(4))
    assert 'id="resilience"' not in page and "Effective training time" not in page
    assert resilience_view(synthetic_doc(4)["results"]) is None
    assert 'id="resilience"' not in pdf_html(synthetic_doc(4))


def test_only_skipped_resilience_items_give_no_section(doc):
    for r in doc["results"]:
        r["verdict"], r["metrics"] = "skip", []
    assert resilience_view(doc["results"]) is None
    assert 'id="resilience"' not in render_html(doc)


def test_estimate_says_how_the_job_mtbf_was_derived(doc):
    sdoc = copy.deepcopy(doc)
    r = next(r for r in sdoc["results"] if r["check"] == "restart_injob")
    r["details"]["effective_time"]["mtbf_source"] = "24 h per node / 2 node(s) of the job"
    assert "24 h per node / 2 node(s) of the job" in _section(render_html(sdoc))
