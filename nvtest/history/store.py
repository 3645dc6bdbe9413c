"""The history store: open a database (SQLite file or PostgreSQL URL), write runs into it.

:class:`HistoryStore` holds one SQLAlchemy engine. Writing is idempotent per run key: a run
ingested again (``nvtest report`` rebuilding it, a drain after the run) replaces its rows.
Reading is in :mod:`nvtest.history.queries`, on the same store.

Where the database is (:func:`resolve_target`): the ``--history`` value, else
``$NVTEST_HISTORY``, else ``$XDG_DATA_HOME/nvtest/history.sqlite`` (``~/.local/share/...``).
``off`` (or ``none``) turns history off; a URL, a libpq keyword string or an SQLite path
(created with its directory) otherwise, as :mod:`nvtest.history.target` reads them. The URL
is shown only in its redacted form (:attr:`HistoryStore.display_url`).
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, delete, event, select, update
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError

from nvtest.errors import ConfigError, HistoryError
from nvtest.history.cluster import cluster_of_run
from nvtest.history.migrate import migrate
from nvtest.history.schema import events, metrics, results, runs
from nvtest.history.target import default_path, redact, resolve_target, scrub

__all__ = ["HistoryStore", "day_of", "default_path", "labels_key", "resolve_target"]


def day_of(t: float) -> int:
    """The UTC day number of epoch seconds ``t`` (days since 1970-01-01)."""
    return int(t // 86400)


def labels_key(labels: Mapping[str, Any] | None) -> str:
    """Canonical text of a metric's labels: ``k=v`` pairs, keys sorted, joined by ``,``."""
    if not labels:
        return ""
    return ",".join(f"{k}={labels[k]}" for k in sorted(labels))


def _sqlite_pragmas(busy_ms: int) -> Callable[[Any, Any], None]:
    """The connect hook of an SQLite store that waits ``busy_ms`` for a lock another holds."""

    def hook(dbapi_conn: Any, _record: Any) -> None:
        cur = dbapi_conn.cursor()
        cur.execute(f"PRAGMA busy_timeout={int(busy_ms)}")
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.execute("PRAGMA cache_size=-65536")  # 64 MiB: the indexes of a large ingest stay in memory
        cur.close()

    return hook


def _pg_statement_timeout(ms: int) -> Callable[[Any, Any], None]:
    """The connect hook of a PostgreSQL store whose every statement ends within ``ms`` (a
    session ``SET``, which a pgbouncer passes on where a startup ``options`` is refused)."""

    def hook(dbapi_conn: Any, _record: Any) -> None:
        cur = dbapi_conn.cursor()
        cur.execute(f"SET statement_timeout = {int(ms)}")
        cur.execute(f"SET lock_timeout = {int(ms)}")
        cur.close()
        dbapi_conn.commit()

    return hook


#: The bound of a connect, a lock wait and a statement when the caller gives none, s: a run's
#: ingest, a sweep, ``nvtest history`` and ``nvtest export`` never wait on a silent database
#: for ever. ``$NVTEST_HISTORY_TIMEOUT_S`` changes it.
DEFAULT_TIMEOUT_S = 60.0


def default_timeout_s() -> float:
    """:data:`DEFAULT_TIMEOUT_S`, or ``$NVTEST_HISTORY_TIMEOUT_S`` when it is a number of
    seconds from 1 to 3600."""
    raw = os.environ.get("NVTEST_HISTORY_TIMEOUT_S", "")
    try:
        value = float(raw)
    except ValueError:
        return DEFAULT_TIMEOUT_S
    return value if math.isfinite(value) and 1.0 <= value <= 3600.0 else DEFAULT_TIMEOUT_S


def _timeouts(backend: str, timeout_s: float | None) -> tuple[dict[str, Any], Callable[[Any, Any], None] | None]:
    """(connect_args, connect hook) bounding a connection and each statement by ``timeout_s``
    (None: :func:`default_timeout_s`)."""
    wait = default_timeout_s() if timeout_s is None else timeout_s
    if backend == "sqlite":
        return {"timeout": wait}, _sqlite_pragmas(int(wait * 1000))
    if backend == "postgresql":
        # libpq (and psycopg) read connect_timeout in whole seconds, 2 at least
        return {"connect_timeout": max(2, math.ceil(wait))}, _pg_statement_timeout(max(1, int(wait * 1000)))
    return {}, None


class HistoryStore:
    """One history database, migrated to the current schema on open.

    Args:
        url: an SQLAlchemy URL (:func:`resolve_target` makes one from a path or ``--history``).
        timeout_s: the longest a connect, a lock wait or a statement may take, s (the gate
            gives what its budget has left); None: :func:`default_timeout_s` (60 s).

    Raises:
        HistoryError: the database cannot be opened or migrated (unreachable server,
            permission, a file that is not a database).
        ConfigError: the database was written by a newer nvtest, or is not an nvtest history.
    """

    def __init__(self, url: str, *, timeout_s: float | None = None) -> None:
        self.url = url
        try:
            u = make_url(url)
            if u.get_backend_name() == "sqlite" and u.database:
                Path(u.database).parent.mkdir(parents=True, exist_ok=True)
            connect_args, hook = _timeouts(u.get_backend_name(), timeout_s)
            self.engine: Engine = create_engine(u, future=True, pool_pre_ping=True, connect_args=connect_args)
            if hook is not None:
                event.listen(self.engine, "connect", hook)
            self.migrated_from, self.version = migrate(self.engine)
        except ConfigError:
            raise
        except (SQLAlchemyError, OSError, ImportError) as exc:
            # ImportError: a URL whose driver is not installed (mysql://: MySQLdb)
            raise self.failure(exc) from exc

    @classmethod
    def open(cls, value: str | os.PathLike[str] | None = None, *, create: bool = True) -> HistoryStore | None:
        """The store at ``value`` (see :func:`resolve_target`), or None when history is off.

        ``create=False`` (the verbs that only read it: ``history``, ``export``): an SQLite
        file that does not exist is not created.

        Raises:
            ConfigError: ``create=False`` and no SQLite file at that path (exit 2).
            HistoryError, ConfigError: as the constructor.
        """
        url = resolve_target(value)
        if url is None:
            return None
        if not create:
            u = make_url(url)
            if u.get_backend_name() == "sqlite" and u.database and not Path(u.database).exists():
                raise ConfigError(
                    f"no history at {u.database}: nothing was recorded there (every run, gate and "
                    "sweep writes it; --history or $NVTEST_HISTORY names where)"
                )
        return cls(url)

    @property
    def display_url(self) -> str:
        """The URL with every password hidden (:func:`~nvtest.history.target.redact`): the only
        form of it a message, a report or a record shows."""
        return redact(self.url)

    def failure(self, exc: BaseException) -> HistoryError:
        """A :class:`HistoryError` for ``exc`` of this database: the redacted URL, and the
        driver's words with the URL's secrets removed (a driver may quote its DSN)."""
        return HistoryError(f"history database {self.display_url}: {scrub(str(exc), self.url)}")

    def close(self) -> None:
        """Release the engine's connections."""
        self.engine.dispose()

    def __enter__(self) -> HistoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writing ------------------------------------------------------------------------
    def _run_row(self, conn: Connection, key: str, row: Mapping[str, Any]) -> int:
        """Insert or replace the run ``key`` (its results, metrics and events removed); its id."""
        found = conn.execute(select(runs.c.id).where(runs.c.key == key)).first()
        if found is None:
            res = conn.execute(runs.insert().values(key=key, **row))
            pk = res.inserted_primary_key
            assert pk is not None
            return int(pk[0])
        run_id = int(found[0])
        for table in (metrics, results, events):
            conn.execute(delete(table).where(table.c.run_id == run_id))
        conn.execute(update(runs).where(runs.c.id == run_id).values(**row))
        return run_id

    def write_run(
        self,
        key: str,
        run: Mapping[str, Any],
        result_rows: Sequence[Mapping[str, Any]],
        metric_rows: Sequence[Mapping[str, Any]],
        event_rows: Sequence[Mapping[str, Any]] = (),
    ) -> int:
        """Write one run (replacing an earlier write of the same ``key``); the run's row id.

        ``run``: kind, started_at, ended_at, host, suite, verdict, details (a mapping, stored
        as JSON), cluster (the cluster of its nodes, :mod:`nvtest.history.cluster`; ''
        when not given). ``result_rows``: node, check_name, verdict, reason, started_at,
        action_class. ``metric_rows``: node, check_name, metric, labels (text), value, unit,
        verdict. ``event_rows``: node, at (epoch s), kind, reason, source (their cluster is
        the run's).

        Raises:
            HistoryError: the database refused the write.
        """
        cluster = str(run.get("cluster") or "")
        row = {**run, "cluster": cluster, "details": json.dumps(run.get("details") or {}, default=str)}
        try:
            with self.engine.begin() as conn:
                run_id = self._run_row(conn, key, row)
                if result_rows:
                    conn.execute(
                        results.insert(),
                        [{**r, "run_id": run_id, "day": day_of(r["started_at"])} for r in result_rows],
                    )
                if metric_rows:
                    _insert_metrics(conn, run_id, metric_rows)
                if event_rows:
                    conn.execute(
                        events.insert(),
                        [{**e, "run_id": run_id, "day": day_of(e["at"]), "cluster": cluster} for e in event_rows],
                    )
        except SQLAlchemyError as exc:
            raise self.failure(exc) from exc
        return run_id

    def record_event(
        self,
        node: str,
        kind: str,
        reason: str = "",
        *,
        t: float | None = None,
        source: str = "",
        cluster: str = "",
    ) -> None:
        """Record one node event (a drain, a resume, a refused resume, a cleared Xid) of
        ``node`` of ``cluster``.

        Raises:
            HistoryError: the database refused the write.
        """
        when = time.time() if t is None else t
        try:
            with self.engine.begin() as conn:
                conn.execute(
                    events.insert().values(
                        node=node,
                        at=when,
                        day=day_of(when),
                        kind=kind,
                        reason=reason,
                        source=source,
                        cluster=cluster,
                    )
                )
        except SQLAlchemyError as exc:
            raise self.failure(exc) from exc

    def ingest_results(self, doc: Mapping[str, Any], *, kind: str = "run", key: str | None = None) -> int:
        """Write a results.json document (``nvtest.results``, schema 1) as one run; its row id.

        ``key`` defaults to ``run:<run_id>``. Nodes drained by the run (``run.drained``)
        become ``drain`` events. The run's cluster: :func:`~nvtest.history.cluster.cluster_of_run`.
        """
        run = doc.get("run") or {}
        rows = list(doc.get("results") or [])
        start = float(run.get("started_at") or min((r.get("started_at") or 0 for r in rows), default=0) or time.time())
        key = key or f"run:{run.get('run_id') or int(start)}"
        result_rows, metric_rows = _result_rows(rows, start)
        drains = [
            {"node": n, "at": float(run.get("ended_at") or start), "kind": "drain", "reason": why, "source": kind}
            for n, why in sorted((run.get("drained") or {}).items())
        ]
        summary = doc.get("summary") or {}
        return self.write_run(
            key,
            {
                "kind": kind,
                "started_at": start,
                "ended_at": run.get("ended_at"),
                "host": run.get("host"),
                "suite": run.get("suite"),
                "verdict": summary.get("verdict"),
                "cluster": cluster_of_run(run),
                "details": {
                    "run_id": run.get("run_id"),
                    "command_line": run.get("command_line"),
                    "nodes": sorted((doc.get("nodes") or {}).keys()),
                    "skus": {n: nd.get("sku") for n, nd in (doc.get("nodes") or {}).items()},
                },
            },
            result_rows,
            metric_rows,
            drains,
        )


_METRIC_COLUMNS = ("run_id", "node", "check_name", "metric", "labels", "value", "unit", "verdict")


def _insert_metrics(conn: Connection, run_id: int, rows: Sequence[Mapping[str, Any]]) -> None:
    """Insert metric rows: through the driver's ``executemany`` of tuples on SQLite (no
    per-row statement work: a million rows is the common size), through SQLAlchemy's
    batched ``insertmanyvalues`` elsewhere."""
    if conn.dialect.name == "sqlite":
        cols = _METRIC_COLUMNS
        sql = f"INSERT INTO metrics ({', '.join(cols)}) VALUES ({', '.join('?' for _ in cols)})"
        conn.exec_driver_sql(sql, [(run_id, *(m.get(c) for c in cols[1:])) for m in rows])
    else:
        conn.execute(metrics.insert(), [{**m, "run_id": run_id} for m in rows])


def _result_rows(rows: Iterable[Mapping[str, Any]], start: float) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """results.json results -> (result rows, metric rows) of the history tables."""
    out_r: list[dict[str, Any]] = []
    out_m: list[dict[str, Any]] = []
    for r in rows:
        node, check = str(r["node"]), str(r["check"])
        diag = r.get("diagnosis") or {}
        out_r.append(
            {
                "node": node,
                "check_name": check,
                "verdict": str(r["verdict"]),
                "reason": (r.get("reason") or "")[:2000],
                "started_at": float(r.get("started_at") or start),
                "action_class": diag.get("class"),
            }
        )
        for m in r.get("metrics") or []:
            value = m.get("value")
            out_m.append(
                {
                    "node": node,
                    "check_name": check,
                    "metric": str(m["name"]),
                    "labels": labels_key(m.get("labels")),
                    "value": float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None,
                    "unit": m.get("unit"),
                    "verdict": m.get("verdict"),
                }
            )
    return out_r, out_m
