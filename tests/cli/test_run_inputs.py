"""``nvtest run`` checks what it is given before it writes anything: the SKUs an inventory
names (with their file and line), the backend an inventory implies, the inventory's
known_hosts, and the local backend's single node."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from tests.conftest import REPO, run_nvtest


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_unknown_sku_in_the_inventory_names_its_file_and_line(tmp_path: Path):
    inv = tmp_path / "rack07.yaml"
    inv.write_text("nodes:\n  - names: gpu[001-002]\n  - names: gpu003\n    sku: h900-sxm\n")
    proc = run_nvtest("run", "--inventory", str(inv), "--out", str(tmp_path / "r"), timeout=60)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"{inv}:4: sku: unknown SKU 'h900-sxm'" in proc.stderr
    assert "writing" not in proc.stdout and not (tmp_path / "r").exists()


def test_an_inventory_implies_the_ssh_backend_and_brings_its_known_hosts(tmp_path: Path):
    inv = tmp_path / "rack07.yaml"
    inv.write_text(
        "known_hosts: keys/known_hosts\n"
        f"nodes:\n  - names: gpu001\n    address: 127.0.0.1\n    port: {_closed_port()}\n"
    )
    out = tmp_path / "r"
    proc = run_nvtest(
        "run",
        "--inventory",
        str(inv),
        "--suite",
        "quick",
        "-k",
        "host",
        "--out",
        str(out),
        "--progress",
        "none",
        "--connect-timeout",
        "5",
        timeout=300,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr  # the node is down: an error, not a usage error
    assert "backend ssh (implied by --inventory)" in proc.stdout
    run_dir = (out / "latest").resolve()
    cfg = json.loads((run_dir / "run_config.json").read_text())
    assert cfg["backend"] == "ssh"
    assert cfg["backend_options"]["known_hosts"] == str(tmp_path / "keys" / "known_hosts")
    doc = json.loads((run_dir / "results.json").read_text())
    assert doc["run"]["backend"] == "ssh" and doc["summary"]["verdict"] == "error"


def test_the_local_backend_refuses_several_nodes_before_writing(tmp_path: Path):
    proc = run_nvtest("run", "--backend", "local", "--nodes", "gpu[001-002]", "--out", str(tmp_path / "r"), timeout=60)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "the local backend runs one node" in proc.stderr and "writing" not in proc.stdout


def test_submit_help_has_an_example():
    proc = run_nvtest("submit", "--help", timeout=60)
    assert proc.returncode == 0 and "Example: nvtest submit" in proc.stdout


@pytest.mark.parametrize(
    ("where", "sig", "code"), [("configure", "INT", 130), ("collection", "INT", 130), ("collection", "TERM", 3)]
)
def test_a_signal_before_the_first_item_is_an_interrupted_run(tmp_path: Path, where: str, sig: str, code: int):
    """Stopped while pytest starts or collects: exit 130 (3 for SIGTERM), never a silent 3 with
    the run directory gone; once collected, every planned item is "not measured"."""
    env = {
        "PYTHONPATH": str(REPO),
        "PYTEST_PLUGINS": "tests.cli.signal_at_hook",
        "NVTEST_TEST_SIGNAL_AT": where,
        "NVTEST_TEST_SIGNAL": sig,
    }
    out = tmp_path / "r"
    proc = run_nvtest(
        "run", "--suite", "quick", "-k", "host", "--out", str(out), "--progress", "plain", env=env, timeout=120
    )
    text = proc.stdout + proc.stderr
    assert proc.returncode == code, text
    assert "Traceback" not in text
    runs = [p for p in out.iterdir() if p.name != "latest"]
    if where == "configure":  # nothing planned yet: no run left behind, and one line says so
        assert runs == [] and "interrupted before the run began: nothing was measured" in proc.stderr, text
        return
    doc = json.loads((runs[0] / "results.json").read_text())
    assert doc["run"]["interrupted"] is True and doc["run"]["interrupt_signal"] == f"SIG{sig}"
    assert doc["results"] and all(r["verdict"] == "error" and "not measured" in r["reason"] for r in doc["results"])
    assert (runs[0] / "junit.xml").is_file() and (runs[0] / "report.html").is_file()
