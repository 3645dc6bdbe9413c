"""Property tests: no parser lets anything but ParseError escape, on any input.

Inputs: random text, and corpus files mutated (lines dropped, truncated, duplicated,
whitespace collapsed). A ParseError whose message starts with ``internal error`` is a parser
bug turned into a ParseError by the safety net, so it fails these tests too.
"""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nvtest.errors import ParseError
from nvtest.parsers import PARSERS, detect, to_jsonable
from tests.parsers.conftest import corpus_files

TEXTS = [p.read_text(encoding="utf-8") for p in corpus_files()]
TOOLS = sorted(PARSERS)
#: Examples per property; raise with NVTEST_HYPOTHESIS_EXAMPLES=400 for a deeper hunt.
EXAMPLES = int(os.environ.get("NVTEST_HYPOTHESIS_EXAMPLES", "40"))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])

_alphabet = st.sampled_from(list("0123456789 .:|#-/[]()<>,=%\t\nabcxyzGMNPRSTUVWX!'\"{}_"))
_words = st.sampled_from(
    [
        "N/A",
        "[N/A]",
        "ERR!",
        "GPU 0:",
        "Link 0:",
        "nThread",
        "# Avg bus bandwidth : ",
        "Port 1:",
        "CA 'x'",
        "hca_id:",
        "Running x.",
        "SUM x 1",
        "#bytes #iterations",
        "Copy:",
        "Function Best Rate MB/s",
        "NVRM: Xid (",
        "proc'd:",
        "Tested 1 GPUs:",
        "|",
        "{",
        "}",
        "LnkSta:",
        "Slot:",
        "<nvidia_smi_log>",
        "GPU0",
        " X ",
        "\n",
    ]
)
random_text = st.lists(st.one_of(st.text(_alphabet, max_size=20), _words), max_size=40).map("".join)


def _check(tool: str, text: str) -> None:
    try:
        record = PARSERS[tool].parse(text)
    except ParseError as err:
        assert err.tool == tool
        assert not str(err).split(": ", 1)[-1].startswith("internal error"), str(err)
        return
    json.dumps(to_jsonable(record))


@pytest.mark.parametrize("tool", TOOLS)
@SETTINGS
@given(text=random_text)
def test_random_text_raises_only_parse_error(tool: str, text: str) -> None:
    _check(tool, text)


@st.composite
def mutated_corpus(draw: st.DrawFn) -> str:
    lines = draw(st.sampled_from(TEXTS)).splitlines(keepends=True)
    for _ in range(draw(st.integers(1, 4))):
        if not lines:
            break
        i = draw(st.integers(0, len(lines) - 1))
        op = draw(st.sampled_from(["drop", "truncate", "duplicate", "collapse", "cut"]))
        if op == "drop":
            del lines[i]
        elif op == "truncate":
            lines[i] = lines[i][: draw(st.integers(0, max(0, len(lines[i]) - 1)))]
        elif op == "duplicate":
            lines.insert(i, lines[i])
        elif op == "collapse":
            lines[i] = " ".join(lines[i].split()) + "\n"
        else:
            lines = lines[:i]
    return "".join(lines)


@pytest.mark.parametrize("tool", TOOLS)
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=mutated_corpus())
def test_mutated_corpus_raises_only_parse_error(tool: str, text: str) -> None:
    _check(tool, text)


@SETTINGS
@given(text=st.one_of(random_text, mutated_corpus()))
def test_detect_never_raises(text: str) -> None:
    assert detect(text) in (None, *TOOLS)
