"""Event logs of the resilience drills: one JSON line per event, one file per rank.

Written by the training ranks (``resilience_train.py train``), read by the
node-side drill driver while the job runs (to kill a rank at a step) and
returned to the controller, which derives the recovery figures from them.

A line::

    {"t": 1718000000.123, "ev": "step", "rank": 1, "incarnation": 0, "pid": 4242,
     "step": 7, "loss": 3.91, "dt": 0.012}

The node-side driver of a job spanning nodes adds ``node`` (the inventory name) to each
event it returns.  ``t`` is wall-clock time (``time.time()``, seconds since the epoch) so that
events of different processes on one node share a clock.  ``incarnation`` is
the restart count the launcher gives the worker group (``TORCHELASTIC_RESTART_COUNT``;
0 for the first start).  Event kinds: ``start`` (process start, before torch is
imported; ``local_rank``, ``group_rank``, ``host``), ``ready`` (process group up;
``generation``: the incarnation the ranks agreed on through the store), ``resume`` (checkpoint loaded:
``step``, ``load_s``), ``step`` (``step``, ``loss``, ``dt`` seconds),
``ckpt`` (``step``, ``save_s``), ``hold`` (``step``, ``hold_s``: the requeue drill's
pause), ``sigterm``, ``error`` (``reason``), ``done``.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any


class EventLog:
    """Appends events of one rank to ``DIR/rank<R>.jsonl`` (line-buffered, flushed per event)."""

    def __init__(self, directory: str, rank: int, incarnation: int) -> None:
        os.makedirs(directory, exist_ok=True)
        self.path = os.path.join(directory, f"rank{rank}.jsonl")
        self.rank = rank
        self.incarnation = incarnation
        self._fh = open(self.path, "a", buffering=1, encoding="utf-8")  # noqa: SIM115 - kept open

    def emit(self, ev: str, t: float | None = None, **fields: Any) -> None:
        """Append one event (``t`` defaults to now)."""
        rec = {"t": time.time() if t is None else t, "ev": ev, "rank": self.rank,
               "incarnation": self.incarnation, "pid": os.getpid(), **fields}
        self._fh.write(json.dumps(rec) + "\n")
        self._fh.flush()

    def close(self) -> None:
        self._fh.close()


def read_events(directory: str) -> list[dict[str, Any]]:
    """All events of all ranks in ``directory``, sorted by time; half-written lines are skipped."""
    events: list[dict[str, Any]] = []
    if not os.path.isdir(directory):
        return events
    for name in sorted(os.listdir(directory)):
        if not name.endswith(".jsonl"):
            continue
        with open(os.path.join(directory, name), encoding="utf-8") as fh:
            for line in fh:
                try:
                    events.append(json.loads(line))
                except json.JSONDecodeError:
                    continue
    events.sort(key=lambda e: e.get("t", 0.0))
    return events


def tail_steps(path: str, offset: int) -> tuple[int, int | None, int | None]:
    """Read ``path`` from byte ``offset``: ``(new offset, last step seen, pid of that line)``."""
    last = pid = None
    try:
        with open(path, encoding="utf-8") as fh:
            fh.seek(offset)
            while True:
                line = fh.readline()
                if not line or not line.endswith("\n"):
                    break
                offset = fh.tell()
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if rec.get("ev") == "step":
                    last, pid = int(rec["step"]), int(rec["pid"])
    except FileNotFoundError:
        pass
    return offset, last, pid


def rank_of_file(path: str) -> int:
    """The global rank of an event file ``rank<R>.jsonl``."""
    return int(os.path.basename(path)[4:-6])


def local_rank_file(directory: str, local_rank: int) -> str | None:
    """The event file of the rank whose ``start`` event has ``local_rank`` (None: not started yet)."""
    if not os.path.isdir(directory):
        return None
    for name in sorted(os.listdir(directory)):
        if not (name.startswith("rank") and name.endswith(".jsonl")):
            continue
        path = os.path.join(directory, name)
        with open(path, encoding="utf-8") as fh:
            first = fh.readline()
        try:
            rec = json.loads(first)
        except json.JSONDecodeError:
            continue
        if rec.get("ev") == "start" and rec.get("local_rank") == local_rank:
            return path
    return None


def read_summaries(directory: str) -> dict[tuple[int, int], dict[str, Any]]:
    """``(rank, incarnation) -> summary`` of the ``summary_rank<R>_inc<I>.json`` files in ``directory``."""
    out = {}
    if not os.path.isdir(directory):
        return out
    for name in os.listdir(directory):
        if name.startswith("summary_rank") and name.endswith(".json"):
            with open(os.path.join(directory, name), encoding="utf-8") as fh:
                s = json.load(fh)
            out[(int(s["rank"]), int(s["incarnation"]))] = s
    return out
