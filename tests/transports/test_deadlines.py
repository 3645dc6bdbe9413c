"""Rule 5 on the local transport and over ssh (real sshd): a command's deadline holds whatever
its children do, and a process that survives SIGKILL makes the result ``unkillable``.

The unkillable process is real: a child frozen in a cgroup-v1 freezer cgroup sleeps
uninterruptibly (state D) and ignores SIGKILL until thawed, as a process stuck in a wedged
driver does (:mod:`nvtest.testing.wedged`). The Slurm cases are in
``tests/transports/slurm/test_slurm_deadlines.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from nvtest.config.inventory import Node
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
