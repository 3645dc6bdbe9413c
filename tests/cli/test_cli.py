"""CLI usage: help, listings, exit code 2 for bad input with a one-line reason."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.parametrize(
    "verb",
    [
        ["run"],
        ["report"],
        ["inventory"],
        ["list", "suites"],
        ["list", "checks"],
        ["list", "skus"],
        ["parse"],
        ["skus", "show"],
        ["skus", "match"],
        ["evaluate"],
        ["verify"],
        ["compare"],
        ["evidence"],
    ],
)
def test_help_has_example(nvtest_cli, verb):
    proc = nvtest_cli(*verb, "--help")
    assert proc.returncode == 0
    assert re.search(r"Examples?:\s+nvtest ", proc.stdout), proc.stdout


def test_list_skus_and_suites(nvtest_cli):
    skus = nvtest_cli("list", "skus")
    assert skus.returncode == 0 and "cpu-generic" in skus.stdout and "h100-sxm-80gb" in skus.stdout
    suites = nvtest_cli("list", "suites")
    assert suites.returncode == 0 and "delivery" in suites.stdout and "quick" in suites.stdout


def test_sku_match_and_expect_read_as_the_profile_writes_them(nvtest_cli):
    listed = nvtest_cli("list", "skus")
    shown = nvtest_cli("skus", "show", "h100-sxm-80gb")
    assert listed.returncode == 0 and shown.returncode == 0, listed.stderr + shown.stderr
    for out in (listed.stdout, shown.stdout):
        assert "['" not in out and "True" not in out, out  # no Python list or bool reprs
    assert "pci_device_ids=2330," in shown.stdout and "ecc=true" in shown.stdout, shown.stdout


def test_unknown_suite_exits_2(nvtest_cli, tmp_path):
    proc = nvtest_cli("run", "--suite", "nope", "--out", str(tmp_path))
    assert proc.returncode == 2
    assert "unknown suite 'nope'" in proc.stderr and "delivery" in proc.stderr


def test_bad_sku_file_exits_2_naming_field(nvtest_cli, tmp_path: Path):
    d = tmp_path / "skus"
    d.mkdir()
    (d / "bad.yaml").write_text(
        "schema_version: 1\nname: bad\ndescription: d\nthresholds:\n  stream:\n    triad_gbps: {min: 1, source: x}\n"
    )
    proc = nvtest_cli("run", "--suite", "quick", "--sku-dir", str(d), "--out", str(tmp_path / "r"))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    assert "bad.yaml:6" in line and "thresholds.stream.triad_gbps.unit" in line


def test_bad_inventory_exits_2(nvtest_cli, tmp_path: Path):
    inv = tmp_path / "inv.yaml"
    inv.write_text("nodes:\n  - names: n1\n    prot: 22\n")
    proc = nvtest_cli("run", "--inventory", str(inv), "--out", str(tmp_path / "r"))
    assert proc.returncode == 2
    assert "inv.yaml:3" in proc.stderr and "nodes.0.prot" in proc.stderr and "unknown key" in proc.stderr


def test_unknown_forced_sku_exits_2(nvtest_cli, tmp_path):
    proc = nvtest_cli("run", "--sku", "h900", "--out", str(tmp_path))
    assert proc.returncode == 2 and "unknown SKU 'h900'" in proc.stderr


def test_report_on_missing_dir_exits_2(nvtest_cli, tmp_path):
    proc = nvtest_cli("report", str(tmp_path / "nothing"))
    assert proc.returncode == 2 and "results.json" in proc.stderr


def test_no_check_selected_exits_2(nvtest_cli, tmp_path):
    proc = nvtest_cli("run", "--suite", "quick", "-k", "no_such_check", "--out", str(tmp_path), "--progress", "none")
    assert proc.returncode == 2 and "no check was selected" in proc.stderr


def test_inventory_json(nvtest_cli):
    import json

    proc = nvtest_cli("inventory", "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    (node,) = data["nodes"].values()
    assert node["inventory"]["cores"] >= 1 and node["sku"] == "cpu-generic"
    assert data["summary"]["reachable"] == 1


def test_bad_hostlist_leaves_no_run_dir(nvtest_cli, tmp_path):
    out = tmp_path / "r"
    proc = nvtest_cli("run", "--nodes", "gpu[001-", "--out", str(out))
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not out.exists() or not any(out.iterdir())


def test_unwritable_out_exits_2(nvtest_cli, tmp_path):
    f = tmp_path / "a-file"
    f.write_text("x")
    proc = nvtest_cli("run", "--suite", "quick", "--out", str(f / "sub"))
    assert proc.returncode == 2 and "--out" in proc.stderr


def test_k_syntax_error_exits_2_without_report(nvtest_cli, tmp_path):
    out = tmp_path / "r"
    proc = nvtest_cli("run", "--suite", "quick", "-k", "stream and (", "--out", str(out), "--progress", "none")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    assert not (out / "latest").exists()


@pytest.mark.parametrize("at", ["nvtest.cli.app", "nvtest.cli.run", "nvtest.cli.export"])
def test_ctrl_c_while_the_command_starts_is_one_line_and_exit_130(at: str) -> None:
    """A SIGINT during the start's imports (the first second of ``nvtest ...``) is raised as
    KeyboardInterrupt inside whichever import runs; here it is raised at the import of ``at``."""
    script = (
        "import builtins, importlib\n"
        "real_import, real_module = builtins.__import__, importlib.import_module\n"
        f"AT = {at!r}\n"
        "def hit(name):\n"
        "    if name == AT:\n"
        "        raise KeyboardInterrupt\n"
        "def fake_import(name, *a, **k):\n"
        "    hit(name)\n"
        "    return real_import(name, *a, **k)\n"
        "def fake_module(name, *a, **k):\n"
        "    hit(name)\n"
        "    return real_module(name, *a, **k)\n"
        "builtins.__import__, importlib.import_module = fake_import, fake_module\n"
        "import nvtest.cli\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 130, proc.stderr
    assert proc.stderr.strip() == "nvtest: interrupted while starting: nothing was run", proc.stderr
