"""Where the history database is: ``--history``, ``$NVTEST_HISTORY``, or the default file.

Pure string work, no SQLAlchemy import: a gate or a run with history off pays nothing for it.
``off`` (or ``none``) turns history off. A value with ``://`` is an SQLAlchemy URL
(``postgresql://user@host/db`` is read as ``postgresql+psycopg://``, psycopg 3); anything
else is the path of an SQLite file.
"""

from __future__ import annotations

import os
from pathlib import Path

from nvtest.errors import ConfigError

__all__ = ["OFF", "default_path", "resolve_target"]

#: Values of ``--history`` / ``$NVTEST_HISTORY`` that turn history off.
OFF = frozenset({"off", "none", "no", "0", "false"})


def default_path() -> Path:
    """``$XDG_DATA_HOME/nvtest/history.sqlite`` (``~/.local/share/nvtest/history.sqlite``)."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "nvtest" / "history.sqlite"


def resolve_target(value: str | os.PathLike[str] | None = None) -> str | None:
    """The SQLAlchemy URL of the history database, or None when history is off.

    Raises:
        ConfigError: a URL SQLAlchemy cannot read.
    """
    raw = os.fspath(value) if value is not None else os.environ.get("NVTEST_HISTORY")
    if raw is not None and raw.strip().lower() in OFF | {""}:
        return None
    if raw is None:
        raw = str(default_path())
    if "://" in raw:
        if raw.startswith(("postgresql://", "postgres://")):
            raw = "postgresql+psycopg://" + raw.split("://", 1)[1]
        from sqlalchemy.engine import make_url
        from sqlalchemy.exc import ArgumentError

        try:
            make_url(raw)
        except ArgumentError as exc:
            raise ConfigError(f"not a database URL: {exc}", field="--history") from exc
        return raw
    return "sqlite:///" + str(Path(raw).expanduser().resolve())
