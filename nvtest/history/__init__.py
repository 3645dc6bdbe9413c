"""The history of every node: each ``nvtest run``, ``gate`` and ``sweep`` kept and queried.

One schema (:mod:`~nvtest.history.schema`) for SQLite (the default: a file in the user's
data directory) and PostgreSQL (a fleet's shared record, through psycopg 3), versioned
migrations (:mod:`~nvtest.history.migrate`), writing (:mod:`~nvtest.history.store`),
questions (:mod:`~nvtest.history.queries`) and the report's "since the last run" data
(:mod:`~nvtest.history.annotate`). On the shared floor: it imports only ``nvtest.results``
and the ground, so the analysis (``finish_run``) and the operating verbs can both use it.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["LATEST", "HistoryStore", "default_path", "resolve_target"]

#: name -> the module that defines it; loaded on first use, so a caller with history off
#: (``--history off``) never imports SQLAlchemy.
_WHERE = {
    "LATEST": "nvtest.history.schema",
    "HistoryStore": "nvtest.history.store",
    "default_path": "nvtest.history.target",
    "resolve_target": "nvtest.history.target",
}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(_WHERE[name]), name)
    raise AttributeError(f"module 'nvtest.history' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
