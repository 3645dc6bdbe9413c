"""The report's "As built" section stays compact for a large fleet: the majority once per SKU,
then only the nodes that differ and only the fields some node differs in, highlighted."""

from __future__ import annotations

import json
import re

from nvtest.analysis.asbuilt import summary
from nvtest.report.asbuilt import asbuilt_view
from nvtest.report.html import make_env
from tests.analysis.test_asbuilt import _doc, _record


def _fleet(n: int) -> dict[str, dict]:
    base = json.dumps(_record(_doc()))
    records = {}
    for i in range(n):
        r = json.loads(base)
        r["node"], r["rack"] = f"gpu{i:04d}", f"r{i // 32:03d}"
        if i % 20 == 0:
            r["hcas"][1]["firmware"] = "28.39.1002"
        records[r["node"]] = r
    return records


def test_the_section_lists_only_what_differs_and_stays_small_at_4096_nodes():
    records = _fleet(4096)
    doc = {
        "asbuilt": summary(records, {"previous_runs": ["run:x"], "changes": []}),
        "run": {"run_id": "20261203-225000-bd27"},
        "nodes": {n: {"verdict": "fail" if i % 64 == 0 else "pass"} for i, n in enumerate(records)},
    }
    view = asbuilt_view(doc)
    assert view is not None
    (sku,) = view["skus"]
    assert sku["cols"] == ["HCA firmware"] and sku["differing"] == 205 and len(sku["rows"]) == 205
    assert sku["col_majority"] == ["28.43.2026"]
    html = make_env().get_template("_asbuilt.html.j2").render(ab=view)
    assert html.count('<mark class="drift">28.39.1002, 28.43.2026</mark>') == 205
    assert "nvtest rma 20261203-225000-bd27 gpu0064" in html and len(view["rma"]) == 64
    assert re.search(r"No part swapped", html)
    assert len(html) < 100_000, len(html)  # 4,096 nodes, 205 differing, 64 failed
    assert len(json.dumps(doc["asbuilt"])) < 60_000
