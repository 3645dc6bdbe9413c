"""junit.xml from results.json: one testcase per (check, node).

Layout follows the JUnit XML format as read by Jenkins, GitLab and GitHub
reporters: ``<testsuites><testsuite name=nvtest.<suite>><testcase classname=
"nvtest.<check>" name="<check>[<node>]">`` with ``<failure>`` (fail),
``<error>`` (error), ``<skipped>`` (skip) and metrics as ``<properties>``.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

__all__ = ["render_junit"]


def _fmt_metric(m: dict[str, Any]) -> str:
    lab = ",".join(f"{k}={v}" for k, v in (m.get("labels") or {}).items())
    return f"{m['name']}{'[' + lab + ']' if lab else ''}"


def render_junit(doc: dict[str, Any]) -> str:
    """Return the junit.xml text for a results.json document."""
    run = doc.get("run", {})
    results = doc.get("results", [])
    items = doc.get("summary", {}).get("items", {})
    suite = ET.Element(
        "testsuite",
        name=f"nvtest.{run.get('suite', 'run')}",
        tests=str(len(results)),
        failures=str(items.get("fail", 0)),
        errors=str(items.get("error", 0)),
        skipped=str(items.get("skip", 0)),
        time=f"{run.get('duration_s', 0) or 0:.3f}",
        hostname=str(run.get("host", "")),
    )
    props = ET.SubElement(suite, "properties")
    for key in ("run_id", "nvtest_version", "backend", "cluster", "command_line"):
        if run.get(key) is not None:
            ET.SubElement(props, "property", name=key, value=str(run[key]))
    for r in results:
        case = ET.SubElement(
            suite,
            "testcase",
            classname=f"nvtest.{r['check']}",
            name=f"{r['check']}[{r['node']}]",
            time=f"{r.get('duration_s', 0):.3f}",
        )
        if r.get("metrics"):
            cp = ET.SubElement(case, "properties")
            for m in r["metrics"]:
                val = "" if m.get("value") is None else f"{m['value']:.6g}"
                ET.SubElement(cp, "property", name=_fmt_metric(m), value=f"{val} {m.get('unit', '')} ({m['verdict']})".strip())
        verdict = r["verdict"]
        message = r.get("reason") or verdict
        diag = r.get("diagnosis") or {}
        text = message
        if diag:
            text += f"\nlikely cause: {diag.get('cause', '')}\nnext step: {diag.get('action', '')}"
        if r.get("log"):
            text += f"\nevidence: {r['log']}"
        if verdict == "fail":
            ET.SubElement(case, "failure", message=message[:500], type="nvtest.fail").text = text
        elif verdict == "error":
            ET.SubElement(case, "error", message=message[:500], type="nvtest.error").text = text
        elif verdict == "skip":
            ET.SubElement(case, "skipped", message=message[:500])
        elif verdict == "warn":
            ET.SubElement(case, "system-out").text = f"WARN: {message}"
    root = ET.Element("testsuites", name="nvtest")
    root.append(suite)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
