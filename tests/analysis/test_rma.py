"""``nvtest rma`` on a small run directory written here (no run, no node): where the archive
goes (never inside the run, never over a device or a link), what it leaves behind when it
fails or is stopped (nothing), and how it sanitises (addresses as whole addresses)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from nvtest.analysis.rma import target_path, write_bundle
from nvtest.errors import ConfigError
from nvtest.results import SCHEMA_VERSION
from tests.conftest import REPO, run_nvtest

RUN_ID = "20260101-120000-ab12"
#: A tool log of the failed node: numbers that are prefixes of its address's parts, and words
#: that start with its host name.
LOG = (
    "$ all_reduce_perf -b 8 -e 128M -f 2 -g 1 -r 10\n"
    '{"reps": 10, "size": 5, "peer": "10.0.0.5", "other": "10.0.0.50", "v6": "fd00::10:5"}\n'
    "gpu017 says: gpu0170 gpu017x gpu017-ib0 10.0.0.5:22 10.0.0.5\n"
)


def _run_dir(root: Path, lines: int = 0) -> Path:
    run = root / "reports" / RUN_ID
    (run / "logs" / "gpu017").mkdir(parents=True)
    (run / "logs" / "gpu017" / "gpus.log").write_text(LOG + "10 0.0.5 x\n" * lines)
    doc = {
        "schema_version": SCHEMA_VERSION,
        "run": {"run_id": RUN_ID, "suite": "delivery", "host": "ctl01"},
        "nodes": {
            "gpu017": {
                "name": "gpu017",
                "verdict": "fail",
                "log_dir": "logs/gpu017",
                "settings": {"address": "10.0.0.5"},
            },
            "gpu018": {
                "name": "gpu018",
                "verdict": "pass",
                "log_dir": "logs/gpu018",
                "settings": {"address": "fd00::10:5"},
            },
        },
        "results": [
            {"node": "gpu017", "check": "gpus", "verdict": "fail", "reason": "10 GPUs", "log": "logs/gpu017/gpus.log"}
        ],
    }
    (run / "results.json").write_text(json.dumps(doc))
    return run


def _members(path: Path) -> dict[str, str]:
    with tarfile.open(path) as tar:
        return {m.name.split("/", 1)[1]: tar.extractfile(m).read().decode() for m in tar.getmembers() if m.isfile()}


def _leftovers(*dirs: Path) -> list[str]:
    return sorted(str(p) for d in dirs for p in d.iterdir() if p.name.startswith((".", "nvtest-rma-")))


def test_the_default_archive_is_outside_the_run_and_a_run_id_is_found_under_reports(tmp_path):
    run = _run_dir(tmp_path)
    before = sorted(p.relative_to(run) for p in run.rglob("*"))
    proc = run_nvtest("rma", RUN_ID, "gpu017", cwd=tmp_path, env={"PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr
    out = tmp_path / f"{RUN_ID}-gpu017-rma.tar.gz"
    assert out.is_file() and sorted(p.relative_to(run) for p in run.rglob("*")) == before
    members = _members(out)
    log = next(v for k, v in members.items() if k.startswith("logs/"))
    # numbers stay numbers, the address is one whole address, the host name only as a word
    assert "-r 10\n" in log and '"reps": 10' in log and '"size": 5' in log
    assert '"peer": "192.0.2.1"' in log and '"other": "192.0.2.2"' in log and '"v6": "2001:db8::1"' in log
    assert "node001 says: gpu0170 gpu017x" in log and "192.0.2.1:22 192.0.2.1" in log
    inside = run_nvtest("rma", ".", "gpu017", cwd=run / "logs", env={"PYTHONPATH": str(REPO)})
    assert inside.returncode == 2 and "cannot read results" in inside.stderr  # "." is not the run
    inside = run_nvtest("rma", "..", "gpu017", cwd=run / "logs", env={"PYTHONPATH": str(REPO)})
    assert inside.returncode == 0 and sorted(p.relative_to(run) for p in run.rglob("*")) == before, inside.stderr
    assert (run.parent / out.name).is_file()  # from inside the run: beside it
    verdicts = json.loads(members["verdicts.json"])
    assert verdicts[0]["reason"] == "10 GPUs"
    assert not any("10.0.0.5" in v or "gpu017 " in v for v in members.values())


@pytest.mark.parametrize("kind", ["device", "symlink", "fifo"])
def test_an_out_that_is_not_a_regular_file_is_refused_and_left_alone(tmp_path, kind):
    run = _run_dir(tmp_path)
    out = tmp_path / "x"
    if kind == "device":
        if not os.path.exists("/dev/null"):
            pytest.skip("no /dev/null on this machine")
        out = Path("/dev/null")  # the real one: refused before anything is written beside it
    elif kind == "symlink":
        out.symlink_to("/proc/self/fd/1")
    else:
        os.mkfifo(out)
    mode = out.lstat().st_mode
    with pytest.raises(ConfigError, match="refusing to replace"):
        write_bundle(run, "gpu017", out)
    assert out.lstat().st_mode == mode and _leftovers(tmp_path) == []


def test_an_out_directory_takes_the_default_name_and_cli_errors_are_one_line(tmp_path):
    run = _run_dir(tmp_path)
    (tmp_path / "d").mkdir()
    bundle = write_bundle(run, "gpu017", tmp_path / "d")
    assert bundle.path == tmp_path / "d" / f"{RUN_ID}-gpu017-rma.tar.gz" and bundle.path.is_file()
    assert target_path(None, RUN_ID, "gpu017") == Path(f"{RUN_ID}-gpu017-rma.tar.gz")
    proc = run_nvtest("rma", str(run), "gpu017", "--out", "/dev/null")
    assert proc.returncode == 2 and "not a regular file" in proc.stderr and "Traceback" not in proc.stderr
    assert os.path.exists("/dev/null") and not Path("/dev/null").is_file()


#: Runs ``nvtest rma`` with a file-size limit (RLIMIT_FSIZE, as a full disk: writes past it
#: fail with EFBIG, whoever runs the test, root included).
FULL_DISK = """
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[1]), int(sys.argv[1])))
sys.argv = ["nvtest", *sys.argv[2:]]
from nvtest.cli.app import main
main()
"""


@pytest.mark.parametrize("limit", [0, 2000])
def test_a_full_disk_leaves_no_temporary_file(tmp_path, limit):
    """0 bytes: nothing can be staged; 2000: the staged files fit, the archive does not."""
    run = _run_dir(tmp_path)
    (run / "logs" / "gpu017" / "inventory.log").write_text(os.urandom(1500).hex()[:1500])
    (tmp_path / "tmp").mkdir()
    (tmp_path / "o").mkdir()
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            FULL_DISK,
            str(limit),
            "rma",
            str(run),
            "gpu017",
            "--out",
            str(tmp_path / "o" / "a.tar.gz"),
        ],
        env={**os.environ, "TMPDIR": str(tmp_path / "tmp"), "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 3, proc.stderr
    assert proc.stderr.startswith("nvtest: error: cannot write") and "Traceback" not in proc.stderr
    assert limit == 0 or "File too large" in proc.stderr
    assert list((tmp_path / "o").iterdir()) == [] and list((tmp_path / "tmp").iterdir()) == []


def test_sigterm_removes_the_staged_copies(tmp_path):
    """A run with a 40 MB log: SIGTERM while it is sanitised leaves no ``nvtest-rma-*``."""
    run = _run_dir(tmp_path, lines=4_000_000)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp), "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "nvtest.cli", "rma", str(run), "gpu017", "--out", str(tmp_path / "a.tar.gz")],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 30
    while not list(tmp.iterdir()) and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.02)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted (SIGTERM)" in err and not (tmp_path / "a.tar.gz").exists()
    assert list(tmp.iterdir()) == [] and _leftovers(tmp_path) == []


def test_compare_reads_asbuilt_json_and_an_unwritable_html_is_one_line(tmp_path):
    """The as-built record compared is asbuilt.json's (what the report shows), not a
    results.jsonl line that says otherwise; ``--html`` into a missing directory is exit 3."""
    from nvtest.analysis.asbuilt import compare_runs

    runs = []
    for name, serial in (("a", "1654922000001"), ("b", "1654922000002")):
        run = _run_dir(tmp_path / name)
        rec = {"read": True, "gpus": [{"slot": "0000:1b:00.0", "serial": serial}]}
        (run / "asbuilt.json").write_text(json.dumps({"nodes": {"gpu017": rec}}))
        stale = {**rec, "gpus": [{"slot": "0000:1b:00.0", "serial": "1654922000001"}]}
        (run / "results.jsonl").write_text(json.dumps({"kind": "asbuilt", "node": "gpu017", "record": stale}) + "\n")
        runs.append(run)
    changes = compare_runs(*runs)
    assert changes and changes[0]["kind"] == "swapped" and changes[0]["now"] == "1654922000002"
    proc = run_nvtest("compare", str(runs[0]), str(runs[0]), "--html", str(tmp_path / "nonexist" / "x.html"))
    assert proc.returncode == 3 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.strip().count("\n") == 0 and "cannot write" in proc.stderr


def test_evaluate_help_says_where_it_writes():
    proc = run_nvtest("evaluate", "--help")
    text = " ".join(proc.stdout.split())
    assert proc.returncode == 0 and "RUN_DIR is not changed" not in text and "RUN_DIR/evaluate-<sku>/" in text
