"""The results store and the derived files on a real tmpfs that fills up or turns read-only.

A full disk or a read-only mount never costs a measurement nor leaves a torn file: the
store cuts a failed line back and keeps it (written with the next line that fits, or in
results.json); results.json and the reports are whole or absent; each failure is an
:class:`~nvtest.errors.OutputWriteError` naming the path and the errno.
"""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest

from nvtest.analysis.finish import finish_run
from nvtest.errors import OutputWriteError
from nvtest.results import (
    RESERVE_BYTES,
    CheckResult,
    ResultStore,
    assemble,
    read_events,
    write_atomic,
)
from nvtest.verdict import Verdict
from tests.conftest import fill, read_only_view, tiny_tmpfs


def _store_run(store: ResultStore, n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        store.result(CheckResult(check="stream", node=f"n{i:03d}", verdict=Verdict.PASS, reason="x" * 200))


def test_a_full_disk_cuts_no_line_and_loses_no_measurement(tmp_path: Path) -> None:
    with tiny_tmpfs(tmp_path / "fs", "1m") as fs:
        store = ResultStore(fs / "run")
        store.append("run", {"run_id": "r", "started_at": 1.0})
        store.append("planned", {"check": "stream", "nodes": [f"n{i:03d}" for i in range(40)]})
        _store_run(store, 5)
        filler = fill(fs)
        _store_run(store, 35, start=5)  # the disk is full: these wait in memory
        assert store.write_error is not None and store.write_error.errno == errno.ENOSPC
        assert str(fs / "run" / "results.jsonl") in str(store.write_error)
        unwritten = store.unwritten
        assert unwritten, "every line fitted: the disk was not full"
        on_disk = read_events(fs / "run" / "results.jsonl")  # whole lines only: no torn one
        assert [e["node"] for e in on_disk if e["kind"] == "result"] == [
            f"n{i:03d}" for i in range(40 - len(unwritten))
        ]
        assert (fs / "run" / "results.jsonl").read_bytes().endswith(b"\n")
        # results.json from the file and the lines kept in memory: every measurement
        doc = assemble(fs / "run" / "results.jsonl", unwritten)
        assert [r["node"] for r in doc["results"] if not r.get("unmeasured")] == [f"n{i:03d}" for i in range(40)]
        filler.unlink()  # space again: the next append writes what waited, in order
        store.append("end", {"ended_at": 2.0})
        store.close()
        assert store.unwritten == []
        events = read_events(fs / "run" / "results.jsonl")
        assert [e["node"] for e in events if e["kind"] == "result"] == [f"n{i:03d}" for i in range(40)]
        assert events[-1]["kind"] == "end"


def test_the_reserve_keeps_the_measurements_when_the_disk_fills(tmp_path: Path) -> None:
    with tiny_tmpfs(tmp_path / "fs", "8m") as fs:
        run = fs / "run"
        store = ResultStore(run)
        assert (run / ".results.jsonl.reserve").stat().st_blocks * 512 >= RESERVE_BYTES
        store.append("run", {"run_id": "r", "started_at": 1.0})
        filler = fill(fs)  # the evidence logs (or another program) took the rest
        _store_run(store, 2000)  # about 600 kB of results
        assert store.write_error is None and store.unwritten == []
        with pytest.raises(OutputWriteError):  # a derived file finds the disk full
            write_atomic(run / "results.json", "x" * 300_000)
        store.close()
        assert not (run / ".results.jsonl.reserve").exists()
        assert len([e for e in read_events(run / "results.jsonl") if e["kind"] == "result"]) == 2000
        filler.unlink()


def test_results_json_and_reports_are_whole_or_absent(tmp_path: Path) -> None:
    with tiny_tmpfs(tmp_path / "fs", "2m") as fs:
        run = fs / "run"
        store = ResultStore(run)
        store.append("run", {"run_id": "r", "started_at": 1.0, "suite": "quick", "backend": "local"})
        _store_run(store, 30)
        store.append("end", {"ended_at": 2.0})
        store.close()
        finish_run(run)  # a first, good results.json and report
        good = {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()}
        store = ResultStore(run)
        _store_run(store, 30, start=30)
        store.close()
        filler = fill(fs)
        with pytest.raises(OutputWriteError) as err:
            finish_run(run)
        assert err.value.errno == errno.ENOSPC and err.value.path.startswith(str(run))
        assert "No space left on device" in str(err.value) and "\n" not in str(err.value)
        # the earlier files as they were, and no temporary file left
        for name in ("results.json", "report.html", "junit.xml"):
            assert (run / name).read_bytes() == good[name], f"{name} changed or cut"
        assert not [p.name for p in run.iterdir() if ".tmp" in p.name]
        filler.unlink()
        finished = finish_run(run)  # rebuilt from results.jsonl alone
        assert len(finished.doc["results"]) == 60
        assert json.loads((run / "results.json").read_text())["results"][-1]["node"] == "n059"


def test_a_read_only_mount_names_the_file_and_the_errno(tmp_path: Path) -> None:
    with tiny_tmpfs(tmp_path / "fs", "1m") as fs:
        (fs / "run").mkdir()
        with read_only_view(fs, tmp_path / "ro") as ro:
            run = ro / "run"
            with pytest.raises(OutputWriteError) as err:
                ResultStore(run)
            assert err.value.errno == errno.EROFS and err.value.path == str(run / "results.jsonl")
            with pytest.raises(OutputWriteError) as err:
                write_atomic(run / "results.json", "{}")
            assert (
                str(err.value)
                == f"cannot write {run / 'results.json'}: [Errno {errno.EROFS}] {os.strerror(errno.EROFS)}"
            )
            assert list(run.iterdir()) == []


def test_planned_items_without_a_result_are_not_measured_errors(tmp_path: Path) -> None:
    store = ResultStore(tmp_path)
    store.append("planned", {"check": "stream", "nodes": ["n1", "n2", "n3"]})
    store.append("planned", {"check": "fleet_check", "nodes": ["fleet"]})
    store.append("run", {"run_id": "r", "started_at": 1.0})
    store.result(CheckResult(check="stream", node="n1", verdict=Verdict.PASS, started_at=1.5))
    store.append("end", {"ended_at": 2.0, "interrupted": True, "interrupt_signal": "SIGTERM"})
    store.close()
    doc = assemble(tmp_path / "results.jsonl")
    by = {(r["check"], r["node"]): r for r in doc["results"]}
    assert set(by) == {("stream", "n1"), ("stream", "n2"), ("stream", "n3"), ("fleet_check", "fleet")}
    for key in (("stream", "n2"), ("stream", "n3"), ("fleet_check", "fleet")):
        assert by[key]["verdict"] == "error" and by[key]["unmeasured"] is True
        assert by[key]["reason"] == "not measured: run interrupted (SIGTERM)"
        assert by[key]["cause"] == "transport:interrupted"  # known, not the generic 'rerun'
    assert doc["nodes"]["n2"]["verdict"] == "error" and doc["nodes"]["n1"]["verdict"] == "pass"
    assert doc["summary"]["items"]["error"] == 3 and doc["summary"]["verdict"] == "error"


def test_a_finished_run_with_an_item_never_reported_is_not_green(tmp_path: Path) -> None:
    store = ResultStore(tmp_path)
    store.append("planned", {"check": "stream", "nodes": ["n1", "n2"]})
    store.append("run", {"run_id": "r", "started_at": 1.0})
    store.result(CheckResult(check="stream", node="n1", verdict=Verdict.PASS))
    store.append("end", {"ended_at": 2.0, "interrupted": False})
    store.close()
    doc = assemble(tmp_path / "results.jsonl")
    lost = [r for r in doc["results"] if r["node"] == "n2"]
    assert lost and lost[0]["verdict"] == "error" and lost[0]["reason"].startswith("not measured: ")
    assert lost[0].get("cause") is None  # nothing says why it was never reported
    assert doc["summary"]["verdict"] == "error"


def test_an_append_after_close_is_written(tmp_path: Path) -> None:
    store = ResultStore(tmp_path)
    store.append("run", {"run_id": "r", "started_at": 1.0})
    store.close()
    store.append("warning", {"message": "ssh: n1: could not remove /tmp/nvtest-r"})  # a transport's late note
    assert read_events(tmp_path / "results.jsonl")[-1]["message"].startswith("ssh: n1")
