"""package_drift: the probe's dpkg-query listing (stand-in replaying dpkg's format) against the
fleet, the boot, the image marker and the loaded nvidia module."""

from __future__ import annotations

from dataclasses import replace

from nvtest.checks.config.packages import Package, fleet_versions, package_drift, packages_of
from nvtest.testing.standin import Recording
from nvtest.verdict import Verdict
from tests.checks.config.conftest import dpkg_lines, probe_platform, verdict_of
from tests.checks.config.fakesys import titanx_plx

BUILT = 1_713_000_000  # the image marker's mtime (fakesys default)
BOOT = 1_714_000_000
UBUNTU = {
    "linux-image-5.15.0-105-generic": ("5.15.0-105.115", BUILT - 3600),
    "nvidia-driver-535": ("535.104.05-0ubuntu1", BUILT - 3000),
    "libnvidia-compute-535": ("535.104.05-0ubuntu1", BUILT - 3000),
    "nvidia-fabricmanager-535": ("535.104.05-1", BUILT - 2900),
}


def _platform(tmp, pkgs, **machine):
    rec = {"dpkg-query": Recording(stdout=dpkg_lines(pkgs))}
    return probe_platform(tmp, replace(titanx_plx(), **machine), rec)


def _fleet(p, n=3, **others):
    mine = packages_of(p)
    base = {k: Package(k, v, t) for k, (v, t) in UBUNTU.items()}
    fleet = {f"node{i:03d}": dict(base) for i in range(1, n)}
    for node, pk in others.items():
        fleet[node] = pk
    fleet["me"] = mine or {}
    return fleet


def test_the_images_packages_pass(tmp_path):
    p = _platform(tmp_path, UBUNTU)
    out = package_drift(p, _fleet(p))
    assert verdict_of(out) == Verdict.PASS, out.text()
    assert out.metrics[0].name == "drifted_packages" and out.metrics[0].value == 0
    assert out.details["packages"]["nvidia-driver-535"]["version"] == "535.104.05-0ubuntu1"


def test_a_driver_upgraded_after_the_image_and_the_boot_is_named_three_ways(tmp_path):
    pkgs = dict(UBUNTU)
    pkgs["nvidia-driver-535"] = ("535.129.03-0ubuntu1", BOOT + 600)
    p = _platform(tmp_path, pkgs)
    out = package_drift(p, _fleet(p))
    assert verdict_of(out) == Verdict.FAIL
    text = out.text()
    assert (
        "nvidia-driver-535 535.129.03-0ubuntu1 (installed 2024-04-24 23:16 UTC)" in text
        and "2 of 3 nodes have 535.104.05-0ubuntu1" in text
    )
    assert "after image 'rack07-2024.04' was built" in text
    assert "the loaded nvidia module is 535.104.05" in text and "Driver/library version mismatch" in text
    assert out.metrics[0].value == 1  # one package, named by three findings


def test_a_package_changed_after_boot_without_marker(tmp_path):
    pkgs = dict(UBUNTU)
    pkgs["nvidia-fabricmanager-535"] = ("535.104.05-1", BOOT + 10)
    p = _platform(tmp_path, pkgs, image=None)
    out = package_drift(p, _fleet(p))
    assert "after the running kernel booted" in out.text() and "no image marker" in out.text()
    assert verdict_of(out) == Verdict.FAIL


def test_the_running_kernel_without_its_package_fails(tmp_path):
    p = _platform(tmp_path, UBUNTU, osrelease="5.15.0-107-generic")
    out = package_drift(p, {"me": packages_of(p) or {}})
    assert (
        verdict_of(out) == Verdict.FAIL
        and "the running kernel 5.15.0-107-generic has no installed package" in out.text()
    )


def test_a_node_missing_a_fleet_package_fails_and_no_majority_is_not_judged():
    a = {"x": Package("x", "1", None)}
    assert fleet_versions({"n1": a, "n2": a, "n3": {}}) == {"x": ("1", 2, 3)}
    assert fleet_versions({"n1": a, "n2": {}}) == {}


def test_no_package_tool_is_an_error_with_its_words(tmp_path):
    p = probe_platform(tmp_path, titanx_plx(), {"dpkg-query": None})
    out = package_drift(p, {})
    assert verdict_of(out) == Verdict.ERROR and "dpkg-query: not found" in (out.error or "")


def test_dpkg_rows_not_installed_are_left_out(tmp_path):
    rec = {
        "dpkg-query": Recording(
            stdout="libc6\t2.36-9+deb12u14\t1779294443\tii \nnvidia-libopencl1-dev\t\t\tun \n",
            stderr="dpkg-query: no packages found matching linux-image-*\n",
            exit_code=1,
        )
    }
    p = probe_platform(tmp_path, titanx_plx(), rec)
    assert list(packages_of(p) or {}) == ["libc6"]
