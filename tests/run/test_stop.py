"""The stop signal handler: it records and wakes, never blocks, and a second signal stops
faster only inside a check (real signals sent to this process)."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from nvtest.results import ResultStore
from nvtest.run.stop import StopRequest


@pytest.fixture
def stop() -> StopRequest:
    called: list[str] = []
    req = StopRequest(lambda: called.append(threading.current_thread().name))
    req.called = called  # type: ignore[attr-defined]
    assert req.install()
    yield req
    req.restore()


def _wait(cond, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.01)
    return False


def test_two_signals_while_the_store_lock_is_held_do_not_hang(stop: StopRequest, tmp_path: Path) -> None:
    store = ResultStore(tmp_path)
    session = SimpleNamespace(shouldstop=False)
    stop.session = session
    with store._lock:  # where the old handler re-entered: inside an append, mid-fsync
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.05)
    assert stop.signals == ["SIGINT", "SIGTERM"] and stop.first_signal == "SIGINT"
    assert session.shouldstop == "interrupted by SIGINT"
    assert _wait(lambda: stop.called == ["nvtest-stop"]), stop.called  # once, on the watcher
    store.append("warning", {"message": "the store still works"})
    store.close()
    assert "SIGINT, then SIGTERM" in stop.describe()


def test_a_second_signal_raises_only_inside_a_check(stop: StopRequest) -> None:
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(0.05)
    with pytest.raises(KeyboardInterrupt):
        with stop.abortable():
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(1.0)  # the handler raises here
    stop.finishing()
    with stop.abortable():  # while the run's files are written: only recorded
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)
    assert stop.signals == ["SIGINT", "SIGINT", "SIGINT"]


def test_restore_puts_the_previous_handlers_back() -> None:
    before = signal.getsignal(signal.SIGTERM)
    req = StopRequest(lambda: None)
    assert req.install()
    assert signal.getsignal(signal.SIGTERM) != before
    req.restore()
    assert signal.getsignal(signal.SIGTERM) == before
