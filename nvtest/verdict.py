"""Verdicts: pass, warn, fail, error, skip, and how they combine.

- ``pass``: inside the SKU threshold.
- ``warn``: inside the threshold, but in its warn band or an outlier against the fleet.
- ``fail``: outside the SKU threshold (or the tool reported a failure).
- ``error``: the probe could not run: unreachable node, timeout, parse failure.
- ``skip``: not applicable here, with the reason.

A node's verdict is the worst of its checks; a check's the worst of its metrics.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum

__all__ = ["Verdict", "worst"]


class Verdict(StrEnum):
    """The verdict of a metric, a (check, node) item, a node or a run."""

    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"
    ERROR = "error"
    SKIP = "skip"

    @property
    def rank(self) -> int:
        """Severity: skip < pass < warn < error < fail (a known failure is the worst)."""
        return _RANK[self]

    @property
    def is_bad(self) -> bool:
        """True for fail and error: what makes ``nvtest run`` exit 1."""
        return self in (Verdict.FAIL, Verdict.ERROR)

    def __str__(self) -> str:
        return self.value


_RANK = {Verdict.SKIP: 0, Verdict.PASS: 1, Verdict.WARN: 2, Verdict.ERROR: 3, Verdict.FAIL: 4}


def worst(verdicts: Iterable[Verdict], default: Verdict = Verdict.SKIP) -> Verdict:
    """The most severe verdict of ``verdicts`` (``default`` when empty)."""
    best: Verdict | None = None
    for v in verdicts:
        if best is None or v.rank > best.rank:
            best = v
    return best if best is not None else default
