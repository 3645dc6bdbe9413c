"""The history store on SQLite and on a real PostgreSQL: writes, the four questions, the same
answers on both engines, migration of a database written at schema version 1."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, inspect, text

from nvtest.errors import ConfigError, HistoryError
from nvtest.history import LATEST, HistoryStore, resolve_target
from nvtest.history import queries as q

DAY = 86400.0
#: a fixed "now" (2025-03-10 12:00 UTC): the fleet's ten days end here
NOW = 1741608000.0
NODES = ("n001", "n002", "n003", "n004")


def run_doc(
    day: int,
    *,
    fail: dict[str, str] | None = None,
    tflops: dict[str, float] | None = None,
    drained: dict[str, str] | None = None,
) -> dict[str, Any]:
    """One day's run of the four nodes: gemm (bf16 TFLOP/s per GPU) and ecc."""
    t = NOW - (9 - day) * DAY
    results = []
    for n in NODES:
        v = (tflops or {}).get(n, 700.0)
        bad = (fail or {}).get(n)
        results.append(
            {
                "check": "gemm",
                "node": n,
                "verdict": "fail" if bad else "pass",
                "reason": bad or "",
                "started_at": t + 10,
                "diagnosis": {"class": "RMA"} if bad else None,
                "metrics": [
                    {
                        "name": "bf16_tflops",
                        "value": v + g,
                        "unit": "TFLOP/s",
                        "verdict": "pass",
                        "labels": {"gpu": str(g), "dtype": "bf16"},
                    }
                    for g in range(2)
                ],
            }
        )
        results.append(
            {
                "check": "ecc",
                "node": n,
                "verdict": "pass",
                "reason": "",
                "started_at": t + 20,
                "metrics": [
                    {
                        "name": "ecc_volatile_uncorrectable",
                        "value": 0,
                        "unit": "count",
                        "verdict": "pass",
                        "labels": {"gpu": "0"},
                    }
                ],
            }
        )
    return {
        "schema_version": 1,
        "run": {
            "run_id": f"day{day:02d}",
            "started_at": t,
            "ended_at": t + 60,
            "suite": "quick",
            "host": "login1",
            "drained": drained or {},
        },
        "summary": {"verdict": "fail" if fail else "pass"},
        "nodes": {n: {"name": n, "sku": "h100-sxm-80gb"} for n in NODES},
        "results": results,
    }


def fleet(store: HistoryStore) -> None:
    """Ten days: n003 fails gemm on days 6, 8 and 9 (drained on day 8); n002 falls 20 % on day 9."""
    for day in range(10):
        fail = {"n003": "bf16 612 TFLOP/s < min 660"} if day in (6, 8, 9) else None
        drained = {"n003": "nvtest day08: gemm bf16 612 TFLOP/s < min 660"} if day == 8 else None
        tflops = {"n002": 560.0} if day == 9 else None
        store.ingest_results(run_doc(day, fail=fail, tflops=tflops, drained=drained))
    store.record_event("n001", "drain", "bad fan, ticket 4711", t=NOW - 3 * DAY, source="admin")


def answers(store: HistoryStore) -> dict[str, Any]:
    """Every question's answer, as plain data (floats rounded) for comparing engines."""
    tl = [
        (round(e.t, 3), e.kind, e.verdict, e.checks, [(m.metric, m.labels, m.delta_pct) for m in e.moved])
        for e in q.timeline(store, "n003")
    ]
    lem = [(x.node, x.days, x.failures, x.drains) for x in q.lemons(store, min_days=3, window_days=7, now=NOW)]
    tr = [(s.node, s.labels, s.drop_pct, s.flagged) for s in q.trend(store, "gemm", "bf16_tflops", drop_pct=10)]
    prev = {
        n: (p.key, p.drained, sorted(p.checks))
        for n, p in q.previous_runs(store, list(NODES), before=NOW + 1, exclude_key="run:day09").items()
    }
    latest = [(x.node, x.sku, sorted((c, v[0]) for c, v in x.checks.items())) for x in q.latest_per_node(store)]
    return json.loads(json.dumps({"timeline": tl, "lemons": lem, "trend": tr, "previous": prev, "latest": latest}))


def test_the_questions_answer_on_each_engine(db_url: str) -> None:
    with HistoryStore(db_url) as store:
        fleet(store)
        a = answers(store)
    assert a["lemons"] == [["n003", 3, 3, 1]]  # days 6, 8, 9: three separate days in seven
    flagged = {(n, lab) for n, lab, _, f in a["trend"] if f}
    assert flagged == {("n002", "dtype=bf16,gpu=0"), ("n002", "dtype=bf16,gpu=1")}
    drop = {(n, lab): d for n, lab, d, _ in a["trend"]}
    assert drop[("n002", "dtype=bf16,gpu=0")] == pytest.approx(20.0, abs=0.01)
    kinds = [e[1] for e in a["timeline"]]
    assert kinds.count("run") == 10 and kinds.count("drain") == 1
    day9 = [e for e in a["timeline"] if e[1] == "run"][-1]
    assert day9[2] == "fail" and day9[3] == [["gemm", "fail", "bf16 612 TFLOP/s < min 660"]]
    assert a["previous"]["n003"][0] == "run:day08"
    assert a["previous"]["n003"][1][1].startswith("nvtest day08")
    assert a["previous"]["n001"][1][1] == "bad fan, ticket 4711"
    assert a["latest"][2] == ["n003", "h100-sxm-80gb", [["ecc", "pass"], ["gemm", "fail"]]]


def test_sqlite_and_postgresql_give_the_same_answers(tmp_path: Path, postgres) -> None:
    from tests.history.conftest import fresh_pg_database

    got = {}
    for name, url in (
        ("sqlite", f"sqlite:///{tmp_path / 'h.sqlite'}"),
        ("pg", fresh_pg_database(postgres, "same_answers")),
    ):
        with HistoryStore(url) as store:
            fleet(store)
            got[name] = answers(store)
    assert got["sqlite"] == got["pg"]


def test_a_run_written_again_replaces_its_rows(db_url: str) -> None:
    with HistoryStore(db_url) as store:
        doc = run_doc(3, fail={"n004": "x"})
        store.ingest_results(doc)
        store.ingest_results(doc)
        with store.engine.connect() as conn:
            n_runs = conn.execute(text("SELECT COUNT(*) FROM runs")).scalar()
            n_results = conn.execute(text("SELECT COUNT(*) FROM results")).scalar()
            n_metrics = conn.execute(text("SELECT COUNT(*) FROM metrics")).scalar()
    assert (n_runs, n_results, n_metrics) == (1, 8, 12)


def _v1_rows(url: str) -> None:
    """Write a database the way nvtest wrote it at schema version 1 (no events table)."""
    from tests.history.conftest import old_database

    old_database(
        url,
        1,
        "n009",
        "fail",
        NOW - DAY,
        "INSERT INTO metrics (run_id, node, check_name, metric, labels, value, unit, verdict) "
        "VALUES (:r, :n, 'gemm', 'bf16_tflops', 'gpu=0', 600.0, 'TFLOP/s', 'fail')",
    )
    eng = create_engine(url)
    assert not inspect(eng).has_table("events")
    eng.dispose()


def test_a_version_1_database_is_migrated(db_url: str) -> None:
    _v1_rows(db_url)
    with HistoryStore(db_url) as store:
        assert (store.migrated_from, store.version) == (1, LATEST)
        assert inspect(store.engine).has_table("events")
        cols = {c["name"] for c in inspect(store.engine).get_columns("results")}
        assert "action_class" in cols
        tl = q.timeline(store, "n009")
        assert [(e.kind, e.verdict) for e in tl] == [("run", "fail")]
        store.record_event("n009", "drain", "nvtest: gemm slow", t=NOW)
        assert [e.kind for e in q.timeline(store, "n009")] == ["run", "drain"]
    with HistoryStore(db_url) as again:  # opening a current database applies nothing
        assert (again.migrated_from, again.version) == (LATEST, LATEST)


def test_a_database_of_a_newer_nvtest_is_refused(db_url: str) -> None:
    HistoryStore(db_url).close()
    eng = create_engine(db_url)
    with eng.begin() as conn:
        conn.execute(text("INSERT INTO nvtest_schema (version, description, applied_at) VALUES (99, 'future', 0)"))
    eng.dispose()
    with pytest.raises(ConfigError, match="newer than this nvtest"):
        HistoryStore(db_url)


def test_where_the_history_is(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NVTEST_HISTORY", "off")
    assert resolve_target(None) is None and HistoryStore.open(None) is None
    monkeypatch.setenv("NVTEST_HISTORY", str(tmp_path / "x" / "h.sqlite"))
    assert resolve_target(None) == f"sqlite:///{tmp_path / 'x' / 'h.sqlite'}"
    monkeypatch.delenv("NVTEST_HISTORY")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert resolve_target(None) == f"sqlite:///{tmp_path / 'data' / 'nvtest' / 'history.sqlite'}"
    assert resolve_target("postgresql://op@db.example/fleet") == "postgresql+psycopg://op@db.example/fleet"


def test_a_url_whose_driver_is_not_installed_is_a_history_error(tmp_path: Path) -> None:
    """mysql:// (no MySQLdb here): one HistoryError, not an ImportError traceback."""
    with pytest.raises(HistoryError, match="history database mysql://op@db.example/fleet: No module named"):
        HistoryStore("mysql://op@db.example/fleet")


def test_the_reading_verbs_do_not_create_a_history_that_is_not_there(tmp_path: Path) -> None:
    """``nvtest history`` and ``nvtest export`` of a path where nothing was recorded say so
    (exit 2) and leave no directory or empty database behind."""
    from tests.conftest import run_nvtest

    missing = tmp_path / "new" / "dir" / "h.sqlite"
    for argv in (
        ["history", "gpu017", "--history", str(missing)],
        ["export", "--prometheus", str(tmp_path / "out.prom"), "--history", str(missing)],
    ):
        proc = run_nvtest(*argv)
        assert proc.returncode == 2, proc.stderr
        assert f"no history at {missing}" in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr
    assert not (tmp_path / "new").exists()


#: A password planted in every form of a history target; it must never be shown.
PLANTED = "pw-PLANTED-7c1e"


@pytest.mark.parametrize(
    ("value", "url", "shown"),
    [
        (
            f"postgresql://op:{PLANTED}@db/fleet?password={PLANTED}&sslmode=require",
            f"postgresql+psycopg://op:{PLANTED}@db/fleet?password={PLANTED}&sslmode=require",
            "postgresql+psycopg://op:***@db/fleet?password=***&sslmode=require",
        ),
        (
            f"postgres://op@db:5433/fleet?sslpassword={PLANTED}&sslkey=/etc/k.pem",
            f"postgresql+psycopg://op@db:5433/fleet?sslpassword={PLANTED}&sslkey=/etc/k.pem",
            "postgresql+psycopg://op@db:5433/fleet?sslkey=%2Fetc%2Fk.pem&sslpassword=***",
        ),
        (
            f"host=db port=5433 user=op password='{PLANTED}' dbname=fleet sslmode=require",
            f"postgresql+psycopg://op:{PLANTED}@db:5433/fleet?sslmode=require",
            "postgresql+psycopg://op:***@db:5433/fleet?sslmode=require",
        ),
        (
            "host=/run/postgresql dbname=fleet",
            "postgresql+psycopg:///fleet?host=%2Frun%2Fpostgresql",
            "postgresql+psycopg:///fleet?host=%2Frun%2Fpostgresql",
        ),
        (
            "host=::1 port=5433 dbname=fleet",
            "postgresql+psycopg:///fleet?host=%3A%3A1&port=5433",
            "postgresql+psycopg:///fleet?host=%3A%3A1&port=5433",
        ),
    ],
)
def test_every_form_of_target_and_its_redacted_form(value: str, url: str, shown: str) -> None:
    """A URL (libpq's ?password= too) and a libpq keyword string are one URL; its shown form
    hides the password of the user part and of the query."""
    from nvtest.history.target import redact, scrub

    got = resolve_target(value)
    assert got == url
    assert redact(got) == shown and PLANTED not in redact(got)
    said = f"could not connect with {got} using {PLANTED}"
    assert scrub(said, got) == f"could not connect with {shown} using " + ("***" if "PLANTED" in url else PLANTED)


@pytest.mark.parametrize(
    "value",
    [
        "fleet",
        f"{PLANTED}",
        f"postgresql://op:{PLANTED}@db:port/fleet",
        f"host=db password='{PLANTED}",
        f"host=db {PLANTED}",
        f"nohost=1 password={PLANTED}",
    ],
)
def test_what_is_no_target_is_refused_without_repeating_it(
    value: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A word that is not plainly a path is no SQLite file created in the working directory;
    the refusal names the accepted forms and never repeats the value (it may be a password)."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as err:
        HistoryStore.open(value)
    assert "accepted: a URL" in str(err.value) and PLANTED not in str(err.value)
    assert list(tmp_path.iterdir()) == []
    assert resolve_target("h.sqlite") == f"sqlite:///{tmp_path / 'h.sqlite'}"
    assert resolve_target("dir/h") == f"sqlite:///{tmp_path / 'dir' / 'h'}"


def test_a_time_that_rises_is_a_trends_drop(tmp_path: Path) -> None:
    """Which way a trend's value is better is the metric catalog's (config.metrics.lower_is_better
    of the unit): a step time (s) 30 % longer is a 30 % drop, a shorter one is none."""
    with HistoryStore(f"sqlite:///{tmp_path / 'h.sqlite'}") as store:
        for day in range(4):
            doc = run_doc(day)
            for r in doc["results"]:
                slow = day == 3 and r["node"] == "n001"
                r["metrics"] = [
                    {"name": "step_time_s", "value": 1.3 if slow else 1.0, "unit": "s", "verdict": "pass", "labels": {}}
                ]
            store.ingest_results(doc)
        got = {s.node: (s.drop_pct, s.flagged) for s in q.trend(store, "gemm", "step_time_s", drop_pct=10)}
    assert got["n001"] == (30.0, True)
    assert got["n002"] == (0.0, False)
