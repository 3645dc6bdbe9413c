"""A pytest plugin for ``nvtest run`` tests (``PYTEST_PLUGINS=tests.cli.signal_at_hook``):
sends this process ``$NVTEST_TEST_SIGNAL`` (INT, TERM) twice, 50 ms apart, at the pytest
phase ``$NVTEST_TEST_SIGNAL_AT`` names: ``configure`` (before nvtest's plugin installs its
handlers) or ``collection`` (after it, before any item is planned)."""

from __future__ import annotations

import os
import signal
import time

import pytest

WHERE = os.environ.get("NVTEST_TEST_SIGNAL_AT", "")
SIG = getattr(signal, "SIG" + os.environ.get("NVTEST_TEST_SIGNAL", "INT"))


def _signal(where: str) -> None:
    if where == WHERE:
        for _ in range(2):
            os.kill(os.getpid(), SIG)
            time.sleep(0.05)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    _signal("configure")


def pytest_collection(session: pytest.Session) -> None:
    _signal("collection")
