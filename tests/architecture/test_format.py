"""The code is in the formatter's form at the one line length the project states.

``pyproject.toml`` ``[tool.ruff] line-length`` is the line length of the code: ``ruff format``
writes it and nothing opts out of it (no ``# fmt: skip`` / ``# fmt: off``). Lines longer than it
remain only where the formatter cannot break them (a long string or comment).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DIRS = ("nvtest", "suites", "tests", "bench", "scripts")


def _ruff() -> list[str]:
    exe = Path(sys.executable).with_name("ruff")
    if exe.exists():
        return [str(exe)]
    found = shutil.which("ruff")
    if found is None:
        pytest.fail("ruff is not installed: it is a dependency of the project's dev extra (pyproject.toml)")
    return [found]


def test_the_code_is_in_the_formatters_form() -> None:
    res = subprocess.run([*_ruff(), "format", "--check", *DIRS], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, f"run `ruff format {' '.join(DIRS)}`:\n{res.stdout[-3000:]}{res.stderr[-1000:]}"


def test_nothing_opts_out_of_the_formatter() -> None:
    words = ("fmt: skip", "fmt: off")
    found = [
        f"{p.relative_to(REPO)}:{i}"
        for d in DIRS
        for p in sorted((REPO / d).rglob("*.py"))
        if "probes" not in p.relative_to(REPO).parts[:2] and p.name != "test_format.py"
        for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if any(f"# {w}" in line for w in words)
    ]
    assert not found, f"formatter opt-outs: {found[:20]}"
