"""Stopping a run on SIGINT/SIGTERM: the handler records, the main thread stops.

A signal handler runs on the main thread between two bytecodes, wherever that thread
is: inside the results store's lock, inside an fsync, inside a rich redraw. So the
handler here takes no lock, touches no file and starts no thread; it only

- appends the signal's name to :attr:`StopRequest.signals` (a list append is atomic),
- sets ``session.shouldstop`` (pytest stops before the next item),
- writes one byte to a pipe, which wakes the watcher thread that calls the
  transport's :meth:`~nvtest.transports.base.Transport.interrupt` (the commands in
  flight are killed on their nodes and return "interrupted"),
- and, on a second signal while a check is running (:meth:`StopRequest.abortable`),
  raises :class:`KeyboardInterrupt` there: "stop faster" leaves that item without a
  result (it becomes ``not measured``), never the run without its files.

Once the run is finishing (:meth:`StopRequest.finishing`: the end record, staging
cleanup, results.json, the reports), a signal is only recorded: the files are
written in any case. The run's end record names the first signal (its exit code:
130 for SIGINT, 3 for SIGTERM) and every signal received.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

__all__ = ["STOP_SIGNALS", "StopRequest"]

#: The signals that stop a run.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class StopRequest:
    """The stop state of one run, and the signal handlers that set it.

    Args:
        on_first: called once, on the watcher thread, after the first signal (the
            transport's ``interrupt``); its exceptions are swallowed.
    """

    def __init__(self, on_first: Callable[[], None]) -> None:
        self._on_first = on_first
        #: names of the signals received, in order (``["SIGINT", "SIGINT"]``)
        self.signals: list[str] = []
        #: epoch seconds of each signal in :attr:`signals`
        self.times: list[float] = []
        self.session: Any = None
        self._abortable = 0
        self._finishing = False
        self._previous: dict[int, Any] = {}
        self._rfd, self._wfd = os.pipe()
        os.set_blocking(self._wfd, False)
        self._watcher: threading.Thread | None = None
        self._installed = False
        self._first_lock = threading.Lock()  # never taken by the handler
        self._first_done = False

    # -- state --------------------------------------------------------------------------
    @property
    def requested(self) -> bool:
        """True once a stop signal arrived."""
        return bool(self.signals)

    @property
    def first_signal(self) -> str | None:
        return self.signals[0] if self.signals else None

    @contextlib.contextmanager
    def abortable(self) -> Iterator[None]:
        """While inside, a second signal raises :class:`KeyboardInterrupt` here (a check
        that does not return after the first one is abandoned)."""
        self._abortable += 1
        try:
            yield
        finally:
            self._abortable -= 1

    def finishing(self) -> None:
        """From now on signals are only recorded (the run's files are being written)."""
        self._finishing = True

    # -- handlers -----------------------------------------------------------------------
    def install(self) -> bool:
        """Install the handlers for :data:`STOP_SIGNALS` and start the watcher.

        Returns False (and installs nothing) off the main thread, where Python cannot
        set signal handlers (nvtest embedded in another program).
        """
        if threading.current_thread() is not threading.main_thread():
            return False
        for sig in STOP_SIGNALS:
            self._previous[sig] = signal.signal(sig, self._handle)
        self._installed = True
        self._watcher = threading.Thread(target=self._watch, name="nvtest-stop", daemon=True)
        self._watcher.start()
        return True

    def restore(self) -> None:
        """Put back the handlers that were there before :meth:`install`; stop the watcher.

        Off the main thread nothing changes (the handlers stay, recording only).
        """
        if not self._installed or threading.current_thread() is not threading.main_thread():
            return
        for sig, previous in self._previous.items():
            signal.signal(sig, previous if previous is not None else signal.SIG_DFL)
        self._installed = False
        os.close(self._wfd)  # the watcher reads end-of-file and closes its end
        self._wfd = -1

    def _handle(self, signum: int, _frame: FrameType | None) -> None:
        # no lock, no file, no thread: see the module text
        self.signals.append(signal.Signals(signum).name)
        self.times.append(time.time())
        session = self.session
        if session is not None:
            session.shouldstop = f"interrupted by {self.signals[0]}"
        if self._wfd >= 0:
            with contextlib.suppress(OSError):
                os.write(self._wfd, b"s")
        if len(self.signals) > 1 and self._abortable and not self._finishing:
            raise KeyboardInterrupt(f"second signal ({self.signals[-1]}): stopping now")

    def interrupt_now(self) -> None:
        """Run ``on_first`` now unless it has run (or is running: then wait for it).

        The watcher calls it on the first signal; the main thread calls it before it
        closes the transport, so nothing started is left running whatever the order.
        """
        with self._first_lock:
            if self._first_done:
                return
            self._first_done = True
            with contextlib.suppress(Exception):
                self._on_first()

    def _watch(self) -> None:
        while True:
            try:
                data = os.read(self._rfd, 64)
            except InterruptedError:
                continue
            except OSError:
                return
            if not data:
                os.close(self._rfd)
                return
            self.interrupt_now()

    def describe(self) -> str:
        """``SIGINT``, or ``SIGTERM, then SIGTERM 0.05 s later`` (for the run's warning)."""
        if not self.signals:
            return ""
        out = self.signals[0]
        for name, t in zip(self.signals[1:], self.times[1:], strict=False):
            out += f", then {name} {t - self.times[0]:.2f} s later"
        return out
