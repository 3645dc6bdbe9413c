"""Golden files: one text file per generated command line or script.

``assert_golden(directory, case, text)`` compares ``text`` with ``<directory>/<case>.txt``;
``NVTEST_REGEN_GOLDEN=1`` rewrites the file instead (review the diff before committing).
``stale_goldens(directory, cases)`` names files no case produces any more.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Iterable
from pathlib import Path


def lines(*argvs: list[str]) -> str:
    """Each argv as one shell-quoted line."""
    return "".join(shlex.join(a) + "\n" for a in argvs)


def assert_golden(directory: Path, case: str, text: str) -> None:
    gold = directory / f"{case}.txt"
    if os.environ.get("NVTEST_REGEN_GOLDEN") == "1":
        directory.mkdir(parents=True, exist_ok=True)
        gold.write_text(text, encoding="utf-8")
    assert gold.exists(), f"no golden file {gold}; run with NVTEST_REGEN_GOLDEN=1"
    assert text == gold.read_text(encoding="utf-8"), f"{case} differs from {gold}"


def stale_goldens(directory: Path, cases: Iterable[str]) -> set[str]:
    """Golden files in ``directory`` that no case writes."""
    return {p.stem for p in directory.glob("*.txt")} - set(cases)
