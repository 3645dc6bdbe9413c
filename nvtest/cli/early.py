"""Stop signals that arrive while the ``nvtest`` command starts, for the verbs that must
answer them with a document (``gate``: slurmd's SIGTERM at PrologEpilogTimeout may come
while Python is still importing, about a second).

:func:`record_while_starting` runs first thing in :mod:`nvtest.cli` (before the heavy
imports) and, for those verbs only, installs SIGTERM and SIGINT handlers that only append
the signal's name to :data:`SIGNALS`, and hand it to the verb's stop function once the verb
gave one (:func:`forward`). The verb's own handlers replace these when it starts its work.
Other verbs keep Python's defaults while starting (Ctrl-C: one line, exit 130). Imports
nothing but the standard library.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from types import FrameType

__all__ = ["SIGNALS", "VERBS", "forward", "record_while_starting"]

#: The verbs whose start records stop signals instead of dying of them.
VERBS = ("gate",)
#: The names of the stop signals received while starting, in order (``["SIGTERM"]``).
SIGNALS: list[str] = []
_stop: list[Callable[[str], None]] = []


def _record(signum: int, _frame: FrameType | None) -> None:
    # a handler takes no lock and touches no file: a list append and the verb's flag setter
    name = signal.Signals(signum).name
    SIGNALS.append(name)
    for fn in _stop:
        fn(name)


def _verb(argv: Sequence[str]) -> str | None:
    """The verb of ``nvtest`` 's command line ``argv`` (``sys.argv``), None if it is not
    ``nvtest`` (``nvtest`` or ``python -m nvtest.cli``: ``-m`` while the package imports)."""
    if not argv or (argv[0] != "-m" and os.path.basename(argv[0]) != "nvtest"):
        return None
    return next((a for a in argv[1:] if not a.startswith("-")), None)


def record_while_starting(argv: Sequence[str] | None = None) -> bool:
    """Install the recording handlers when ``argv`` (default ``sys.argv``) runs one of
    :data:`VERBS` on the main thread; True if installed."""
    if (
        _verb(sys.argv if argv is None else argv) not in VERBS
        or threading.current_thread() is not threading.main_thread()
    ):
        return False
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, _record)
    return True


def forward(stop: Callable[[str], None]) -> None:
    """Hand the first signal already recorded, and each later one that reaches these handlers,
    to ``stop`` (it is called in a signal handler: set flags only, e.g.
    :meth:`~nvtest.ops.gate.budget.Budget.mark`)."""
    _stop.append(stop)
    if SIGNALS:
        stop(SIGNALS[0])
