"""Helpers of the interconnect and workload checks (``suites/interconnect``, ``suites/workload``).

One job per module:

- :mod:`~nvtest.interconnect.pairs`: pair schedules (ring, all-pairs, random matchings), pure.
- :mod:`~nvtest.interconnect.blame`: which node a set of failing pairs points at, and the
  re-pairing with known-good nodes that confirms it, pure.
- :mod:`~nvtest.interconnect.nccl`: nccl-tests command lines and verdicts (pure).
- :mod:`~nvtest.interconnect.launch`: mpirun / srun / torchrun command builders (pure).
- :mod:`~nvtest.interconnect.pair_jobs`: what one pair runs (perftest, TCP, nccl-tests) and how
  its output becomes a :class:`~nvtest.interconnect.blame.PairOutcome`.
- :mod:`~nvtest.interconnect.orchestrate`: runs pair rounds over a transport (servers first,
  clients once the servers listen), then the second pass.
- :mod:`~nvtest.interconnect.fleet`: the per-run cache of multi-node phases and the helpers that
  turn one launch into one share per node.
"""
