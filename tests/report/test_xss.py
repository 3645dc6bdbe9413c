"""Hostile strings from nodes and tools render as text: in the source, in the browser, in every output."""

from __future__ import annotations

import json
from pathlib import Path

from nvtest.report.html import json_for_script
from nvtest.report.model import safe_log_link
from nvtest.testing.synthetic import HOSTILE_GPU, HOSTILE_NODE
from nvtest.text import visible
from tests.report.conftest import ARTIFACTS


def test_source_carries_no_live_markup(hostile_dir: Path):
    html = (hostile_dir / "report.html").read_text()
    assert HOSTILE_NODE not in html and HOSTILE_GPU not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert html.count("<script") == 2  # the JSON blob and the report's own script
    blob = html.split('<script type="application/json" id="nvtest-data">', 1)[1].split("</script>", 1)[0]
    assert "<" not in blob and "\u2028" not in blob
    assert json.loads(blob)["nodes"][0]["n"] == HOSTILE_NODE


def test_hostile_names_are_text_in_the_browser(page, hostile_dir: Path):
    page.open(hostile_dir / "report.html")
    body = page.eval("document.body.innerText")
    assert HOSTILE_NODE in body  # shown as text: matrix, diagnoses, evidence, warnings
    assert "<b>acme</b>" in body
    assert page.eval("document.querySelectorAll('img').length") == 0
    assert page.eval("document.querySelectorAll('script').length") == 2
    injected = (
        "Array.from(document.querySelectorAll('b')).filter(b => ['acme', 'ibstat'].includes(b.textContent)).length"
    )
    assert page.eval(injected) == 0
    page.eval(f"document.querySelector('#matrix tr[data-node={json.dumps(HOSTILE_NODE)}] td.node').click()")
    panel = page.eval("document.getElementById('panel').innerText")
    assert HOSTILE_NODE in panel and HOSTILE_GPU in panel
    page.eval(
        f"document.querySelector('#matrix tr[data-node={json.dumps(HOSTILE_NODE)}] td.cell[data-ci=\"7\"]').click()"
    )
    assert "</script><b>ibstat</b>" in page.eval("document.getElementById('panel').innerText")
    # the tool's 400-character word wraps: nothing is wider than the window
    page.eval("document.getElementById('panel').classList.remove('open')")
    assert page.eval("document.documentElement.scrollWidth <= window.innerWidth"), page.eval(
        "document.documentElement.scrollWidth"
    )
    page.screenshot(ARTIFACTS / "report-hostile.png")
    assert page.dialogs == [], page.dialogs
    assert page.errors == [], page.errors
    assert all(u.startswith("file://") for u in page.requests), page.requests


def test_hostile_names_in_junit_csv_and_pdf(hostile_dir: Path):
    from xml.etree import ElementTree as ET

    root = ET.parse(hostile_dir / "junit.xml").getroot()
    names = [c.get("name") for c in root.iter("testcase")]
    assert f"host[{HOSTILE_NODE}]" in names
    assert HOSTILE_NODE in (hostile_dir / "results.csv").read_text()


def test_a_tools_control_characters_are_escapes_in_every_file(hostile_dir: Path):
    """ESC, BEL and CR of a tool's words reach report.html, junit.xml and results.csv as
    ``\\x1b``-style escapes (a CR in a CSV would end the row; XML cannot hold ESC)."""
    for name in ("report.html", "junit.xml", "results.csv"):
        text = (hostile_dir / name).read_bytes().decode()
        assert not {"\x1b", "\x07", "\r"} & set(text), name
        assert visible("\x1b[2J\x1b]0;x\x07\rFAULTY") in text, name
    css = (hostile_dir / "report.html").read_text()
    assert "body, td, th, li, p, code, pre { overflow-wrap: anywhere; }" in css


def test_json_for_script_escapes_what_closes_a_script():
    text = str(json_for_script({"a": "</script><!-- & \u2028\u2029 >"}))
    for bad in ("<", ">", "&", "\u2028", "\u2029"):
        assert bad not in text
    assert json.loads(text) == {"a": "</script><!-- & \u2028\u2029 >"}


def test_only_relative_links_inside_the_run_dir():
    assert safe_log_link("logs/gpu001/stream.log") == "logs/gpu001/stream.log"
    assert safe_log_link("logs/<script>/a b#.log") == "logs/%3Cscript%3E/a%20b%23.log"
    for bad in (
        "/etc/passwd",
        "../x.log",
        "logs/../../x",
        "javascript:alert(1)",
        "http://x/y",
        "C:\\x",
        "",
        None,
        "logs//x",
        "logs/\nx",
        "..",
        ".",
        "logs/<a>/..",
    ):
        assert safe_log_link(bad) is None, bad
