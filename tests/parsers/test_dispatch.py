"""LineDispatch: the table of line rules the line-oriented parsers run."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from nvtest.parsers import nccl_tests
from nvtest.parsers._common import LineDispatch, numbered_lines, skip_line


class _Log:
    def __init__(self) -> None:
        self.seen: list[tuple[str, int, str, str]] = []
        self.other: list[str] = []

    def default(self, no: int, line: str) -> None:
        self.other.append(line)


def _rule(name: str, decline: bool = False) -> Callable[[_Log, int, str, re.Match[str]], bool]:
    """A handler that records (name, line number, line, matched text); False when ``decline``."""

    def handler(state: _Log, no: int, line: str, m: re.Match[str]) -> bool:
        state.seen.append((name, no, line, m.group(0)))
        return not decline

    return handler


def _table() -> LineDispatch[_Log]:
    return LineDispatch(
        [
            ("SUM ", _rule("prefix")),
            (("Run", "Running "), _rule("prefixes")),
            (re.compile(r"(\d+) GB/s"), _rule("regex")),
            (lambda s: s.endswith("!"), _rule("predicate")),
            (re.compile("maybe"), _rule("declined", decline=True)),
            ("maybe", _rule("after-decline")),
        ],
        default=_Log.default,
    )


def test_each_pattern_kind_and_its_match() -> None:
    log = _Log()
    table = _table()
    assert table(log, 1, "SUM total 3")
    assert table(log, 2, "Running x.")
    assert table(log, 3, "bw 12 GB/s")
    assert table(log, 4, "stop!")
    assert log.seen == [
        ("prefix", 1, "SUM total 3", "SUM "),
        ("prefixes", 2, "Running x.", "Running "),  # the longest prefix matched
        ("regex", 3, "bw 12 GB/s", "12 GB/s"),  # search: anywhere in the line
        ("predicate", 4, "stop!", ""),  # an empty match at 0
    ]
    assert log.other == []


def test_first_match_wins_and_a_decline_passes_the_line_on() -> None:
    log = _Log()
    table = _table()
    assert table(log, 1, "SUM 12 GB/s!")
    assert [s[0] for s in log.seen] == ["prefix"]
    log.seen.clear()
    assert table(log, 2, "maybe")
    assert [s[0] for s in log.seen] == ["declined", "after-decline"]


def test_default_takes_what_no_rule_took() -> None:
    log = _Log()
    table = _table()
    assert not table(log, 1, "nothing here")
    assert not table(log, 2, " SUM indented: prefixes test the line as given")
    assert log.other == ["nothing here", " SUM indented: prefixes test the line as given"]
    assert log.seen == []


def test_without_default_an_unmatched_line_is_dropped() -> None:
    log = _Log()
    table: LineDispatch[_Log] = LineDispatch([("a", skip_line)])
    assert table(log, 1, "abc")
    assert not table(log, 2, "xyz")
    assert log.other == [] and log.seen == []


def test_feed_dispatches_every_line_and_returns_the_state() -> None:
    log = _Log()
    text = "SUM 1\nother\nRun 2\n"
    assert _table().feed(log, numbered_lines(text)) is log
    assert [(s[0], s[1]) for s in log.seen] == [("prefix", 1), ("prefixes", 3)]
    assert log.other == ["other"]


@pytest.mark.parametrize("pattern", [3, (), ("a", 3), None])
def test_a_pattern_of_no_known_kind_is_a_type_error(pattern: object) -> None:
    with pytest.raises(TypeError):
        LineDispatch([(pattern, skip_line)])  # type: ignore[list-item]


def test_the_tables_hold_no_state_between_parses() -> None:
    """Module-level tables serve every call: a parse never sees what an earlier one read."""
    text = "# nThread 1 nGpus 1 minBytes 8 maxBytes 8 step: 2(factor) warmup iters: 1 iters: 1 agg iters: 1 validation: 1 graph: 0\n"
    first = nccl_tests.parse(text + "# Avg bus bandwidth    : 1.5\n")
    second = nccl_tests.parse(text)
    assert first.tests[0].avg_busbw_gbps == 1.5
    assert second.tests[0].avg_busbw_gbps is None
