"""Result records and the append-only run store.

While a run goes on, every event is one line of ``results.jsonl`` written (and
flushed to disk) the moment it is known, so a crash loses nothing measured. At
the end, :func:`assemble` folds the lines into ``results.json`` (schema in
``docs/results.schema.json``), from which every report is rendered.

JSONL lines, by ``kind``:

- ``run``: run metadata (id, nvtest version, command line, start time, host, backend, suite)
- ``node``: a node's settings, gathered inventory and SKU
- ``sku``: a SKU profile used in the run (thresholds with sources)
- ``check``: a check's title, area and description
- ``result``: one verdict of one (check, node) with its metrics
- ``warning``: a run-level warning (e.g. host keys not checked)
- ``end``: end time, interrupted flag, exit code
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from nvtest.verdict import Verdict, worst

__all__ = [
    "SCHEMA_VERSION",
    "CheckResult",
    "MetricResult",
    "ResultStore",
    "assemble",
    "load_results",
    "write_results",
    "node_verdicts",
]

#: Version of the results.json layout; bumped on any incompatible change.
SCHEMA_VERSION = 1


@dataclass(frozen=True)
class MetricResult:
    """One judged measurement.

    Attributes:
        name: metric name with its unit in it where it has one (``triad_gbps``).
        value: the measured value (None when it could not be measured).
        unit: unit of ``value`` (``GB/s``, ``TFLOP/s``, ``count``...).
        verdict: the metric's verdict.
        reason: why (``412 GB/s < min 431 GB/s``).
        threshold: the threshold used (min, max, warn_min, warn_max, unit, source,
            origin: ``profile:<sku>`` or ``overlay:<file>``), or None.
        labels: what the value is of: ``{"gpu": "0", "dtype": "bf16"}``.
        fleet: fleet statistics for outliers (median, mad, delta_pct), or None.
        bound: the physical bound the value was checked against before any threshold
            (rule, min, max, basis; :mod:`nvtest.config.metrics`), with ``implausible``
            true when the value was outside it; None when no bound applied.
    """

    name: str
    value: float | None
    unit: str
    verdict: Verdict
    reason: str = ""
    threshold: Mapping[str, Any] | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    fleet: Mapping[str, Any] | None = None
    bound: Mapping[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["verdict"] = self.verdict.value
        return d


@dataclass(frozen=True)
class CheckResult:
    """The verdict of one check on one node (one pytest item, e.g. ``test_stream[node001]``).

    Attributes:
        check: check name (``stream``).
        node: node name.
        verdict: worst of the metrics, or the item's own outcome (error, skip).
        reason: one line: the failing metric, the skip reason, the error.
        metrics: the judged measurements.
        log: path of the raw evidence, relative to the run directory.
        duration_s: time of the pytest item, seconds.
        started_at: seconds since the epoch.
        details: check-specific extra data shown in the report (e.g. inventory tables).
        diagnosis: likely cause and next step, when failing or erroring.
        nodeid: the pytest node id.
    """

    check: str
    node: str
    verdict: Verdict
    reason: str = ""
    metrics: tuple[MetricResult, ...] = ()
    log: str | None = None
    duration_s: float = 0.0
    started_at: float = 0.0
    details: Mapping[str, Any] | None = None
    diagnosis: Mapping[str, str] | None = None
    nodeid: str | None = None

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["verdict"] = self.verdict.value
        d["metrics"] = [m.to_json() for m in self.metrics]
        return d


class ResultStore:
    """Append-only JSONL writer for one run directory; safe across threads.

    Each :meth:`append` writes one line and flushes it to disk (``fsync``) before
    returning.
    """

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.path = run_dir / "results.jsonl"
        run_dir.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._fh = self.path.open("a", encoding="utf-8")

    def append(self, kind: str, payload: Mapping[str, Any]) -> None:
        """Write one event line ``{"kind": kind, "t": <epoch s>, **payload}``."""
        line = json.dumps({"kind": kind, "t": time.time(), **payload}, default=_json_default, sort_keys=False)
        with self._lock:
            self._fh.write(line + "\n")
            self._fh.flush()
            os.fsync(self._fh.fileno())

    def result(self, result: CheckResult) -> None:
        self.append("result", result.to_json())

    def close(self) -> None:
        with self._lock:
            if not self._fh.closed:
                self._fh.close()


def _json_default(obj: Any) -> Any:
    if isinstance(obj, Verdict):
        return obj.value
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    if hasattr(obj, "model_dump"):
        return obj.model_dump()
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def read_events(jsonl: Path) -> list[dict[str, Any]]:
    """Read a results.jsonl; a torn last line (crash mid-write) is ignored."""
    events = []
    for raw in jsonl.read_text(encoding="utf-8").splitlines():
        raw = raw.strip()
        if not raw:
            continue
        try:
            events.append(json.loads(raw))
        except json.JSONDecodeError:
            continue
    return events


def node_verdicts(results: Iterable[Mapping[str, Any]], node_names: Iterable[str]) -> dict[str, str]:
    """Node name -> worst verdict of its results (``skip`` for a node with none)."""
    per: dict[str, list[Verdict]] = {n: [] for n in node_names}
    for r in results:
        per.setdefault(r["node"], []).append(Verdict(r["verdict"]))
    return {n: worst(vs).value for n, vs in per.items()}


def assemble(jsonl: Path) -> dict[str, Any]:
    """Fold a run's results.jsonl into the results.json document (schema version 1).

    The latest ``result`` line for a (check, node) wins (a rerun replaces).
    """
    run: dict[str, Any] = {}
    nodes: dict[str, dict[str, Any]] = {}
    skus: dict[str, Any] = {}
    checks: dict[str, Any] = {}
    warnings: list[str] = []
    results: dict[tuple[str, str], dict[str, Any]] = {}
    end: dict[str, Any] = {}
    drained: dict[str, str] = {}
    for ev in read_events(jsonl):
        kind = ev.pop("kind", None)
        ev.pop("t", None)
        if kind == "run":
            run.update(ev)
        elif kind == "node":
            nodes.setdefault(ev["name"], {}).update(ev)
        elif kind == "sku":
            skus[ev["name"]] = ev
        elif kind == "check":
            checks[ev["name"]] = ev
        elif kind == "warning":
            warnings.append(ev["message"])
        elif kind == "result":
            results[(ev["check"], ev["node"])] = ev
        elif kind == "end":
            end.update(ev)
        elif kind == "drain":
            drained[ev["node"]] = ev["reason"]
    result_list = sorted(results.values(), key=lambda r: (r.get("started_at", 0), r["check"], r["node"]))
    for r in result_list:
        nodes.setdefault(r["node"], {"name": r["node"]})
    run.setdefault("host", socket.gethostname())
    run.update({k: v for k, v in end.items()})
    if run.get("started_at") and run.get("ended_at"):
        run["duration_s"] = round(run["ended_at"] - run["started_at"], 3)
    run["warnings"] = warnings
    run["drained"] = drained
    doc = {
        "schema_version": SCHEMA_VERSION,
        "run": run,
        "summary": {},
        "nodes": dict(sorted(nodes.items())),
        "skus": skus,
        "checks": checks,
        "results": result_list,
    }
    summarize(doc)
    return doc


def incomplete_reason(run: Mapping[str, Any]) -> str | None:
    """Why a run did not finish (interrupted, or nvtest itself failed), else None."""
    if run.get("harness_error"):
        return f"nvtest failed: {run['harness_error']}"
    if run.get("interrupted"):
        return f"run interrupted ({run.get('interrupt_signal') or 'SIGINT'})"
    if run.get("started_at") and not run.get("ended_at"):
        return "run did not finish (no end record)"
    return None


def summarize(doc: dict[str, Any]) -> None:
    """Set node verdicts, the per-verdict counts and the overall verdict (in place).

    The overall verdict is the worst node verdict; a run that did not finish is at
    least ``error`` (``summary.incomplete`` says why), so a partial run never reads
    as a pass, and a node with no result in it is ``error`` with ``unmeasured_reason``
    (not ``skip``, which means "not applicable").
    """
    results = doc.get("results") or []
    nodes = doc.setdefault("nodes", {})
    verdict_of = node_verdicts(results, nodes)
    incomplete = incomplete_reason(doc.get("run") or {})
    measured = {r["node"] for r in results}
    for name, v in verdict_of.items():
        node = nodes.setdefault(name, {"name": name})
        node.pop("unmeasured_reason", None)
        if incomplete and name not in measured:
            # nothing measured because the run stopped: not a skip (not applicable)
            verdict_of[name] = v = Verdict.ERROR.value
            node["unmeasured_reason"] = f"nothing measured: {incomplete}"
        node["verdict"] = v
    node_counts = {v.value: 0 for v in Verdict}
    for v in verdict_of.values():
        node_counts[v] += 1
    item_counts = {v.value: 0 for v in Verdict}
    for r in results:
        item_counts[r["verdict"]] += 1
    overall = worst((Verdict(v) for v in verdict_of.values()), default=Verdict.SKIP)
    if incomplete:
        overall = worst([overall, Verdict.ERROR])
    summary = {**(doc.get("summary") or {}), "verdict": overall.value, "nodes": node_counts, "items": item_counts}
    summary.pop("incomplete", None)
    if incomplete:
        summary["incomplete"] = incomplete
    doc["summary"] = summary


def write_results(run_dir: Path, doc: Mapping[str, Any]) -> Path:
    """Write ``doc`` as ``run_dir/results.json`` atomically (a temporary file, then rename).

    Raises:
        OSError: the file could not be written (the previous results.json, if any, is kept).
    """
    path = run_dir / "results.json"
    tmp = run_dir / "results.json.tmp"
    try:
        tmp.write_text(json.dumps(doc, indent=1, default=_json_default), encoding="utf-8")
        tmp.replace(path)
    except OSError:
        tmp.unlink(missing_ok=True)
        raise
    return path


def load_results(run_dir: Path) -> dict[str, Any]:
    """Read ``run_dir/results.json``.

    Raises:
        ConfigError: missing or unreadable file, or an unknown schema version.
    """
    from nvtest.errors import ConfigError

    path = run_dir if run_dir.suffix == ".json" else run_dir / "results.json"
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read results: {exc.strerror or exc}", path=str(path)) from exc
    except json.JSONDecodeError as exc:
        raise ConfigError(f"not JSON: {exc.msg}", path=str(path), line=exc.lineno) from exc
    if doc.get("schema_version") != SCHEMA_VERSION:
        raise ConfigError(
            f"unsupported schema_version {doc.get('schema_version')!r} (this nvtest reads {SCHEMA_VERSION})",
            path=str(path),
            field="schema_version",
        )
    return doc
