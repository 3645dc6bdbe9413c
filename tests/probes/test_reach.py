"""reach_probe.py, the launchers' preflight, run as a node runs it: a listener and peers
over loopback, a name that does not resolve, a port nobody listens on."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import pytest

from tests.probes.conftest import ProbeRun, run_probe
from tests.transports.helpers import free_port


def test_peers_reach_the_listener_and_name_themselves(probe_dir: Path) -> None:
    port = free_port()
    box: dict[str, ProbeRun] = {}
    listener = threading.Thread(
        target=lambda: box.update(
            l=run_probe(probe_dir, "reach_probe.py", "listen", "--port", str(port), "--peers", "2", "--timeout-s", "20")
        )
    )
    listener.start()
    peers = [
        run_probe(
            probe_dir,
            "reach_probe.py",
            "connect",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--name",
            name,
            "--timeout-s",
            "15",
        )
        for name in ("node02", "node03")
    ]
    listener.join(30)
    assert all(p.doc["status"] == "ok" for p in peers), [p.doc for p in peers]
    assert peers[0].doc["results"][0]["address"] == "127.0.0.1"
    got = box["l"].doc
    assert got["status"] == "ok" and sorted(p["name"] for p in got["results"][0]["peers"]) == ["node02", "node03"]


def test_a_name_that_does_not_resolve_fails_at_once(probe_dir: Path) -> None:
    run = run_probe(
        probe_dir,
        "reach_probe.py",
        "connect",
        "--host",
        "gpu01.no-such-site.invalid",
        "--port",
        "29500",
        "--name",
        "x",
        "--timeout-s",
        "15",
    )
    assert run.doc["status"] == "error" and run.doc["duration_s"] < 5
    assert "cannot resolve 'gpu01.no-such-site.invalid'" in run.doc["reason"]


def test_nobody_listening_is_refused_within_the_timeout(probe_dir: Path) -> None:
    port = free_port()
    run = run_probe(
        probe_dir,
        "reach_probe.py",
        "connect",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--name",
        "x",
        "--timeout-s",
        "1.5",
    )
    assert run.doc["status"] == "error" and run.doc["duration_s"] < 5
    assert f"cannot reach 127.0.0.1:{port}" in run.doc["reason"] and "refused" in run.doc["reason"]


def test_ssh_to_a_host_that_does_not_resolve_names_it(probe_dir: Path, tmp_path: Path) -> None:
    if shutil.which("ssh") is None:
        pytest.skip("no ssh client here (Debian: openssh-client)")
    cfg = tmp_path / "ssh_config"
    cfg.write_text("Host ghost\n    HostName ghost.no-such-site.invalid\n    BatchMode yes\n")
    run = run_probe(probe_dir, "reach_probe.py", "ssh", "--config", str(cfg), "--hosts", "ghost", "--timeout-s", "3")
    assert run.doc["status"] == "error", run.doc
    (res,) = run.doc["results"]
    assert res["host"] == "ghost" and res["exit_code"] == 255
    assert "Could not resolve hostname ghost.no-such-site.invalid" in res["reason"], res
