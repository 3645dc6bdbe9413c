"""A gate document into the history: one run of kind ``gate``, a result per check, its
numbers, and the drain or resume it caused (``nvtest history NODE`` shows them).

A record the gate could not write within its budget (a database that does not answer, a
locked SQLite file) is spooled on the node (:func:`spool_gate`,
``<state dir>/spool/gate-<node>-<start>.json``); the next gate sends the spool when its own
write succeeded and time is left, and ``nvtest history import`` sends it by hand.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nvtest.history.target import redact, resolve_target
from nvtest.ops.gate.state import write_atomic

if TYPE_CHECKING:
    from nvtest.history.store import HistoryStore

__all__ = [
    "SPOOL_KIND",
    "check_target",
    "gate_rows",
    "import_spool",
    "record_gate",
    "spool_gate",
    "spool_path",
    "spooled",
]

#: The ``kind`` of a spooled gate record (``{"kind", "version", "cleared", "gate": document}``).
SPOOL_KIND = "nvtest.gate.spool"


def gate_rows(
    doc: Mapping[str, Any],
) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """(run, result rows, metric rows, event rows) of a gate document; the run's ``cluster``
    is the document's (the node is known by (cluster, node))."""
    from nvtest.history.store import labels_key

    node, start = str(doc["node"]), float(doc["started_at"])
    run = {
        "cluster": str(doc.get("cluster") or ""),
        "kind": "gate",
        "started_at": start,
        "ended_at": start + float(doc.get("duration_s") or 0),
        "host": node,
        "suite": f"gate:{doc.get('mode')}",
        "verdict": doc.get("verdict"),
        "details": {
            "duration_s": doc.get("duration_s"),
            "sku": (doc.get("sku") or {}).get("name"),
            "mode": doc.get("mode"),
            "job_id": doc.get("job_id"),
            "budget_s": doc.get("budget_s"),
        },
    }
    results, metrics = [], []
    for c in doc.get("checks") or []:
        bad = next((d for d in c.get("decisions") or [] if d.get("next_step")), None)
        results.append(
            {
                "node": node,
                "check_name": c["check"],
                "verdict": c["verdict"],
                "reason": (c.get("reason") or "")[:2000],
                "started_at": start,
                "action_class": (bad or {}).get("next_step", {}).get("class") if bad else None,
            }
        )
        for m in c.get("metrics") or []:
            metrics.append(
                {
                    "node": node,
                    "check_name": c["check"],
                    "metric": m["name"],
                    "labels": labels_key(m.get("labels")),
                    "value": m.get("value"),
                    "unit": m.get("unit"),
                    "verdict": c["verdict"],
                }
            )
    events = []
    for key in ("drain", "resume"):
        act = (doc.get("slurm") or {}).get(key)
        if act and act.get("action") in ("drain", "resume", "refused"):
            kind = act["action"] if act["action"] != "refused" else f"{key}_refused"
            events.append(
                {
                    "node": node,
                    "at": start,
                    "kind": kind,
                    "reason": act.get("reason"),
                    "source": f"gate:{doc.get('mode')}",
                }
            )
    return run, results, metrics, events


def _write_gate(store: HistoryStore, doc: Mapping[str, Any], cleared: bool) -> None:
    run, results, metrics, events = gate_rows(doc)
    if cleared:
        events.append(
            {
                "node": str(doc["node"]),
                "at": float(doc["started_at"]),
                "kind": "xid_cleared",
                "reason": "fatal GPU events cleared by an operator (--clear-xids)",
                "source": "gate",
            }
        )
    who = f"{run['cluster']}/{doc['node']}" if run["cluster"] else str(doc["node"])
    store.write_run(f"gate:{who}:{float(doc['started_at']):.6f}", run, results, metrics, events)


def record_gate(
    doc: Mapping[str, Any], target: str | None, *, cleared: bool = False, timeout_s: float | None = None
) -> dict[str, Any] | None:
    """Write ``doc`` into the history at ``target`` (None: the default); its database, or None
    when history is off. ``timeout_s`` bounds the connect, each lock wait and each statement.
    Writing the same gate again replaces it (its key: node and start time).

    Raises:
        HistoryError: the database could not be written. ConfigError: a bad ``--history``.
    """
    url = resolve_target(target)
    if url is None:
        return None
    from nvtest.history.store import HistoryStore

    store = HistoryStore(url, timeout_s=timeout_s)
    try:
        _write_gate(store, doc, cleared)
        return {"database": store.display_url}
    finally:
        store.close()


def check_target(target: str | None) -> str | None:
    """The history URL of ``target`` after the checks that need no connection (the URL reads,
    its driver imports); None when history is off.

    Raises:
        ConfigError: a URL SQLAlchemy cannot read, or whose driver is not installed.
    """
    url = resolve_target(target)
    if url is None:
        return None
    from sqlalchemy.engine import make_url

    from nvtest.errors import ConfigError

    try:
        make_url(url).get_dialect().import_dbapi()
    except ImportError as exc:
        raise ConfigError(
            f"history database {redact(url)}: its driver is not installed ({exc})", field="--history"
        ) from exc
    return url


def spool_path(spool_dir: Path, doc: Mapping[str, Any]) -> Path:
    """Where a gate's record waits: ``<spool>/gate-<node>-<started_at>.json``."""
    node = "".join(c if c.isalnum() or c in "-_." else "_" for c in str(doc["node"]))
    return spool_dir / f"gate-{node}-{float(doc['started_at']):.6f}.json"


def spool_gate(spool_dir: Path, doc: Mapping[str, Any], *, cleared: bool = False) -> Path:
    """Keep a record that could not be written in ``spool_dir`` (written to a temporary file
    renamed into place: a reader never sees half of one); its path. The next gate sends it
    (:func:`import_spool`), as does ``nvtest history import``.

    Raises:
        OSError: the spool directory cannot be written.
    """
    spool_dir.mkdir(parents=True, exist_ok=True)
    path = spool_path(spool_dir, doc)
    record = {"kind": SPOOL_KIND, "version": 1, "cleared": cleared, "gate": doc}
    write_atomic(path, json.dumps(record, default=str).encode("utf-8"))
    return path


def spooled(spool_dir: Path) -> list[Path]:
    """The records waiting in ``spool_dir``, oldest name first."""
    try:
        return sorted(p for p in spool_dir.glob("gate-*.json") if p.is_file())
    except OSError:
        return []


def import_spool(
    spool_dir: Path, target: str | None, *, timeout_s: float | None = None, stop: Callable[[], bool] = lambda: False
) -> tuple[int, list[str]]:
    """Write every record waiting in ``spool_dir`` into the history at ``target`` and remove
    each once it is written; (records written, problems). Importing a record twice replaces
    it (same key), never duplicates it. ``stop()`` true: leave the rest for later.

    Raises:
        HistoryError: the database cannot be opened. ConfigError: a bad ``--history`` or
            history off.
    """
    from nvtest.errors import ConfigError
    from nvtest.history.store import HistoryStore

    files = spooled(spool_dir)
    if not files:
        return 0, []
    url = resolve_target(target)
    if url is None:
        raise ConfigError("history is off: nowhere to import the spool to", field="--history")
    done, problems = 0, []
    store = HistoryStore(url, timeout_s=timeout_s)
    try:
        for path in files:
            if stop():
                break
            try:
                rec = json.loads(path.read_text(encoding="utf-8"))
                if not isinstance(rec, dict) or rec.get("kind") != SPOOL_KIND or not isinstance(rec.get("gate"), dict):
                    problems.append(f"{path}: not a spooled gate record")
                    continue
                _write_gate(store, rec["gate"], bool(rec.get("cleared")))
            except (OSError, ValueError, KeyError, TypeError) as exc:
                if isinstance(exc, FileNotFoundError):
                    continue  # another gate sent it meanwhile
                problems.append(f"{path}: {exc}")
                continue
            done += 1
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
    finally:
        store.close()
    return done, problems
