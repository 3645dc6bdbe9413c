"""Wall time of ``nvtest gate --budget 10`` on a healthy stand-in node and with each fault
a side effect can meet, against the promise ``budget + 2 s``.

Every case is a new ``python -m nvtest.cli gate`` process, as Slurm's Prolog runs it, on a
simulated healthy HGX H100 (nvtest/testing/standin_nodes.py):

- ``healthy``: a SQLite history that answers;
- ``silent PostgreSQL``: ``--history postgresql://`` to a listener that accepts and never
  answers (:class:`nvtest.testing.blackhole.BlackHole`, a hung pgbouncer);
- ``locked SQLite``: another process holds the history file's write lock (``BEGIN EXCLUSIVE``);
- ``unresponsive scontrol``: an IB port down (a failed gate) with ``--drain``, and an
  ``scontrol`` that never answers (a slurmctld that does not);
- ``hung nvidia-smi``: every nvidia-smi call hangs (a wedged driver);
- ``SIGTERM at 2 s``: hung nvidia-smi, SIGTERM after 2 s (slurmd at PrologEpilogTimeout).

Columns: ``doc`` seconds until the JSON document was on stdout, ``wall`` until the process
exited, its exit status, the verdict, what became of the history record, and whether a
stand-in process was left behind. Usage::

    python bench/gate_faults_bench.py [--budget 10]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from nvtest.testing.blackhole import BlackHole  # noqa: E402
from nvtest.testing.standin_nodes import FAULTS, hung, node_bin  # noqa: E402

MARK_S = 4242.5  # the hung stand-ins' sleep: how their leftovers are found


def gate(tools_path: str, args: list[str], *, term_after: float | None = None) -> dict[str, object]:
    """One gate process; its timings and outcome."""
    env = {**os.environ, "PATH": tools_path, "PYTHONPATH": str(REPO)}
    t0 = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "nvtest.cli", "gate", "--node", "gpu01", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    seen: dict[str, object] = {}

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("{") and "doc" not in seen:
                seen["doc"], seen["json"] = time.monotonic() - t0, json.loads(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    if term_after is not None:
        time.sleep(term_after)
        proc.send_signal(signal.SIGTERM)
    assert proc.stderr is not None
    err = proc.stderr.read()
    proc.wait(timeout=300)
    wall = time.monotonic() - t0
    reader.join(5)
    doc = seen.get("json") or {}
    hist = next(
        (ln.split("history: ", 1)[1][:40] for ln in err.splitlines() if ln.startswith("nvtest gate: history:")), "-"
    )
    left = subprocess.run(["pgrep", "-f", f"sleep {MARK_S:g}"], capture_output=True, text=True).stdout.split()
    for pid in left:  # clean up what a gate left behind (reported, then ended)
        os.kill(int(pid), signal.SIGKILL)
    return {
        "doc": seen.get("doc"),
        "wall": wall,
        "rc": proc.returncode,
        "verdict": doc.get("verdict", "-"),  # type: ignore[union-attr]
        "history": hist,
        "left": len(left),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", type=float, default=10.0)
    a = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="nvtest-gate-faults-") as tmp:
        base = Path(tmp)

        def common(case: str, history: str) -> list[str]:
            return [
                "--mode",
                "prolog",
                "--budget",
                f"{a.budget:g}",
                "--state-dir",
                str(base / case / "s"),
                "--history",
                history,
            ]

        healthy = node_bin(base, "healthy").path_prefix()
        rows.append(("healthy", gate(healthy, common("healthy", str(base / "h.sqlite")))))
        with BlackHole() as hole:
            url = f"postgresql://nvtest@127.0.0.1:{hole.port}/fleet"
            rows.append(("silent PostgreSQL", gate(healthy, common("pg", url))))
        db = base / "locked.sqlite"
        gate(healthy, common("warm", str(db)))  # the file exists with its schema
        lock = sqlite3.connect(db, timeout=0)
        lock.execute("BEGIN EXCLUSIVE")
        rows.append(("locked SQLite", gate(healthy, common("sqlite", str(db)))))
        lock.rollback()
        lock.close()
        ctl = hung(FAULTS["ib_port_down"][0](node_bin(base, "ctl")), "scontrol", MARK_S).path_prefix()
        rows.append(("unresponsive scontrol", gate(ctl, [*common("ctl", str(base / "h.sqlite")), "--drain"])))
        smi = hung(node_bin(base, "smi"), "nvidia-smi", MARK_S).path_prefix()
        rows.append(("hung nvidia-smi", gate(smi, common("smi", str(base / "h.sqlite")))))
        rows.append(("SIGTERM at 2 s", gate(smi, common("term", str(base / "h.sqlite")), term_after=2.0)))
    print(f"nvtest gate --budget {a.budget:g}: promise: wall <= {a.budget + 2:g} s")
    print(f"{'case':24} {'doc s':>7} {'wall s':>7} {'exit':>4}  {'verdict':8} {'left':>4}  history")
    for name, r in rows:
        doc = f"{r['doc']:7.2f}" if isinstance(r["doc"], float) else "      -"
        print(f"{name:24} {doc} {r['wall']:7.2f} {r['rc']:>4}  {r['verdict']!s:8} {r['left']:>4}  {r['history']}")
    return 0 if all(float(r["wall"]) <= a.budget + 2 for _, r in rows) else 1  # type: ignore[arg-type]


if __name__ == "__main__":
    sys.exit(main())
