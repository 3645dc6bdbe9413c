"""Captured output is bounded on every path: a node printing 100 MB costs the controller
the capture limit, the result says what was dropped, a probe's cut JSON says so, and the
node's log holds at most the limit.

Every path nvtest captures a command's output through is walked (:data:`PATHS`): the local
transport, the SSH transport on the real sshd cluster, and the gate's tools.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from nvtest.config.inventory import Node
from nvtest.errors import ProbeError
from nvtest.ops.gate.tools import run_tool
from nvtest.session.phase import write_evidence
from nvtest.session.probe import parse_probe_json
from nvtest.testing.sshd_cluster import SSHDCluster
from nvtest.transports._slurm_step import SrunProcess
from nvtest.transports.base import CommandResult
from nvtest.transports.capture import (
    DEFAULT_LIMIT,
    BoundedCapture,
    capture_limit,
    capture_note,
    read_capped,
)
from nvtest.transports.local import LocalTransport

from .conftest import LoggedSSHTransport

MB = 1000 * 1000
#: A probe that prints 100 MB of one JSON document: the capture limit cuts it.
BIG_JSON = (
    'python3 -c "import sys; w = sys.stdout.write; w(\'{\\"pad\\": \\"\')\n'
    "for _ in range(100): w('x' * 1000000)\n"
    "w('\\\"}')\""
)
BIG_WORDS = "stdout of 100.0 MB exceeded the capture limit of 8 MiB: first and last 4 MiB kept, 91.6 MB dropped"


def _rss() -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


@contextmanager
def _peak_rss_growth() -> Iterator[list[int]]:
    """Samples this process's RSS every 10 ms while the block runs; yields [growth bytes]."""
    base, peak, stop = _rss(), [0], threading.Event()

    def sample() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], _rss() - base)
            time.sleep(0.01)

    t = threading.Thread(target=sample, daemon=True)
    t.start()
    try:
        yield peak
    finally:
        stop.set()
        t.join()


def test_bounded_capture_keeps_head_and_tail_and_counts_the_rest() -> None:
    cap = BoundedCapture(8 * 1024 * 1024)
    chunk = b"a" * MB
    cap.add(b"HEAD")
    for _ in range(300):
        cap.add(chunk)
    cap.add(b"TAIL")
    assert cap.total == 300 * MB + 8 and cap.truncated
    assert cap.dropped == cap.total - 8 * 1024 * 1024
    value = cap.getvalue()
    assert value.startswith(b"HEAD") and value.endswith(b"TAIL")
    assert len(value) < 8 * 1024 * 1024 + 200
    assert b"dropped here (capture limit)" in value
    assert capture_note(300 * MB, 8 * 1024 * 1024, 300 * MB - 8 * 1024 * 1024) == (
        "output of 300.0 MB exceeded the capture limit of 8 MiB: first and last 4 MiB kept, 291.6 MB dropped"
    )
    small = BoundedCapture(1024)
    small.add(b"x" * 1024)
    assert not small.truncated and small.note() is None and small.getvalue() == b"x" * 1024


def test_capture_limit_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NVTEST_CAPTURE_BYTES", raising=False)
    assert capture_limit() == DEFAULT_LIMIT
    monkeypatch.setenv("NVTEST_CAPTURE_BYTES", "2MiB")
    assert capture_limit() == 2 * 1024 * 1024
    monkeypatch.setenv("NVTEST_CAPTURE_BYTES", "10")  # below the floor: the floor
    assert capture_limit() == 64 * 1024
    monkeypatch.setenv("NVTEST_CAPTURE_BYTES", "lots")  # not a size: the default
    assert capture_limit() == DEFAULT_LIMIT


def _local(_: object, command: str) -> CommandResult:
    return LocalTransport().run_one("local1", command, timeout_s=60)


def _ssh(request: pytest.FixtureRequest, command: str) -> CommandResult:
    cluster: SSHDCluster = request.getfixturevalue("sshd_cluster")
    transport: LoggedSSHTransport = request.getfixturevalue("ssh_transport")
    node = cluster.inventory().nodes[0]
    return transport.run([node], command, timeout_s=60)[node.name]


def _gate_tool(_: object, command: str) -> CommandResult:
    out = run_tool(["/bin/sh", "-c", command], time.monotonic() + 60)
    return CommandResult(
        node="gate",
        command=out.command,
        stdout=out.stdout,
        stderr=out.stderr,
        exit_code=out.exit_code,
        truncated=out.truncated,
    )


def _srun_pipes(_: object, command: str) -> CommandResult:
    """srun's pipes as the slurm transport reads them (the client process here is a shell:
    what is read is its stdout, as srun's would be)."""
    out = SrunProcess(["/bin/sh", "-c", command], own_job=False).run(60)
    return CommandResult(
        node="slurm",
        command=command,
        stdout=out.stdout.decode("utf-8", "replace"),
        exit_code=out.returncode,
        truncated=out.truncated,
    )


def _sbatch_output(request: pytest.FixtureRequest, command: str) -> CommandResult:
    """A batch job's output file (slurm-<job>.out), read as the requeue drill reads it."""
    path = request.getfixturevalue("tmp_path") / "slurm-1.out"
    LocalTransport().run_one("local1", f"({command}) > {path}", timeout_s=60)
    cap = read_capped(path)
    return CommandResult(
        node="slurm",
        command=command,
        stdout=cap.take().decode("utf-8", "replace"),
        exit_code=0,
        truncated=cap.note("stdout"),
    )


#: Every path a command's output is captured through.
PATHS: dict[str, Callable[[pytest.FixtureRequest, str], CommandResult]] = {
    "local": _local,
    "ssh": _ssh,
    "gate-tool": _gate_tool,
    "srun-pipes": _srun_pipes,
    "sbatch-output": _sbatch_output,
}


@pytest.mark.parametrize("path", sorted(PATHS))
def test_a_node_printing_100_mb_is_bounded_and_says_so(
    path: str, request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if path == "ssh":
        from nvtest.testing.sshd_cluster import sshd_unavailable_reason

        if reason := sshd_unavailable_reason():
            pytest.skip(reason)
    monkeypatch.delenv("NVTEST_CAPTURE_BYTES", raising=False)
    with _peak_rss_growth() as growth:
        res = PATHS[path](request, BIG_JSON)
    assert res.exit_code == 0, res
    assert res.truncated == BIG_WORDS
    assert len(res.stdout) < DEFAULT_LIMIT + 200
    assert growth[0] < 200 * MB, f"the controller grew by {growth[0] / MB:.0f} MB reading 100 MB"
    with pytest.raises(ProbeError) as exc:
        parse_probe_json(res)
    assert str(exc.value) == BIG_WORDS + "; the probe's JSON document could not be read"
    assert "Expecting value" not in str(exc.value)
    rel = write_evidence(tmp_path, "gemm", res)
    log = tmp_path / rel
    assert log.stat().st_size < DEFAULT_LIMIT + 4096
    assert f"# truncated: {BIG_WORDS}" in log.read_text()


def test_the_json_after_a_flood_is_still_read() -> None:
    """Noise before the probe's document is cut from the middle: the document, at the end,
    is kept and read."""
    noise = "head -c 50000000 /dev/zero | tr '\\0' x; echo"
    res = LocalTransport().run_one("local1", f'{noise}; echo \'{{"status": "ok"}}\'', timeout_s=60)
    assert res.truncated and parse_probe_json(res) == {"status": "ok"}


def test_a_node_that_prints_little_is_kept_whole() -> None:
    res = LocalTransport().run([Node("n1")], "echo hello; echo oops >&2", timeout_s=10)["n1"]
    assert res.stdout == "hello\n" and res.stderr == "oops\n" and res.truncated is None
