"""Test helpers that other projects and nvtest's own tests can reuse.

:mod:`nvtest.testing.sshd_cluster` starts real ``sshd`` processes on loopback
addresses, one per simulated node, for transport tests, the fan-out benchmark
and ``make demo-cluster``.
"""

from __future__ import annotations

__all__: list[str] = []
