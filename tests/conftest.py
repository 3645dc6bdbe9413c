"""Shared fixtures of nvtest's own tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
NVTEST = [sys.executable, "-m", "nvtest.cli"]


def run_nvtest(*args: str, cwd: Path | None = None, timeout: float = 900, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run the nvtest CLI in a subprocess (as a user would) and capture its output."""
    full_env = {**os.environ, "COLUMNS": "200", **(env or {})}
    return subprocess.run(
        [*NVTEST, *args], cwd=cwd or REPO, capture_output=True, text=True, timeout=timeout, env=full_env
    )


@pytest.fixture
def nvtest_cli():
    return run_nvtest
