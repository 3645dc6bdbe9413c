"""Checks read tools through :func:`nvtest.checks.hardware.read_tool`: on a node with the
hardware, every real failure output of every parser's tool (the corpus files whose record
carries a ``failure``) fails the check with the tool's words; none passes or is skipped."""

from __future__ import annotations

from pathlib import Path

import pytest

from nvtest.checks.hardware import read_tool
from nvtest.errors import UnreportedHardware
from nvtest.parsers import PARSERS, detect, parse
from nvtest.session.expect import Expected
from nvtest.transports.base import CommandResult
from tests.parsers.conftest import corpus_files


def _failure_files() -> list[tuple[Path, str]]:
    out = []
    for path in corpus_files():
        text = path.read_text(encoding="utf-8")
        tool = detect(text)
        if tool is not None and getattr(parse(tool, text), "failure", None) is not None:
            out.append((path, tool))
    return out


FAILURES = _failure_files()


def test_every_parser_with_failure_outputs_is_walked():
    """Each parser that has a failure table is exercised by at least one real failure output."""
    with_tables = {name for name, info in PARSERS.items() if getattr(info, "failures", None)}
    assert len(FAILURES) >= 30, len(FAILURES)
    assert len({tool for _, tool in FAILURES}) >= len(with_tables) // 2, sorted(with_tables)


@pytest.mark.parametrize(("path", "tool"), FAILURES, ids=[f"{p.parent.name}/{p.name}" for p, _ in FAILURES])
def test_a_tools_own_failure_fails_the_check_in_its_words(path: Path, tool: str) -> None:
    text = path.read_text(encoding="utf-8")
    res = CommandResult(node="n1", command=tool, stdout=text, stderr="", exit_code=0, duration_s=0.1)
    exp = Expected(what="NVIDIA GPU", count=8, sources=("PCI bus: 8 x 10de:2330",))
    with pytest.raises(UnreportedHardware) as info:
        read_tool(exp, tool, res, lambda t: parse(tool, t))
    failure = parse(tool, text).failure
    assert failure.message[:60] in str(info.value)
