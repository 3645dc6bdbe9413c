"""Rule 5 on the local transport and over ssh (real sshd): a command's deadline holds whatever
its children do, and a process that survives SIGKILL makes the result ``unkillable``; the
local runner outside a run (the gate's tools, the evidence kit's steps) holds it too.

The unkillable process is real: a child frozen in a cgroup-v1 freezer cgroup sleeps
uninterruptibly (state D) and ignores SIGKILL until thawed, as a process stuck in a wedged
driver does (:mod:`nvtest.testing.wedged`). The Slurm cases are in
``tests/transports/slurm/test_slurm_deadlines.py``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from nvtest.config.inventory import Node
from nvtest.ops.evidence.kit import run_with_deadline
from nvtest.ops.gate.tools import run_tool
from nvtest.testing.sshd_cluster import SSHDCluster
from nvtest.testing.wedged import Freezer, freezer_unavailable_reason
from nvtest.transports.base import Transport
from nvtest.transports.local import LocalTransport
from nvtest.transports.ssh import SSHTransport

from .deadline_cases import GRACE_S, OVER_DEADLINE_S, escaped_pids, escaping_children, within
from .helpers import pid_alive, wait_until


@pytest.fixture(params=["local", pytest.param("ssh", marks=pytest.mark.sshd)])
def target(request: pytest.FixtureRequest) -> Iterator[tuple[Transport, list[Node]]]:
    """(transport, its nodes): this machine, or two nodes of the real sshd cluster."""
    if request.param == "local":
        transport: Transport = LocalTransport()
        nodes = [Node("local")]
    else:
        cluster: SSHDCluster = request.getfixturevalue("sshd_cluster")
        transport = SSHTransport(known_hosts=str(cluster.known_hosts_path))
        nodes = list(cluster.inventory().nodes[:2])
    transport.kill_grace_s = GRACE_S  # type: ignore[attr-defined]
    yield transport, nodes
    transport.close()


def test_children_that_leave_the_group_and_ignore_sigterm_die_at_the_deadline(
    target: tuple[Transport, list[Node]], tmp_path: Path
) -> None:
    transport, nodes = target
    node = nodes[0]
    timeout = 1.5
    results, took = within(
        timeout + OVER_DEADLINE_S,
        lambda: transport.run([node], escaping_children(tmp_path), timeout_s=timeout),
    )
    res = results[node.name]
    assert res.timed_out and res.failure == "timeout" and res.exit_code is None, res
    assert f"timed out after {timeout:g} s" in (res.error or "")
    assert "python" in " ".join(res.hung), res.hung  # what was running at the deadline
    assert res.stdout.startswith("started"), res.stdout  # what came before the deadline is kept
    assert took < timeout + OVER_DEADLINE_S
    pids = escaped_pids(tmp_path)
    assert wait_until(lambda: not any(pid_alive(p) for p in pids), 5), (
        f"an escaped child survived the deadline: {[p for p in pids if pid_alive(p)]}"
    )


@pytest.mark.skipif(freezer_unavailable_reason() is not None, reason=str(freezer_unavailable_reason()))
def test_a_process_that_survives_sigkill_is_unkillable_and_the_run_moves_on(
    target: tuple[Transport, list[Node]],
) -> None:
    transport, nodes = target
    timeout = 1.5
    with Freezer() as freezer:
        commands = {nodes[0].name: f"{freezer.wedge_command()}; sleep 600"}
        commands.update({n.name: "sleep 600" for n in nodes[1:]})
        results, took = within(
            timeout + OVER_DEADLINE_S,
            lambda: transport.run(nodes, commands, timeout_s=timeout),
        )
        wedged = results[nodes[0].name]
        assert wedged.failure == "unkillable", wedged
        assert "unkillable (still alive after SIGKILL: sleep" in (wedged.error or "")
        assert "state D" in (wedged.error or ""), wedged.error
        frozen = freezer.pids()
        assert frozen and all(pid_alive(p) for p in frozen)  # really still there
        for other in nodes[1:]:  # a node with a killable hang is only a timeout
            assert results[other.name].failure == "timeout", results[other.name]
        again = transport.run(nodes, "echo next", timeout_s=20)  # the run moves on
        assert all(r.stdout == "next\n" for r in again.values()), again
    assert took < timeout + OVER_DEADLINE_S
    assert wait_until(lambda: not any(pid_alive(p) for p in frozen), 5)


# ------------------------------------------------------------------ the local runner outside a run


def _gate_tool(argv: list[str], timeout: float, out: Path) -> tuple[bool, int | None, str]:
    res = run_tool(argv, time.monotonic() + timeout)
    return res.timed_out, res.exit_code, res.stdout


def _evidence_step(argv: list[str], timeout: float, out: Path) -> tuple[bool, int | None, str]:
    res = run_with_deadline(
        argv,
        out / "step.txt",
        out / "step.stderr.txt",
        deadline_s=timeout,
        kill_after_s=GRACE_S,
        env=dict(os.environ),
        cwd=out,
    )
    return res.timed_out, res.exit_code, (out / "step.txt").read_text()


#: Every caller that runs a command here outside a run, each through ``run_argv``.
LOCAL_RUNNERS = {"gate tool": _gate_tool, "evidence step": _evidence_step}


@pytest.mark.parametrize("runner", sorted(LOCAL_RUNNERS))
def test_every_local_runner_kills_the_whole_task_at_its_deadline(runner: str, tmp_path: Path) -> None:
    """The gate's tools and the evidence kit's steps run under the local transport's deadline
    discipline: children that left the group and session and ignore SIGTERM die too."""
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    timeout = 1.5
    (timed_out, exit_code, stdout), took = within(
        timeout + OVER_DEADLINE_S,
        lambda: LOCAL_RUNNERS[runner](["/bin/sh", "-c", escaping_children(pid_dir)], timeout, tmp_path),
    )
    assert timed_out and exit_code is None, (timed_out, exit_code)
    assert stdout.startswith("started"), stdout  # what came before the deadline is kept
    assert took < timeout + OVER_DEADLINE_S
    pids = escaped_pids(pid_dir)
    assert wait_until(lambda: not any(pid_alive(p) for p in pids), 5), (
        f"an escaped child survived the deadline: {[p for p in pids if pid_alive(p)]}"
    )
