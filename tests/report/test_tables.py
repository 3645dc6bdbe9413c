"""results.csv and results.parquet: one row per (node, check, metric)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pandas as pd
import pytest

from nvtest.report import tables
from nvtest.testing.synthetic import synthetic_doc


def _expected_rows(doc: dict) -> int:
    return sum(max(1, len(r["metrics"])) for r in doc["results"])


def test_delivery_csv(delivery_dir: Path):
    doc = json.loads((delivery_dir / "results.json").read_text())
    df = pd.read_csv(delivery_dir / "results.csv")
    assert list(df.columns) == tables.COLUMNS
    assert len(df) == _expected_rows(doc)
    triad = df[(df.check == "stream") & (df.metric == "triad_gbps")]
    assert len(triad) == 1 and triad.iloc[0].unit == "GB/s" and triad.iloc[0].threshold_min > 0
    assert set(df.check) == {r["check"] for r in doc["results"]}


def test_synthetic_csv_and_parquet(synthetic_dir: Path):
    doc = json.loads((synthetic_dir / "results.json").read_text())
    df = pd.read_csv(synthetic_dir / "results.csv")
    assert len(df) == _expected_rows(doc) and len(df) >= 63 * 40
    assert df.fleet_median.notna().any() and df.diagnosis_cause.notna().any()
    if importlib.util.find_spec("pyarrow") is None:
        assert not (synthetic_dir / "results.parquet").exists()
        return
    pq = pd.read_parquet(synthetic_dir / "results.parquet")
    assert len(pq) == len(df) and list(pq.columns) == tables.COLUMNS
    assert pq.value.dtype == "float64"


def test_parquet_skipped_silently_without_pyarrow(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "pyarrow" else real(name, *a))
    paths = tables.write_tables(tmp_path, synthetic_doc(2))
    assert [p.name for p in paths] == ["results.csv"]
    assert not (tmp_path / "results.parquet").exists()


def test_csv_cells_cannot_run_as_formulas(tmp_path: Path):
    doc = synthetic_doc(2)
    doc["results"][0]["reason"] = '=HYPERLINK("x")'
    tables.write_tables(tmp_path, doc)
    df = pd.read_csv(tmp_path / "results.csv")
    assert df.check_reason.iloc[0] == '\'=HYPERLINK("x")'
