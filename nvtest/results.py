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
- ``planned``: a check and the nodes of its items, written after collection (an item
  without a result at the end is ``error`` "not measured")
- ``result``: one verdict of one (check, node) with its metrics
- ``warning``: a run-level warning (e.g. host keys not checked)
- ``end``: end time, interrupted flag, the signals received, harness error
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import socket
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from nvtest.errors import OutputWriteError
from nvtest.verdict import Verdict, worst

__all__ = [
    "SCHEMA_VERSION",
    "CheckResult",
    "MetricResult",
    "REASON_MAX_CHARS",
    "ResultStore",
    "bound_reason",
    "one_line_reason",
    "share_details",
    "assemble",
    "load_results",
    "unmeasured_result",
    "write_atomic",
    "write_results",
    "node_verdicts",
]

#: Version of the results.json layout; bumped on any incompatible change.
SCHEMA_VERSION = 1

#: Seconds an appended line may wait for its fsync (see :class:`ResultStore`).
FSYNC_INTERVAL_S = 0.1
#: Disk space a store sets aside for results.jsonl while a run goes on (about 8,000
#: results), and how much of it each write that finds the disk full gives back.
RESERVE_BYTES = 4 << 20
RESERVE_STEP = 256 << 10
#: A detail value with more JSON than this, the same in a check's items, is stored once.
SHARED_DETAIL_BYTES = 8192
#: A result's reason is one line of at most this many characters: one readable sentence.
#: What does not fit (every finding, a tool's whole command line) is evidence, kept whole
#: in the result's ``details.reason_full`` (:func:`bound_reason`).
REASON_MAX_CHARS = 300
_MORE = " (+{n} more; whole reason in {at})"


def _bare(part: str) -> str:
    """``part`` without a parenthesized tail (``msg (source: ...; next: ...)`` -> ``msg``)."""
    if not part.endswith(")"):
        return part
    depth = 0
    for i in range(len(part) - 1, -1, -1):
        depth += {")": 1, "(": -1}.get(part[i], 0)
        if depth == 0:
            return part[:i].rstrip() or part
    return part


def _parts(line: str) -> list[str]:
    """``line`` split at its ``"; "`` outside parentheses (a finding's ``(source: a; next: b)``
    stays whole)."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(line):
        depth = max(0, depth + {"(": 1, ")": -1}.get(ch, 0))
        if depth == 0 and line.startswith("; ", i):
            parts.append(line[start:i])
            start = i + 2
    parts.append(line[start:])
    return [p for p in parts if p.strip()]


def one_line_reason(
    reason: str, limit: int = REASON_MAX_CHARS, *, whole_at: str = "details.reason_full"
) -> tuple[str, bool]:
    """``reason`` as one line of at most ``limit`` characters, and whether anything was left out.

    A reason of one line within ``limit`` is kept as it is; otherwise whitespace runs
    (newlines included) become one space. When the line is longer than
    ``limit``: its ``"; "``-separated parts lose their parenthesized tails (sources, next
    steps: the evidence holds them), as many whole parts as fit are kept, then
    ``(+N more; whole reason in details.reason_full)`` (``whole_at`` names where the whole
    reason is kept); a first part that alone is too long is cut at a word with ``...``.
    """
    if len(reason) <= limit and "\n" not in reason and "\r" not in reason:
        return reason, False  # a tool's words as they were (aligned columns in a quote)
    line = " ".join(reason.split())
    if len(line) <= limit:
        return line, True
    parts = [_bare(p) for p in _parts(line)]
    kept: list[str] = []
    for part in parts:
        if len("; ".join([*kept, part]) + _MORE.format(n=len(parts), at=whole_at)) > limit:
            break
        kept.append(part)
    cut = not kept
    if cut:  # the first part alone does not fit: cut it at a word
        room = limit - len(_MORE.format(n=len(parts), at=whole_at)) - 3
        kept.append(parts[0][:room].rsplit(" ", 1)[0] + "...")
    left = len(parts) - len(kept)
    if left == 0 and not cut:
        return "; ".join(kept), True
    tail = _MORE.format(n=left, at=whole_at) if left else f" (cut; whole reason in {whole_at})"
    return "; ".join(kept) + tail, True


def bound_reason(reason: str, details: Mapping[str, Any] | None) -> tuple[str, dict[str, Any] | None]:
    """(the one-line reason, the details with ``reason_full`` where words were left out).

    The one place every result's reason is bounded (:class:`CheckResult` on construction,
    the run's analysis after it adds to reasons). ``reason_full`` keeps the first whole
    reason recorded (a check's own words outrank a later note on them).
    """
    short, cut = one_line_reason(reason)
    out = dict(details) if details is not None else None
    if cut:
        out = {**(out or {})}
        out.setdefault("reason_full", reason)
    return short, out


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
        lower_is_better: which way the value is better, written by the Judge from the metric
            catalog (:func:`nvtest.config.metrics.lower_is_better` of the unit): True for a
            time, False for a rate, None where neither. Not in results.json (derived from
            the unit, which is): readers of results.json and of the history ask the catalog.
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
    lower_is_better: bool | None = None

    def to_json(self) -> dict[str, Any]:
        """The metric as results.json writes it (docs/results.schema.json ``metric``)."""
        d = asdict(self)
        d["verdict"] = self.verdict.value
        del d["lower_is_better"]
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
        cause: the key of the cause where the code that made the result knew it
            (``transport:auth``, ``tool:missing``, ``hardware:unreported``; the keys are
            :data:`nvtest.playbook.diagnosis.CAUSES`); None where only the reason says it.
            Optional in results.json: a file written before it existed has none.
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
    cause: str | None = None

    def __post_init__(self) -> None:
        # a reason is one readable line (REASON_MAX_CHARS); the evidence keeps the rest
        if len(self.reason) > REASON_MAX_CHARS or "\n" in self.reason:
            short, details = bound_reason(self.reason, self.details)
            object.__setattr__(self, "reason", short)
            object.__setattr__(self, "details", details)

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["verdict"] = self.verdict.value
        d["metrics"] = [m.to_json() for m in self.metrics]
        if self.cause is None:  # optional: a result without a known cause reads as before
            del d["cause"]
        return d


class ResultStore:
    """Append-only JSONL writer for one run directory; safe across threads.

    Each :meth:`append` writes its whole line with one ``write(2)`` on an ``O_APPEND``
    descriptor before it returns, so a crash of nvtest (an exception, SIGKILL, the OOM
    killer) loses nothing appended. A background thread fsyncs the file within
    :data:`FSYNC_INTERVAL_S` of a write, one fsync for every line written meanwhile (a
    phase's items come in a burst: an fsync per item was a millisecond or more each, on
    the main thread), so an OS crash or a power cut loses at most that interval;
    :meth:`close` fsyncs before it returns.

    While it is open the store keeps :data:`RESERVE_BYTES` of the disk allocated in a
    hidden file beside it (``.results.jsonl.reserve``, removed at :meth:`close`): when a
    write finds the disk full (the evidence logs or another program filled it), the store
    gives back a slice of that space and writes again, so the measurements still reach
    results.jsonl while the derived files fail.

    A failed write (a full disk past the reserve, a read-only mount) is undone (the file
    is cut back to its last whole line) and the line kept in memory, retried with every later append
    and at :meth:`close`: :attr:`write_error` names the path and the errno of the first
    failure, :attr:`unwritten` holds what never reached the file, and :func:`assemble`
    takes it as ``extra`` so results.json still holds every measurement. An append after
    :meth:`close` (a transport's late note) is written too, never an error.

    Raises:
        OutputWriteError: (constructor) results.jsonl cannot be opened for appending.
    """

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.path = run_dir / "results.jsonl"
        run_dir.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()  # the pending lines, the size, the descriptor
        self._fd_lock = threading.Lock()  # the descriptor's life (fsync against close)
        self._fd: int | None = self._open()
        self._size = os.fstat(self._fd).st_size
        self._pending: list[bytes] = []
        self._last_sync = 0.0
        self._dirty = threading.Event()
        self._closing = False
        self._flusher: threading.Thread | None = None
        #: the first failure to write results.jsonl (None: every line is in the file)
        self.write_error: OutputWriteError | None = None
        self._shared: dict[tuple[str, str], tuple[bytes, str]] = {}
        self._reserve_path = run_dir / ".results.jsonl.reserve"
        self._reserve = _set_aside(self._reserve_path, RESERVE_BYTES)

    def _open(self) -> int:
        try:
            return os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise OutputWriteError.of(self.path, exc) from None

    def append(self, kind: str, payload: Mapping[str, Any]) -> None:
        """Write one event line ``{"kind": kind, "t": <epoch s>, **payload}``; never raises
        for the disk (see the class text)."""
        line = json.dumps({"kind": kind, "t": time.time(), **payload}, default=_json_default, sort_keys=False)
        data = (line + "\n").encode("utf-8")
        with self._lock:
            self._pending.append(data)
            if self._fd is None:  # after close: one short-lived descriptor
                self._append_closed()
                return
            if not self._write_pending():
                return
        if not self._dirty.is_set():
            self._dirty.set()
            if self._flusher is None:
                with self._lock:
                    if self._flusher is None and self._fd is not None:
                        self._flusher = threading.Thread(
                            target=self._flush_loop, name="nvtest-results-fsync", daemon=True
                        )
                        self._flusher.start()

    def _append_closed(self) -> None:
        try:
            self._fd = self._open()
        except OutputWriteError as exc:
            self.write_error = self.write_error or exc
            return
        try:
            if self._write_pending():
                self._sync()
        finally:
            os.close(self._fd)
            self._fd = None

    def result(self, result: CheckResult) -> None:
        """Append one item's result; a large detail the check's earlier item already
        stored is written as ``{"same_as": "<check>[<node>]"}`` (see :func:`share_details`)."""
        doc = result.to_json()
        if doc.get("details"):
            doc["details"] = share_details(self._shared, result.check, result.node, doc["details"])
        self.append("result", doc)

    @property
    def unwritten(self) -> list[str]:
        """The lines (without their newline) that could not be written to results.jsonl."""
        with self._lock:
            return [b.decode("utf-8").rstrip("\n") for b in self._pending]

    def _write_pending(self) -> bool:
        """Write every pending line (lock held); False (and the file as it was) on a failure."""
        assert self._fd is not None
        data = b"".join(self._pending)
        done = 0
        try:
            while done < len(data):
                try:
                    done += os.write(self._fd, data[done:])
                except OSError as exc:
                    if exc.errno not in (errno.ENOSPC, errno.EDQUOT) or not self._give_back():
                        raise
        except OSError as exc:
            if self.write_error is None:
                self.write_error = OutputWriteError.of(self.path, exc)
            try:  # a torn line would swallow the next one: cut back to the last whole line
                os.ftruncate(self._fd, self._size)
            except OSError:
                pass
            return False
        self._size += len(data)
        self._pending.clear()
        return True

    def _give_back(self) -> bool:
        """Free a slice of the reserve (the disk is full); False when none is left."""
        if self._reserve <= 0:
            return False
        self._reserve = max(0, self._reserve - RESERVE_STEP)
        try:
            if self._reserve:
                os.truncate(self._reserve_path, self._reserve)
            else:
                self._reserve_path.unlink(missing_ok=True)
        except OSError:
            self._reserve = 0
            return False
        return True

    def _sync(self) -> None:
        with self._fd_lock:
            if self._fd is None:
                return
            try:
                os.fsync(self._fd)
            except OSError as exc:
                if self.write_error is None:
                    self.write_error = OutputWriteError.of(self.path, exc)
            self._last_sync = time.monotonic()

    def _flush_loop(self) -> None:
        """The background fsync: at most one per :data:`FSYNC_INTERVAL_S`, while lines wait."""
        while True:
            self._dirty.wait()
            if self._closing:
                return
            delay = self._last_sync + FSYNC_INTERVAL_S - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            self._dirty.clear()  # a line written from here on sets it again
            self._sync()

    def close(self) -> None:
        """Write what is pending, fsync, close (idempotent)."""
        with self._lock:
            if self._fd is None:
                return
            self._write_pending()
            self._closing = True
            self._dirty.set()
            self._sync()
            with self._fd_lock:
                os.close(self._fd)
                self._fd = None
            self._reserve = 0
            with contextlib.suppress(OSError):
                self._reserve_path.unlink(missing_ok=True)
        if self._flusher is not None:
            self._flusher.join(timeout=5)


def share_details(
    seen: dict[tuple[str, str], tuple[bytes, str]], check: str, node: str, details: Mapping[str, Any]
) -> dict[str, Any]:
    """``details`` with each value over :data:`SHARED_DETAIL_BYTES` of JSON that an earlier
    item of ``check`` stored the same replaced by ``{"same_as": "<check>[<node>]"}``.

    A fleet-wide detail (the mpirun command line of an MPMD launch, the rank -> node map of
    a job) is the same in every node's item and grows with the fleet: kept in each of
    4,096 items it made results.jsonl 2.2 GB. ``seen`` is the caller's memory of the first
    item per (check, key): its digest and node.
    """
    out: dict[str, Any] = {}
    for key, value in details.items():
        if isinstance(value, (dict, list, str)):
            text = json.dumps(value, default=_json_default, sort_keys=True)
            if len(text) > SHARED_DETAIL_BYTES:
                digest = hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()
                first = seen.setdefault((check, key), (digest, node))
                if first[0] == digest and first[1] != node:
                    out[key] = {"same_as": f"{check}[{first[1]}]"}
                    continue
        out[key] = value
    return out


def _set_aside(path: Path, size: int) -> int:
    """Allocate ``size`` bytes of disk in ``path`` (best effort); returns the bytes set aside."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    except OSError:
        return 0
    try:
        os.posix_fallocate(fd, 0, size)
        return size
    except OSError:  # not that much room (or no fallocate): whatever got allocated
        return 0 if os.fstat(fd).st_size == 0 else os.fstat(fd).st_size
    finally:
        os.close(fd)


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


def read_events(jsonl: Path, extra: Iterable[str] = ()) -> list[dict[str, Any]]:
    """Read a results.jsonl, then the ``extra`` lines (those a store could not write);
    a torn line (a crash mid-write) is ignored. A missing file reads as no lines when
    ``extra`` is given (everything was kept in memory).

    Raises:
        OSError: the file cannot be read (and no ``extra`` was given).
    """
    extra = list(extra)
    try:
        text = jsonl.read_text(encoding="utf-8")
    except FileNotFoundError:
        if not extra:
            raise
        text = ""
    events = []
    for raw in [*text.splitlines(), *extra]:
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


def assemble(jsonl: Path, extra: Iterable[str] = ()) -> dict[str, Any]:
    """Fold a run's results.jsonl (and ``extra`` lines, see :func:`read_events`) into the
    results.json document (schema version 1).

    The latest ``result`` line for a (check, node) wins (a rerun replaces). Every item of
    a ``planned`` line that has no result gets one: ``error``, ``unmeasured: true``,
    reason ``not measured: <why the run ended>`` (:func:`unmeasured_result`), so an
    interrupted run counts what it did not reach and ``--rerun-failed`` reruns it.
    """
    run: dict[str, Any] = {}
    nodes: dict[str, dict[str, Any]] = {}
    skus: dict[str, Any] = {}
    checks: dict[str, Any] = {}
    warnings: list[str] = []
    results: dict[tuple[str, str], dict[str, Any]] = {}
    planned: dict[tuple[str, str], None] = {}
    end: dict[str, Any] = {}
    drained: dict[str, str] = {}
    not_drained: dict[str, str] = {}
    for ev in read_events(jsonl, extra):
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
        elif kind == "planned":
            planned.update(dict.fromkeys((ev["check"], n) for n in ev.get("nodes") or ()))
        elif kind == "warning":
            warnings.append(ev["message"])
        elif kind == "result":
            results[(ev["check"], ev["node"])] = ev
        elif kind == "end":
            end.update(ev)
        elif kind == "drain":
            drained[ev["node"]] = ev["reason"]
        elif kind == "drain_skipped":
            not_drained[ev["node"]] = ev["why"]
    run.setdefault("host", socket.gethostname())
    run.update({k: v for k, v in end.items()})
    missing = [key for key in planned if key not in results]
    if missing:
        why = incomplete_reason(run) or "the run ended without a result for it"
        at = float(run.get("ended_at") or run.get("started_at") or 0.0)
        # a signal stopped the run: the cause of the items it left unmeasured is known
        cause = "transport:interrupted" if run.get("interrupted") and not run.get("harness_error") else None
        for check, node in missing:
            results[(check, node)] = unmeasured_result(check, node, why, at, cause)
    result_list = sorted(results.values(), key=lambda r: (r.get("started_at", 0), r["check"], r["node"]))
    for r in result_list:
        nodes.setdefault(r["node"], {"name": r["node"]})
    if run.get("started_at") and run.get("ended_at"):
        run["duration_s"] = round(run["ended_at"] - run["started_at"], 3)
    run["warnings"] = warnings
    run["drained"] = drained
    if not_drained:
        run["not_drained"] = not_drained
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


def unmeasured_result(check: str, node: str, why: str, at: float = 0.0, cause: str | None = None) -> dict[str, Any]:
    """The result of a planned item that was never measured: ``error``, ``not measured: <why>``,
    with ``cause`` (``transport:interrupted``: a signal stopped the run) where it is known."""
    return {
        **CheckResult(
            check=check, node=node, verdict=Verdict.ERROR, reason=f"not measured: {why}", started_at=at, cause=cause
        ).to_json(),
        "unmeasured": True,
    }


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


def write_atomic(path: Path, data: str | bytes) -> Path:
    """Write ``data`` to ``path`` through a temporary file beside it, fsync, then rename:
    a reader sees the old file or the new one, never half of one, and a failure leaves
    the old file and no temporary one.

    Raises:
        OutputWriteError: the file could not be written (its path and errno).
    """
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    raw = data.encode("utf-8") if isinstance(data, str) else data
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        try:
            view = memoryview(raw)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError as exc:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
        raise OutputWriteError.of(path, exc) from None
    return path


def write_results(run_dir: Path, doc: Mapping[str, Any]) -> Path:
    """Write ``doc`` as ``run_dir/results.json`` atomically (:func:`write_atomic`).

    Raises:
        OutputWriteError: the file could not be written (the previous results.json, if
            any, is kept; no temporary file is left).
    """
    return write_atomic(run_dir / "results.json", json.dumps(doc, indent=1, default=_json_default))


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
        hint = ""
        if isinstance(exc, FileNotFoundError) and (path.parent / "results.jsonl").is_file():
            # a run that could not write results.json (a full disk) still has its measurements
            hint = f" (the measurements are in results.jsonl: rebuild it with: nvtest report {path.parent})"
        raise ConfigError(f"cannot read results: {exc.strerror or exc}{hint}", path=str(path)) from exc
    except json.JSONDecodeError as exc:
        raise ConfigError(f"not JSON: {exc.msg}", path=str(path), line=exc.lineno) from exc
    if doc.get("schema_version") != SCHEMA_VERSION:
        raise ConfigError(
            f"unsupported schema_version {doc.get('schema_version')!r} (this nvtest reads {SCHEMA_VERSION})",
            path=str(path),
            field="schema_version",
        )
    return doc
