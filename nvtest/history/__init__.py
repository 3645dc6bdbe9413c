"""The history of every node: each ``nvtest run``, ``gate`` and ``sweep`` kept and queried.

One schema (:mod:`~nvtest.history.schema`) for SQLite (the default: a file in the user's
data directory) and PostgreSQL (a fleet's shared record, through psycopg 3), versioned
migrations (:mod:`~nvtest.history.migrate`), writing (:mod:`~nvtest.history.store`),
questions (:mod:`~nvtest.history.queries`) and the report's "since the last run" data
(:mod:`~nvtest.history.annotate`). On the shared floor: it imports only ``nvtest.results``
and the ground, so the analysis (``finish_run``) and the operating verbs can both use it.
"""

from __future__ import annotations

from nvtest.history.schema import LATEST
from nvtest.history.store import HistoryStore, default_path, resolve_target

__all__ = ["LATEST", "HistoryStore", "default_path", "resolve_target"]
