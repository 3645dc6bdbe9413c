"""The local transport: timeouts kill the whole process group; results are evidence."""

from __future__ import annotations

import os
import time
from pathlib import Path

from nvtest.config.inventory import Node
from nvtest.session.phase import PhaseRunner
from nvtest.transports import get_transport
from nvtest.transports.base import render_command


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is dead for our purpose
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split()[2] != "Z"
    except OSError:
        return False


def test_timeout_kills_grandchildren(tmp_path: Path):
    pidfile = tmp_path / "child.pid"
    t = get_transport("local")
    cmd = f"sh -c 'sleep 60 & echo $! > {pidfile}; wait'"
    t0 = time.monotonic()
    res = t.run([Node("n1")], cmd, timeout_s=1.0)["n1"]
    assert time.monotonic() - t0 < 10
    assert res.timed_out and res.exit_code is None and "timed out" in (res.error or "")
    child = int(pidfile.read_text())
    time.sleep(0.2)
    assert not _alive(child), "the background grandchild survived the timeout"


def test_exit_code_env_and_quoting():
    t = get_transport("local")
    res = t.run([Node("n1")], ["sh", "-c", 'echo "$GREETING"; exit 3'], timeout_s=10, env={"GREETING": "a b;c"})["n1"]
    assert res.exit_code == 3 and res.stdout == "a b;c\n" and res.completed
    assert render_command(["echo", "x;touch pwned"]) == "echo 'x;touch pwned'"


def test_phase_runs_once_and_writes_evidence(tmp_path: Path):
    counter = tmp_path / "count"
    runner = PhaseRunner(get_transport("local"), tmp_path)
    cmd = lambda n: f"echo run >> {counter}; echo hello-{n.name}"  # noqa: E731
    nodes = [Node("n1"), Node("n2")]
    first = runner.run("probe", nodes, cmd, timeout_s=10)
    second = runner.run("probe", nodes, cmd, timeout_s=10)
    assert first is second
    assert counter.read_text().count("run") == 2  # once per node, not per call
    log = tmp_path / runner.log_path("probe", "n2")
    text = log.read_text()
    assert "hello-n2" in text and "# exit code: 0" in text and "# command:" in text
