"""Every parser reads a coloured output as it reads the plain one: terminal escape sequences
(``dmesg --color=always``, ``grep --color``, a pty's colours) are removed in the one place
every parser's input is cleaned (:func:`nvtest.parsers._common.clean_paste`)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from nvtest.checks.standalone import judge_reading
from nvtest.errors import ParseError
from nvtest.parsers import detect, parse, readable, to_jsonable
from tests.parsers.conftest import corpus_files
from tests.parsers.test_corpus import _expected_tool

_COLOUR_NOTE = re.compile(r"^removed terminal colour/escape codes from \d+ line\(s\)$")


def _colour(text: str) -> str:
    """``text`` as a colouring terminal shows it: the first word of each line in bold green
    (as dmesg colours its timestamp), the rest reset, and an erase-to-end-of-line after."""

    def one(line: str) -> str:
        if not line.strip():
            return line
        m = re.match(r"(\s*)(\S+)(.*)", line, re.S)
        assert m is not None
        return f"{m[1]}\x1b[1;32m{m[2]}\x1b[0m{m[3]}\x1b[K"

    return "\n".join(one(ln) for ln in text.split("\n"))


def _reading(tool: str, text: str) -> Any:
    """The record as JSON-able values without the colour note and the judgement ``nvtest
    parse`` gives it (of the text as the parser read it), or the ParseError's class."""
    try:
        parsed = parse(tool, text)
    except ParseError:
        return ParseError
    record = to_jsonable(parsed)
    if isinstance(record, dict) and record.get("warnings"):
        record["warnings"] = [w for w in record["warnings"] if not _COLOUR_NOTE.match(w)]
    judged = judge_reading(parsed, readable(tool, text))
    return record, judged.verdict, judged.failures, judged.errors


@pytest.mark.parametrize("path", corpus_files(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_coloured_output_reads_as_plain(path):
    plain = path.read_text(encoding="utf-8")
    tool = _expected_tool(path.name, path.parent.name)
    coloured = _colour(plain)
    assert "\x1b[" in coloured
    assert detect(coloured) == tool
    assert _reading(tool, coloured) == _reading(tool, plain)


def test_colour_removal_is_said_and_osc_and_cursor_codes_go_too():
    text = "\x1b]0;root@node1: ~\x07\x1b[2K[    5.000000] \x1b[33mNVRM: \x1b[0mXid (PCI:0000:1b:00): 48, pid=1, DBE\n"
    record = parse("dmesg", text)
    assert any(_COLOUR_NOTE.match(w) for w in record.warnings)
    assert [e.code for e in record.events if getattr(e, "code", None) is not None] == [48]
