"""nvtest compare: what got better or worse between two runs."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from nvtest.analysis.compare import compare_docs, summarise
from nvtest.testing.synthetic import HOSTILE_NODE, synthetic_doc
from tests.conftest import run_nvtest


def _before_after() -> tuple[dict, dict]:
    before = synthetic_doc(16, seed=3)
    after = copy.deepcopy(before)
    fixed = next(r for r in after["results"] if r["verdict"] == "fail")
    for m in fixed["metrics"]:
        if m["verdict"] == "fail":
            m["value"], m["verdict"] = m["threshold"]["min"] * 1.3, "pass"
    fixed["verdict"] = "pass"
    worse = next(r for r in after["results"] if r["check"] == "stream" and r["verdict"] == "pass")
    triad = next(m for m in worse["metrics"] if m["name"] == "triad_gbps")
    triad["value"] *= 0.9  # slower, still passing
    return before, after


def test_better_and_worse_by_verdict_and_direction():
    before, after = _before_after()
    changes = compare_docs(before, after)
    counts = summarise(changes)
    assert counts["better"] >= 1 and counts["worse"] == 1
    worse = [c for c in changes if c.kind == "worse"]
    assert worse[0].metric == "triad_gbps" and round(worse[0].delta_pct) == -10
    assert changes[0].kind == "worse"  # what needs attention first
    assert all(c.kind == "same" for c in compare_docs(before, before))


def test_gone_and_new_items():
    a = synthetic_doc(4)
    b = copy.deepcopy(a)
    b["results"] = [r for r in b["results"] if r["check"] != "nccl"]
    kinds = summarise(compare_docs(a, b))
    assert kinds["gone"] == 4
    assert summarise(compare_docs(b, a))["new"] == 4


def test_cli_compare_text_and_html(tmp_path: Path):
    before, after = _before_after()
    after["results"][0]["node"] = HOSTILE_NODE  # escaped in the HTML, not markup in the terminal
    for name, doc in (("a", before), ("b", after)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "results.json").write_text(json.dumps(doc))
    out = tmp_path / "diff.html"
    proc = run_nvtest("compare", str(tmp_path / "a"), str(tmp_path / "b"), "--html", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "worse" in proc.stdout and "better" in proc.stdout and "triad_gbps" in proc.stdout
    html = out.read_text()
    assert '<tr class="worse">' in html and HOSTILE_NODE not in html and "&lt;script&gt;" in html
    assert "http://" not in html and "https://" not in html


def test_cli_compare_missing_run_is_a_config_error(tmp_path: Path):
    proc = run_nvtest("compare", str(tmp_path / "nope"), str(tmp_path / "nope2"))
    assert proc.returncode == 2


def test_a_tolerance_must_be_a_finite_number_of_percent(tmp_path: Path):
    import pytest

    from nvtest.errors import ConfigError

    doc = synthetic_doc(2)
    for bad in (-5.0, float("nan"), float("inf")):
        with pytest.raises(ConfigError) as ei:
            compare_docs(doc, doc, tolerance_pct=bad)
        assert ei.value.field == "--tolerance"
    assert all(c.kind == "same" for c in compare_docs(doc, doc, tolerance_pct=0.0))
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "results.json").write_text(json.dumps(doc))
    for bad in ("-5", "nan"):
        proc = run_nvtest("compare", str(tmp_path / "a"), str(tmp_path / "a"), "--tolerance", bad)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert "--tolerance: must be a finite number of percent >= 0" in proc.stderr
        assert "worse" not in proc.stdout
