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


def _raises_value_error(_text: str) -> object:
    """A parser with a bug: it raises ValueError (not ParseError) on any text."""
    raise ValueError("invalid literal for int() with base 10: 'N/A'")


DRIVER_DOWN = "nvidia-smi/plain-failed-couldnt-communicate-with-driver-after-reboot.txt"
EXP = Expected(what="NVIDIA GPU", count=8, sources=("PCI bus: 8 x 10de:2330",))


@pytest.mark.parametrize("exit_code", [9, 0])
def test_a_parser_bug_on_output_the_tool_marked_failed_fails_with_the_tools_words(exit_code: int) -> None:
    """nvidia-smi's driver-down words (exit 9, or exit 0 behind a wrapper): the finding is the tool's."""
    from tests.conftest import CORPUS

    text = (CORPUS / DRIVER_DOWN).read_text(encoding="utf-8")
    res = CommandResult(node="n1", command="nvidia-smi", stdout=text, stderr="", exit_code=exit_code, duration_s=0.1)
    with pytest.raises(UnreportedHardware) as info:
        read_tool(EXP, "nvidia-smi", res, _raises_value_error)
    assert "couldn't communicate with the NVIDIA driver" in str(info.value)
    assert f"exit {exit_code}" in str(info.value)


@pytest.mark.parametrize(("path", "tool"), FAILURES, ids=[f"{p.parent.name}/{p.name}" for p, _ in FAILURES])
def test_every_failure_output_with_a_non_zero_exit_fails_when_the_parser_breaks(path: Path, tool: str) -> None:
    """Walked over every real failure output: a breaking parser never turns it into an error."""
    text = path.read_text(encoding="utf-8")
    res = CommandResult(node="n1", command=tool, stdout=text, stderr="", exit_code=1, duration_s=0.1)
    with pytest.raises(UnreportedHardware):
        read_tool(EXP, tool, res, _raises_value_error)


def test_a_parser_bug_on_healthy_output_is_an_error_naming_it() -> None:
    from nvtest.errors import ProbeError
    from tests.conftest import CORPUS

    text = (CORPUS / "nvidia-smi/q-h100-sxm-x8-driver565-all-gpus.txt").read_text(encoding="utf-8")
    res = CommandResult(node="n1", command="nvidia-smi -q", stdout=text, stderr="", exit_code=0, duration_s=0.1)
    with pytest.raises(ProbeError) as info:
        read_tool(EXP, "nvidia-smi", res, _raises_value_error)
    assert "parser raised ValueError" in str(info.value) and "parser bug" in str(info.value)
    assert info.value.cause == "tool:parse"
