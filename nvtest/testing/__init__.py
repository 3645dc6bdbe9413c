"""Test helpers that other projects and nvtest's own tests can reuse.

:mod:`nvtest.testing.sshd_cluster` starts real ``sshd`` processes on loopback
addresses, one per simulated node, for transport tests, the fan-out benchmark
and ``make demo-cluster``; :mod:`nvtest.testing.standin` puts stand-ins for the field's
tools on a node's PATH; :mod:`nvtest.testing.instant` is a transport whose nodes answer
at once, for measuring the harness's own cost per item; :mod:`nvtest.testing.blackhole` is a
loopback TCP listener that accepts and never answers (a hung pgbouncer); :mod:`nvtest.testing.synthetic`
builds results.json documents of any fleet size for the report tests and benchmarks.

The rigs the tests and ``bench/`` share live here too: :mod:`nvtest.testing.standin_nodes`
(named GPU nodes from recorded real tool outputs, read from the checkout's ``tests/data``)
and :mod:`nvtest.testing.signal_rig` (a run over the ssh cluster stopped with signals).
"""

from __future__ import annotations

__all__: list[str] = []
