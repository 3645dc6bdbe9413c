"""MPI across all nodes: one launch (mpirun, or srun under Slurm) of ``mpi_probe.py``.

Every rank reports where it runs; rank 0 measures barrier latency and an allreduce of
float64 buffers (sizes of ``recipe.mpi.sizes``, default 1 KiB, 1 MiB, 64 MiB) and checks
each result exactly. One item per node:

- ``barrier_latency_us`` (us): median over the barriers of the slowest rank's time;
- ``allreduce_busbw_gbps`` (GB/s): busbw at the largest size, ``algbw * 2 (n - 1) / n``
  as nccl-tests defines it (doc/PERFORMANCE.md);
- a wrong element fails every node (the job's result is wrong, not one node's);
- a node an earlier check of the run failed, or on which something hung, is left out of
  the launch and its item is an error naming that check (``left out of the multi-node
  launch: ib_ports failed on this node``); the others are judged on their own;
- a node whose ranks could not start (mpirun, ssh or srun naming it) fails; the job is
  launched again without it (when two or more nodes are left) and the other nodes are
  judged on that run (``left_out`` in their details names the node); with fewer nodes
  left, their items are errors naming it. A rank that ran elsewhere than the layout says
  fails its node.

On one node (``local``): ``ranks_per_node`` ranks (default 2) on that node. Recipe keys
(``recipe.mpi``): ``ranks_per_node`` (default: 2 on one node, else 1), ``sizes``, ``iters``,
``barriers``, ``timeout_s``, and the launcher's ``rsh_agent``, ``tcp_if_include``, ``mca``.

The orchestration is :mod:`nvtest.checks.interconnect.mpi`.
"""

from __future__ import annotations

import pytest

from nvtest.checks.api import Fleet, Judge, Node
from nvtest.checks.interconnect import mpi


@pytest.mark.check("mpi", area="interconnect", title="MPI across all nodes (barrier, allreduce)")
def test_mpi(node: Node, fleet: Fleet, judge: Judge) -> None:
    mpi.across(fleet, node, judge)
