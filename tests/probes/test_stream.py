"""STREAM probe: byte counting, cache sizing, table parsing, compile cache, validation."""

from __future__ import annotations

import shutil

import pytest
import stream_probe as sp

SMALL = ("--array-mib", "8", "--reps", "10")


def test_stream_bytes_per_kernel_follow_stream_counting():
    n = 1000
    assert sp.kernel_bytes("copy", n) == 2 * 8 * n
    assert sp.kernel_bytes("scale", n) == 2 * 8 * n
    assert sp.kernel_bytes("add", n) == 3 * 8 * n
    assert sp.kernel_bytes("triad", n) == 3 * 8 * n


def _cache(root, cpu, index, level, size, shared, kind="Unified"):
    d = root / f"cpu{cpu}" / "cache" / f"index{index}"
    d.mkdir(parents=True)
    for name, value in (
        ("level", level),
        ("size", size),
        ("shared_cpu_list", shared),
        ("type", kind),
    ):
        (d / name).write_text(f"{value}\n")


def test_llc_sums_each_last_level_instance_once(tmp_path):
    # two sockets, two cpus each: per-cpu L2, one 32M L3 per socket
    for cpu in range(4):
        socket_cpus = "0-1" if cpu < 2 else "2-3"
        _cache(tmp_path, cpu, 0, 1, "32K", str(cpu), "Data")
        _cache(tmp_path, cpu, 1, 1, "32K", str(cpu), "Instruction")
        _cache(tmp_path, cpu, 2, 2, "1M", str(cpu))
        _cache(tmp_path, cpu, 3, 3, "32768K", socket_cpus)
    assert sp.llc_bytes(str(tmp_path)) == 2 * 32 * 2**20


def test_llc_unknown_without_sysfs(tmp_path):
    assert sp.llc_bytes(str(tmp_path / "absent")) is None


def test_array_size_is_at_least_four_llc_and_the_floor():
    mib = 2**20
    assert sp.choose_elements(64 * mib, 64, None) * 8 == 4 * 64 * mib
    assert sp.choose_elements(4 * mib, 64, None) * 8 == 64 * mib
    assert sp.choose_elements(None, 64, None) * 8 == 64 * mib
    assert sp.choose_elements(512 * mib, 64, 8) * 8 == 8 * mib  # explicit override wins


def test_expected_values_match_the_stream_recurrence():
    a, b, c = sp.expected_values(0)  # one iteration from a=1, b=2, c=0
    assert (a, b, c) == (1 * 3 + 3 * 4, 3.0, 4.0)
    assert sp.expected_values(10)[0] == pytest.approx(15.0**11)


@pytest.fixture(scope="module")
def stream_runs(probe, tmp_path_factory):
    cache = tmp_path_factory.mktemp("cache")
    first = probe("stream_probe.py", *SMALL, "--cache-dir", str(cache))
    second = probe("stream_probe.py", *SMALL, "--cache-dir", str(cache), "--inject-error")
    return first, second


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler here")
def test_c_stream_reports_four_kernels_with_consistent_rates(stream_runs):
    doc = stream_runs[0].doc
    assert doc["status"] == "ok", doc
    assert doc["implementation"] in ("c-openmp", "c-serial")
    assert doc["library"].startswith("C (")
    assert doc["validation"]["ok"] is True
    n = doc["array_elements"]
    assert n == 8 * 2**20 // 8
    assert [r["kernel"] for r in doc["results"]] == ["copy", "scale", "add", "triad"]
    for r in doc["results"]:
        assert r["bytes_per_iter"] == sp.kernel_bytes(r["kernel"], n)
        assert r["min_time_s"] <= r["avg_time_s"] <= r["max_time_s"]
        # the table's MB/s is best time based; the times are printed to 1 us (%11.6f), so
        # the rate recomputed from the printed time is off by up to 0.5 us / min time
        assert r["best_rate_gbps"] == pytest.approx(
            r["bytes_per_iter"] / r["min_time_s"] / 1e9, rel=1e-3 + 0.6e-6 / r["min_time_s"]
        )
    assert "Function    Best Rate MB/s  Avg time     Min time     Max time" in doc["raw"]
    assert "Solution Validates" in doc["raw"]
    assert doc["threads"] >= 1


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler here")
def test_compile_cache_is_reused_and_injected_error_fails_validation(stream_runs):
    first, second = stream_runs
    assert first.doc["compile"]["cached"] is False
    assert second.doc["compile"]["cached"] is True
    assert second.doc["compile"]["cache_dir"] == first.doc["compile"]["cache_dir"]
    assert "/stream-" in second.doc["compile"]["cache_dir"]
    assert second.doc["status"] == "ok"  # the probe ran; the verdict is the controller's
    assert second.doc["validation"]["ok"] is False
    assert second.doc["validation"]["errors"]["a"]["max_rel_err"] > 1e-13
    assert "Failed Validation on array a[]" in second.doc["raw"]


def test_numpy_fallback_same_arithmetic_and_detects_corruption(probe):
    ok = probe("stream_probe.py", *SMALL, env={"NVTEST_PROBE_DISABLE": "cc"})
    assert ok.doc["implementation"] == "numpy-fallback"
    assert ok.doc["library"].startswith("numpy ")
    assert "disabled" in ok.doc["fallback_reason"]
    assert ok.doc["validation"]["ok"] is True
    assert {r["kernel"] for r in ok.doc["results"]} == set(sp.KERNEL_WORDS)
    bad = probe("stream_probe.py", *SMALL, "--inject-error", env={"NVTEST_PROBE_DISABLE": "cc"})
    assert bad.doc["validation"]["ok"] is False


def test_parse_table_rejects_output_without_verdict():
    text = "Copy:  1000.0  0.1  0.1  0.1\nScale: 1.0 0.1 0.1 0.1\nAdd: 1.0 0.1 0.1 0.1\nTriad: 1.0 0.1 0.1 0.1\n"
    with pytest.raises(sp.contract.ProbeError, match="neither"):
        sp.parse_table(text)
    with pytest.raises(sp.contract.ProbeError, match="lacks"):
        sp.parse_table("Solution Validates\n")


def test_fewer_than_ten_reps_is_a_usage_error(probe):
    run = probe("stream_probe.py", "--array-mib", "1", "--reps", "5", env={"NVTEST_PROBE_DISABLE": "cc"})
    assert run.doc["status"] == "error" and "--reps must be >= 10" in run.doc["reason"]
