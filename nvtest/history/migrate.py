"""Versioned migrations of the history database: a table of applied steps, steps in code.

``nvtest_schema`` holds one row per applied step (version, description, time). Opening a
database applies every step above its version, each in its own transaction, so a database
written by an older nvtest is brought up to :data:`~nvtest.history.schema.LATEST` and one
written by a newer nvtest is refused (its tables may mean something this one does not know).

Why not Alembic: the store ships inside the package for two engines and a handful of steps;
a step is a function of a connection, tested like any other code, with no migration
environment, ini file or script directory to ship in the wheel. Each step declares the
tables as they were at its version (its own :class:`~sqlalchemy.MetaData`), never the
current ones, so replaying step 1 on an empty database still builds version 1.

Steps:

====  ==========================================================================
1     ``runs``, ``results``, ``metrics`` and their indexes
2     ``events`` (drains, resumes, Xid events); ``results.action_class``
3     ``runs.cluster`` and ``events.cluster``: a node is known by (cluster, node).
      Rows written before carry the cluster ``''`` ("not known"): they stay readable
      (``nvtest history NODE --cluster ''``) and are never the "previous run" of a
      run whose cluster is named, so a node is never compared with another
      cluster's node of the same name.
4     ``asbuilt``: each node's as-built record per run, so the next acceptance of
      (cluster, node) reports swapped parts and moved firmware
====  ==========================================================================
"""

from __future__ import annotations

import time
from collections.abc import Callable

from sqlalchemy import (
    Column,
    Connection,
    Engine,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    inspect,
    select,
    text,
)

from nvtest.errors import ConfigError
from nvtest.history.schema import LATEST, schema_table

__all__ = ["STEPS", "current_version", "migrate"]


def _v1(conn: Connection) -> None:
    md = MetaData()
    Table(
        "nvtest_schema",
        md,
        Column("version", Integer, primary_key=True, autoincrement=False),
        Column("description", Text, nullable=False),
        Column("applied_at", Float, nullable=False),
    )
    Table(
        "runs",
        md,
        Column("id", Integer, primary_key=True, autoincrement=True),
        Column("key", String(200), nullable=False, unique=True),
        Column("kind", String(16), nullable=False),
        Column("started_at", Float, nullable=False),
        Column("ended_at", Float),
        Column("host", String(255)),
        Column("suite", String(255)),
        Column("verdict", String(16)),
        Column("details", Text),
    )
    res = Table(
        "results",
        md,
        Column("id", Integer, primary_key=True, autoincrement=True),
        Column("run_id", Integer, ForeignKey("runs.id"), nullable=False),
        Column("node", String(255), nullable=False),
        Column("check_name", String(128), nullable=False),
        Column("verdict", String(16), nullable=False),
        Column("reason", Text),
        Column("started_at", Float, nullable=False),
        Column("day", Integer, nullable=False),
    )
    Index("ix_results_node_time", res.c.node, res.c.started_at)
    Index("ix_results_verdict_day", res.c.verdict, res.c.day)
    Index("ix_results_run", res.c.run_id)
    met = Table(
        "metrics",
        md,
        Column("run_id", Integer, ForeignKey("runs.id"), nullable=False),
        Column("node", String(255), nullable=False),
        Column("check_name", String(128), nullable=False),
        Column("metric", String(128), nullable=False),
        Column("labels", String(255), nullable=False),
        Column("value", Float),
        Column("unit", String(32)),
        Column("verdict", String(16)),
    )
    Index("ix_metrics_run_node", met.c.run_id, met.c.node)
    md.create_all(conn)


def _v2(conn: Connection) -> None:
    md = MetaData()
    Table("runs", md, Column("id", Integer, primary_key=True))
    ev = Table(
        "events",
        md,
        Column("id", Integer, primary_key=True, autoincrement=True),
        Column("node", String(255), nullable=False),
        Column("at", Float, nullable=False),
        Column("day", Integer, nullable=False),
        Column("kind", String(32), nullable=False),
        Column("reason", Text),
        Column("source", String(64)),
        Column("run_id", Integer, ForeignKey("runs.id")),
    )
    Index("ix_events_node_time", ev.c.node, ev.c.at)
    Index("ix_events_kind_day", ev.c.kind, ev.c.day)
    ev.create(conn)
    conn.execute(text("ALTER TABLE results ADD COLUMN action_class VARCHAR(16)"))


def _v3(conn: Connection) -> None:
    for table in ("runs", "events"):
        conn.execute(text(f"ALTER TABLE {table} ADD COLUMN cluster VARCHAR(255) NOT NULL DEFAULT ''"))
    conn.execute(text("CREATE INDEX ix_runs_cluster ON runs (cluster)"))


def _v4(conn: Connection) -> None:
    md = MetaData()
    ab = Table(
        "asbuilt",
        md,
        Column("id", Integer, primary_key=True, autoincrement=True),
        Column("run_key", String(200), nullable=False),
        Column("cluster", String(255), nullable=False, server_default=""),
        Column("node", String(255), nullable=False),
        Column("at", Float, nullable=False),
        Column("record", Text, nullable=False),
    )
    Index("ix_asbuilt_node_time", ab.c.cluster, ab.c.node, ab.c.at)
    Index("ix_asbuilt_run", ab.c.run_key)
    ab.create(conn)


#: (version, description, step) in order; the last version is ``schema.LATEST``.
STEPS: tuple[tuple[int, str, Callable[[Connection], None]], ...] = (
    (1, "runs, results, metrics", _v1),
    (2, "events; results.action_class", _v2),
    (3, "runs.cluster, events.cluster (rows before: '')", _v3),
    (4, "asbuilt: each node's as-built record per run", _v4),
)
assert STEPS[-1][0] == LATEST


def current_version(conn: Connection) -> int:
    """The highest applied step of the database (0: an empty database)."""
    if not inspect(conn).has_table("nvtest_schema"):
        if inspect(conn).has_table("runs"):
            raise ConfigError(
                "the database has a 'runs' table but no nvtest_schema table: not an nvtest history",
                field="--history",
            )
        return 0
    got = conn.execute(select(schema_table.c.version).order_by(schema_table.c.version.desc())).first()
    return int(got[0]) if got else 0


def migrate(engine: Engine, target: int = LATEST) -> tuple[int, int]:
    """Apply every step above the database's version up to ``target``; (from, to) versions.

    Raises:
        ConfigError: the database was written by a newer nvtest (its version is above
            :data:`~nvtest.history.schema.LATEST`), or is not an nvtest history.
    """
    with engine.connect() as conn:
        start = current_version(conn)
    if start > LATEST:
        raise ConfigError(
            f"history database schema version {start} is newer than this nvtest's ({LATEST}): upgrade nvtest",
            field="--history",
        )
    for version, description, step in STEPS:
        if version <= start or version > target:
            continue
        with engine.begin() as conn:
            step(conn)
            conn.execute(schema_table.insert().values(version=version, description=description, applied_at=time.time()))
    return start, max(start, min(target, LATEST))
