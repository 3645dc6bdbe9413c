"""Golden JSON per corpus file: ``to_jsonable(parse(detect(text), text))``.

Regenerate deliberately with ``NVTEST_REGEN_GOLDEN=1``; review the diff before committing.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from nvtest.parsers import detect, parse, to_jsonable
from tests.parsers.conftest import corpus_files

GOLDEN = Path(__file__).resolve().parent / "golden"


def _golden_path(path: Path) -> Path:
    return GOLDEN / path.parent.name / (path.name + ".json")


@pytest.mark.parametrize("path", corpus_files(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_matches_golden(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    tool = detect(text)
    assert tool is not None
    got = {"tool": tool, "record": to_jsonable(parse(tool, text))}
    rendered = json.dumps(got, indent=1, sort_keys=True) + "\n"
    gold = _golden_path(path)
    if os.environ.get("NVTEST_REGEN_GOLDEN") == "1":
        gold.parent.mkdir(parents=True, exist_ok=True)
        gold.write_text(rendered, encoding="utf-8")
    assert gold.exists(), f"no golden file {gold}; run with NVTEST_REGEN_GOLDEN=1"
    assert json.loads(gold.read_text(encoding="utf-8")) == json.loads(rendered)


def test_no_stale_golden_files() -> None:
    expected = {_golden_path(p) for p in corpus_files()}
    assert set(GOLDEN.rglob("*.json")) == expected
