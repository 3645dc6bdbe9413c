"""junit.xml from results.json: one testcase per (check, node).

Layout follows the JUnit XML format as Jenkins (junit plugin), GitLab (unit
test reports) and GitHub reporters read it::

    <testsuites name="nvtest" tests= failures= errors= skipped= time=>
      <testsuite name="nvtest.<suite>" tests= failures= errors= skipped= time= timestamp= hostname=>
        <properties> run_id, nvtest_version, backend, cluster, command_line </properties>
        <testcase classname="nvtest.<check>" name="<check>[<node>]" time= file=>
          <properties> one per metric: name[labels] = "value unit (verdict)" </properties>
          <failure message= type="nvtest.fail"> reason, likely cause, next step, evidence </failure>
          | <error ...> | <skipped message=>
          <system-out> warnings, the evidence as [[ATTACHMENT|logs/...]] </system-out>
        </testcase>
      </testsuite>
    </testsuites>

A node that was unreachable and has no result gets one ``reachability[<node>]``
error case, so CI sees it; a run that was interrupted or ended with a harness
error (``nvtest.results.incomplete_reason``) gets one ``nvtest`` / ``run`` error
case carrying the reason, so CI never reads a partial run as green. Control characters of tool output
(and what XML 1.0 cannot carry) are written as escapes (``\\x1b``, :func:`nvtest.text.visible`).
"""

from __future__ import annotations

import datetime as dt
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from typing import Any

from nvtest.report.model import labels_text, safe_log_link
from nvtest.results import incomplete_reason
from nvtest.text import visible

__all__ = ["render_junit"]


def _x(text: Any) -> str:
    """``text`` as XML may hold it: control characters, U+FFFE/U+FFFF and lone surrogates
    (never valid XML 1.0) written as escapes (:func:`nvtest.text.visible`)."""
    return visible(str(text))


def _metric_name(m: Mapping[str, Any]) -> str:
    lab = labels_text(m.get("labels")).replace(" ", ",")
    return f"{m['name']}[{lab}]" if lab else str(m["name"])


def _metric_value(m: Mapping[str, Any]) -> str:
    v = m.get("value")
    val = "" if not isinstance(v, (int, float)) else f"{v:.6g}"
    return f"{val} {m.get('unit') or ''} ({m.get('verdict')})".replace("  ", " ").strip()


def _message(r: Mapping[str, Any]) -> tuple[str, str]:
    """(message attribute, element text) of a result."""
    reason = str(r.get("reason") or r.get("verdict"))
    diag = r.get("diagnosis") or {}
    message = reason
    if diag:
        message += f" | likely cause: {diag.get('cause', '')} | next step: {diag.get('action', '')}"
    lines = [reason]
    if diag:
        lines += [f"likely cause: {diag.get('cause', '')}", f"next step: {diag.get('action', '')}"]
        if diag.get("class"):
            lines.append(f"class: {diag['class']}")
    for m in r.get("metrics") or []:
        if m.get("verdict") in ("fail", "error", "warn"):
            lines.append(f"{_metric_name(m)} = {_metric_value(m)}: {m.get('reason', '')}")
    if r.get("log"):
        lines.append(f"evidence: {r['log']}")
    return message[:1000], "\n".join(lines)


def render_junit(doc: Mapping[str, Any]) -> str:
    """Return the junit.xml text for a results.json document."""
    run = doc.get("run") or {}
    results = list(doc.get("results") or [])
    nodes = doc.get("nodes") or {}
    with_result = {r["node"] for r in results}
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    cases: list[ET.Element] = []
    for r in results:
        counts["tests"] += 1
        case = ET.Element(
            "testcase",
            classname=_x(f"nvtest.{r['check']}"),
            name=_x(f"{r['check']}[{r['node']}]"),
            time=f"{float(r.get('duration_s') or 0):.3f}",
        )
        if r.get("nodeid"):
            case.set("file", _x(str(r["nodeid"]).split("::")[0] or r["check"]))
        if r.get("metrics"):
            props = ET.SubElement(case, "properties")
            for m in r["metrics"]:
                ET.SubElement(props, "property", name=_x(_metric_name(m)), value=_x(_metric_value(m)))
        verdict = r["verdict"]
        message, text = _message(r)
        if verdict == "fail":
            counts["failures"] += 1
            ET.SubElement(case, "failure", message=_x(message), type="nvtest.fail").text = _x(text)
        elif verdict == "error":
            counts["errors"] += 1
            ET.SubElement(case, "error", message=_x(message), type="nvtest.error").text = _x(text)
        elif verdict == "skip":
            counts["skipped"] += 1
            ET.SubElement(case, "skipped", message=_x(message))
        out = []
        if verdict == "warn":
            out.append(f"WARN: {text}")
        link = safe_log_link(r.get("log"))
        if link:
            out.append(f"[[ATTACHMENT|{r['log']}]]")
        if out:
            ET.SubElement(case, "system-out").text = _x("\n".join(out))
        cases.append(case)
    for name, nd in sorted(nodes.items()):
        if nd.get("down_reason") and name not in with_result:
            counts["tests"] += 1
            counts["errors"] += 1
            case = ET.Element(
                "testcase",
                classname="nvtest.reachability",
                name=_x(f"reachability[{name}]"),
                time="0.000",
            )
            # down_message words the cause (unreachable, name does not resolve, probe hung...);
            # runs written before it had only down_reason
            why = nd.get("down_message") or f"unreachable: {nd['down_reason']}"
            ET.SubElement(case, "error", message=_x(why), type="nvtest.error").text = _x(why)
            cases.append(case)
    incomplete = incomplete_reason(run) or (doc.get("summary") or {}).get("incomplete")
    if incomplete:
        counts["tests"] += 1
        counts["errors"] += 1
        case = ET.Element("testcase", classname="nvtest", name="run", time="0.000")
        text = (
            f"{incomplete}: the items that were running or not reached are errors "
            "'not measured' (rerun them with --rerun-failed); the other results are what "
            "was measured before the run stopped"
        )
        ET.SubElement(case, "error", message=_x(incomplete), type="nvtest.incomplete").text = _x(text)
        cases.append(case)
    duration = f"{float(run.get('duration_s') or 0):.3f}"
    attrs = {k: str(v) for k, v in counts.items()}
    root = ET.Element("testsuites", {"name": "nvtest", "time": duration, **attrs})
    suite = ET.SubElement(root, "testsuite", {"name": _x(f"nvtest.{run.get('suite', 'run')}"), **attrs})
    suite.set("time", duration)
    if run.get("started_at"):
        suite.set(
            "timestamp",
            dt.datetime.fromtimestamp(float(run["started_at"]), tz=dt.UTC).strftime("%Y-%m-%dT%H:%M:%S"),
        )
    suite.set("hostname", _x(run.get("host") or ""))
    props = ET.SubElement(suite, "properties")
    for key in ("run_id", "nvtest_version", "backend", "cluster", "command_line"):
        if run.get(key) is not None:
            ET.SubElement(props, "property", name=key, value=_x(run[key]))
    ET.SubElement(props, "property", name="verdict", value=_x((doc.get("summary") or {}).get("verdict", "")))
    suite.extend(cases)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
