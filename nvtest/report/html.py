"""report.html: one self-contained file rendered with jinja2 (autoescape on).

Every string from a node or a tool goes through jinja2's escaping; links are
made only to paths inside the run directory (``logs/...``).
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape

__all__ = ["render_html", "safe_log_link"]

_ENV = Environment(
    loader=PackageLoader("nvtest.report", "templates"),
    autoescape=select_autoescape(default=True, default_for_string=True),
    trim_blocks=True,
    lstrip_blocks=True,
)


def safe_log_link(path: str | None) -> str | None:
    """``path`` if it is a relative path inside the run directory, else None."""
    if not path or path.startswith(("/", "\\")) or ":" in path.split("/")[0]:
        return None
    parts = path.replace("\\", "/").split("/")
    if any(p == ".." for p in parts):
        return None
    return "/".join(parts)


def _time(ts: float | None) -> str:
    if not ts:
        return "-"
    return dt.datetime.fromtimestamp(ts, tz=dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _num(x: Any) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:.4g}"
    return str(x)


_ENV.filters["time"] = _time
_ENV.filters["num"] = _num
_ENV.filters["loglink"] = safe_log_link


def render_html(doc: dict[str, Any]) -> str:
    """Return the report.html text for a results.json document."""
    results = doc.get("results", [])
    checks = list(doc.get("checks", {}).values())
    known = {c["name"] for c in checks}
    for r in results:
        if r["check"] not in known:
            known.add(r["check"])
            checks.append({"name": r["check"], "title": r["check"], "area": "", "description": ""})
    matrix: dict[str, dict[str, Any]] = defaultdict(dict)
    by_check: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in results:
        matrix[r["node"]][r["check"]] = r
        by_check[r["check"]].append(r)
    nodes = doc.get("nodes", {})
    node_names = sorted(set(nodes) | set(matrix))
    return _ENV.get_template("report.html.j2").render(
        doc=doc,
        run=doc.get("run", {}),
        summary=doc.get("summary", {}),
        checks=checks,
        nodes=nodes,
        node_names=node_names,
        matrix=matrix,
        by_check=by_check,
        skus=doc.get("skus", {}),
    )
