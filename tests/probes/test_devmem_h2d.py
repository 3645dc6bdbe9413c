"""Device memory and host<->device probes: byte counting, CPU run, nvbandwidth path, sysfs."""

from __future__ import annotations

import os
import stat

import _devices as hw
import devmem_probe as dm
import h2d_probe as hd
import pytest


def test_devmem_bytes_read_plus_written():
    assert dm.kernel_bytes("copy", 1000) == 2 * 4 * 1000
    assert dm.kernel_bytes("triad", 1000) == 3 * 4 * 1000
    assert dm.kernel_bytes("triad", 10, element_bytes=8) == 240


def test_devmem_on_cpu_with_torch(probe):
    run = probe("devmem_probe.py", "--device", "cpu", "--array-mib", "4", "--reps", "5")
    doc = run.doc
    assert doc["status"] == "ok" and doc["library"].startswith("torch ")
    by_kernel = {r["kernel"]: r for r in doc["results"]}
    assert set(by_kernel) == {"copy", "triad"}
    elements = 4 * 2**20 // 4
    for kernel, r in by_kernel.items():
        assert r["bytes_per_iter"] == dm.kernel_bytes(kernel, elements)
        assert r["check_ok"] is True
        assert r["best_gbps"] == pytest.approx(r["bytes_per_iter"] / r["min_time_s"] / 1e9, rel=1e-3)
        assert r["best_gbps"] >= r["median_gbps"] > 0


def test_h2d_direction_bytes():
    assert hd.direction_bytes("h2d", 100) == 100
    assert hd.direction_bytes("d2h", 100) == 100
    assert hd.direction_bytes("bidir", 100) == 200


def test_h2d_runs_nvbandwidth_when_on_path(probe, tmp_path):
    fake = tmp_path / "nvbandwidth"
    fake.write_text('#!/bin/sh\necho "nvbandwidth Version: test"\necho "ARGS $*"\n')
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    env = {
        "PATH": f"{tmp_path}{os.pathsep}{os.environ['PATH']}",
        "NVTEST_PROBE_DISABLE": "torch,cupy",
    }
    run = probe("h2d_probe.py", env=env)
    doc = run.doc
    assert doc["status"] == "ok" and doc["raw_tool"] == "nvbandwidth"
    assert doc["raw"].startswith("nvbandwidth Version: test")
    for test in hd.NVBANDWIDTH_TESTS:
        assert f"-t {test}" in doc["raw"]
    failing = tmp_path / "nvbandwidth"
    failing.write_text("#!/bin/sh\necho 'CUDA error: no device' >&2\nexit 3\n")
    bad = probe("h2d_probe.py", env=env)  # the tool's verdict is the controller's, from its words
    assert bad.doc["status"] == "ok" and bad.doc["raw_exit_code"] == 3
    assert "no device" in bad.doc["raw_stderr"]
    skipped = probe("h2d_probe.py", "--no-nvbandwidth", env=env)
    assert skipped.doc["status"] == "skip"


@pytest.fixture
def fake_pci(tmp_path):
    dev = tmp_path / "0000:1b:00.0"
    dev.mkdir()
    (dev / "numa_node").write_text("1\n")
    (dev / "local_cpulist").write_text("0-3,8,10-11\n")
    other = tmp_path / "0000:2c:00.0"
    other.mkdir()
    (other / "numa_node").write_text("-1\n")
    return tmp_path


def test_numa_node_and_local_cpus_from_sysfs(fake_pci):
    root = str(fake_pci)
    assert hw.pci_numa_node("00000000:1B:00.0", root) == 1  # nvidia-smi style 8-digit domain
    assert hw.pci_numa_node("0000:1b:00.0", root) == 1
    assert hw.pci_numa_node("0000:2c:00.0", root) is None  # -1: no NUMA information
    assert hw.pci_numa_node("0000:99:00.0", root) is None
    assert hw.pci_local_cpus("0000:1b:00.0", root) == [0, 1, 2, 3, 8, 10, 11]


def test_bound_to_restores_affinity():
    before = os.sched_getaffinity(0)
    with hd.bound_to([min(before)]) as cpus:
        assert cpus == [min(before)] and os.sched_getaffinity(0) == {min(before)}
    assert os.sched_getaffinity(0) == before
    with hd.bound_to([10_000]) as cpus:  # not allowed here: left alone
        assert cpus is None
