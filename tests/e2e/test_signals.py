"""Stopping a run over the ssh cluster with signals: two signals 50 ms apart, SIGINT to the
process group. Every time: exit 130 (SIGINT) or 3 (SIGTERM), a complete results.json (every
planned item has a verdict, the one in flight and those not reached are errors "not measured:
run interrupted (SIGINT)"), report.html
and junit.xml, nothing left running on a node and nothing left staged there.

The run is tiny: the ``host`` check (from the facts), then ``sw_uniformity``, whose probe
calls ``ofed_info``: a stand-in (:class:`~nvtest.testing.standin.StandInTools`) on every
node's PATH that sleeps for a minute, so the signals always find the check in flight on
every node. One cluster serves the module. ``NVTEST_SIGNAL_REPEAT`` sets the repetitions
per kind (default 2; ``bench/signal_stress_bench.py`` runs 20 of each and prints a table).
The rig is :mod:`nvtest.testing.signal_rig` (the benchmark uses it too).
"""

from __future__ import annotations

import json
import os
import subprocess
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest

from nvtest.testing.signal_rig import KINDS, SLEEP_S, SignalRig
from nvtest.testing.sshd_cluster import sshd_unavailable_reason
from nvtest.testing.standin import Recording
from tests.conftest import NVTEST, REPO

pytestmark = [pytest.mark.sshd, pytest.mark.slow]

REPEAT = int(os.environ.get("NVTEST_SIGNAL_REPEAT", "2"))


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SignalRig]:
    reason = sshd_unavailable_reason()
    if reason:
        pytest.skip(reason)
    with SignalRig(tmp_path_factory.mktemp("signals")) as r:
        yield r


@pytest.mark.parametrize("kind", list(KINDS))
def test_a_stopped_run_writes_everything_and_leaves_nothing(rig: SignalRig, tmp_path: Path, kind: str) -> None:
    for i in range(REPEAT):
        o = rig.interrupted_run(tmp_path / f"r{i}", kind)
        assert not o.problems, f"run {i + 1} of {REPEAT} ({kind}): {o.problems}\n{o.output[-3000:]}"


def test_rerun_failed_reruns_what_the_interrupted_run_did_not_measure(rig: SignalRig, tmp_path: Path) -> None:
    o = rig.interrupted_run(tmp_path, "two-sigint")
    assert not o.problems, o.problems
    assert o.doc is not None
    not_measured = sorted((r["check"], r["node"]) for r in o.doc["results"] if r.get("unmeasured"))
    assert not_measured, "the items not reached are not marked unmeasured"
    assert all(
        r["reason"].startswith("not measured: run interrupted (SIGINT)")
        for r in o.doc["results"]
        if r.get("unmeasured")
    )
    junit = ET.parse(o.run_dir / "junit.xml").getroot()  # type: ignore[operator]
    errors = {c.get("name") for c in junit.iter("testcase") if c.find("error") is not None}
    assert {f"{c}[{n}]" for c, n in not_measured} <= errors
    # the earlier run's items that errored (in flight, not reached) are what --rerun-failed runs
    rig.tools.add("ofed_info", Recording(stdout="MLNX_OFED_LINUX-5.8-1.0.1.1:\n"))  # no sleep now
    try:
        again = subprocess.run(
            [*NVTEST, "run", "--rerun-failed", str(o.run_dir), "--out", str(tmp_path), "--progress", "none"],
            cwd=REPO,
            env={**os.environ, "HOME": str(rig.home)},
            capture_output=True,
            text=True,
            timeout=300,
        )
    finally:
        rig.tools.add("ofed_info", Recording(stdout="MLNX_OFED_LINUX-5.8-1.0.1.1:\n", sleep_s=SLEEP_S))
    assert again.returncode == 0, again.stdout + again.stderr
    new = json.loads((tmp_path / "latest" / "results.json").read_text())
    assert sorted((r["check"], r["node"]) for r in new["results"]) == sorted(
        (r["check"], r["node"]) for r in o.doc["results"] if r["verdict"] == "error"
    )
    assert all(r["verdict"] == "pass" for r in new["results"]), [(r["node"], r["reason"]) for r in new["results"]]
