"""The history database's tables (SQLAlchemy Core), one schema for SQLite and PostgreSQL.

Every ``nvtest run``, ``gate`` and ``sweep`` is one row of ``runs``; each (check, node)
verdict of it one row of ``results``; each judged number one row of ``metrics``; drains,
resumes and Xid events are ``events``. Times are epoch seconds (UTC); ``day`` is the UTC
day number (``int(t // 86400)``), computed at ingest so the "N separate days" queries are
the same integer comparison on both engines.

A node is known by (cluster, node): ``runs.cluster`` and ``events.cluster`` name the cluster
a record belongs to (:mod:`nvtest.history.cluster` says where the name comes from), so two
clusters that both have a ``node1`` never share a record; results and metrics belong to a
run and take its cluster.

The tables as they stand at :data:`LATEST`; :mod:`nvtest.history.migrate` holds the steps
that build them from an empty database or from an older version.
"""

from __future__ import annotations

from sqlalchemy import (
    Column,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
)

__all__ = ["LATEST", "asbuilt", "events", "metadata", "metrics", "results", "runs", "schema_table"]

#: The schema version this nvtest writes and reads.
LATEST = 4

metadata = MetaData()

#: One row per applied migration step.
schema_table = Table(
    "nvtest_schema",
    metadata,
    Column("version", Integer, primary_key=True, autoincrement=False),
    Column("description", Text, nullable=False),
    Column("applied_at", Float, nullable=False),
)

#: One row per run, gate or sweep job. ``key`` is unique: ``run:<run-id>``,
#: ``gate:<node>:<start>`` (``gate:<cluster>/<node>:<start>`` when the cluster is named) or
#: ``sweep:<sweep-id>:<node>``. ``cluster`` (v3): the cluster of its nodes ('' for rows
#: written before v3: not known).
runs = Table(
    "runs",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("key", String(200), nullable=False, unique=True),
    Column("kind", String(16), nullable=False),
    Column("started_at", Float, nullable=False),
    Column("ended_at", Float),
    Column("host", String(255)),
    Column("suite", String(255)),
    Column("verdict", String(16)),
    Column("details", Text),
    Column("cluster", String(255), nullable=False, server_default=""),  # v3
)
Index("ix_runs_cluster", runs.c.cluster)

#: One row per (check, node) verdict of a run. ``verdict``: pass, warn, fail, error, skip,
#: or unknown (a gate check that did not answer within its budget).
results = Table(
    "results",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("run_id", Integer, ForeignKey("runs.id"), nullable=False),
    Column("node", String(255), nullable=False),
    Column("check_name", String(128), nullable=False),
    Column("verdict", String(16), nullable=False),
    Column("reason", Text),
    Column("started_at", Float, nullable=False),
    Column("day", Integer, nullable=False),
    Column("action_class", String(16)),  # v2: the playbook's class of the next step
)
Index("ix_results_node_time", results.c.node, results.c.started_at)
Index("ix_results_verdict_day", results.c.verdict, results.c.day)
Index("ix_results_run", results.c.run_id)

#: One row per judged number. ``labels`` is the canonical ``k=v,k=v`` of its labels
#: (sorted keys; empty for none); ``value`` NULL when it could not be measured. Indexed by
#: (run, node) only: that is how a report and the exporter read it; a trend reads the table
#: through (a full scan of a million rows is well under a second), and a second index on
#: (check, metric, node) would cost every ingest more than it saves the trend.
metrics = Table(
    "metrics",
    metadata,
    Column("run_id", Integer, ForeignKey("runs.id"), nullable=False),
    Column("node", String(255), nullable=False),
    Column("check_name", String(128), nullable=False),
    Column("metric", String(128), nullable=False),
    Column("labels", String(255), nullable=False),
    Column("value", Float),
    Column("unit", String(32)),
    Column("verdict", String(16)),
)
Index("ix_metrics_run_node", metrics.c.run_id, metrics.c.node)

#: v2: drains, resumes and other node events. ``kind``: drain, resume, resume_refused,
#: xid, xid_cleared, breaker. ``cluster`` (v3): the node's cluster ('' before v3).
events = Table(
    "events",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("node", String(255), nullable=False),
    Column("at", Float, nullable=False),
    Column("day", Integer, nullable=False),
    Column("kind", String(32), nullable=False),
    Column("reason", Text),
    Column("source", String(64)),
    Column("run_id", Integer, ForeignKey("runs.id")),
    Column("cluster", String(255), nullable=False, server_default=""),  # v3
)
Index("ix_events_node_time", events.c.node, events.c.at)
Index("ix_events_kind_day", events.c.kind, events.c.day)

#: v4: each node's as-built record of each run (docs/asbuilt.md), the JSON as asbuilt.json
#: holds it, so the next acceptance of (cluster, node) finds what was delivered before.
#: ``run_key`` is the run's ``runs.key``; one row per (run_key, node): a rebuild replaces it.
asbuilt = Table(
    "asbuilt",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("run_key", String(200), nullable=False),
    Column("cluster", String(255), nullable=False, server_default=""),
    Column("node", String(255), nullable=False),
    Column("at", Float, nullable=False),
    Column("record", Text, nullable=False),
)
Index("ix_asbuilt_node_time", asbuilt.c.cluster, asbuilt.c.node, asbuilt.c.at)
Index("ix_asbuilt_run", asbuilt.c.run_key)
