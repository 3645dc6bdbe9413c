"""``pcie_link`` end to end on stand-in nodes (issue 24, class 7): the check's sysfs script reads
``sys/`` under ``$NVTEST_SYSFS_ROOT`` (the config probe's seam), so ``nvtest run`` on an HGX
H100 stand-in (nvtest/testing/standin_nodes.py) judges a recorded tree: all eight GPUs at Gen5 x16 pass;
one trained at x8 under an x16 capability (LnkSta x8, LnkCap x16) fails, naming the GPU."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nvtest.testing.standin_nodes import install, pcie_sysfs
from tests.conftest import run_nvtest

DEGRADED = "0000:9d:00.0"


def _run(tmp: Path, widths: dict[str, int] | None) -> dict:
    tools = install("h100_healthy", tmp / "bin")
    root = pcie_sysfs(tmp / "root", widths=widths)
    out = tmp / "reports"
    proc = run_nvtest(
        "run",
        "--suite",
        "delivery",
        "-k",
        "pcie_link",
        "--out",
        str(out),
        "--progress",
        "none",
        env={"PATH": tools.path_prefix(), "NVTEST_SYSFS_ROOT": str(root)},
        timeout=300,
    )
    results = out / "latest" / "results.json"
    assert results.exists(), proc.stdout[-2000:] + proc.stderr[-2000:]
    (r,) = [r for r in json.loads(results.read_text())["results"] if r["check"] == "pcie_link"]
    return r


@pytest.mark.parametrize("degraded", [False, True], ids=["healthy", "x8-under-x16"])
def test_pcie_link_reads_the_stand_in_nodes_sysfs(tmp_path, degraded):
    r = _run(tmp_path, {DEGRADED: 8} if degraded else None)
    widths = {(m["labels"].get("device"), m["value"]) for m in r["metrics"] if m["name"] == "link_width"}
    assert len({d for d, _ in widths}) >= 8, r  # every GPU's link was read from the tree
    if not degraded:
        assert r["verdict"] == "pass", r
        assert all(v == 16 for _, v in widths), widths
        return
    assert r["verdict"] == "fail", r
    assert DEGRADED in r["reason"] and "x8" in r["reason"], r["reason"]
    assert (DEGRADED, 8) in widths
