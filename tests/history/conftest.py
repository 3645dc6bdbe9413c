"""The history store on SQLite and on a real PostgreSQL server started for the module."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from nvtest.testing.postgres import PostgresServer, missing_postgres


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """A PostgreSQL server (Debian's binaries, a temp dir, a free loopback port)."""
    why = missing_postgres()
    if why:
        pytest.skip(why)
    with PostgresServer() as pg:
        yield pg


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """An empty history database: a SQLite file, or a fresh database on the server."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'history.sqlite'}"
        return
    pg: PostgresServer = request.getfixturevalue("postgres")
    yield fresh_pg_database(pg, tmp_path.name)


def fresh_pg_database(pg: PostgresServer, hint: str) -> str:
    """A new, empty database on ``pg`` (one per test); its URL."""
    from sqlalchemy import create_engine, text

    name = "t_" + "".join(c if c.isalnum() else "_" for c in hint.lower())[:50]
    admin = create_engine(pg.url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}"'))
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    return pg.url.rsplit("/", 1)[0] + "/" + name
