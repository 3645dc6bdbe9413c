"""report.pdf: cover, summary, nodes, failures with diagnoses, thresholds; text extractable."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from pypdf import PdfReader

from nvtest.report import render_pdf
from nvtest.report.manifest import evidence_digest
from nvtest.report.pdf import write_pdf
from tests.conftest import run_nvtest
from tests.report.conftest import ARTIFACTS

SECTIONS = ["Summary", "Nodes", "Failures and diagnoses", "Thresholds and their sources"]


def _outline(reader: PdfReader) -> dict[str, int]:
    out: dict[str, int] = {}

    def walk(items):
        for it in items:
            if isinstance(it, list):
                walk(it)
            else:
                out[it.title.strip()] = reader.get_destination_page_number(it)

    walk(reader.outline)
    return out


def test_delivery_pdf_pages_and_text(delivery_dir: Path, tmp_path: Path):
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(delivery_dir / "results.json", run / "results.json")
    proc = run_nvtest("report", str(run), "--pdf")  # from results.json alone
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((run / "results.json").read_text())
    reader = PdfReader(str(run / "report.pdf"))
    assert len(reader.pages) >= 4
    cover = reader.pages[0].extract_text()
    assert f"Overall verdict: {doc['summary']['verdict'].upper()}" in cover
    assert doc["run"]["run_id"] in cover
    node = next(iter(doc["nodes"]))
    outline = _outline(reader)
    for s in SECTIONS:
        assert s in outline, outline
    assert outline["Summary"] >= 1  # the cover is a page of its own
    pages = [outline[s] for s in SECTIONS]
    assert pages == sorted(pages)
    assert node in reader.pages[outline["Nodes"]].extract_text()
    assert doc.get("asbuilt"), "the delivery run records what was delivered"
    assert "As built" in outline  # the customer's printed report holds the as-built record too
    assert "fleet majority" in reader.pages[outline["As built"]].extract_text()
    shutil.copy(run / "report.pdf", ARTIFACTS / "report-delivery.pdf") if ARTIFACTS.is_dir() else None


def test_synthetic_pdf_failures_with_diagnoses(synthetic_dir: Path, tmp_path: Path):
    doc = json.loads((synthetic_dir / "results.json").read_text())
    pdf = render_pdf(synthetic_dir, doc)
    reader = PdfReader(str(pdf))
    text = "\n".join(p.extract_text() or "" for p in reader.pages)
    assert "Overall verdict: FAIL" in reader.pages[0].extract_text()
    # the first page carries the evidence digest (docs/report.md: manifest.sha256)
    assert evidence_digest(synthetic_dir)[:16] in reader.pages[0].extract_text().replace("\n", "")
    failing = [r for r in doc["results"] if r["verdict"] == "fail"]
    assert failing
    for r in failing:
        assert r["node"] in text
    assert "Likely cause: PCIe link trained below x16" in text.replace("\n", " ")
    assert "gpu0064" in text  # the last node of the per-node table: nothing cut
    # every page has its header and page number (repeated headers come from thead)
    assert all("page" in (p.extract_text() or "") for p in reader.pages[1:])


def test_chromium_engine_fallback(synthetic_dir: Path, tmp_path: Path):
    if shutil.which("chromium") is None:
        pytest.skip("no chromium on PATH")
    doc = json.loads((synthetic_dir / "results.json").read_text())
    pdf = write_pdf(tmp_path, doc, engine="chromium")
    text = PdfReader(str(pdf)).pages[0].extract_text()
    assert "Overall verdict: FAIL" in text
