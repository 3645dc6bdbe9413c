"""Re-judge a stored run's measurements against another SKU profile (and overlay), offline.

``nvtest evaluate RUN_DIR --sku X [--overlay F] [--out DIR]`` reads
``RUN_DIR/results.json``, judges every recorded metric value again with the
thresholds of ``X`` (after the overlay), reruns the post-run analysis (fleet
outliers, diagnosis) and writes a new ``results.json`` and reports in ``DIR``
(default ``RUN_DIR/evaluate-<sku>/``). Nothing is rerun and ``RUN_DIR`` is not
changed.

What a check reported itself (wrong results, an inactive link, an Xid) is kept:
an item keeps the verdict of those findings, and only its metric verdicts
change. Where the stored reason cannot tell a finding from a warning, the
finding is kept as a failure (never re-judged into a pass). Skipped and errored
items stay as they were.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from nvtest.analysis.finish import finish_run
from nvtest.config.skus import Catalog, load_catalog
from nvtest.config.thresholds import SkuProfile, evaluate
from nvtest.results import load_results
from nvtest.verdict import Verdict, worst

__all__ = ["evaluate_run", "rejudge"]


def _part(m: dict[str, Any]) -> str:
    lab = ",".join(f"{k}={v}" for k, v in (m.get("labels") or {}).items())
    return f"{m['name']}{'[' + lab + ']' if lab else ''}: {m.get('reason', '')}"


def _base(r: dict[str, Any]) -> tuple[str, str, list[tuple[str, str]]]:
    judged = r.get("judged")
    if judged:
        return (
            judged["verdict"],
            judged.get("reason", ""),
            [tuple(x) for x in judged.get("metrics") or []],
        )
    return (
        r["verdict"],
        r.get("reason", ""),
        [(m["verdict"], m.get("reason", "")) for m in r.get("metrics") or []],
    )


def rejudge(r: dict[str, Any], prof: SkuProfile, catalog: Catalog) -> dict[str, Any]:
    """One result re-judged with ``prof`` (a new dict; see the module doc for the rules)."""
    verdict, reason, old = _base(r)
    new = copy.deepcopy(r)
    new.pop("judged", None)
    new["diagnosis"] = None
    metrics = new.get("metrics") or []
    for m, (v, why) in zip(metrics, old, strict=False):
        m["verdict"], m["reason"], m["fleet"] = v, why, None
    if verdict in (Verdict.SKIP.value, Verdict.ERROR.value) and not metrics:
        new["verdict"], new["reason"] = verdict, reason
        return new
    rest = reason
    for m in metrics:
        if m["verdict"] in ("fail", "error", "warn"):
            rest = rest.replace(_part(m), "")
    findings = [p.strip() for p in rest.split("; ") if p.strip()]
    tool = Verdict.PASS
    if verdict == Verdict.ERROR.value:
        tool = Verdict.ERROR
    elif findings:
        tool = Verdict.WARN if verdict == Verdict.WARN.value else Verdict.FAIL
        if verdict == Verdict.PASS.value:
            tool = Verdict.PASS
    for m in metrics:
        thr = prof.threshold(new["check"], m["name"])
        ev = evaluate(m.get("value"), m.get("unit", ""), thr)
        m["verdict"], m["reason"] = ev.verdict.value, ev.reason
        m["threshold"] = (
            {
                **thr.model_dump(exclude_none=True),
                "origin": catalog.origin(prof.name, new["check"], m["name"]),
            }
            if thr is not None
            else None
        )
    new["verdict"] = worst(
        [tool, *(Verdict(m["verdict"]) for m in metrics)], default=Verdict.PASS
    ).value
    bad = sorted(
        (m for m in metrics if m["verdict"] in ("fail", "error", "warn")),
        key=lambda m: -Verdict(m["verdict"]).rank,
    )
    new["reason"] = "; ".join([*findings, *(_part(m) for m in bad)])
    return new


def _sku_entry(catalog: Catalog, prof: SkuProfile) -> dict[str, Any]:
    return {
        "name": prof.name,
        "description": prof.description,
        "file": catalog.files.get(prof.name),
        "thresholds": {
            c: {
                m: {**t.model_dump(exclude_none=True), "origin": catalog.origin(prof.name, c, m)}
                for m, t in ms.items()
            }
            for c, ms in prof.thresholds.items()
        },
        "sources": prof.sources,
        "expect": prof.expect.model_dump(exclude_none=True),
    }


def evaluate_run(
    run_dir: Path,
    sku: str,
    *,
    overlay: Path | None = None,
    out: Path | None = None,
    sku_dirs: Sequence[Path] = (),
) -> tuple[Path, dict[str, Any]]:
    """Re-judge ``run_dir`` with ``sku`` (+ ``overlay``); write and return (out dir, document).

    Raises:
        ConfigError: unreadable results.json, unknown SKU, invalid overlay or profile.
    """
    doc = load_results(run_dir)
    catalog = load_catalog(list(sku_dirs), overlay)
    prof = catalog.get(sku)
    out_dir = out or run_dir / f"evaluate-{sku}"
    out_dir.mkdir(parents=True, exist_ok=True)
    new = copy.deepcopy(doc)
    new["results"] = [rejudge(r, prof, catalog) for r in doc.get("results") or []]
    for r in new["results"]:
        if r.get("log"):
            r["log"] = os.path.relpath(Path(run_dir) / r["log"], out_dir)
    for nd in (new.get("nodes") or {}).values():
        nd["sku"], nd["sku_match"], nd["sku_forced"] = (
            prof.name,
            ["forced (nvtest evaluate --sku)"],
            True,
        )
    new["skus"] = {prof.name: _sku_entry(catalog, prof)}
    run = new.setdefault("run", {})
    run["evaluated_from"] = {
        "run_id": run.get("run_id"),
        "run_dir": str(run_dir),
        "sku": sku,
        "overlay": str(overlay) if overlay else None,
    }
    run["overlay"] = str(overlay) if overlay else None
    run["forced_sku"] = sku
    finish_run(out_dir, catalog, doc=new)
    return out_dir, new
