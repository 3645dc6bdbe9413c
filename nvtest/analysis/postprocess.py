"""Post-run analysis of a results.json document: fleet outliers, systemic failures, diagnosis.

:func:`post_process` runs in :func:`nvtest.results.write_results_json` before the
document is written, and again in ``nvtest evaluate``. It is pure on the
document (the SKU catalog is read only for ``recipe.fleet`` policies) and
idempotent: each result keeps its pre-analysis verdict and reason under
``"judged"`` and the analysis restarts from them.

Adds to the document:

- per performance metric ``"fleet": {median, mad, delta_pct, robust_z, outlier, n}``
  (outliers warn, see :mod:`nvtest.analysis.outliers`), item, node and run verdicts recomputed;
- ``"fleet": {"policy": {...}, "outliers": [...], "systemic": [...]}`` at the top,
  a run warning per systemic failure, and one per configuration difference the ``sdc``
  check found between groups of GPUs (:func:`nvtest.analysis.sdc.run_warnings`);
- every reason bounded to one line (:func:`nvtest.results.bound_reason`: what the analysis
  added to it too; the whole text in ``details.reason_full``);
- per failing or erroring result ``"diagnosis": {cause, action, class, rule}``, from the
  tool's own words (the whole reason) (the tail of the result's log, when ``run_dir`` is given), the same
  node's other results in the run (its failing configuration findings) and the fleet.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from nvtest.analysis.outliers import FleetPolicy, apply_fleet, systemic_failures
from nvtest.analysis.sdc import run_warnings as sdc_run_warnings
from nvtest.playbook.diagnosis import diagnose
from nvtest.results import bound_reason, summarize

__all__ = ["EVIDENCE_TAIL_BYTES", "evidence_tail", "fleet_policies", "post_process", "recompute_summary"]


def fleet_policies(doc: Mapping[str, Any], catalog: Any | None = None) -> dict[str | None, FleetPolicy]:
    """SKU name -> :class:`FleetPolicy` from each profile's ``recipe.fleet`` (defaults otherwise).

    Without a catalog, the bundled profiles and the run's overlay (``run.overlay``) are read;
    any trouble reading them falls back to the defaults.
    """
    if catalog is None:
        try:
            from pathlib import Path

            from nvtest.config.skus import load_catalog

            ov = (doc.get("run") or {}).get("overlay")
            catalog = load_catalog([], Path(ov) if ov and Path(ov).is_file() else None)
        except Exception:  # noqa: BLE001 - a policy lookup never breaks writing results
            catalog = None
    out: dict[str | None, FleetPolicy] = {}
    for sku in doc.get("skus") or {}:
        prof = catalog.profiles.get(sku) if catalog is not None else None
        out[sku] = FleetPolicy.from_mapping((prof.recipe.get("fleet") if prof else None) or None)
    return out


def recompute_summary(doc: dict[str, Any]) -> None:
    """Node verdicts, counts and the overall verdict from the results (in place)."""
    summarize(doc)


def _restore(r: dict[str, Any]) -> None:
    """Back to the verdicts the checks gave, before any earlier analysis."""
    judged = r.get("judged")
    if judged is None:
        r["judged"] = {
            "verdict": r["verdict"],
            "reason": r.get("reason", ""),
            "metrics": [[m.get("verdict"), m.get("reason", "")] for m in r.get("metrics") or []],
        }
        return
    r["verdict"], r["reason"] = judged["verdict"], judged["reason"]
    for m, (v, why) in zip(r.get("metrics") or [], judged.get("metrics") or [], strict=False):
        m["verdict"], m["reason"] = v, why
    for m in r.get("metrics") or []:
        m["fleet"] = None
    r["diagnosis"] = None


#: How much of the end of a result's log the diagnosis reads (bytes): the tool's last words.
EVIDENCE_TAIL_BYTES = 256 * 1024


def evidence_tail(run_dir: Path | None, log: object) -> str:
    """The last :data:`EVIDENCE_TAIL_BYTES` of a result's log, relative to ``run_dir`` ('' if none).

    ``log`` is relative to ``run_dir`` (a re-judged copy's logs are ``../logs/...`` of the
    run it came from). Only a regular file is read (never a FIFO or device, which could
    block); any trouble reading it gives '' (the diagnosis then has the reason alone).
    """
    if run_dir is None or not isinstance(log, str) or not log:
        return ""
    try:
        path = run_dir / log
        if not path.is_file():
            return ""
        with path.open("rb") as f:
            size = f.seek(0, 2)
            f.seek(max(0, size - EVIDENCE_TAIL_BYTES))
            return f.read(EVIDENCE_TAIL_BYTES).decode("utf-8", "replace")
    except OSError:
        return ""


def post_process(
    doc: dict[str, Any],
    *,
    catalog: Any | None = None,
    policies: Mapping[str | None, FleetPolicy] | None = None,
    run_dir: Path | None = None,
) -> dict[str, Any]:
    """Fleet outliers, systemic failures and diagnoses on ``doc`` (changed in place and returned).

    ``run_dir``: where the results' logs are (their tails are the tools' own words for the
    diagnosis); None diagnoses from the document alone.
    """
    results: list[dict[str, Any]] = doc.get("results") or []
    for r in results:
        _restore(r)
    sku_of = {name: nd.get("sku") for name, nd in (doc.get("nodes") or {}).items()}
    for r in results:
        sku_of.setdefault(r["node"], None)
    pol = dict(policies) if policies is not None else fleet_policies(doc, catalog)
    outliers = apply_fleet(results, sku_of, pol)
    systemic = systemic_failures(results, sku_of)
    run = doc.setdefault("run", {})
    warnings = [w for w in run.get("warnings") or [] if not str(w).startswith(("systemic: ", "sdc: "))]
    warnings.extend(f"systemic: {s['message']}" for s in systemic)
    warnings.extend(sdc_run_warnings(results))
    run["warnings"] = warnings
    pairs = {(s["sku"], s["check"]) for s in systemic}
    by_node: dict[str, list[dict[str, Any]]] = {}
    for r in results:
        by_node.setdefault(r["node"], []).append(r)
    for r in results:
        r["reason"], r["details"] = bound_reason(str(r.get("reason") or ""), r.get("details"))
        evidence = evidence_tail(run_dir, r.get("log")) if r.get("verdict") in ("fail", "error") else ""
        full = (r.get("details") or {}).get("reason_full")
        d = diagnose(
            {**r, "reason": full} if full else r,  # the tool's words the one-line reason left out
            systemic=(sku_of.get(r["node"]), r["check"]) in pairs,
            evidence=evidence,
            node_results=[o for o in by_node[r["node"]] if o is not r],
        )
        r["diagnosis"] = d.to_json() if d else None
    default = FleetPolicy()
    doc["fleet"] = {
        "policy": {str(k): asdict(v) for k, v in pol.items()} or {"default": asdict(default)},
        "outliers": outliers,
        "systemic": systemic,
    }
    recompute_summary(doc)
    return doc
