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


def old_database(url: str, version: int, node: str, verdict: str, t: float, *more: str) -> None:
    """A database as nvtest wrote it at schema ``version``: one run ``run:old`` with one gemm
    result of ``node`` at ``t``, then the statements ``more`` (``:r`` the run's id, ``:t``
    the time, ``:d`` its day)."""
    from sqlalchemy import create_engine, text

    from nvtest.history.migrate import migrate
    from nvtest.history.store import day_of

    eng = create_engine(url)
    migrate(eng, target=version)
    with eng.begin() as conn:
        conn.execute(
            text("INSERT INTO runs (key, kind, started_at, verdict, details) VALUES ('run:old', 'run', :t, :v, '{}')"),
            {"t": t, "v": verdict},
        )
        rid = conn.execute(text("SELECT id FROM runs WHERE key = 'run:old'")).scalar()
        args = {"r": rid, "t": t, "d": day_of(t), "n": node, "v": verdict}
        for sql in (
            "INSERT INTO results (run_id, node, check_name, verdict, reason, started_at, day) "
            "VALUES (:r, :n, 'gemm', :v, 'slow', :t, :d)",
            *more,
        ):
            conn.execute(text(sql), {k: v for k, v in args.items() if f":{k}" in sql})
    eng.dispose()
