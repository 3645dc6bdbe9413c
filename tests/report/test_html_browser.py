"""report.html in a real headless Chromium: loads clean, matrix, filters, panel, screenshot."""

from __future__ import annotations

import json
from pathlib import Path

from tests.report.conftest import ARTIFACTS

VISIBLE_ROWS = "Array.from(document.querySelectorAll('#matrix tbody tr')).filter(r => r.offsetParent !== null).length"


def _set(page, selector: str, value: str) -> None:
    page.eval(
        f"(() => {{ const e = document.querySelector({json.dumps(selector)}); e.value = {json.dumps(value)};"
        f" e.dispatchEvent(new Event(e.tagName === 'INPUT' ? 'input' : 'change')); }})()"
    )


def test_delivery_report_loads_without_errors(page, delivery_dir: Path):
    load_s = page.open(delivery_dir / "report.html")
    assert page.eval("document.documentElement.dataset.ready") == "1"
    assert page.errors == [], page.errors
    assert page.dialogs == []
    assert all(u.startswith("file://") for u in page.requests), page.requests
    assert load_s < 60  # a functional bound on a loaded CI machine; bench/report_bench.py measures speed
    text = page.eval("document.getElementById('overall').textContent")
    doc = json.loads((delivery_dir / "results.json").read_text())
    assert text.startswith(f"Overall verdict: {doc['summary']['verdict'].upper()}")
    page.screenshot(ARTIFACTS / "report-delivery.png")
    page.screenshot(ARTIFACTS / "report-delivery-full.png", full_page=True)


def test_matrix_has_one_cell_per_node_and_check(page, delivery_dir: Path):
    doc = json.loads((delivery_dir / "results.json").read_text())
    page.open(delivery_dir / "report.html")
    nodes, checks = len(doc["nodes"]), len(doc["checks"])
    assert page.eval("document.querySelectorAll('#matrix td.cell').length") == nodes * checks
    assert page.eval("document.querySelectorAll('#matrix td.cell[data-ci]').length") == len(doc["results"])
    for r in doc["results"]:
        ci = list(doc["checks"]).index(r["check"])
        got = page.eval(
            f"document.querySelector('#matrix tr[data-node={json.dumps(r['node'])}] td.cell[data-ci=\"{ci}\"]').classList[1]"
        )
        assert got == r["verdict"], (r["check"], got)


def test_filter_by_verdict_counts_visible_rows(page, delivery_dir: Path):
    doc = json.loads((delivery_dir / "results.json").read_text())
    page.open(delivery_dir / "report.html")
    assert page.eval(VISIBLE_ROWS) == len(doc["nodes"])
    for verdict in ("pass", "fail", "skip"):
        _set(page, "#f-verdict", verdict)
        want = sum(1 for n in doc["nodes"].values() if n["verdict"] == verdict)
        assert page.eval(VISIBLE_ROWS) == want, verdict
    _set(page, "#f-verdict", "")
    _set(page, "#f-text", "no-such-node")
    assert page.eval(VISIBLE_ROWS) == 0
    assert page.errors == []


def test_clicking_a_cell_opens_the_panel_with_metrics_and_evidence(page, delivery_dir: Path):
    doc = json.loads((delivery_dir / "results.json").read_text())
    r = next(r for r in doc["results"] if r["check"] == "stream")
    ci = list(doc["checks"]).index("stream")
    page.open(delivery_dir / "report.html")
    assert page.eval("document.getElementById('panel').hidden") is True
    page.eval(
        f"document.querySelector('#matrix tr[data-node={json.dumps(r['node'])}] td.cell[data-ci=\"{ci}\"]').click()"
    )
    assert page.eval("document.getElementById('panel').hidden") is False
    text = page.eval("document.getElementById('panel').innerText")
    assert "triad_gbps" in text and "GB/s" in text and "profile:cpu-generic" in text
    href = page.eval("document.querySelector('#panel a[href^=\"logs/\"]').getAttribute('href')")
    assert href == r["log"] and (delivery_dir / href).is_file()
    page.screenshot(ARTIFACTS / "report-delivery-panel.png")
    page.eval("document.dispatchEvent(new KeyboardEvent('keydown', {key: 'Escape'}))")
    assert page.eval("document.getElementById('panel').hidden") is True


def test_every_log_link_is_relative_and_exists(page, delivery_dir: Path):
    page.open(delivery_dir / "report.html")
    hrefs = page.eval("Array.from(document.querySelectorAll('a[href]')).map(a => a.getAttribute('href'))")
    logs = [h for h in hrefs if not h.startswith("#")]
    assert logs, hrefs
    for h in logs:  # a raw log, or a file of the run directory itself (asbuilt.json)
        assert h.startswith("logs/") or "/" not in h, h
        assert ".." not in h and ":" not in h, h
        assert (delivery_dir / h).is_file(), h


def test_synthetic_fleet_filters_sort_and_panels(page, synthetic_dir: Path):
    doc = json.loads((synthetic_dir / "results.json").read_text())
    page.open(synthetic_dir / "report.html")
    assert page.errors == []
    assert page.eval(VISIBLE_ROWS) == 64
    _set(page, "#f-rack", "r02")
    assert page.eval(VISIBLE_ROWS) == sum(1 for n in doc["nodes"].values() if n["settings"]["tags"]["rack"] == "r02")
    _set(page, "#f-rack", "")
    _set(page, "#f-verdict", "bad")
    bad = sorted(n for n, nd in doc["nodes"].items() if nd["verdict"] in ("fail", "error"))
    assert page.eval(VISIBLE_ROWS) == len(bad) > 0
    _set(page, "#f-verdict", "")
    page.eval("document.querySelector('#matrix th[data-sort=verdict]').click()")
    first = page.eval("document.querySelector('#matrix tbody tr').dataset.verdict")
    assert first == "fail"
    # the unreachable node's panel says so, and the drained ones are marked
    down = next(n for n, nd in doc["nodes"].items() if nd["down_reason"])
    page.eval(f"document.querySelector('#matrix tr[data-node={json.dumps(down)}] td.node').click()")
    assert "Unreachable: ssh: connect timed out" in page.eval("document.getElementById('panel').innerText")
    assert "drained" in page.eval("document.getElementById('matrix').innerText").lower()
    # a chart per metric, with the threshold and the median drawn
    assert page.eval("document.querySelectorAll('svg.chart line.thr').length") > 0
    assert page.eval("document.querySelectorAll('svg.chart line.median').length") >= 8
    assert page.eval("document.querySelectorAll('svg.chart circle.mark').length") > 0
    page.eval("document.getElementById('panel-close').click(); window.scrollTo(0, 0)")
    page.screenshot(ARTIFACTS / "report-synthetic-64.png")
    assert page.errors == []


def test_print_stylesheet_hides_controls(page, synthetic_dir: Path, tmp_path: Path):
    from pypdf import PdfReader

    page.open(synthetic_dir / "report.html")
    pdf = page.print_pdf(tmp_path / "printed.pdf")
    reader = PdfReader(str(pdf))
    text = "\n".join(p.extract_text() or "" for p in reader.pages)
    assert "Overall verdict: FAIL" in text
    assert "gpu0064" in text  # every matrix row printed, not only the first page
    assert "Click a cell" not in text  # controls are screen-only
    assert page.errors == []
