"""Fleet-relative outliers: each node (and each GPU) against its SKU's fleet.

For every performance metric of a run (a unit with a better direction, as the metric
catalog's :func:`~nvtest.config.metrics.lower_is_better` says: GB/s, Gb/s, TB/s, TFLOP/s,
GFLOP/s, tokens/s higher is better; s, ms, us, ns lower is better), values are grouped by
SKU, check, metric name and the labels that say *what* was measured (dtype,
library, message size), not *where* (``device``, ``gpu``, ``hca``, ``port``):
every GPU of every node of a SKU is one population. Per value::

    delta_pct = (value - median) / median * 100          (sign: + faster for higher-is-better)
    robust_z  = 0.6745 * (value - median) / MAD           (MAD = median absolute deviation)

A value is an outlier when it is worse than the median by ``warn_below_pct`` (5 %,
SuperBench's rule) or when its robust z-score is beyond ``robust_z`` (3.5, the
Iglewicz-Hoaglin cut) in the bad direction *and* at least ``min_delta_pct`` (1 %)
worse (a tight fleet's noise is not an outlier). An outlier that passed its
absolute threshold becomes ``warn``; ``fail`` only when ``fail_below_pct`` is
set and the value is that much worse. Groups smaller than ``min_samples`` are
not judged. A value the Judge found implausible (outside its physical bound,
``bound.implausible``) or any metric with an ``error`` verdict is left out of its
group: it is neither judged against the fleet nor counts in the median.

Systemic failures: when every node of a SKU (two or more) fails the same check,
the thresholds or the environment are suspect before the hardware (field-cases
"detect systemic failure"); :func:`systemic_failures` lists them.

Each judged metric gets ``"fleet": {"median", "mad", "delta_pct", "robust_z",
"outlier", "n"}`` in results.json.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from nvtest.config.metrics import lower_is_better
from nvtest.verdict import Verdict

__all__ = [
    "FleetPolicy",
    "FleetStats",
    "apply_fleet",
    "group_key",
    "robust_stats",
    "systemic_failures",
]

#: Labels that say where a value was measured (not part of the comparison group).
PLACE_LABELS = frozenset({"device", "gpu", "hca", "port", "node", "pci_bus_id", "rank"})

#: 1 / Phi^-1(3/4): makes the MAD a consistent estimator of the standard deviation.
_MAD_K = 0.6745


@dataclass(frozen=True)
class FleetPolicy:
    """How far from the fleet a value may be.

    Attributes:
        warn_below_pct: warn when this many percent worse than the median.
        robust_z: warn when the robust z-score is beyond this (bad direction only).
        min_delta_pct: a z-score outlier must also be at least this many percent worse.
        fail_below_pct: fail when this many percent worse (None: outliers never fail).
        min_samples: smallest group that is judged.
    """

    warn_below_pct: float = 5.0
    robust_z: float = 3.5
    min_delta_pct: float = 1.0
    fail_below_pct: float | None = None
    min_samples: int = 3

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any] | None) -> FleetPolicy:
        """From a SKU recipe's ``fleet:`` block (unknown keys are ignored)."""
        if not data:
            return cls()
        fields = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in data.items() if k in fields})


@dataclass(frozen=True)
class FleetStats:
    """One value against its group (see the module doc for the formulas)."""

    median: float
    mad: float
    delta_pct: float
    robust_z: float | None
    outlier: bool
    n: int

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        for k in ("median", "mad", "delta_pct"):
            d[k] = round(d[k], 4)
        if d["robust_z"] is not None:
            d["robust_z"] = round(d["robust_z"], 3)
        return d


def robust_stats(values: Iterable[float]) -> tuple[float, float]:
    """(median, MAD) of ``values`` (MAD: median of absolute deviations from the median)."""
    xs = list(values)
    med = statistics.median(xs)
    return med, statistics.median(abs(x - med) for x in xs)


def group_key(sku: str | None, check: str, metric: Mapping[str, Any]) -> tuple[Any, ...]:
    """The comparison group of one metric: SKU, check, name, unit and what-labels."""
    labels = tuple(sorted((k, str(v)) for k, v in (metric.get("labels") or {}).items() if k not in PLACE_LABELS))
    return (sku, check, metric["name"], metric.get("unit"), labels)


def _judge(value: float, med: float, mad: float, n: int, lower_better: bool, p: FleetPolicy) -> FleetStats:
    sign = -1.0 if lower_better else 1.0
    delta = 0.0 if med == 0 else (value - med) / abs(med) * 100.0
    z = None if mad == 0 else _MAD_K * (value - med) / mad
    worse_pct = -sign * delta
    outlier = worse_pct >= p.warn_below_pct or (
        z is not None and -sign * z > p.robust_z and worse_pct >= p.min_delta_pct
    )
    return FleetStats(med, mad, delta, z, outlier, n)


def apply_fleet(
    results: list[dict[str, Any]],
    sku_of: Mapping[str, str | None],
    policy_of: Mapping[str | None, FleetPolicy] | None = None,
) -> list[dict[str, Any]]:
    """Add fleet statistics to every performance metric of ``results`` (in place).

    ``results`` are results.json result dicts; ``sku_of`` maps node -> SKU name;
    ``policy_of`` maps SKU name -> policy (default :class:`FleetPolicy`).
    Metric verdicts turn ``pass`` -> ``warn`` (or ``fail`` per policy) for
    outliers, with the reason extended; item verdicts become the worst of the
    old item verdict and its metrics. Returns the outliers found, as
    ``{"check", "node", "metric", "labels", "value", "unit", "fleet"}``.
    """
    policies = policy_of or {}
    groups: dict[tuple[Any, ...], list[tuple[dict[str, Any], dict[str, Any]]]] = {}
    for r in results:
        if r.get("verdict") in (Verdict.SKIP.value, Verdict.ERROR.value):
            continue
        for m in r.get("metrics") or []:
            if m.get("value") is None or lower_is_better(m.get("unit")) is None:
                continue  # no better direction (a count, a temperature): thresholds only
            if m.get("verdict") == Verdict.ERROR.value or (m.get("bound") or {}).get("implausible"):
                continue  # implausible or unmeasured: not a member of the fleet
            groups.setdefault(group_key(sku_of.get(r["node"]), r["check"], m), []).append((r, m))
    found: list[dict[str, Any]] = []
    for key, members in groups.items():
        pol = policies.get(key[0]) or FleetPolicy()
        if len(members) < pol.min_samples:
            continue
        med, mad = robust_stats(float(m["value"]) for _, m in members)
        lower = lower_is_better(key[3]) is True
        for r, m in members:
            st = _judge(float(m["value"]), med, mad, len(members), lower, pol)
            m["fleet"] = st.to_json()
            if not st.outlier:
                continue
            found.append(
                {
                    "check": r["check"],
                    "node": r["node"],
                    "metric": m["name"],
                    "labels": m.get("labels") or {},
                    "value": m["value"],
                    "unit": m.get("unit"),
                    "fleet": m["fleet"],
                }
            )
            worse = abs(st.delta_pct)
            fails = pol.fail_below_pct is not None and worse >= pol.fail_below_pct
            new = Verdict.FAIL if fails else Verdict.WARN
            if Verdict(m["verdict"]).rank < new.rank:
                m["verdict"] = new.value
            note = (
                f"{worse:.1f}% {'slower than' if lower else 'below'} the fleet median "
                f"{med:.4g} {m.get('unit')} (n={st.n}"
                + (f", robust z {st.robust_z:.1f})" if st.robust_z is not None else ")")
            )
            m["reason"] = f"{m.get('reason') or ''}; fleet: {note}".lstrip("; ")
            if Verdict(r["verdict"]).rank < new.rank:
                r["verdict"] = new.value
            lab = ",".join(f"{k}={v}" for k, v in (m.get("labels") or {}).items())
            part = f"{m['name']}{'[' + lab + ']' if lab else ''}: fleet outlier, {note}"
            r["reason"] = f"{r.get('reason') or ''}; {part}".lstrip("; ")
    return found


#: The fewest nodes of a SKU that can show a systemic failure (all of them failing alike).
SYSTEMIC_MIN_NODES = 3


def systemic_failures(results: Iterable[Mapping[str, Any]], sku_of: Mapping[str, str | None]) -> list[dict[str, Any]]:
    """(SKU, check) pairs where every node of the SKU (three or more) failed.

    Two nodes failing alike are no fleet pattern: each keeps its own diagnosis.

    Returns ``{"sku", "check", "nodes", "metrics", "message"}`` per pair; ``metrics``
    are the metric names that failed on every node (the "same way").
    """
    nodes_of: dict[str | None, set[str]] = {}
    for node, sku in sku_of.items():
        nodes_of.setdefault(sku, set()).add(node)
    by_pair: dict[tuple[str | None, str], list[Mapping[str, Any]]] = {}
    for r in results:
        by_pair.setdefault((sku_of.get(r["node"]), r["check"]), []).append(r)
    out = []
    for (sku, check), rs in sorted(by_pair.items(), key=lambda kv: (str(kv[0][0]), kv[0][1])):
        members = nodes_of.get(sku, set())
        failed = {r["node"] for r in rs if r.get("verdict") == Verdict.FAIL.value}
        if len(members) < SYSTEMIC_MIN_NODES or failed != members:
            continue
        per_node = [{m["name"] for m in r.get("metrics") or [] if m.get("verdict") == "fail"} for r in rs]
        common = sorted(set.intersection(*per_node)) if per_node else []
        what = f" ({', '.join(common)} below the threshold on every node)" if common else ""
        message = (
            f"every one of the {len(members)} {sku or 'unmatched'} nodes fails {check}{what}: "
            "suspect the thresholds, the recipe or the environment (software stack, cooling, fabric) "
            "before the hardware"
        )
        out.append(
            {
                "sku": sku,
                "check": check,
                "nodes": sorted(members),
                "metrics": common,
                "message": message,
            }
        )
    return out
