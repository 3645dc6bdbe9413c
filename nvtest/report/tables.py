"""results.csv and results.parquet: one row per (node, check, metric).

An item with no metric (a skip, an error, an inventory check) still gets one
row, with an empty ``metric``, so every verdict is in the table. Columns are
listed in :data:`COLUMNS`. ``results.parquet`` is written only where pyarrow
is importable; without it the step is skipped silently.

In the CSV (for spreadsheets), control characters of a tool's words are written as
escapes (:func:`nvtest.text.visible`: a carriage return as ``\\r``) and a text cell that
starts with ``=``, ``+``, ``-``, ``@`` or a tab is prefixed with ``'`` so it cannot run as
a formula; the Parquet file keeps the text unchanged.
"""

from __future__ import annotations

import importlib.util
import io
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from nvtest.report.model import labels_text, node_rack
from nvtest.results import write_atomic
from nvtest.text import visible

__all__ = ["COLUMNS", "results_frame", "write_tables"]

COLUMNS = [
    "run_id",
    "node",
    "rack",
    "sku",
    "check",
    "check_verdict",
    "check_reason",
    "metric",
    "labels",
    "value",
    "unit",
    "metric_verdict",
    "metric_reason",
    "threshold_min",
    "threshold_max",
    "threshold_warn_min",
    "threshold_warn_max",
    "threshold_unit",
    "threshold_source",
    "threshold_origin",
    "fleet_median",
    "fleet_mad",
    "fleet_delta_pct",
    "fleet_robust_z",
    "fleet_outlier",
    "diagnosis_cause",
    "diagnosis_action",
    "diagnosis_class",
    "log",
    "duration_s",
]


def _rows(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    run_id = (doc.get("run") or {}).get("run_id")
    nodes = doc.get("nodes") or {}
    rows: list[dict[str, Any]] = []
    for r in doc.get("results") or []:
        nd = nodes.get(r["node"]) or {}
        diag = r.get("diagnosis") or {}
        base = {
            "run_id": run_id,
            "node": r["node"],
            "rack": node_rack(nd) or None,
            "sku": nd.get("sku"),
            "check": r["check"],
            "check_verdict": r["verdict"],
            "check_reason": r.get("reason") or None,
            "diagnosis_cause": diag.get("cause"),
            "diagnosis_action": diag.get("action"),
            "diagnosis_class": diag.get("class"),
            "log": r.get("log"),
            "duration_s": r.get("duration_s"),
        }
        metrics = r.get("metrics") or []
        if not metrics:
            rows.append(base)
        for m in metrics:
            t = m.get("threshold") or {}
            f = m.get("fleet") or {}
            value = m.get("value")
            rows.append(
                {
                    **base,
                    "metric": m.get("name"),
                    "labels": labels_text(m.get("labels")) or None,
                    "value": float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None,
                    "unit": m.get("unit"),
                    "metric_verdict": m.get("verdict"),
                    "metric_reason": m.get("reason") or None,
                    "threshold_min": t.get("min"),
                    "threshold_max": t.get("max"),
                    "threshold_warn_min": t.get("warn_min"),
                    "threshold_warn_max": t.get("warn_max"),
                    "threshold_unit": t.get("unit"),
                    "threshold_source": t.get("source"),
                    "threshold_origin": t.get("origin"),
                    "fleet_median": f.get("median"),
                    "fleet_mad": f.get("mad"),
                    "fleet_delta_pct": f.get("delta_pct"),
                    "fleet_robust_z": f.get("robust_z"),
                    "fleet_outlier": f.get("outlier"),
                }
            )
    return rows


def results_frame(doc: Mapping[str, Any]) -> Any:
    """A pandas DataFrame of the document, one row per (node, check, metric), columns :data:`COLUMNS`."""
    import pandas as pd

    df = pd.DataFrame(_rows(doc), columns=COLUMNS)
    for col in (
        "value",
        "threshold_min",
        "threshold_max",
        "threshold_warn_min",
        "threshold_warn_max",
        "fleet_median",
        "fleet_mad",
        "fleet_delta_pct",
        "fleet_robust_z",
        "duration_s",
    ):
        df[col] = pd.to_numeric(df[col], errors="coerce").astype("float64")
    df["fleet_outlier"] = df["fleet_outlier"].astype("boolean")
    text = [c for c in COLUMNS if df[c].dtype == object]
    for col in text:
        df[col] = df[col].astype("string")
    return df


def _defuse(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    value = visible(value)  # a tool's control characters as escapes (a CR would end a row)
    if value[:1] in ("=", "+", "-", "@", "\t"):
        return "'" + value
    return value


def write_tables(run_dir: Path, doc: Mapping[str, Any]) -> list[Path]:
    """Write ``results.csv`` (and ``results.parquet`` when pyarrow is installed); return the paths.

    Raises:
        OutputWriteError: a file could not be written (each is written whole or not at all).
    """
    import pandas as pd

    df = results_frame(doc)
    written = []
    csv = run_dir / "results.csv"
    out = df.copy()
    for col in out.columns:
        if pd.api.types.is_string_dtype(out[col].dtype):
            out[col] = out[col].map(_defuse, na_action="ignore")
    written.append(write_atomic(csv, out.to_csv(index=False)))
    if importlib.util.find_spec("pyarrow") is not None:
        buf = io.BytesIO()
        df.to_parquet(buf, index=False, engine="pyarrow")
        written.append(write_atomic(run_dir / "results.parquet", buf.getvalue()))
    return written
