"""Shared helpers for the parser tests: the corpus copy under tests/data/corpus."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import CORPUS


def corpus_files() -> list[Path]:
    """Every sample file of the corpus (INDEX.md excluded), sorted."""
    return sorted(p for p in CORPUS.rglob("*") if p.is_file() and p.name != "INDEX.md")


def read(rel: str) -> str:
    """The text of ``tests/data/corpus/<rel>``, exactly as stored."""
    return (CORPUS / rel).read_text(encoding="utf-8")


@pytest.fixture
def corpus() -> Path:
    return CORPUS
