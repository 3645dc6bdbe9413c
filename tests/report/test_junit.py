"""junit.xml: one testcase per (check, node), metrics as properties, diagnosis in the failure message."""

from __future__ import annotations

import json
from pathlib import Path
from xml.etree import ElementTree as ET

from junitparser import Error, Failure, JUnitXml, Skipped

from nvtest.report.junit import render_junit
from nvtest.testing.synthetic import synthetic_doc


def _cases(path: Path):
    xml = JUnitXml.fromfile(str(path))
    return xml, [case for suite in xml for case in suite]


def test_delivery_junit(delivery_dir: Path):
    doc = json.loads((delivery_dir / "results.json").read_text())
    xml, cases = _cases(delivery_dir / "junit.xml")
    assert len(cases) == len(doc["results"])
    names = {c.name for c in cases}
    assert {f"{r['check']}[{r['node']}]" for r in doc["results"]} == names
    skipped = [c for c in cases if any(isinstance(x, Skipped) for x in c.result)]
    assert len(skipped) == doc["summary"]["items"]["skip"]
    stream = next(c for c in cases if c.name.startswith("stream["))
    assert stream.classname == "nvtest.stream"
    props = {p.get("name"): p.get("value") for p in ET.fromstring(stream.tostring()).iter("property")}
    assert "triad_gbps" in props and "GB/s" in props["triad_gbps"]


def test_synthetic_junit_structure_for_jenkins_and_gitlab(synthetic_dir: Path):
    doc = json.loads((synthetic_dir / "results.json").read_text())
    root = ET.parse(synthetic_dir / "junit.xml").getroot()
    assert root.tag == "testsuites"
    suites = root.findall("testsuite")
    assert len(suites) == 1
    suite = suites[0]
    cases = suite.findall("testcase")
    items = doc["summary"]["items"]
    for el in (root, suite):
        assert int(el.get("tests")) == len(cases) == len(doc["results"])
        assert int(el.get("failures")) == items["fail"]
        assert int(el.get("errors")) == items["error"]
        assert int(el.get("skipped")) == items["skip"]
        float(el.get("time"))
    assert suite.get("timestamp") and suite.get("name") == "nvtest.delivery"
    for c in cases:
        assert c.get("classname") and c.get("name") and float(c.get("time")) >= 0
    _, jcases = _cases(synthetic_dir / "junit.xml")
    fails = [c for c in jcases if any(isinstance(x, Failure) for x in c.result)]
    assert len(fails) == items["fail"]
    msg = fails[0].result[0].message
    assert "likely cause:" in msg and "next step:" in msg
    errors = [c for c in jcases if any(isinstance(x, Error) for x in c.result)]
    assert errors and "unreachable" in errors[0].result[0].message
    out = [c.system_out for c in jcases if c.system_out]
    assert any("[[ATTACHMENT|logs/" in o for o in out)


def test_control_characters_and_unreachable_nodes_without_results():
    doc = synthetic_doc(4)
    doc["results"][0]["reason"] = "bad \x00\x1b[31m bytes"
    doc["nodes"]["gpu9999"] = {"name": "gpu9999", "down_reason": "no route", "verdict": "error"}
    text = render_junit(doc)
    root = ET.fromstring(text.encode())  # well-formed
    names = [c.get("name") for c in root.iter("testcase")]
    assert "reachability[gpu9999]" in names
    assert int(root.get("tests")) == len(doc["results"]) + 1


def _run_case(xml_text: str) -> tuple[ET.Element, ET.Element | None]:
    root = ET.fromstring(xml_text.split("\n", 1)[1])
    case = next(
        (c for c in root.iter("testcase") if c.get("classname") == "nvtest" and c.get("name") == "run"),
        None,
    )
    return root, case


def test_interrupted_run_is_an_error_in_junit():
    doc = synthetic_doc(4)
    doc["results"] = [r for r in doc["results"] if r["verdict"] in ("pass", "skip")]
    for nd in doc["nodes"].values():
        nd.pop("down_reason", None)
    doc["run"].update(interrupted=True, interrupt_signal="SIGINT")
    root, case = _run_case(render_junit(doc))
    assert case is not None
    err = case.find("error")
    assert err is not None and "run interrupted (SIGINT)" in err.get("message")
    suite = root.find("testsuite")
    for el in (root, suite):
        assert int(el.get("errors")) >= 1
        assert int(el.get("failures")) == 0
        assert int(el.get("tests")) == len(doc["results"]) + 1


def test_harness_error_is_an_error_in_junit():
    doc = synthetic_doc(4)
    doc["run"].update(harness_error="KeyError: 'x'")
    _, case = _run_case(render_junit(doc))
    assert case is not None and "nvtest failed: KeyError" in case.find("error").get("message")


def test_finished_run_has_no_run_case():
    doc = synthetic_doc(4)
    doc["run"].pop("interrupted", None)
    doc["run"].pop("harness_error", None)
    _, case = _run_case(render_junit(doc))
    assert case is None
