"""The gate's verdict document (``docs/gate.schema.json``, schema version 1) and its records.

One JSON document on stdout per gate::

    {"schema": "nvtest-gate", "schema_version": 1, "node": "gpu017", "mode": "prolog",
     "verdict": "fail", "exit_code": 1, "budget_s": 10.0, "duration_s": 0.84,
     "sku": {"name": "h100-sxm-80gb", "how": "matched: GPU name ..."},
     "checks": [{"check": "gpus", "verdict": "fail", "reason": "...", "duration_s": 0.31,
                 "decisions": [{"verdict": "fail", "what": "gpu_count", "value": 0, "unit": "count",
                                "threshold": "== 8", "source": "profile:h100-sxm-80gb expect.gpus",
                                "reason": "...", "next_step": {"action": "...", "class": "REBOOT", "rule": "lost_gpu"}}],
                 "evidence": [{"command": "nvidia-smi -q", "exit_code": 15, "duration_s": 0.05, "tail": "..."}]}],
     "slurm": {"drain": {...} | null, "resume": {...} | null}, "warnings": [...]}

Verdicts of a check and of the gate: ``pass``, ``warn``, ``fail``, ``unknown`` (could not be
measured: it did not answer within the budget, or its tool could not be read), ``skip``
(provably absent, with the source that proved it). The gate's verdict is the worst of its
checks (``skip < pass < warn < unknown < fail``): nvtest's one severity order
(:mod:`nvtest.verdict`), where the gate's ``unknown`` is the run's ``error`` under another name.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from nvtest.ops.gate.tools import ToolOutput
from nvtest.playbook.diagnosis import diagnose
from nvtest.results import one_line_reason
from nvtest.verdict import UNKNOWN, verdict_of, worst_of

__all__ = [
    "SCHEMA",
    "SCHEMA_VERSION",
    "VERDICTS",
    "Decision",
    "GateCheck",
    "exit_code",
    "next_step",
    "worst",
]

SCHEMA = "nvtest-gate"
#: Version of the gate document; bumped on any incompatible change.
SCHEMA_VERSION = 1
#: The gate's verdict words (``docs/gate.schema.json``), in severity order (nvtest.verdict's:
#: ``unknown`` ranks as ``error``; tests/architecture holds the two to the same order).
VERDICTS = ("skip", "pass", "warn", "unknown", "fail")


def worst(verdicts: Iterable[str], default: str = "skip") -> str:
    """The most severe of the gate's ``verdicts`` (``default`` when empty), in nvtest's order.

    Raises:
        ValueError: a word that is none of :data:`VERDICTS` (``error`` is the run's word:
            the gate says ``unknown``).
    """
    words = list(verdicts)
    for v in words:
        if v not in VERDICTS:
            raise ValueError(f"{v!r} is not a gate verdict (one of {', '.join(VERDICTS)})")
    return worst_of(words, default)


def next_step(check: str, verdict: str, reason: str, cause: str | None = None) -> dict[str, str] | None:
    """The playbook's cause, action and class for a bad decision (None for pass/skip/warn),
    from the decision's own reason and ``cause`` (its cause key where the gate knows it:
    ``transport:timeout``); the engine chooses it again once every check answered, from
    everything the gate found on the node (:func:`nvtest.ops.gate.diagnose.diagnose_gate`)."""
    if verdict not in ("fail", UNKNOWN):
        return None
    d = diagnose({"check": check, "verdict": verdict_of(verdict).value, "reason": reason, "cause": cause})
    return None if d is None else {"cause": d.cause, "action": d.action, "class": d.cls, "rule": d.rule}


@dataclass(frozen=True)
class Decision:
    """One judged item: what, its measured value and unit, the threshold, where the threshold
    comes from, the verdict, why, and the playbook's next step when it is bad."""

    verdict: str
    what: str
    reason: str
    value: Any = None
    unit: str | None = None
    threshold: str | None = None
    source: str | None = None
    next_step: Mapping[str, str] | None = None
    #: the cause key where the gate knew one (``transport:timeout``: the tool did not answer),
    #: as a result of ``nvtest run`` carries it; the next step is diagnosed from it first
    cause: str | None = None


@dataclass
class GateCheck:
    """One gate check: its verdict (worst decision), decisions, evidence and numbers.

    The gate's own record, written as one ``checks`` entry of the gate's document; a check
    of ``nvtest run`` is :class:`nvtest.results.CheckResult`.

    ``metrics``: (name, value, unit, labels) recorded in the history.
    """

    check: str
    decisions: list[Decision] = field(default_factory=list)
    evidence: list[ToolOutput] = field(default_factory=list)
    metrics: list[tuple[str, float | None, str, dict[str, str]]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    duration_s: float = 0.0

    @property
    def verdict(self) -> str:
        return worst((d.verdict for d in self.decisions), default=UNKNOWN)

    @property
    def reason(self) -> str:
        """The first decision of the check's verdict (its reason is the check's)."""
        for d in self.decisions:
            if d.verdict == self.verdict:
                return d.reason
        return "no decision"

    def add(
        self,
        verdict: str,
        what: str,
        reason: str,
        *,
        value: Any = None,
        unit: str | None = None,
        threshold: str | None = None,
        source: str | None = None,
        cause: str | None = None,
    ) -> None:
        """Add a decision (the playbook's next step is looked up for a bad one, from its cause
        key where the gate knows one, and the whole reason). The decision's reason is one line of at most
        :data:`nvtest.results.REASON_MAX_CHARS` characters, as every result's; a reason cut
        to fit is kept whole in the check's ``notes`` (``whole reason: ...``)."""
        short, cut = one_line_reason(reason, whole_at="the check's notes")
        if cut:
            self.notes.append(f"whole reason ({what}): {reason}")
        self.decisions.append(
            Decision(
                verdict,
                what,
                short,
                value,
                unit,
                threshold,
                source,
                next_step(self.check, verdict, reason, cause),
                cause,
            )
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "check": self.check,
            "verdict": self.verdict,
            "reason": self.reason,
            "duration_s": round(self.duration_s, 3),
            "decisions": [
                {k: v for k, v in asdict(d).items() if k != "cause" or v is not None} for d in self.decisions
            ],
            "evidence": [
                {
                    "command": e.command,
                    "exit_code": e.exit_code,
                    "timed_out": e.timed_out,
                    "duration_s": round(e.duration_s, 3),
                    "tail": e.tail(),
                }
                for e in self.evidence
            ],
            "metrics": [{"name": n, "value": v, "unit": u, "labels": lab} for n, v, u, lab in self.metrics],
            "notes": list(self.notes),
        }


def exit_code(verdict: str, *, strict: bool) -> int:
    """The gate's exit status: 1 on ``fail`` (and on ``unknown`` with ``strict``), else 0.

    Slurm treats a non-zero Prolog/Epilog as a node failure (it drains the node and
    requeues the job), so nothing but a proven failure may exit non-zero by default.
    """
    if verdict == "fail" or (strict and verdict == "unknown"):
        return 1
    return 0
