"""Verdicts: pass, warn, fail, error, skip, and how they combine.

- ``pass``: inside the SKU threshold.
- ``warn``: inside the threshold, but in its warn band or an outlier against the fleet.
- ``fail``: outside the SKU threshold (or the tool reported a failure).
- ``error``: the probe could not run: unreachable node, timeout, parse failure.
- ``skip``: not applicable here, with the reason.

A node's verdict is the worst of its checks; a check's the worst of its metrics.

This module holds the one severity order of the package: ``skip < pass < warn < error <
fail`` (:attr:`Verdict.rank`). Verdicts written as JSON words (results.json, the gate's
document, the history's rows) are ranked with :func:`rank_of` and combined with
:func:`worst_of`; the gate's public word ``unknown`` (could not be measured,
``docs/gate.schema.json``) is the run's ``error`` under another name and ranks as it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

__all__ = ["UNKNOWN", "Measured", "Outcome", "Verdict", "rank_of", "verdict_of", "worst", "worst_of"]


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


#: The gate's public word for a check that could not be measured (``docs/gate.schema.json``):
#: the run's ``error`` under another name, ranked as it.
UNKNOWN = "unknown"
_ALIASES = {UNKNOWN: Verdict.ERROR}


def verdict_of(word: str) -> Verdict:
    """The :class:`Verdict` a JSON word names (``"fail"`` -> FAIL; the gate's ``unknown`` -> ERROR).

    Raises:
        ValueError: ``word`` is no verdict.
    """
    alias = _ALIASES.get(word)
    return alias if alias is not None else Verdict(word)


def rank_of(word: str) -> int:
    """The severity of a verdict written as a JSON word, as :attr:`Verdict.rank` (0 skip .. 4 fail).

    The gate's ``unknown`` ranks as ``error``; a word that is no verdict ranks as ``error``
    too (fail closed: what cannot be read is never better than a pass).
    """
    try:
        return verdict_of(word).rank
    except ValueError:
        return Verdict.ERROR.rank


def worst_of(words: Iterable[str], default: str = "skip") -> str:
    """The most severe of ``words`` (JSON verdict words) as written, by :func:`rank_of`.

    Of equally severe words the first is kept (``unknown`` before ``error`` stays
    ``unknown``); ``default`` when ``words`` is empty.
    """
    return max(words, key=rank_of, default=default)


@dataclass(frozen=True)
class Measured:
    """One value to judge: ``name`` (with its unit in it), value, unit, labels."""

    name: str
    value: float | None
    unit: str
    labels: dict[str, str] = field(default_factory=dict)


@dataclass
class Outcome:
    """What a check found on one node.

    ``failures`` fail the item, ``warnings`` warn it, ``notes`` are shown only;
    ``skip`` (not applicable, with the reason) and ``error`` (could not judge)
    replace every other finding. ``cause`` is the key of the cause where the code that made
    the outcome knows it (``transport:auth``, ``tool:init_failure``, ``xid:79``; see
    :mod:`nvtest.playbook`), None where only the reason's words say it: the key of the first
    failing finding that has one (:meth:`fail` with ``cause``); ``keys`` holds each keyed
    finding's key (finding text -> key), for a record that keeps its findings apart (the gate's
    decisions).

    This is the one record of what a check found, on every floor: the health and config
    functions, the collective jobs and the gate build it; :func:`nvtest.checks.health.apply`
    records it on a check's Judge.
    """

    metrics: list[Measured] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)
    skip: str | None = None
    error: str | None = None
    cause: str | None = None
    keys: dict[str, str] = field(default_factory=dict)

    def measure(self, name: str, value: float | None, unit: str, **labels: Any) -> None:
        self.metrics.append(Measured(name, value, unit, {k: str(v) for k, v in labels.items()}))

    def fail(self, reason: str, cause: str | None = None) -> None:
        """Add a failing finding; ``cause`` its key where known (the first one is the outcome's)."""
        self.failures.append(reason)
        if cause is not None:
            self.keys[reason] = cause
            if self.cause is None:
                self.cause = cause

    def warn(self, reason: str, cause: str | None = None) -> None:
        """Add a warning; ``cause`` its key where known (kept in :attr:`keys` only)."""
        self.warnings.append(reason)
        if cause is not None:
            self.keys[reason] = cause

    def note(self, text: str) -> None:
        self.notes.append(text)

    @property
    def verdict(self) -> Verdict:
        """The verdict of the findings alone (metric thresholds are the Judge's)."""
        if self.skip is not None:
            return Verdict.SKIP
        if self.failures:
            return Verdict.FAIL
        if self.error is not None:
            return Verdict.ERROR
        return Verdict.WARN if self.warnings else Verdict.PASS

    def text(self) -> str:
        """Every finding on one line (for assertions and logs)."""
        parts = [self.skip or "", self.error or "", *self.failures, *self.warnings, *self.notes]
        return "; ".join(p for p in parts if p)
