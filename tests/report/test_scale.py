"""report.html at fleet scale: small, and every fact still in the file.

1,024 synthetic nodes x 40 metrics with 500 unreachable for one reason: at most 5 MB;
every node and its verdict per check, every failing figure beside its threshold, and
every failure's reason are in the file; repeated rows are one row naming their nodes;
the first screen is the verdict, per rack and SKU, and the failures by cause.
"""

from __future__ import annotations

import html as htmlmod
import json
from collections import Counter

import pytest

from nvtest.report.html import render_html
from nvtest.report.model import threshold_text
from nvtest.testing.synthetic import synthetic_doc

NODES, DOWN = 1024, 500
CODE = {"pass": "p", "warn": "w", "fail": "f", "error": "e", "skip": "s"}


@pytest.fixture(scope="module")
def fleet() -> tuple[dict, str, dict]:
    doc = synthetic_doc(NODES, unreachable=DOWN)
    page = render_html(doc)
    start = page.index('<script type="application/json" id="nvtest-data">')
    blob = json.loads(page[page.index(">", start) + 1 : page.index("</script>", start)])
    return doc, page, blob


def test_at_most_5_mb_at_1024_nodes(fleet: tuple[dict, str, dict]) -> None:
    _doc, page, _blob = fleet
    assert len(page.encode()) <= 5_000_000, len(page.encode()) / 1e6


def test_every_node_and_every_verdict_is_in_the_file(fleet: tuple[dict, str, dict]) -> None:
    doc, _page, blob = fleet
    checks = [c["name"] for c in blob["checks"]]
    by_node = {n["n"]: n for n in blob["nodes"]}
    assert sorted(by_node) == sorted(doc["nodes"])
    for r in doc["results"]:
        assert by_node[r["node"]]["c"][checks.index(r["check"])] == CODE[r["verdict"]], (r["node"], r["check"])


def test_every_failing_figure_is_beside_its_threshold(fleet: tuple[dict, str, dict]) -> None:
    doc, page, blob = fleet
    checks = [c["name"] for c in blob["checks"]]
    index = {n["n"]: i for i, n in enumerate(blob["nodes"])}
    text = htmlmod.unescape(page)
    failing = 0
    for r in doc["results"]:
        if r["verdict"] not in ("fail", "error"):
            continue
        assert " ".join(r["reason"].split()) in text, r["reason"]  # the failures table, in words
        ci = checks.index(r["check"])
        item = blob["items"][index[r["node"]]][ci]
        for m, row in zip(r["metrics"], item["m"], strict=True):
            if m["verdict"] != "fail":
                continue
            failing += 1
            key = blob["keys"][ci][row[0]]
            assert key[0] == m["name"] and row[1] == m["value"] and row[3] == "fail"
            assert blob["thresholds"][key[3]][0] == threshold_text(m["threshold"])
    assert failing > 10


def test_repeated_rows_collapse_into_one_naming_every_node(fleet: tuple[dict, str, dict]) -> None:
    doc, page, _blob = fleet
    down = sorted(n for n, nd in doc["nodes"].items() if nd.get("down_reason"))
    assert len(down) == DOWN
    unreachable = page[page.index('id="unreachable"') : page.index("</div>", page.index('id="unreachable"'))]
    assert unreachable.count("<li>") == 1 and f"{DOWN} nodes: <b>{', '.join(down)}</b>" in unreachable
    failures = page[page.index('id="failures"') : page.index("</table>", page.index('id="failures"'))]
    rows = failures.count("<tr>") - 1
    errors = Counter((r["check"], r["reason"]) for r in doc["results"] if r["verdict"] == "error")
    assert all(k == DOWN for k in errors.values())
    assert failures.count(f"{DOWN} nodes: ") == len(errors)  # one row per check for the 500
    assert rows < 100


def test_the_first_screen_is_verdict_racks_and_causes(fleet: tuple[dict, str, dict]) -> None:
    doc, page, _blob = fleet
    order = [
        page.index(x)
        for x in ('id="overall"', 'id="evidence-digest"', 'id="rack-sku"', 'id="diagnoses"', 'id="matrix-sec"')
    ]
    assert order == sorted(order)
    racks = page[page.index('id="rack-sku"') : page.index("</table>", page.index('id="rack-sku"'))]
    assert racks.count("<tr>") - 1 == NODES // 16  # 16 nodes to a rack, one SKU
