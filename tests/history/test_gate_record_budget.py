"""The gate's record within its budget: a database that accepts connections and never
answers (a black-hole listener), a real PostgreSQL whose table is locked, a locked SQLite
file; the document comes first, the record is spooled, and ``nvtest history import`` (or the
next gate) sends it, once."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from sqlalchemy import create_engine, func, select, text

from nvtest.history.schema import runs
from nvtest.ops.gate.budget import GRACE_S
from nvtest.ops.gate.engine import GateOptions, run_gate
from nvtest.testing.blackhole import BlackHole
from nvtest.testing.postgres import PostgresServer
from nvtest.testing.standin_nodes import node_bin
from tests.conftest import REPO, run_nvtest
from tests.history.conftest import fresh_pg_database

SCHEMA = json.loads((REPO / "docs" / "gate.schema.json").read_text())
BUDGET = 3.0


def timed_gate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, history: str
) -> tuple[dict[str, Any], dict[str, Any], float, float]:
    """A gate of a healthy node ``n1`` with ``history``: (document handed out, final document,
    seconds to the hand-out, wall seconds)."""
    monkeypatch.setenv("PATH", node_bin(tmp_path, "n1").path_prefix())
    seen: list[tuple[float, str]] = []
    t0 = time.monotonic()
    opts = GateOptions(
        node="n1",
        budget_s=BUDGET,
        state_dir=tmp_path / "state",
        history=history,
        emit=lambda d: seen.append((time.monotonic() - t0, json.dumps(d))),
    )
    doc = run_gate(opts)
    wall = time.monotonic() - t0
    assert len(seen) == 1
    emitted = json.loads(seen[0][1])
    jsonschema.validate(emitted, SCHEMA)
    jsonschema.validate(doc, SCHEMA)
    return emitted, doc, seen[0][0], wall


def gate_runs(url: str) -> int:
    eng = create_engine(url)
    with eng.connect() as conn:
        n = conn.execute(select(func.count()).select_from(runs).where(runs.c.kind == "gate")).scalar_one()
    eng.dispose()
    return int(n)


def test_a_silent_database_keeps_the_gate_in_budget_and_the_record_is_spooled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with BlackHole() as hole:
        emitted, doc, printed_at, wall = timed_gate(
            tmp_path, monkeypatch, f"postgresql://nvtest@127.0.0.1:{hole.port}/fleet"
        )
        assert hole.accepted >= 1  # the client did connect: the silence came after the handshake
    assert wall <= BUDGET + GRACE_S + 0.5, wall
    assert printed_at < BUDGET, printed_at  # the verdict was out before the database was waited for
    assert emitted["verdict"] == "pass" and emitted["history"] == {"status": "pending"}
    err = doc["history"]["error"]
    assert doc["history"]["status"] == "spooled" and ("did not finish within" in err or "timeout expired" in err), err
    spool = Path(doc["history"]["spool"])
    assert spool.parent == tmp_path / "state" / "spool" and json.loads(spool.read_text())["gate"]["node"] == "n1"
    # sent by hand, once: a second import finds nothing and duplicates nothing
    db = tmp_path / "fleet.sqlite"
    first = run_nvtest("history", "import", "--spool", str(spool.parent), "--history", str(db), timeout=120)
    assert first.returncode == 0 and "imported 1 of 1" in first.stdout, first.stdout + first.stderr
    assert not spool.exists() and gate_runs(f"sqlite:///{db}") == 1
    again = run_nvtest("history", "import", "--spool", str(spool.parent), "--history", str(db), timeout=120)
    assert again.returncode == 0 and "imported 0 of 0" in again.stdout
    assert gate_runs(f"sqlite:///{db}") == 1
    off = run_nvtest("history", "import", "--spool", str(tmp_path / "nope"), "--history", str(db), timeout=120)
    assert off.returncode == 2


def test_a_locked_postgres_table_is_waited_for_within_the_budget_then_the_spool_is_sent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, postgres: PostgresServer
) -> None:
    url = fresh_pg_database(postgres, tmp_path.name)
    _, _, _, _ = timed_gate(tmp_path / "warm", monkeypatch, url)  # the schema exists, one gate recorded
    holder = create_engine(url)
    conn = holder.connect()
    trans = conn.begin()
    conn.execute(text("LOCK TABLE runs IN ACCESS EXCLUSIVE MODE"))  # another writer stuck mid-transaction
    try:
        emitted, doc, printed_at, wall = timed_gate(tmp_path, monkeypatch, url)
    finally:
        trans.rollback()
        conn.close()
        holder.dispose()
    assert wall <= BUDGET + GRACE_S + 0.5, wall
    assert printed_at < BUDGET and emitted["history"] == {"status": "pending"}
    assert doc["history"]["status"] == "spooled", doc["history"]
    assert gate_runs(url) == 1
    # the next gate writes its own record and sends the spooled one
    _, nxt, _, wall2 = timed_gate(tmp_path, monkeypatch, url)
    assert nxt["history"]["status"] == "written" and nxt["history"]["spool_sent"] == 1, nxt["history"]
    assert gate_runs(url) == 3 and not list((tmp_path / "state" / "spool").glob("*.json"))


def test_a_locked_sqlite_history_is_waited_for_within_the_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "h.sqlite"
    timed_gate(tmp_path / "warm", monkeypatch, str(db))  # created, one gate recorded
    lock = sqlite3.connect(db, timeout=0)
    lock.execute("BEGIN EXCLUSIVE")
    try:
        _, doc, printed_at, wall = timed_gate(tmp_path, monkeypatch, str(db))
    finally:
        lock.rollback()
        lock.close()
    assert wall <= BUDGET + GRACE_S + 0.5, wall
    assert doc["history"]["status"] == "spooled" and "locked" in doc["history"]["error"], doc["history"]
