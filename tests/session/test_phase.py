"""Evidence paths: one node (and one check) per file, whatever the names.

The node -> path mapping of :func:`~nvtest.session.phase.path_part` is injective: names
that differ only in characters a file name cannot hold (``a b``, ``a_b``, ``a/b``, ``a%20b``)
get distinct paths, each inside the run directory; the report shows each node's directory.
"""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path

from nvtest.report.html import render_html
from nvtest.session.phase import node_log_dir, path_part, write_evidence
from nvtest.transports.base import CommandResult

TRICKY = [
    "a b",
    "a_b",
    "a/b",
    "a%20b",
    "a%2Fb",
    "a.b",
    ".a",
    "a",
    "A",
    "..",
    ".",
    "",
    "%",
    "%25",
    "a\tb",
    "a\nb",
    "gpü01",
    "gpu01",
    "0000:ab:00.0",
    "0000_ab_00.0",
    "x" * 200,
    "x" * 199 + "y",
    "x" * 121,
    "x" * 120,
    "node-01",
    "node+01",
    "node@01",
]


def _safe(part: str) -> bool:
    return bool(part) and "/" not in part and "\0" not in part and not part.startswith(".") and len(part) <= 120


def test_distinct_names_get_distinct_safe_paths() -> None:
    rng = random.Random(15)
    alphabet = "ab _-./%:+@\t\u00fc"
    names = set(TRICKY) | {"".join(rng.choice(alphabet) for _ in range(rng.randint(0, 6))) for _ in range(3000)}
    parts = {name: path_part(name) for name in names}
    assert len(set(parts.values())) == len(names), "two names share a path"
    assert all(_safe(p) for p in parts.values()), [p for p in parts.values() if not _safe(p)]
    assert path_part("gpu017") == "gpu017" and path_part("a b") == "a%20b" and path_part("a_b") == "a_b"


def test_two_nodes_whose_names_differ_in_a_replaced_character_write_two_files(tmp_path: Path) -> None:
    for a, b in itertools.combinations(["a b", "a_b", "a/b", "a%20b"], 2):
        ra = write_evidence(tmp_path, "stream", CommandResult(a, "x", stdout=f"from {a}", exit_code=0))
        rb = write_evidence(tmp_path, "stream", CommandResult(b, "x", stdout=f"from {b}", exit_code=0))
        assert ra != rb
        assert f"from {a}" in (tmp_path / ra).read_text() and f"from {b}" not in (tmp_path / ra).read_text()
    for rel in (tmp_path / "logs").iterdir():
        assert rel.parent == tmp_path / "logs"  # nothing outside logs/, no nested directory from a "/"
    assert len(list((tmp_path / "logs").iterdir())) == 4


def test_the_report_shows_each_nodes_directory() -> None:
    from nvtest.testing.synthetic import synthetic_doc

    doc = synthetic_doc(2)
    for name, node in doc["nodes"].items():
        node["log_dir"] = node_log_dir(name)
    doc["nodes"]["a b"] = {**doc["nodes"]["gpu0001"], "name": "a b", "log_dir": node_log_dir("a b")}
    html = render_html(doc)
    start = html.index('<script type="application/json" id="nvtest-data">')
    blob = json.loads(html[html.index(">", start) + 1 : html.index("</script>", start)])
    shown = {n["n"]: n.get("dir") or n["ld"] for n in blob["nodes"]}  # the raw-log table's directory column
    for name in doc["nodes"]:
        assert shown[name] == node_log_dir(name)
    assert shown["a b"] == "logs/a%20b"
