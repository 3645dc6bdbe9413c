"""Recovery figures of a restart drill, derived from the ranks' event logs.

The node-side drill (``probes/resilience_train.py drill injob``) returns every
rank's events (``probes/_resilience_events.py``: wall-clock ``t``, ``ev``,
``rank``, ``incarnation``, ``step``...) and the time of the SIGKILL it sent.
From them, for the incarnation ``k`` that follows the kill::

    detect_s   = t(first reaction of a surviving rank: SIGTERM from the launcher,
                   or its collective failing)                    - t(kill)
    restart_s  = max over ranks t(ready, incarnation k)           - t(detect)
    reload_s   = max over ranks t(resume, incarnation k)          - max t(ready, k)
    first_step_s = max over ranks t(first step, incarnation k)    - max t(resume, k)
    recovery_s = max over ranks t(first step, incarnation k)      - t(kill)
               = detect_s + restart_s + reload_s + first_step_s
    steps_lost = last step completed before the kill - step of the checkpoint resumed from

All times in seconds.  Pure functions: no I/O.

A job spanning nodes gives the events of all its nodes (each stamped with ``node``); its
launchers' restart counts differ between nodes (an agent restarted for the rendezvous'
membership change does not count it), so :func:`relabel_incarnations` numbers the
incarnations per rank by process before the figures are taken, over all ranks or over one
node's ranks (:func:`of_node`).  Times from different nodes compare through their wall
clocks: the figures carry the nodes' clock offset (NTP: milliseconds).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

__all__ = [
    "LossComparison",
    "RecoveryFigures",
    "compare_losses",
    "of_node",
    "rank_nodes",
    "ranks_training_again",
    "recovery_figures",
    "relabel_incarnations",
]

#: Largest |loss difference| accepted as "the same trajectory" (float32 losses, same ops, same order).
LOSS_ATOL = 1e-6


@dataclass(frozen=True)
class RecoveryFigures:
    """One in-job restart, in seconds and steps (None where an event is missing)."""

    killed_rank: int
    kill_step: int
    detect_s: float | None
    detected_by: str
    restart_s: float | None
    reload_s: float | None
    first_step_s: float | None
    recovery_s: float | None
    resumed_from_step: int | None
    last_step_before_kill: int
    steps_lost: int | None
    incarnation: int | None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class LossComparison:
    """Per-step losses after the resume point against the uninterrupted run."""

    steps_compared: int
    first_step: int | None
    max_abs_diff: float | None
    missing_steps: tuple[int, ...]
    matches: bool

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "missing_steps": list(self.missing_steps)}


def _of(events: Sequence[Mapping[str, Any]], ev: str, inc: int) -> list[Mapping[str, Any]]:
    return [e for e in events if e.get("ev") == ev and e.get("incarnation") == inc]


def _max_t(events: Sequence[Mapping[str, Any]]) -> float | None:
    return max((float(e["t"]) for e in events), default=None)


def _sub(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a - b


def recovery_figures(events: Sequence[Mapping[str, Any]], kill: Mapping[str, Any]) -> RecoveryFigures:
    """Figures of the restart that followed ``kill`` (``{"t", "rank", "at_step"}``) in ``events``."""
    t_kill, killed = float(kill["t"]), int(kill["rank"])
    before = [e for e in events if e.get("incarnation") == 0]
    last_step = max((int(e["step"]) for e in before if e.get("ev") == "step"), default=int(kill["at_step"]))
    reactions = [
        e for e in before if e.get("ev") in ("sigterm", "error") and e.get("rank") != killed and float(e["t"]) >= t_kill
    ]
    later = sorted({int(e["incarnation"]) for e in events if int(e.get("incarnation", 0)) > 0})
    inc = later[0] if later else None
    if reactions:
        first = min(reactions, key=lambda e: float(e["t"]))
        t_detect: float | None = float(first["t"])
        by = (
            "launcher stopped the surviving ranks (SIGTERM)"
            if first["ev"] == "sigterm"
            else f"collective failed on rank {first['rank']}: {str(first.get('reason', ''))[:120]}"
        )
    elif inc is not None:
        t_detect = min(float(e["t"]) for e in _of(events, "start", inc))
        by = "no survivor reaction logged: bounded by the restart's first process start"
    else:
        t_detect, by = None, "not detected: no reaction and no restart"
    if inc is None:
        return RecoveryFigures(
            killed,
            int(kill["at_step"]),
            _sub(t_detect, t_kill),
            by,
            None,
            None,
            None,
            None,
            None,
            last_step,
            None,
            None,
        )
    t_ready = _max_t(_of(events, "ready", inc))
    resumes = _of(events, "resume", inc)
    t_resume = _max_t(resumes)
    firsts = []
    for rank in sorted({int(e["rank"]) for e in _of(events, "start", inc)}):
        steps = [e for e in _of(events, "step", inc) if e.get("rank") == rank]
        if steps:
            firsts.append(min(float(e["t"]) for e in steps))
    t_first = max(firsts) if firsts else None
    resumed = min((int(e["step"]) for e in resumes), default=None)
    return RecoveryFigures(
        killed_rank=killed,
        kill_step=int(kill["at_step"]),
        detect_s=_sub(t_detect, t_kill),
        detected_by=by,
        restart_s=_sub(t_ready, t_detect),
        reload_s=_sub(t_resume, t_ready),
        first_step_s=_sub(t_first, t_resume),
        recovery_s=_sub(t_first, t_kill),
        resumed_from_step=resumed,
        last_step_before_kill=last_step,
        steps_lost=None if resumed is None else last_step - resumed,
        incarnation=inc,
    )


def compare_losses(
    reference: Mapping[str, float],
    resumed: Mapping[str, float],
    after_step: int,
    atol: float = LOSS_ATOL,
) -> LossComparison:
    """Compare the losses of steps ``> after_step`` of the resumed run with the reference run.

    Keys are step numbers as strings (JSON).  ``matches`` needs at least one step
    compared, no step of the reference missing from the resumed run, and every
    ``|difference| <= atol``.
    """
    steps = sorted(int(s) for s in reference if int(s) > after_step)
    missing = tuple(s for s in steps if str(s) not in resumed)
    diffs = [abs(float(resumed[str(s)]) - float(reference[str(s)])) for s in steps if str(s) in resumed]
    worst = max(diffs) if diffs else None
    ok = bool(diffs) and not missing and worst is not None and math.isfinite(worst) and worst <= atol
    return LossComparison(len(diffs), steps[0] if steps else None, worst, missing, ok)


def relabel_incarnations(events: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``events`` sorted by time, ``incarnation`` renumbered per rank by process.

    The k-th process of a rank (ordered by its first event's time, told apart by ``pid``
    and ``node``) is incarnation k; the launcher's own count is kept as
    ``launcher_incarnation``.  On one node with one restart both numbers agree.
    """
    first: dict[tuple[int, Any, int], float] = {}
    for e in events:
        key = (int(e["rank"]), e.get("node"), int(e["pid"]))
        first[key] = min(first.get(key, float("inf")), float(e["t"]))
    order: dict[tuple[int, Any, int], int] = {}
    for rank in sorted({k[0] for k in first}):
        procs = sorted((t, k) for k, t in first.items() if k[0] == rank)
        for i, (_t, k) in enumerate(procs):
            order[k] = i
    out = [
        {
            **e,
            "incarnation": order[(int(e["rank"]), e.get("node"), int(e["pid"]))],
            "launcher_incarnation": e.get("incarnation"),
        }
        for e in events
    ]
    out.sort(key=lambda e: float(e["t"]))
    return out


def of_node(events: Sequence[Mapping[str, Any]], node: str) -> list[Mapping[str, Any]]:
    """The events of the ranks that ran on ``node``."""
    return [e for e in events if e.get("node") == node]


def rank_nodes(events: Sequence[Mapping[str, Any]]) -> dict[int, str]:
    """global rank -> node it first ran on (from the ``start`` events)."""
    out: dict[int, str] = {}
    for e in sorted(events, key=lambda e: float(e["t"])):
        if e.get("ev") == "start" and e.get("node") is not None:
            out.setdefault(int(e["rank"]), str(e["node"]))
    return out


def ranks_training_again(events: Sequence[Mapping[str, Any]], incarnation: int | None) -> list[int]:
    """Ranks that completed a step in ``incarnation`` (sorted; [] for None)."""
    if incarnation is None:
        return []
    return sorted({int(e["rank"]) for e in _of(events, "step", incarnation)})
