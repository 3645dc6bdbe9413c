"""Re-judge a stored run's measurements against another SKU profile (and overlay), offline.

``nvtest evaluate RUN_DIR [--sku X] [--overlay F] [--out DIR]`` reads
``RUN_DIR/results.json``, judges everything the run recorded again with everything the
profile says, reruns the post-run analysis (fleet outliers, diagnosis) and writes a new
``results.json`` and reports in ``DIR`` (default ``RUN_DIR/evaluate-<sku>/``, or
``evaluate-<overlay name>/`` with an overlay alone). Nothing is rerun and ``RUN_DIR`` is
not changed. With ``--sku`` every node is judged as that SKU; without it, each node with
the SKU it was judged with in the run (the overlay on top).

What is applied, per item:

- a check judged from the node facts alone (``host``, ``gpus``, ``driver_stack``, through
  the ``facts_rejudge`` callback, :func:`nvtest.checks.offline.rejudge_from_facts`) is
  judged again from the recorded facts: the profile's expectations (GPU count and model,
  driver, ECC) apply to what the node was;
- every recorded metric is judged again as the Judge judges it
  (:func:`nvtest.config.thresholds.assess`: declared, plausible on the node's recorded
  hardware with the new profile's figures, then the new threshold);
- a threshold of the profile for the item's check at a metric the run did not measure is
  an ``error`` ("not measured"): a profile's expectation is never met by its absence;
- a skipped item becomes ``error`` ("not measured") when the profile has thresholds for
  its check, or expects GPUs the recorded facts do not show; otherwise it stays skipped.

What a check reported itself (wrong results, an inactive link, an Xid) is kept: such an
item keeps the verdict of those findings, and only its metric verdicts change. Where the
stored reason cannot tell a finding from a warning, the finding is kept as a failure
(never re-judged into a pass). Items that errored without a metric stay as they were.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from nvtest.analysis.finish import finish_run
from nvtest.config.metrics import Hardware, declare_recorded, hardware_from_facts
from nvtest.config.skus import Catalog, load_catalog
from nvtest.config.thresholds import (
    IMPLAUSIBLE,
    METRIC_UNDECLARED,
    METRIC_UNIT,
    OUTSIDE_THRESHOLD,
    UNIT_MISMATCH,
    SkuProfile,
    assess,
)
from nvtest.errors import ConfigError
from nvtest.playbook.diagnosis import first_cause
from nvtest.playbook.legacy import add_legacy_causes
from nvtest.report.manifest import check_sign_key
from nvtest.results import load_results
from nvtest.verdict import Verdict, worst

__all__ = ["FactsRejudge", "evaluate_run", "rejudge"]

#: ``(result, recorded facts, profile, catalog, nodes in the run) -> new verdict, reason,
#: metrics, details`` for a check judged from the node facts alone, else None.
FactsRejudge = Callable[
    [Mapping[str, Any], Mapping[str, Any] | None, SkuProfile | None, Catalog, int],
    dict[str, Any] | None,
]


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


def _skip_still_holds(r: dict[str, Any], prof: SkuProfile | None, facts: Mapping[str, Any] | None) -> str | None:
    """Why a skipped item cannot stay skipped under ``prof`` (None: it stays)."""
    if prof is None:
        return None
    wanted = sorted(prof.thresholds.get(r["check"], {}))
    if wanted:
        return f"{prof.name} has thresholds for {r['check']} ({', '.join(wanted)})"
    if prof.expect.gpus and facts is not None and not facts.get("gpus"):
        return f"{prof.name} expects {prof.expect.gpus} GPUs and the run's facts show none"
    return None


#: The cause keys the judgement of a metric gives (judged again here).
THRESHOLD_KEYS = (OUTSIDE_THRESHOLD, UNIT_MISMATCH, METRIC_UNDECLARED, METRIC_UNIT, IMPLAUSIBLE)


def _judge_metrics(
    new: dict[str, Any], prof: SkuProfile | None, catalog: Catalog, hw: Hardware
) -> tuple[list[dict[str, Any]], list[str]]:
    """Judge every recorded metric of ``new`` again (in place); add the profile's unmeasured ones.
    Returns the metrics and the cause keys of those a threshold fails or cannot judge."""
    check = new["check"]
    metrics = new.setdefault("metrics", [])
    causes: list[str] = []
    for m in metrics:
        a = assess(check, m["name"], m.get("value"), m.get("unit", ""), prof, hw, dict(m.get("labels") or {}))
        if a.cause is not None:
            causes.append(a.cause)
        m["verdict"], m["reason"] = a.verdict.value, a.reason
        m["threshold"] = (
            {**a.threshold.model_dump(exclude_none=True), "origin": catalog.origin(prof.name, check, m["name"])}
            if a.threshold is not None and prof is not None
            else None
        )
        m["bound"] = {**a.bound.to_json(), "implausible": a.implausible} if a.bound is not None else None
    measured = {m["name"] for m in metrics}
    for name, thr in sorted(((prof.thresholds.get(check) or {}) if prof else {}).items()):
        if name not in measured:
            metrics.append(
                {
                    "name": name,
                    "value": None,
                    "unit": thr.unit,
                    "verdict": Verdict.ERROR.value,
                    "reason": f"not measured in this run; {prof.name if prof else '?'} has a threshold for it",
                    "threshold": {
                        **thr.model_dump(exclude_none=True),
                        "origin": catalog.origin(prof.name if prof else "", check, name),
                    },
                    "labels": {},
                    "fleet": None,
                    "bound": None,
                }
            )
    return metrics, causes


def rejudge(
    r: dict[str, Any],
    prof: SkuProfile | None,
    catalog: Catalog,
    *,
    facts: Mapping[str, Any] | None = None,
    nodes: int = 1,
    facts_rejudge: FactsRejudge | None = None,
) -> dict[str, Any]:
    """One result re-judged with ``prof`` (a new dict; see the module doc for the rules).

    ``facts``: the node's recorded inventory (results.json ``nodes.<node>.inventory``);
    ``nodes``: nodes in the run (aggregate bounds).
    """
    verdict, reason, old = _base(r)
    new = copy.deepcopy(r)
    new.pop("judged", None)
    new["diagnosis"] = None
    if facts_rejudge is not None:
        fresh = facts_rejudge(r, facts, prof, catalog, nodes)
        if fresh is not None:
            new.update(fresh)
            return new
    metrics = new.get("metrics") or []
    for m, (v, why) in zip(metrics, old, strict=False):
        m["verdict"], m["reason"], m["fleet"] = v, why, None
    if verdict == Verdict.SKIP.value and not metrics:
        why_not = _skip_still_holds(r, prof, facts)
        if why_not is None:
            new["verdict"], new["reason"] = verdict, reason
        else:
            new["verdict"] = Verdict.ERROR.value
            new["reason"] = f"not measured: the run skipped it ({reason}), but {why_not}"
        return new
    if verdict == Verdict.ERROR.value and not metrics:
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
    elif findings and verdict != Verdict.PASS.value:
        tool = Verdict.WARN if verdict == Verdict.WARN.value else Verdict.FAIL
    metrics, causes = _judge_metrics(new, prof, catalog, hardware_from_facts(facts, prof, nodes))
    new["verdict"] = worst([tool, *(Verdict(m["verdict"]) for m in metrics)], default=Verdict.PASS).value
    # the check's own cause stays; the metrics' are judged again
    own = None if r.get("cause") in THRESHOLD_KEYS else r.get("cause")
    cause = first_cause([own, *causes]) if Verdict(new["verdict"]).is_bad else None
    if cause is None:
        new.pop("cause", None)
    else:
        new["cause"] = cause
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
                m: {**t.model_dump(exclude_none=True), "origin": catalog.origin(prof.name, c, m)} for m, t in ms.items()
            }
            for c, ms in prof.thresholds.items()
        },
        "sources": prof.sources,
        "expect": prof.expect.model_dump(exclude_none=True),
    }


def _profiles(doc: Mapping[str, Any], catalog: Catalog, sku: str | None) -> dict[str, SkuProfile | None]:
    """node -> the profile it is judged with: ``sku`` for all, else the one of the run.

    Raises:
        ConfigError: ``sku`` is unknown, or a node's recorded SKU is not in the catalog.
    """
    if sku is not None:
        prof = catalog.get(sku)
        return {n: prof for n in doc.get("nodes") or {}}
    out: dict[str, SkuProfile | None] = {}
    for name, nd in (doc.get("nodes") or {}).items():
        recorded = nd.get("sku")
        if recorded and recorded not in catalog.profiles:
            raise ConfigError(
                f"node {name} was judged with SKU {recorded!r}, which is not in the catalog "
                "(pass --sku-dir with its profile, or --sku)",
                field="sku",
            )
        out[name] = catalog.profiles.get(recorded) if recorded else None
    return out


def _out_name(sku: str | None, overlay: Path | None) -> str:
    if sku:
        return f"evaluate-{sku}"
    return f"evaluate-{overlay.stem}" if overlay else "evaluate-profiles"


def evaluate_run(
    run_dir: Path,
    sku: str | None = None,
    *,
    overlay: Path | None = None,
    out: Path | None = None,
    sku_dirs: Sequence[Path] = (),
    facts_rejudge: FactsRejudge | None = None,
    sign_key: Path | None = None,
) -> tuple[Path, dict[str, Any]]:
    """Re-judge ``run_dir`` with ``sku`` (None: each node's recorded SKU) and ``overlay``;
    write and return (out dir, document). ``facts_rejudge``: see :data:`FactsRejudge`.
    The out dir gets a manifest of its own (signed with ``sign_key`` when given); the
    run's manifest is not changed, so ``nvtest verify`` of the run names a copy written
    inside it ADDED until the run's manifest lists the copy's (a separate set: see
    :mod:`nvtest.report.manifest`).

    Raises:
        ConfigError: unreadable results.json, unknown SKU, invalid overlay or profile, or a
            ``sign_key`` that cannot sign (checked before anything is written).
    """
    check_sign_key(sign_key)
    doc = load_results(run_dir)
    declare_recorded(doc.get("checks") or {})  # a site check's own metrics, as the run declared them
    add_legacy_causes(doc)  # before judging again sets threshold keys: the document's own state
    catalog = load_catalog(list(sku_dirs), overlay)
    profiles = _profiles(doc, catalog, sku)
    forced = catalog.get(sku) if sku else None
    out_dir = out or run_dir / _out_name(sku, overlay)
    out_dir.mkdir(parents=True, exist_ok=True)
    new = copy.deepcopy(doc)
    nodes = doc.get("nodes") or {}
    count = max(1, len(nodes))
    new["results"] = [
        rejudge(
            r,
            profiles.get(r["node"], forced),
            catalog,
            facts=(nodes.get(r["node"]) or {}).get("inventory"),
            nodes=count,
            facts_rejudge=facts_rejudge,
        )
        for r in doc.get("results") or []
    ]
    for r in new["results"]:
        if r.get("log"):
            r["log"] = os.path.relpath(Path(run_dir) / r["log"], out_dir)
    if forced is not None:
        for nd in (new.get("nodes") or {}).values():
            nd["sku"], nd["sku_match"], nd["sku_forced"] = forced.name, ["forced (nvtest evaluate --sku)"], True
    used = {p.name: p for p in profiles.values() if p is not None}
    new["skus"] = {name: _sku_entry(catalog, p) for name, p in sorted(used.items())}
    run = new.setdefault("run", {})
    run["evaluated_from"] = {
        "run_id": run.get("run_id"),
        "run_dir": str(run_dir),
        "sku": sku,
        "overlay": str(overlay) if overlay else None,
    }
    run["overlay"] = str(overlay) if overlay else None
    run["forced_sku"] = sku
    finish_run(out_dir, catalog, doc=new, sign_key=sign_key, rejudged="nvtest evaluate")
    return out_dir, new
