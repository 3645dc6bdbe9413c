"""A password in the history target appears nowhere: not in a file a run, a gate, a rebuild,
an export or ``nvtest history`` writes, not in their output, not in the database.

One password is planted in every form a target takes (URL user part, libpq's ``?password=``,
the libpq keyword string) and each verb runs as an operator would, against a database that
cannot be reached (every error path: the driver's words, the warnings) and against a real
PostgreSQL server (the success path: results.json's ``history`` section, the report, the gate
JSON, the rows). The test server trusts loopback connections, so the password is carried
to it but not checked. The sweep reaches the history through the same
``HistoryStore.open`` and its errors (tests/ops/test_sweep_slurm.py runs it on Slurm).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from nvtest.testing.postgres import PostgresServer
from nvtest.testing.standin_nodes import node_bin
from tests.conftest import run_nvtest
from tests.history.conftest import fresh_pg_database

PLANTED = "pw-PLANTED-7c1e"


def _leaks(root: Path, outputs: list[subprocess.CompletedProcess[str]]) -> list[str]:
    """Where the planted password is: files under ``root`` and each command's output."""
    found = [str(p) for p in sorted(root.rglob("*")) if p.is_file() and PLANTED.encode() in p.read_bytes()]
    for proc in outputs:
        for name, text in (("stdout", proc.stdout), ("stderr", proc.stderr)):
            if PLANTED in text:
                at = text.index(PLANTED)
                found.append(f"{proc.args[3:5]} {name}: ...{text[max(0, at - 120) : at + 40]}")
    return found


def _verbs(tmp: Path, target: str, keyword: str, *, every: bool = True) -> list[subprocess.CompletedProcess[str]]:
    """A run (one check), its rebuild, a gate per target form, an export and a history query,
    all with ``tmp`` as working directory, home and data directory; ``every=False``: the run,
    a gate with ``keyword`` and an export with ``target``."""
    suite = tmp / "one.yaml"
    suite.write_text("name: one\ndescription: one check\nchecks:\n  - inventory/test_inventory.py::test_host\n")
    home = {"HOME": str(tmp), "XDG_DATA_HOME": str(tmp / "data"), "XDG_STATE_HOME": str(tmp / "state")}
    procs = [
        run_nvtest(
            "run",
            "--suite",
            str(suite),
            "--backend",
            "local",
            "--out",
            str(tmp / "out"),
            "--progress",
            "plain",
            cwd=tmp,
            env={**home, "NVTEST_HISTORY": target},
            timeout=300,
        )
    ]
    if every:
        procs.append(
            run_nvtest(
                "report", str(tmp / "out" / "latest"), cwd=tmp, env={**home, "NVTEST_HISTORY": target}, timeout=120
            )
        )
    gate_env = {**home, "PATH": node_bin(tmp, "n1").path_prefix()}
    for form in (target, keyword) if every else (keyword,):
        procs.append(
            run_nvtest(
                "gate",
                "--node",
                "n1",
                "--state-dir",
                str(tmp / "gate"),
                "--history",
                form,
                cwd=tmp,
                env=gate_env,
                timeout=120,
            )
        )
    procs.append(
        run_nvtest(
            "export",
            "--prometheus",
            str(tmp / "prom"),
            "--history",
            keyword if every else target,
            cwd=tmp,
            env=home,
            timeout=120,
        )
    )
    if every:
        procs.append(run_nvtest("history", "vm", "--history", target, "--json", cwd=tmp, env=home, timeout=120))
    return procs


def test_an_unreachable_history_never_shows_its_password(tmp_path: Path) -> None:
    target = f"postgresql://op:{PLANTED}@127.0.0.1:1/fleet?password={PLANTED}&sslmode=disable"
    keyword = f"host=127.0.0.1 port=1 user=op password={PLANTED} dbname=fleet"
    procs = _verbs(tmp_path, target, keyword, every=False)
    run, gate, export = procs
    shown = "history not recorded: history database postgresql+psycopg://op:***@127.0.0.1:1/fleet"
    assert run.returncode == 0 and shown in " ".join(run.stdout.split()), run.stdout[-2000:]
    assert gate.returncode == 0 and '"history": {"status": "pending"}' in gate.stdout  # printed before the write
    assert "nvtest gate: history: spooled in" in gate.stderr and list((tmp_path / "gate" / "spool").iterdir())
    assert export.returncode == 3 and "Traceback" not in export.stderr
    assert _leaks(tmp_path, procs) == []


def test_a_refused_target_is_no_sqlite_file_and_never_repeated(tmp_path: Path) -> None:
    """A bare word (here the password itself, as a slip of the shell) is refused, not made a
    file; a sweep refuses it before Slurm is asked or a job submitted."""
    gate = run_nvtest(
        "gate",
        "--node",
        "n1",
        "--state-dir",
        str(tmp_path / "gate"),
        "--history",
        PLANTED,
        cwd=tmp_path,
        env={"PATH": node_bin(tmp_path, "n1").path_prefix()},
        timeout=120,
    )
    export = run_nvtest(
        "export", "--prometheus", str(tmp_path / "prom"), "--history", PLANTED, cwd=tmp_path, timeout=120
    )
    sweep = run_nvtest("sweep", "--out", str(tmp_path / "sweeps"), "--history", PLANTED, cwd=tmp_path, timeout=120)
    assert gate.returncode == 0 and "accepted: a URL" in gate.stdout and export.returncode == sweep.returncode == 2
    assert "accepted: a URL" in sweep.stderr and not (tmp_path / "sweeps").exists()
    assert not list(tmp_path.glob("pw-*")) and _leaks(tmp_path, [gate, export, sweep]) == []


def test_a_history_on_postgresql_never_stores_or_shows_its_password(tmp_path: Path, postgres: PostgresServer) -> None:
    from sqlalchemy import create_engine, text

    url = fresh_pg_database(postgres, tmp_path.name)  # postgresql+psycopg://nvtest@127.0.0.1:PORT/DB
    db = url.rsplit("/", 1)[1]
    target = f"postgresql://nvtest:{PLANTED}@127.0.0.1:{postgres.port}/{db}?password={PLANTED}"
    keyword = f"host=127.0.0.1 port={postgres.port} user=nvtest password={PLANTED} dbname={db}"
    procs = _verbs(tmp_path, target, keyword)
    assert [p.returncode for p in procs] == [0, 0, 0, 0, 0, 0], [p.stderr[-800:] for p in procs]
    assert "history not recorded" not in procs[0].stdout + procs[2].stdout
    shown = f"postgresql+psycopg://nvtest:***@127.0.0.1:{postgres.port}/{db}?password=***"
    assert shown in (tmp_path / "out" / "latest" / "results.json").read_text()
    assert _leaks(tmp_path, procs) == []
    engine = create_engine(url)
    with engine.connect() as conn:
        tables = conn.execute(text("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")).scalars().all()
        rows = {t: conn.execute(text(f'SELECT * FROM "{t}"')).all() for t in tables}
    engine.dispose()
    assert len(rows["runs"]) == 3 and PLANTED not in repr(rows)  # the run and two gates


def test_a_target_whose_driver_is_missing_is_refused_without_its_password() -> None:
    """The gate's check of its target before it runs (no connection): a driver that is not
    installed is named with the URL's every password hidden, the query's too."""
    from nvtest.errors import ConfigError
    from nvtest.ops.gate.history import check_target

    with pytest.raises(ConfigError) as err:
        check_target(f"mysql://op:{PLANTED}@127.0.0.1/fleet?password={PLANTED}")
    assert "driver is not installed" in str(err.value) and PLANTED not in str(err.value), str(err.value)
