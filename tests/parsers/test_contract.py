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
    return [(parser, path) for parser in sorted(PARSERS) for path, tool in OWN if _family(parser) != _family(tool)]


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


@pytest.mark.parametrize(("tool", "index", "rx", "source"), _rows(), ids=[f"{t}#{i}" for t, i, _, _ in _rows()])
def test_every_failure_wording_is_exercised(tool: str, index: int, rx: re.Pattern[str], source: str) -> None:
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


def _hard_wrapped(text: str, width: int = 80) -> tuple[str, str]:
    """``text`` as a terminal of ``width`` columns shows it, and the baseline: the text with a
    blank line for each continuation line (the cleaner leaves those blank)."""
    wrapped: list[str] = []
    baseline: list[str] = []
    for ln in text.splitlines():
        chunks = [ln[i : i + width] for i in range(0, len(ln), width)] or [""]
        wrapped += chunks
        baseline += [ln] + [""] * (len(chunks) - 1)
    return "\n".join(wrapped) + "\n", "\n".join(baseline) + "\n"


def _wrappable(text: str, width: int = 80) -> bool:
    """Lines longer than the terminal (at most half of them, as a wrap leaves a rest after
    each), and none of exactly its width already."""
    lens = [len(ln) for ln in text.splitlines()]
    return any(n > width for n in lens) and width not in lens


PASTED_FORMS = {
    "wrapped-80": (
        lambda t: _hard_wrapped(t)[0],
        lambda t: _hard_wrapped(t)[1],
        "wrapped at 80 columns",
    ),
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
def test_pasted_forms_read_the_same_values_and_say_what_was_skipped(path: Path, tool: str, form: str) -> None:
    text = path.read_text(encoding="utf-8")
    if form.startswith("wrapped") and not _wrappable(text):
        pytest.skip("no line longer than the terminal, or one of exactly its width")
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


SNIP = "[... 40 similar lines snipped by the poster ...]"
#: Samples where the middle line is inside one block that the snip breaks: no intact block
#: is left after it (a JSON document is one block).
ONE_BLOCK = {
    "dcgmi/diag-r1-json-v3.1-warning-line-before-json-null-entries.txt",
    "dcgmi/diag-r1-json-dcgm-4.2.3-gb10-metadata-object-software-fail-persistence-mode.txt",
}


def _without_line_counts(doc: object) -> object:
    """The reading with ``effective.lines`` (how many lines were read) left out."""
    if isinstance(doc, dict) and isinstance(doc.get("effective"), dict):
        doc["effective"].pop("lines", None)
    return doc


@pytest.mark.parametrize(("path", "tool"), OWN, ids=[f"{p.parent.name}/{p.name}" for p, _ in OWN])
def test_one_unreadable_line_loses_nothing_after_it(path: Path, tool: str) -> None:
    """A poster's ``[... snipped ...]`` line in the middle of an output: every value before and
    after it is read as without it (the line counted as read at most)."""
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    if len(lines) < 6:
        pytest.skip("too short to have a middle")
    mid = len(lines) // 2
    snipped = "".join([*lines[:mid], SNIP + "\n", *lines[mid:]])
    blank = "".join([*lines[:mid], "\n", *lines[mid:]])
    if f"{path.parent.name}/{path.name}" in ONE_BLOCK:
        with pytest.raises(ParseError):
            PARSERS[tool].parse(snipped)
        return
    record = PARSERS[tool].parse(snipped)
    got = _without_line_counts(_reading(record))
    assert got == _without_line_counts(_reading(PARSERS[tool].parse(blank)))
    if f"{path.parent.name}/{path.name}" not in INSIDE_ONE_MESSAGE:
        said = record.warnings
        assert any(w.startswith(f"line {mid + 1} not read") for w in said), said


#: Samples whose clipped form keeps nothing that names the tool's device or test: the clip
#: takes the one line that does, and what is left is rightly refused.
NOTHING_LEFT = {
    ("dcgmi/diag-r2-text-gpu-memory-fail-thermal-warning-wrapped-excerpt.txt", "first"),
    ("ibstat/ibstat-port-polling-rate-10-guids-elided.txt", "first"),
    ("ibstat/ibstat-one-ca-port-down-disabled-cut-after-physical-state.txt", "first"),
    ("ibstat/ibv_devinfo-no-userspace-driver-warnings-no-ib-devices-found.txt", "last"),
    ("lspci/nnk-rtx3080-vendor-device-ids.txt", "first"),
    ("lspci/vnn-kata-vfio-guest-gt1030-one-device-block.txt", "first"),
    # excerpts without a table: the parameter line is what makes them nccl-tests
    ("nccl-tests/all_reduce_perf-8xh800-nvls-cuda-failure-invalid-argument-fabric-manager-excerpt.txt", "first"),
    ("nccl-tests/all_reduce_perf-8xh800-nvls-multicast-not-available-0-nvls-channels-excerpt.txt", "first"),
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


# ------------------------------------------------------------ failure-only outputs (class 1)

#: A binary of each tool, as a shell or the loader names it in a launch failure.
BINARY = {
    "dcgmi": "dcgmi",
    "dmesg": "dmesg",
    "gpu-burn": "./gpu_burn",
    "ibstat": "ibstat",
    "ibstatus": "ibstatus",
    "ibv_devinfo": "ibv_devinfo",
    "lspci": "lspci",
    "nccl-tests": "./build/all_reduce_perf",
    "nvbandwidth": "./nvbandwidth",
    "nvidia-smi": "nvidia-smi",
    "nvidia-smi-csv": "nvidia-smi",
    "nvidia-smi-nvlink": "nvidia-smi",
    "nvidia-smi-q": "nvidia-smi",
    "nvidia-smi-topo": "nvidia-smi",
    "nvidia-smi-xml": "nvidia-smi",
    "perftest": "ib_write_bw",
    "stream": "./stream_c.exe",
    "vllm-bench": "vllm",
}
LAUNCH_FAILURES = {
    "not-installed": "bash: {exe}: command not found\n",
    "missing-library": "{exe}: error while loading shared libraries: libfoo.so.1: cannot open "
    "shared object file: No such file or directory\n",
}


# the launch-failure rows every table shares are exercised by these texts
LINES += [text.format(exe=exe).strip() for exe in BINARY.values() for text in LAUNCH_FAILURES.values()]


def test_every_parser_names_a_binary() -> None:
    assert set(BINARY) == set(PARSERS)


@pytest.mark.parametrize("case", sorted(LAUNCH_FAILURES))
@pytest.mark.parametrize("tool", sorted(PARSERS))
def test_a_failure_only_output_is_the_tools_failure(tool: str, case: str) -> None:
    """The shell's or the loader's words that the tool could not start are that tool's output
    (a record whose failure is could_not_start), never "not <tool> output"; pasted behind a
    prompt, the same."""
    text = LAUNCH_FAILURES[case].format(exe=BINARY[tool])
    for form in (text, PROMPT + text):
        record = PARSERS[tool].parse(form)
        _check_record(record, form)
        assert record.failure is not None and record.failure.kind is FailureKind.COULD_NOT_START


# ------------------------------------------------------------ a reading's own severity (class 2)

#: Per tool that can show one, real readings of a failed state and the words the failure has.
FAILED_STATES = [
    (
        "dmesg",
        "dmesg-xid/gpud-scan-xid119-gsp-rpc-timeout-quoted-lines-relative-time.txt",
        "Xid 119",
    ),
    # an Xid 45 caused by NVLink Xids 149/145 (catalog severity error) warns, as in a run
    # (tests/parsers/test_parse_judges_as_run.py): it is no failed state
    (
        "dmesg",
        "dmesg-xid/dmesg-2014-gpu-fallen-off-the-bus-os-pci-init-handle-invalid-context.txt",
        "fallen off the bus",
    ),
    (
        "lspci",
        "lspci/nn-grep-dgx-station-4xv100-one-gpu-rev-ff-config-space-all-ones.txt",
        "revision ff",
    ),
    (
        "ibstat",
        "ibstat/ibstat-prompts-ibpanic-then-unindented-ca-port-initializing-lid-65535.txt",
        "Initializing",
    ),
    ("nvidia-smi-nvlink", "nvidia-smi/nvlink-s-v100-inactive-links-truncated.txt", "inactive"),
]
#: Readings with nothing wrong: no failure, no warning.
HEALTHY = [
    ("ibstat", "ibstat/ibstat-h100-8x-ndr-400-active-plus-bond-200-ethernet.txt"),
    ("lspci", "lspci/grep-h100-p5-8gpu-4nvswitch.txt"),
    ("nvidia-smi-nvlink", "nvidia-smi/nvlink-s-h100-x8-18-links-p5.txt"),
    ("nvidia-smi-q", "nvidia-smi/q-h100-sxm-x8-driver565-all-gpus.txt"),
]


@pytest.mark.parametrize(("tool", "rel", "said"), FAILED_STATES, ids=[r for _, r, _ in FAILED_STATES])
def test_a_reading_of_a_failed_state_fails_with_the_reason(tool: str, rel: str, said: str) -> None:
    from nvtest.playbook.readings import assess
    from tests.parsers.conftest import read

    states = assess(PARSERS[tool].parse(read(rel)))
    assert any(said in f for f in states.failures), states


@pytest.mark.parametrize(("tool", "rel"), HEALTHY, ids=[r for _, r in HEALTHY])
def test_a_healthy_reading_stays_as_it_was(tool: str, rel: str) -> None:
    from nvtest.playbook.readings import assess
    from tests.parsers.conftest import read

    assert assess(PARSERS[tool].parse(read(rel))) == type(assess(None))()


def test_a_port_down_is_doubtful_not_failed() -> None:
    from nvtest.playbook.readings import assess
    from tests.parsers.conftest import read

    rel = "ibstat/ibstat-one-ca-port-down-disabled-cut-after-physical-state.txt"
    states = assess(PARSERS["ibstat"].parse(read(rel)))
    assert states.failures == () and states.warnings == ("mlx5_8 port 1: state Down, physical Disabled",)


# ------------------------------------------------------------ a log with no header (class 5)

NCCL_WITH_ROWS = [
    (p, t)
    for p, t in OWN
    if t == "nccl-tests" and len(PARSERS[t].parse(p.read_text(encoding="utf-8")).tests[0].rows) >= 2
]


@pytest.mark.parametrize(("path", "tool"), NCCL_WITH_ROWS, ids=[p.name for p, _ in NCCL_WITH_ROWS])
def test_an_nccl_tests_log_cut_before_its_header_is_detected_and_read(path: Path, tool: str) -> None:
    """Cut just before its first result row, a log is still nccl-tests' (detection tries the
    row shape, not only the banner) and reads the same rows, saying the parameters are unknown."""
    text = path.read_text(encoding="utf-8")
    full = PARSERS[tool].parse(text).tests[0]
    lines = text.splitlines(keepends=True)
    first = full.rows[0].line - 1
    rows_only = "".join(lines[first:])
    assert detect(rows_only) == "nccl-tests"
    cut = PARSERS[tool].parse(rows_only).tests[0]
    assert [r.size_bytes for r in cut.rows[: len(full.rows)]] == [r.size_bytes for r in full.rows]
    assert any("parameter line" in w for w in cut.warnings), cut.warnings


def test_a_raw_log_whose_longest_line_is_a_terminal_width_is_not_unwrapped() -> None:
    """A kernel log read as the node printed it: its longest line may be exactly 120 wide,
    and the next event is never joined to it."""
    from nvtest.parsers._common import clean_paste

    first = "[ 1843.308145] NVRM: Xid (PCI:0000:cb:00): 13, pid=1234, name=python, Graphics Exception: "
    first += "x" * (120 - len(first))
    text = f"{first}\n[ 1843.308200] NVRM: Xid (PCI:0000:cb:00): 43, pid=1234, name=python, Ch 0008\n"
    assert len(first) == 120
    assert clean_paste(text) == type(clean_paste(text))(text)
    log = PARSERS["dmesg"].parse(text)
    assert [e.code for e in log.events] == [13, 43]


# ------------------------------------------------------------ every tool's failed state (class 2)

#: Per tool, a real reading of a failed state: its sample and the words its failure has. The
#: failure is :func:`~nvtest.playbook.readings.assess`'s (``assess``), or the record's own
#: ``passed: false`` with no tool failure (``passed``, the words in the record), or a doubtful
#: state where the tool's readings cannot tell a failure from an unused part (``warning``).
STATE_OF_EVERY_TOOL: dict[str, tuple[str, str, str]] = {
    "dcgmi": (
        "dcgmi/diag-r2-text-gpu-memory-fail-thermal-warning-wrapped-excerpt.txt",
        "passed",
        "GPU Memory",
    ),
    "dmesg": (
        "dmesg-xid/gpud-scan-xid119-gsp-rpc-timeout-quoted-lines-relative-time.txt",
        "assess",
        "Xid 119",
    ),
    "gpu-burn": (
        "gpu-burn/16gpu-all-FAULTY-negative-error-counts-WARNING-exit-code-0.txt",
        "passed",
        "FAULTY",
    ),
    "ibstat": (
        "ibstat/ibstat-single-ca-state-down-physical-linkup-lid-65535.txt",
        "assess",
        "state Down, physical LinkUp",
    ),
    # ibstatus prints no LID with the state: a port down may be an unused one
    "ibstatus": (
        "ibstatus/ibstatus-roce-2-port-cx-edr-100-one-down-disabled-one-active-tabs.txt",
        "warning",
        "state Down, physical Disabled",
    ),
    "ibv_devinfo": ("ibstat/ibv_devinfo-port-down-lid-65535-one-hca.txt", "warning", "state Down"),
    "lspci": (
        "lspci/nn-grep-dgx-station-4xv100-one-gpu-rev-ff-config-space-all-ones.txt",
        "assess",
        "revision ff",
    ),
    "nccl-tests": (
        "nccl-tests/all_reduce_perf-2node-gh200-nccl-tests-2.17.8-wrong-96-32-at-1MiB-oob-4-failed.txt",
        "passed",
        "'wrong': 96",
    ),
    "nvidia-smi": ("nvidia-smi/plain-gtx1080ti-x2-driver460-ERR-fan-power.txt", "assess", "ERR!"),
    "nvidia-smi-csv": (
        "nvidia-smi/query-gpu-csv-gpu-requires-reset.txt",
        "assess",
        "GPU requires reset",
    ),
    "nvidia-smi-nvlink": (
        "nvidia-smi/nvlink-s-v100-inactive-links-truncated.txt",
        "assess",
        "inactive",
    ),
    "nvidia-smi-q": (
        "nvidia-smi/q-a100-sxm4-x4-driver555-row-remap-pending-gpu1.txt",
        "assess",
        "00000000:9E:00.0: row remap pending",
    ),
    "stream": (
        "stream/sam460ex-validation-FAILED-all-three-arrays-mail-wrapped.txt",
        "passed",
        "validation",
    ),
}
#: Tools whose readings carry no state of their own, and why: what they print is a measurement
#: that only a check's expectation judges, or the tool's own failure (class 1, walked above).
NO_STATE_OF_THEIR_OWN = {
    "nvbandwidth": "bandwidth/latency matrices: a low figure is judged against the check's "
    "threshold; a copy that failed is the tool's failure (crash_after_partial_output)",
    "nvidia-smi-topo": "a topology matrix (link kinds, affinities): right or wrong only against "
    "the node's expected topology, which the check holds",
    "perftest": "bandwidth/latency figures; a fabric fault shows as the tool's own failure (a "
    "completion error with its status, a QP that did not reach RTR/RTS)",
    "vllm-bench": "throughput figures, judged against the check's threshold; an engine crash is "
    "the tool's failure (error_banner)",
}
#: Tools read into another tool's record: the states are that tool's, classified by the same
#: code (no real paste of the failed state in this format was found).
SAME_RECORD_AS = {"nvidia-smi-xml": "nvidia-smi-q"}


def test_every_tool_shows_a_failed_state_or_says_why_it_has_none() -> None:
    tables = (set(STATE_OF_EVERY_TOOL), set(NO_STATE_OF_THEIR_OWN), set(SAME_RECORD_AS))
    assert set.union(*tables) == set(PARSERS)
    assert sum(map(len, tables)) == len(PARSERS), "a tool is in one table only"
    assert all(reason.strip() for reason in NO_STATE_OF_THEIR_OWN.values())


@pytest.mark.parametrize("tool", sorted(STATE_OF_EVERY_TOOL))
def test_a_failed_state_of_every_tool_is_read_as_one(tool: str) -> None:
    from nvtest.playbook.readings import assess
    from tests.parsers.conftest import read

    rel, how, said = STATE_OF_EVERY_TOOL[tool]
    record = PARSERS[tool].parse(read(rel))
    states = assess(record)
    if how == "assess":
        assert any(said in f for f in states.failures), states
    elif how == "warning":
        assert states.failures == () and any(said in w for w in states.warnings), states
    else:
        assert record.failure is None and record.passed is False
        assert said in str(to_jsonable(record))


@pytest.mark.parametrize("tool", sorted(SAME_RECORD_AS))
def test_a_tool_read_into_another_tools_record_is_assessed_alike(tool: str) -> None:
    from tests.parsers.conftest import read

    other = SAME_RECORD_AS[tool]
    mine = next(PARSERS[tool].parse(p.read_text(encoding="utf-8")) for p, t in OWN if t == tool)
    theirs = PARSERS[other].parse(read(STATE_OF_EVERY_TOOL[other][0]))
    assert type(mine) is type(theirs)


# ------------------------------------------------------------ what a parser did not read (class 3)

#: A poster's own sentence, as people put one inside a pasted output (nccl-tests issue #280).
POSTERS_LINE = "I ran this on the second node too and it hangs right after this point, any idea why"
#: Samples whose middle is inside one message of several lines: a line there splits it.
#: A terminal's wrap: the sentence is joined to the wrapped line as its rest (the wrap is undone
#: first). A kernel message continued on unstamped lines: the sentence ends the message, and
#: its rest is read as a message of its own.
INSIDE_ONE_MESSAGE = {
    "dmesg-xid/talos-host-label-kern-warning-iso-gsp-coredump-trace-excerpt.txt",
    "dmesg-xid/fallen-off-bus-multiline-no-xid-driver570.txt",
}


@pytest.mark.parametrize(("path", "tool"), OWN, ids=[f"{p.parent.name}/{p.name}" for p, _ in OWN])
def test_a_posters_line_in_the_middle_is_named_and_changes_nothing(path: Path, tool: str) -> None:
    """Every non-blank line a parser did not read is said in ``warnings`` with its number; the
    values are those of the output without it."""
    rel = f"{path.parent.name}/{path.name}"
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    if rel in INSIDE_ONE_MESSAGE:
        pytest.skip("the middle is inside one message of several lines")
    mid = max(1, len(lines) // 2)  # a one-line output: the poster's line after it
    with_line = "".join([*lines[:mid], POSTERS_LINE + "\n", *lines[mid:]])
    blank = "".join([*lines[:mid], "\n", *lines[mid:]])
    if rel in ONE_BLOCK:
        with pytest.raises(ParseError):
            PARSERS[tool].parse(with_line)
        return
    got = PARSERS[tool].parse(with_line)
    assert _without_line_counts(_reading(got)) == _without_line_counts(_reading(PARSERS[tool].parse(blank)))
    assert any(w.startswith(f"line {mid + 1} not read") for w in got.warnings), got.warnings


@pytest.mark.parametrize(("path", "tool"), OWN, ids=[f"{p.parent.name}/{p.name}" for p, _ in OWN])
def test_the_tools_own_lines_are_never_said_to_be_unread(path: Path, tool: str) -> None:
    """No flood: a corpus sample as the tool printed it has no line "not read", except the
    lines its poster put in (a sentence, a mark of lines left out)."""
    record = PARSERS[tool].parse(path.read_text(encoding="utf-8"))
    unread = [w for w in record.warnings if " not read (" in w]
    assert unread == POSTERS_OWN.get(f"{path.parent.name}/{path.name}", [])


#: The corpus samples with lines their posters put in, and what is said of them.
POSTERS_OWN = {
    "nccl-tests/all_reduce_perf-4x4090-test-nccl-failure-unhandled-cuda-error-rows-left-aligned-cut.txt": [
        "line 4 not read (not the tool's): 'I have tried that there is a situatio...'"
    ],
    "ibstat/ibstat-partial-output-then-ibpanic-stat-of-ib-device-failed.txt": [
        "line 1 not read (the poster's mark of lines left out): '...'"
    ],
    "nccl-tests/alltoall_perf-32node-128xgb300-low-bw-inplace-NA.txt": [
        "line 7 not read (the poster's mark of lines left out): '...'"
    ],
    "nvidia-smi/nvlink-s-v100-inactive-links-truncated.txt": [
        "line 2 not read (the poster's mark of lines left out): '....'"
    ],
    **{
        f"nccl-tests/all_reduce_perf-2node-eks-efa-{name}-excerpt.txt": [
            f"line {n} not read (the poster's mark of lines left out): '...'" for n in (1, 3 + shift)
        ]
        for name, shift in (("disabled-using-network-socket", 0), ("using-network-aws-libfabric", 1))
    },
}


def test_many_unread_lines_are_counted() -> None:
    from nvtest.parsers._common import skipped_lines

    said = skipped_lines([(n, POSTERS_LINE) for n in range(3, 9)], "not the tool's")
    assert said[:1] == (f"line 3 not read (not the tool's): {POSTERS_LINE[:37]!r}"[:-1] + "...'",)
    assert said[-1] == "3 more line(s) not read (not the tool's): line(s) 6, 7, 8"
    assert len(said) == 4


# ------------------------------------------------------------ wrapped by a mail client (class 3)


def _mail_wrapped(text: str, width: int = 72) -> tuple[str, str]:
    """``text`` as a mail client wraps it (each line longer than ``width`` cut at its last
    space that fits, the spaces at the cut dropped), and the baseline: the text with a blank
    line for each continuation line."""
    wrapped: list[str] = []
    baseline: list[str] = []
    for ln in text.splitlines():
        pieces: list[str] = []
        rest = ln
        while len(rest) > width and (cut := rest.rfind(" ", 0, width + 1)) > 0:
            if not rest[:cut].strip():
                break
            pieces.append(rest[:cut].rstrip())
            rest = rest[cut:].lstrip()
        pieces.append(rest)
        wrapped += pieces
        baseline += [ln] + [""] * (len(pieces) - 1)
    return "\n".join(wrapped) + "\n", "\n".join(baseline) + "\n"


#: Per tabular tool, its rows in a reading (what a mail client's wrap must not lose).
TABLE_ROWS = {
    "nccl-tests": lambda r: [to_jsonable(row) for t in r.tests for row in t.rows],
}
#: Tabular tools whose wrapped rows are left as they are, and why.
WRAP_AMBIGUOUS = {
    "nvidia-smi": "a box whose cells are read by column; a wrapped box line is a box line cut "
    "short, and its rest no row: which cells moved cannot be told",
    "dcgmi": "the same: a box of cells read by column, whose wrapped cell text (a Warning) dcgmi wraps itself",
    "nvidia-smi-topo": "a matrix row's rest (SYS SYS 48-63 3) and a legend's rest are words of "
    "the same kinds as the header's",
    "nvbandwidth": "a matrix row's rest is numbers, as a row of its own starts",
    "nvidia-smi-csv": "a row's rest has commas and values like a row of its own",
    "perftest": "a latency row cut after five figures has the shape of a whole bandwidth row "
    "(which of the two a paste holds is in a header the paste may have lost)",
    "stream": "its rows fit in 72 columns",
}


@pytest.mark.parametrize(
    ("path", "tool"),
    [(p, t) for p, t in OWN if t in TABLE_ROWS],
    ids=[f"{p.parent.name}/{p.name}" for p, t in OWN if t in TABLE_ROWS],
)
def test_rows_a_mail_client_wrapped_are_joined_back(path: Path, tool: str) -> None:
    text = path.read_text(encoding="utf-8")
    wrapped, baseline = _mail_wrapped(text)
    if wrapped == text:
        pytest.skip("no line longer than 72 columns")
    rows = TABLE_ROWS[tool]
    expected = rows(PARSERS[tool].parse(baseline))
    got = PARSERS[tool].parse(wrapped)
    assert rows(got) == expected
    if expected and len(wrapped.splitlines()) > len(text.splitlines()):
        assert any("wrapped by a mail client" in w for w in got.warnings), got.warnings


@pytest.mark.parametrize(("path", "tool"), OWN, ids=[f"{p.parent.name}/{p.name}" for p, _ in OWN])
def test_a_quoted_reply_reads_as_the_output(path: Path, tool: str) -> None:
    """Every line behind a mail reader's ``> `` quote prefix: the same reading, said."""
    text = path.read_text(encoding="utf-8")
    quoted = "".join(f"> {ln}" for ln in text.splitlines(keepends=True))
    got = PARSERS[tool].parse(quoted)
    assert _reading(got) == _reading(PARSERS[tool].parse(text))
    assert any("mail quote" in w for w in got.warnings), got.warnings


def test_every_tabular_tool_is_joined_or_said_ambiguous() -> None:
    tabular = {"nccl-tests", "perftest", "stream", "nvbandwidth", "nvidia-smi-csv"}
    tabular |= {"nvidia-smi", "dcgmi", "nvidia-smi-topo"}
    assert set(TABLE_ROWS) | set(WRAP_AMBIGUOUS) == tabular
    assert not set(TABLE_ROWS) & set(WRAP_AMBIGUOUS)
