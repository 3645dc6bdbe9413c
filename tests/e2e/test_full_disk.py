"""``nvtest run`` and ``nvtest report`` with ``--out`` on a real tmpfs that fills up mid-run.

The run on this machine (the local backend) measures ``host``, then ``sw_uniformity``,
whose probe calls ``ofed_info``: here a script first on PATH that fills the file system
under ``--out`` before it answers, as a full disk does in the middle of a delivery run.
What must hold: exit 3 with one line naming the file and the errno (no traceback), no
temporary file left, results.jsonl keeps every measurement (its reserve of disk space),
``latest`` never left on the earlier green run, and once there is room ``nvtest report
RUN_DIR`` rebuilds results.json, the report and junit.xml from results.jsonl alone.
"""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.conftest import fill, read_only_view, run_nvtest, tiny_tmpfs

pytestmark = pytest.mark.slow

FILLER = """#!/bin/sh
# fills the file system of $NVTEST_TEST_FILL to the last byte, then answers as ofed_info does
head -c 1000000000 /dev/zero > "$NVTEST_TEST_FILL" 2>/dev/null
for n in 4096 64 1; do while head -c $n /dev/zero >> "$NVTEST_TEST_FILL" 2>/dev/null; do :; done; done
echo "MLNX_OFED_LINUX-5.8-1.0.1.1:"
"""


def _error_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("nvtest: error:")]


def test_a_disk_that_fills_mid_run(tmp_path: Path) -> None:
    with tiny_tmpfs(tmp_path / "out", "8m") as out:
        green = run_nvtest("run", "-k", "host", "--out", str(out), "--progress", "none")
        assert green.returncode == 0, green.stdout + green.stderr
        earlier = (out / "latest").resolve()
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir()
        (bin_dir / "ofed_info").write_text(FILLER)
        (bin_dir / "ofed_info").chmod(0o755)
        env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "NVTEST_TEST_FILL": str(out / "filler")}
        full = run_nvtest("run", "-k", "host or sw_uniformity", "--out", str(out), "--progress", "plain", env=env)
        text = full.stdout + full.stderr
        assert full.returncode == 3, text
        assert "Traceback" not in text, text
        errors = _error_lines(full.stderr)
        assert len(errors) == 1, text
        assert str(out) in errors[0] and "[Errno 28] No space left on device" in errors[0], errors
        runs = [d for d in out.iterdir() if not d.is_symlink() and (d / "run_config.json").is_file() and d != earlier]
        assert len(runs) == 1, runs
        new = runs[0]
        # latest never stays on the earlier green run: on this one if its results.json is whole
        if (new / "results.json").exists():
            assert (out / "latest").resolve() == new
            json.loads((new / "results.json").read_text())
        else:
            assert not (out / "latest").exists()
        assert not [p for p in new.rglob("*") if ".tmp" in p.name or p.name.endswith(".reserve")]
        # the disk filled under the evidence logs: the measurements still reached results.jsonl
        lines = [json.loads(x) for x in (new / "results.jsonl").read_text().splitlines()]
        measured = {e["check"]: e for e in lines if e["kind"] == "result"}
        assert set(measured) == {"host", "sw_uniformity"}, measured
        assert measured["host"]["verdict"] == "pass"
        assert "No space" not in measured["sw_uniformity"]["reason"], "the full disk turned a measurement into an error"

        (out / "filler").unlink()
        again = run_nvtest("report", str(new))
        assert again.returncode == 0, again.stdout + again.stderr
        doc = json.loads((new / "results.json").read_text())
        assert {r["check"]: r["verdict"] for r in doc["results"]} == {
            "host": "pass",
            "sw_uniformity": measured["sw_uniformity"]["verdict"],
        }
        assert doc["summary"]["verdict"] == "error" and "nvtest failed: cannot write" in doc["summary"]["incomplete"]
        ET.parse(new / "junit.xml")
        assert "Overall verdict" in (new / "report.html").read_text()


def test_a_run_whose_results_json_cannot_be_written_moves_no_latest(tmp_path: Path) -> None:
    out = tmp_path / "out"
    green = run_nvtest("run", "-k", "host", "--out", str(out), "--progress", "none")
    assert green.returncode == 0, green.stdout + green.stderr
    run_dir = out / "blocked"
    (run_dir / "results.json").mkdir(parents=True)  # a directory where the file goes
    (run_dir / "results.json" / "x").write_text("")
    proc = run_nvtest("run", "-k", "host", "--progress", "none", env={"NVTEST_RUN_DIR": str(run_dir)})
    assert proc.returncode == 3, proc.stdout + proc.stderr
    errors = _error_lines(proc.stderr)
    assert len(errors) == 1 and f"cannot write {run_dir / 'results.json'}: [Errno" in errors[0], proc.stderr
    assert "rebuild with: nvtest report" in errors[0]
    assert not (out / "latest").exists(), "latest still points at the earlier green run"
    assert (run_dir / "results.jsonl").is_file()


def test_report_on_a_full_or_read_only_disk(tmp_path: Path) -> None:
    with tiny_tmpfs(tmp_path / "out", "8m") as out:
        first = run_nvtest("run", "-k", "host", "--out", str(out), "--progress", "none")
        assert first.returncode == 0, first.stdout + first.stderr
        run_dir = (out / "latest").resolve()
        before = (run_dir / "results.json").read_bytes()
        filler = fill(out)
        full = run_nvtest("report", str(run_dir))
        assert full.returncode == 3, full.stdout + full.stderr
        assert "Traceback" not in full.stderr
        errors = _error_lines(full.stderr)
        assert len(errors) == 1 and "[Errno 28]" in errors[0] and str(run_dir) in errors[0], full.stderr
        assert (run_dir / "results.json").read_bytes() == before
        assert not [p for p in run_dir.iterdir() if ".tmp" in p.name]
        filler.unlink()
        with read_only_view(out, tmp_path / "ro") as ro:
            ro_run = ro / run_dir.name
            read_only = run_nvtest("report", str(ro_run))
            assert read_only.returncode == 3, read_only.stdout + read_only.stderr
            errors = _error_lines(read_only.stderr)
            assert len(errors) == 1 and "[Errno 30] Read-only file system" in errors[0], read_only.stderr
        ok = run_nvtest("report", str(run_dir))
        assert ok.returncode == 0, ok.stdout + ok.stderr
