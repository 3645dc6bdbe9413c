"""Rule 5 under the real Slurm (munged, slurmctld, slurmd node1 and node2): a step's
deadline holds whatever its tasks' children do; a process that survives SIGKILL makes that
node's result ``unkillable``; a hung tool blocks the node's later checks that need it.

At a deadline the step is cancelled (``scancel``) and one more step kills, on each node,
what Slurm's process tracking left of the tasks (found by their task token) and reports the
survivors. The unkillable process is a child frozen by the cgroup-v1 freezer
(:mod:`nvtest.testing.wedged`): real uninterruptible sleep, as in a wedged driver.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from nvtest.config.inventory import Node
from nvtest.testing.slurm_cluster import SlurmCluster
from nvtest.testing.wedged import Freezer, freezer_unavailable_reason
from nvtest.transports.slurm import SlurmTransport
from tests.session.hung_tool_case import assert_hung_tool_blocks, context, nvidia_smi
from tests.transports.deadline_cases import (
    GRACE_S,
    escaped_pids,
    escaping_children,
    within,
)
from tests.transports.helpers import pid_alive, wait_until

pytestmark = pytest.mark.slurm

NODES = [Node("node1"), Node("node2")]
#: scancel, srun's own wait for the step ("Waiting up to 4 seconds"), the kill step (two
#: graces) and slack for two slurmd on a shared machine
OVER_DEADLINE_S = 2 * GRACE_S + 20.0


def _transport(run_id: str) -> SlurmTransport:
    t = SlurmTransport(run_id=run_id)
    t.kill_grace_s = GRACE_S
    return t


def test_children_that_leave_the_step_die_at_the_deadline(cluster: SlurmCluster, tmp_path: Path) -> None:
    with _transport("t-escape") as t:
        timeout = 2.0
        node_dir = {n.name: tmp_path / n.name for n in NODES}
        for d in node_dir.values():
            d.mkdir()
        commands = {n: escaping_children(d) for n, d in node_dir.items()}
        results, took = within(timeout + OVER_DEADLINE_S, lambda: t.run(NODES, commands, timeout_s=timeout))
        for res in results.values():
            assert res.timed_out and res.failure == "timeout", res
            assert res.error and res.error.startswith(f"timed out after {timeout:g} s; step cancelled")
        pids = [p for d in node_dir.values() for p in escaped_pids(d)]
        assert wait_until(lambda: not any(pid_alive(p) for p in pids), 5), (
            f"children outlived the step: {[p for p in pids if pid_alive(p)]}"
        )
    assert took < timeout + OVER_DEADLINE_S


@pytest.mark.skipif(freezer_unavailable_reason() is not None, reason=str(freezer_unavailable_reason()))
def test_a_process_that_survives_sigkill_is_unkillable_on_its_node(cluster: SlurmCluster) -> None:
    with _transport("t-wedged") as t, Freezer() as freezer:
        timeout = 2.0
        commands = {"node1": f"{freezer.wedge_command()}; sleep 600", "node2": "sleep 600"}
        results, took = within(timeout + OVER_DEADLINE_S, lambda: t.run(NODES, commands, timeout_s=timeout))
        assert results["node1"].failure == "unkillable", results["node1"]
        assert "unkillable (still alive after SIGKILL: sleep" in (results["node1"].error or "")
        assert "state D" in (results["node1"].error or "")
        assert results["node2"].failure == "timeout", results["node2"]  # killable: a timeout
        again = t.run(NODES, "echo next", timeout_s=30)  # the run moves on
        assert all(r.stdout == "next\n" for r in again.values()), again
    assert took < timeout + OVER_DEADLINE_S


def test_a_hung_tool_blocks_the_later_checks_needing_it(
    cluster: SlurmCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tools = nvidia_smi(tmp_path / "bin", hung=True)
    monkeypatch.setenv("PATH", tools.path_prefix())  # srun hands the client's PATH to the tasks
    ctx = context(tmp_path / "run", "slurm", nodes="node[1-2]", backend_options={"partition": "nvt"})
    assert_hung_tool_blocks(ctx, {"node1", "node2"})


@pytest.mark.skipif(freezer_unavailable_reason() is not None, reason=str(freezer_unavailable_reason()))
def test_a_multi_node_launch_names_the_node_that_owns_the_survivor(cluster: SlurmCluster) -> None:
    """One srun step over both nodes (an MPI/NCCL launch); node1's task leaves a process that
    survives SIGKILL. The result names node1 as its owner (issue 24, class 3), not the step's
    every node, and the phase layer words and pins it there alone."""
    from nvtest.session.phase import attribute_unkillable, unkillable_owners

    with _transport("t-multi-wedged") as t, Freezer() as freezer:
        timeout = 2.0
        script = f'if [ "$SLURMD_NODENAME" = node1 ]; then {freezer.wedge_command()}; fi; sleep 600'
        res, took = within(
            timeout + OVER_DEADLINE_S,
            lambda: t.launch_multi(NODES, ["sh", "-c", script], 1, None, None, timeout_s=timeout),
        )
        assert res.failure == "unkillable", res
        assert "node1: unkillable (still alive after SIGKILL: sleep" in (res.error or ""), res.error
        assert "node2: unkillable" not in (res.error or ""), res.error
        worded = attribute_unkillable(res, ("gpu",))
        assert "node1: unkillable: GPU or driver wedged on node1 (" in (worded.error or ""), worded.error
        assert unkillable_owners(worded) == ["node1"]
    assert took < timeout + OVER_DEADLINE_S
