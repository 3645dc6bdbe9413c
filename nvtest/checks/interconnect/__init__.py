"""Helpers of the interconnect and workload checks (``suites/interconnect``, ``suites/workload``).

One job per module:

- :mod:`~nvtest.jobs.pairs`: pair schedules (ring, all-pairs, random matchings), pure.
- :mod:`~nvtest.jobs.blame`: which node a set of failing pairs points at, and the
  re-pairing with known-good nodes that confirms it, pure.
- :mod:`~nvtest.jobs.nccl`: nccl-tests command lines and verdicts (pure).
- :mod:`~nvtest.jobs.launch`: mpirun / srun / torchrun command builders (pure).
- :mod:`~nvtest.jobs.pair_jobs`: what one pair runs (perftest, TCP, nccl-tests) and how
  its output becomes a :class:`~nvtest.jobs.blame.PairOutcome`.
- :mod:`~nvtest.jobs.pair_runner`: runs pair rounds over a transport (servers first,
  clients once the servers listen), then the second pass.
- :mod:`~nvtest.jobs.base`: the per-run cache of multi-node phases and the helpers that
  turn one launch into one share per node.
- :mod:`~nvtest.checks.interconnect.imex`: multi-node NVLink (GB200 NVL72): the IMEX channel,
  service and domain, and one multi-node nvbandwidth run read per node, pure.

The checks themselves, one function each that a suite item calls: :mod:`.nccl` (``intra``,
``multinode``), :mod:`.ib` (``ports``, ``write_bw``, ``tcp_bw``), :mod:`.collectives`
(``inside``, ``across``), :mod:`.mpi` (``across``), :mod:`.nvlink_multinode` (``imex``,
``bandwidth``); :mod:`.nodes`: a node's expected GPUs and RDMA NICs.
"""
