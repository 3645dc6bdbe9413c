"""The signal rig: a run over the ssh cluster stopped with signals, and what it left behind.

:class:`SignalRig` starts a simulated cluster (:class:`~nvtest.testing.sshd_cluster.SSHDCluster`,
:data:`NODES` nodes) whose ``ofed_info`` is a stand-in sleeping for a minute, runs ``nvtest run``
(``host`` and ``sw_uniformity``) on it, and sends one of :data:`KINDS`' signals once the probe
sleeps on every node. :meth:`SignalRig.interrupted_run` returns an :class:`Outcome` whose
``problems`` list what did not end well: an exit code other than the kind's, a traceback, a
results.json, report.html or junit.xml missing or incomplete, ssh sessions or the probe left
running, the staging directory left on a node. Used by ``tests/e2e/test_signals.py`` and
``bench/signal_stress_bench.py``; it runs the CLI from this checkout.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

from nvtest.testing.sshd_cluster import SSHDCluster
from nvtest.testing.standin import Recording, StandInTools

__all__ = ["KINDS", "NODES", "SLEEP_S", "Outcome", "SignalRig"]

#: The checkout whose nvtest the rig runs (its working directory), and the command.
REPO = Path(__file__).resolve().parents[2]
NVTEST = [sys.executable, "-m", "nvtest.cli"]

#: What each kind sends, and the exit code it must end with.
KINDS: dict[str, tuple[tuple[signal.Signals, ...], bool, int]] = {
    "two-sigint": ((signal.SIGINT, signal.SIGINT), False, 130),
    "two-sigterm": ((signal.SIGTERM, signal.SIGTERM), False, 3),
    "sigint-to-group": ((signal.SIGINT,), True, 130),
}
#: A sleep no other process on this machine has on its command line.
SLEEP_S = 61.25
NODES = 3


@dataclass
class Outcome:
    """One interrupted run, and what it left behind."""

    kind: str
    rc: int | None
    output: str
    run_dir: Path | None
    doc: dict | None
    #: seconds from the first signal to the process's exit
    exit_s: float
    problems: list[str] = field(default_factory=list)


class SignalRig:
    """The simulated cluster with the sleeping stand-in, and the way to interrupt a run on it."""

    def __init__(self, base: Path) -> None:
        self.tools = StandInTools(base / "bin")
        self.tools.add("ofed_info", Recording(stdout="MLNX_OFED_LINUX-5.8-1.0.1.1:\n", sleep_s=SLEEP_S))
        env = {"PATH": self.tools.path_prefix()}
        self.cluster = SSHDCluster(NODES, prefix="sig", node_env={f"sig{i:02d}": env for i in range(1, NODES + 1)})

    def __enter__(self) -> SignalRig:
        self.cluster.start()
        self.home = self.cluster.client_home()
        return self

    def __exit__(self, *exc: object) -> None:
        self.cluster.stop()

    def _calls(self) -> int:
        return sum(1 for c in self.tools.calls() if c.startswith("ofed_info"))

    def interrupted_run(self, out: Path, kind: str, gap_s: float = 0.05) -> Outcome:
        """Start a run, wait until the probe sleeps on every node, send ``kind``'s signals."""
        signals, to_group, _ = KINDS[kind]
        before = self._calls()
        argv = [
            *NVTEST,
            "run",
            "--backend",
            "ssh",
            "--inventory",
            str(self.cluster.inventory_path),
            "-k",
            "host or sw_uniformity",
            "--out",
            str(out),
            "--progress",
            "plain",
        ]
        env = {**os.environ, "HOME": str(self.home), "COLUMNS": "200"}
        proc = subprocess.Popen(
            argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
        )
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.extend(proc.stdout or ()), daemon=True)
        reader.start()
        deadline = time.monotonic() + 120
        while self._calls() - before < NODES:  # the stand-in runs on every node now
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                reader.join(5)
                return Outcome(
                    kind, proc.returncode, "".join(lines), None, None, 0.0, ["the probe never started on every node"]
                )
            time.sleep(0.05)
        t0 = time.monotonic()
        for i, sig in enumerate(signals):
            if i:
                time.sleep(gap_s)
            if to_group:
                os.killpg(proc.pid, sig)
            else:
                proc.send_signal(sig)
        try:
            rc = proc.wait(timeout=90)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            rc = proc.wait(10)
            reader.join(5)
            return Outcome(kind, None, "".join(lines), None, None, 90.0, ["hung: still running 90 s after the signals"])
        exit_s = time.monotonic() - t0
        reader.join(10)
        outcome = Outcome(kind, rc, "".join(lines), None, None, exit_s)
        self._check(outcome, out)
        return outcome

    def _check(self, o: Outcome, out: Path) -> None:
        expected = KINDS[o.kind][2]
        if o.rc != expected:
            o.problems.append(f"exit {o.rc}, expected {expected}")
        if "Traceback" in o.output:
            o.problems.append("a traceback on the console")
        latest = out / "latest"
        if not latest.is_symlink():
            o.problems.append("no latest link: no results.json")
            return
        o.run_dir = latest.resolve()
        try:
            o.doc = json.loads((o.run_dir / "results.json").read_text())
            ET.parse(o.run_dir / "junit.xml")
            if "Overall verdict" not in (o.run_dir / "report.html").read_text():
                o.problems.append("report.html has no verdict")
        except (OSError, ValueError, ET.ParseError) as exc:
            o.problems.append(f"a file missing or unreadable: {exc}")
            return
        o.problems += _incomplete(o.doc)
        o.problems += self._left_behind(o.doc["run"]["run_id"])

    def _left_behind(self, run_id: str) -> list[str]:
        problems = []
        deadline = time.monotonic() + 10
        while True:
            sessions = {n: self.cluster.session_pids(n) for n in self.cluster.names}
            sleeping = _pgrep(f"sleep {SLEEP_S:g}")
            if not any(sessions.values()) and not sleeping or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        if any(sessions.values()):
            problems.append(f"ssh sessions still open on the nodes: {sessions}")
        if sleeping:
            problems.append(f"the probe still runs: pids {sleeping}")
        if Path(f"/tmp/nvtest-{run_id}").exists():
            problems.append(f"/tmp/nvtest-{run_id} still staged")
        return problems


def _incomplete(doc: dict) -> list[str]:
    problems = []
    run = doc["run"]
    if not run.get("interrupted") or not run.get("signals"):
        problems.append(f"not recorded as interrupted: {run.get('interrupted')}, signals {run.get('signals')}")
    items = {(r["check"], r["node"]): r for r in doc["results"]}
    nodes = [f"sig{i:02d}" for i in range(1, NODES + 1)]
    want = {(c, n) for c in ("host", "sw_uniformity") for n in nodes}
    if set(items) != want:
        problems.append(f"items {sorted(set(items) ^ want)} missing or extra")
    for n in nodes:
        r = items.get(("sw_uniformity", n))
        # in flight or never started, it reads the same: not measured, and why
        if r is not None and (
            r["verdict"] != "error" or not r["reason"].startswith("not measured: run interrupted (SIG")
        ):
            problems.append(f"sw_uniformity[{n}]: {r['verdict']} {r['reason']!r}, not an interrupted error")
        if doc["nodes"].get(n, {}).get("verdict") != "error":
            problems.append(f"node {n} is {doc['nodes'].get(n, {}).get('verdict')}, not error")
    if doc["summary"]["verdict"] != "error":
        problems.append(f"overall {doc['summary']['verdict']}")
    return problems


def _pgrep(pattern: str) -> list[int]:
    proc = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True, check=False)
    return [int(p) for p in proc.stdout.split()]
