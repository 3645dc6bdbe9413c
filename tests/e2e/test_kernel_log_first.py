"""Issue 24, class 4: the kernel log is read first, and a GPU that needs a reset blocks NVML.

A stand-in HGX H100 whose kernel log shows a GPU fallen off the bus (Xid 79) and whose
nvidia-smi never answers: the run ends without waiting out the NVML timeouts (the inventory's
nvidia-smi gets a short deadline, 10 s, instead of 60; nvidia-smi -q -x's 120 s is never
spent), every check that would ask NVML is ``blocked`` naming the Xid line, and ``xid_scan``
fails on the same line. A walker proves that in every shipped suite
the checks that read only the kernel log come before every other check.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from nvtest.config.suites import list_suites, suite_targets
from nvtest.run.plugin import check_name, order_items
from nvtest.session.kernel_log import NVML_NEEDS
from nvtest.session.probe import Probe
from nvtest.testing.standin_nodes import XID79_WEDGED, install
from tests.conftest import run_nvtest

#: Seconds the run may take on this machine's 2 shared cores: the inventory's short nvidia-smi
#: deadline (10 s) and the run's own cost, far below the NVML timeouts (60 s, 120 s; the
#: stand-in sleeps 600 s).
BOUND_S = 45


def test_a_gpu_fallen_off_the_bus_blocks_nvml_before_any_timeout(tmp_path: Path) -> None:
    tools = install(XID79_WEDGED, tmp_path / "bin")
    out = tmp_path / "reports"
    t0 = time.monotonic()
    proc = run_nvtest(
        # --timeout-scale 0.2: the inventory's short nvidia-smi deadline is 2 s, not 10 (a fast test)
        "run",
        "--suite",
        "health",
        "--out",
        str(out),
        "--progress",
        "none",
        "--timeout-scale",
        "0.2",
        env={"PATH": tools.path_prefix(), "OMP_NUM_THREADS": "1"},
        timeout=300,
    )
    wall = time.monotonic() - t0
    text = proc.stdout[-2000:] + proc.stderr[-2000:]
    doc = json.loads((out / "latest" / "results.json").read_text())
    by = {r["check"]: r for r in doc["results"]}
    assert wall < BOUND_S, (wall, text)
    assert proc.returncode == 1, text
    xid = by["xid_scan"]
    assert xid["verdict"] == "fail" and "fell off the bus (Xid 79)" in xid["reason"], xid
    blocked = {c: r for c, r in by.items() if "blocked: the kernel log" in r["reason"]}
    # the checks that ask nvidia-smi or the GPUs: not started, each naming the Xid line
    assert {"ecc", "nvlink", "fabric_manager"} <= set(blocked), sorted(by)
    for r in blocked.values():
        assert r["verdict"] == "error" and "Xid 79" in r["reason"] and "fallen off the bus" in r["reason"], r
    log = (out / "latest" / "logs").rglob("inventory.log")
    assert any("stopped: the kernel log" in p.read_text() for p in log)  # nvidia-smi cut at its short deadline


class _Collected:
    """A pytest plugin keeping the collected items of one suite."""

    def __init__(self) -> None:
        self.items: list[pytest.Item] = []

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.items = list(session.items)


def _asks_nvml(item: pytest.Item) -> bool:
    """The item's module holds a probe, or a ``needs`` tuple, that needs NVML."""
    for value in vars(item.module).values():  # type: ignore[attr-defined]
        needs = value.all_needs() if isinstance(value, Probe) else value if isinstance(value, tuple) else ()
        if any(isinstance(n, str) and n in NVML_NEEDS for n in needs):
            return True
    return False


@pytest.mark.parametrize("suite", sorted(list_suites()))
def test_kernel_log_checks_run_before_every_nvml_check_in_every_suite(suite: str) -> None:
    collected = _Collected()
    code = pytest.main(
        ["--collect-only", "-q", "-p", "no:randomly", "-p", "no:cacheprovider", *suite_targets(list_suites()[suite])],
        plugins=[collected],
    )
    assert code == 0 and collected.items, suite
    ordered = order_items(collected.items)
    reads = [
        (check_name(i), (i.get_closest_marker("check").kwargs.get("reads") if i.get_closest_marker("check") else None))
        for i in ordered
    ]
    first = [c for c, r in reads if r == "kernel-log"]
    if first:  # the suite runs a kernel-log check: every one of them before any other check
        assert all(r == "kernel-log" for _, r in reads[: len(first)]), reads
    nvml = [check_name(i) for i in ordered if _asks_nvml(i)]
    if suite in ("delivery", "health", "burnin"):
        assert first == ["xid_scan"] and nvml, (suite, reads)
    positions = {check_name(i): n for n, i in enumerate(ordered)}
    assert all(positions[k] < positions[c] for k in first for c in nvml), (suite, reads)
