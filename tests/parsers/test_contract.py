"""The contract every parser keeps (nvtest/parsers/_common.py, docs/parsers.md), walked over
every parser of ``nvtest.parsers.PARSERS`` and every corpus file:

1. the tool's own output never raises: a failure output is a record whose ``failure`` is a
   :class:`ToolFailure` with the tool's line, as printed;
2. text that is not the tool's (another tool's corpus files, binary, empty text, a prompt)
   raises ParseError, never an internal error and never a record;
3. every record has ``failure`` and a read-only ``effective`` mapping;
4. every row of every parser's failure table is exercised by a corpus file or by a wording
   in tests/parsers/test_failure_wordings.py.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

import pytest

from nvtest.errors import ParseError
from nvtest.parsers import PARSERS, FailureKind, ToolFailure, detect, to_jsonable
from nvtest.parsers._common import strip_launcher_prefix
from tests.parsers.conftest import corpus_files
from tests.parsers.test_failure_wordings import WORDINGS

FILES = corpus_files()
#: Parsers of one binary (they share nvidia-smi's failure wordings, so each reads the others'
#: failure-only outputs as nvidia-smi's).
FAMILIES = {name: "nvidia-smi" for name in PARSERS if name.startswith("nvidia-smi")}


def _family(tool: str) -> str:
    return FAMILIES.get(tool, tool)


def _tool_of(path: Path) -> str:
    tool = detect(path.read_text(encoding="utf-8"))
    assert tool is not None, path
    return tool


OWN = [(p, _tool_of(p)) for p in FILES]


def _check_record(record: object, text: str) -> None:
    failure = getattr(record, "failure", "missing")
    assert failure is None or isinstance(failure, ToolFailure), failure
    eff = getattr(record, "effective", None)
    assert isinstance(eff, Mapping) and not isinstance(eff, dict), "effective must be read-only"
    if isinstance(failure, ToolFailure):
        assert isinstance(failure.kind, FailureKind) and failure.message.strip()
        if failure.line is not None:
            lines = text.splitlines()
            assert 1 <= failure.line <= len(lines)
            printed = strip_launcher_prefix(lines[failure.line - 1].replace("\r", "")).strip()
            assert printed == failure.message, (printed, failure.message)
    to_jsonable(record)


@pytest.mark.parametrize(("path", "tool"), OWN, ids=[f"{p.parent.name}/{p.name}" for p, _ in OWN])
def test_own_output_never_raises_and_keeps_the_contract(path: Path, tool: str) -> None:
    text = path.read_text(encoding="utf-8")
    record = PARSERS[tool].parse(text)
    _check_record(record, text)
    if tool in ("nccl-tests", "perftest"):  # the per-test / per-side records carry theirs too
        for sub in getattr(record, "tests", None) or getattr(record, "runs", ()):
            assert isinstance(sub.effective, Mapping)


def _foreign_cases() -> list[tuple[str, Path]]:
    return [
        (parser, path)
        for parser in sorted(PARSERS)
        for path, tool in OWN
        if _family(parser) != _family(tool)
    ]


@pytest.mark.parametrize(
    ("parser", "path"),
    _foreign_cases(),
    ids=[f"{t}<-{p.parent.name}/{p.name}" for t, p in _foreign_cases()],
)
def test_another_tools_output_is_a_parse_error(parser: str, path: Path) -> None:
    with pytest.raises(ParseError) as err:
        PARSERS[parser].parse(path.read_text(encoding="utf-8"))
    assert err.value.tool == parser
    assert "internal error" not in str(err.value)


NOT_TOOL_OUTPUT = {
    "empty": "",
    "blank": "\n   \n\t\n",
    "prompt": "user@node001:~$ \n",
    "binary": bytes(range(256)).decode("latin-1") * 4,
    "prose": "The job finished.\nSee the attached log for details.\n",
    # a benchmark's one-line summary with a comma: no headerless --query-gpu row
    "summary": "Result: 81.74 items/s, 20926.37 units/s\n",
}


@pytest.mark.parametrize("tool", sorted(PARSERS))
@pytest.mark.parametrize("case", sorted(NOT_TOOL_OUTPUT))
def test_text_that_is_no_tools_is_a_parse_error(tool: str, case: str) -> None:
    with pytest.raises(ParseError) as err:
        PARSERS[tool].parse(NOT_TOOL_OUTPUT[case])
    assert err.value.tool == tool and "internal error" not in str(err.value)


def _all_lines() -> list[str]:
    """Every corpus and wording line, and every failure message the parsers make of them (a
    dcgmi Warning cell is matched once its wrapping is undone)."""
    lines = [ln.strip() for p in FILES for ln in p.read_text(encoding="utf-8").splitlines()]
    lines += [ln.strip() for w in WORDINGS for ln in w.text.splitlines()]
    for path, tool in OWN:
        failure = PARSERS[tool].parse(path.read_text(encoding="utf-8")).failure
        if failure is not None:
            lines.append(failure.message)
    return lines


def _rows() -> list[tuple[str, int, re.Pattern[str], str]]:
    return [
        (tool, i, rx, source)
        for tool, info in sorted(PARSERS.items())
        for i, (rx, _kind, source) in enumerate(info.failures.rules)
    ]


@pytest.mark.parametrize(
    ("tool", "index", "rx", "source"), _rows(), ids=[f"{t}#{i}" for t, i, _, _ in _rows()]
)
def test_every_failure_wording_is_exercised(
    tool: str, index: int, rx: re.Pattern[str], source: str
) -> None:
    assert source, "every row names where its wording comes from"
    assert any(rx.search(line) for line in LINES), f"{tool} row {index} ({source}) matches no text"


LINES = _all_lines()


def test_every_parser_has_a_failure_table() -> None:
    for tool, info in PARSERS.items():
        assert info.failures.rules, f"{tool} has no failure wordings"


# ------------------------------------------------------------ the same outputs, as pasted

#: How people paste an output (issue 25, class 3): name -> (the pasted text, the text whose
#: reading it must equal, the words a warning must have). The baseline keeps the line count, so
#: that line numbers in the records agree.
PROMPT = "user@node001:~/work$ ./run-the-tool --with args\n"


def _prefixed(text: str, prefix: str) -> str:
    return "".join(prefix + ln for ln in text.splitlines(keepends=True))


PASTED_FORMS = {
    "prompt": (
        lambda t: PROMPT + t,
        lambda t: "$ ./run-the-tool --with args\n" + t,
        "shell prompt",
    ),
    "iso-prefix": (lambda t: _prefixed(t, "[2026-12-01T10:00:00Z] "), lambda t: t, "timestamp"),
    "host-pipe": (lambda t: _prefixed(t, "node001 | "), lambda t: t, "'host | ' label"),
    "crlf": (lambda t: t.replace("\n", "\r\n"), lambda t: t, None),
}


def _reading(record: object) -> object:
    """The record as JSON, its own top-level warnings left out (the paste adds to them)."""
    doc = to_jsonable(record)
    if isinstance(doc, dict):
        doc.pop("warnings", None)
    return doc


@pytest.mark.parametrize("form", sorted(PASTED_FORMS))
@pytest.mark.parametrize(("path", "tool"), OWN, ids=[f"{p.parent.name}/{p.name}" for p, _ in OWN])
def test_pasted_forms_read_the_same_values_and_say_what_was_skipped(
    path: Path, tool: str, form: str
) -> None:
    text = path.read_text(encoding="utf-8")
    paste, baseline, said = PASTED_FORMS[form]
    pasted = paste(text)
    assert detect(pasted) == tool
    expected = PARSERS[tool].parse(baseline(text))
    got = PARSERS[tool].parse(pasted)
    assert _reading(got) == _reading(expected)
    if said is not None:
        assert any(said in w for w in got.warnings), got.warnings


def _clip_first_line(text: str) -> str:
    lines = text.splitlines(keepends=True)
    i = next(i for i, ln in enumerate(lines) if ln.strip())
    lines[i] = lines[i][len(lines[i].rstrip()) // 2 :]
    return "".join(lines)


def _cut_last_line(text: str) -> str:
    lines = text.rstrip().splitlines(keepends=True)
    return "".join(lines[:-1]) + lines[-1][: len(lines[-1]) // 2]


#: Samples whose clipped form keeps nothing that names the tool's device or test: the clip
#: takes the one line that does, and what is left is rightly refused.
NOTHING_LEFT = {
    ("dcgmi/diag-r2-text-gpu-memory-fail-thermal-warning-wrapped-excerpt.txt", "first"),
    ("ibstat/ibstat-port-polling-rate-10-guids-elided.txt", "first"),
    ("ibstat/ibv_devinfo-no-userspace-driver-warnings-no-ib-devices-found.txt", "last"),
    ("lspci/nnk-rtx3080-vendor-device-ids.txt", "first"),
}


@pytest.mark.parametrize("cut", ["first", "last"])
@pytest.mark.parametrize(("path", "tool"), OWN, ids=[f"{p.parent.name}/{p.name}" for p, _ in OWN])
def test_a_clipped_paste_keeps_what_is_intact(path: Path, tool: str, cut: str) -> None:
    """A paste cut by its poster (the first line clipped, the last one cut mid-line) is still
    the tool's output: never a ParseError while several lines of it are left."""
    text = path.read_text(encoding="utf-8")
    if sum(1 for ln in text.splitlines() if ln.strip()) < 4:
        pytest.skip("too short to clip and still hold the tool's output")
    clipped = _clip_first_line(text) if cut == "first" else _cut_last_line(text)
    if (f"{path.parent.name}/{path.name}", cut) in NOTHING_LEFT:
        with pytest.raises(ParseError):
            PARSERS[tool].parse(clipped)
        return
    _check_record(PARSERS[tool].parse(clipped), clipped)
