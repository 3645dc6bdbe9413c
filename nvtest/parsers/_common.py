"""Helpers shared by the parsers: value states, prefix stripping, line iteration, numbers,
:class:`LineDispatch` (the table of line rules that the line-oriented parsers run), and the
contract every parser keeps with its callers: :class:`ToolFailure` and :class:`FailureTable`
for the tool's own failure outputs, :func:`effective` for the parameters that took effect.

The contract (also in docs/parsers.md; ``tests/parsers/test_contract.py`` walks every parser):

1. ``parse(text)`` of the tool's own output never raises. A failure output (an error banner
   instead of the report, a diagnostic that could not start, an init failure, a partial table
   then a crash, a plugin that did not load, a format version the parser does not read) is a
   record whose ``failure`` is a :class:`ToolFailure` carrying the tool's words and line.
2. ``parse(text)`` of text that is not the tool's at all (another tool's output, binary, empty
   text, a bare shell prompt) raises :class:`~nvtest.errors.ParseError`; never a record that
   would read as "nothing wrong".
3. The record returned by ``parse`` has ``failure`` (None when the tool printed no failure) and
   ``effective``: a read-only mapping of the parameters that took effect, as the tool printed
   them (keys per tool in docs/parsers.md).

Nothing here knows about a particular tool's format; each helper is used by at least
two parsers. All functions are pure and raise only :class:`~nvtest.errors.ParseError`.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import re
import types
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from nvtest.errors import ParseError

__all__ = [
    "FailureKind",
    "FailureRule",
    "FailureTable",
    "LineDefault",
    "LineDispatch",
    "LineHandler",
    "LinePattern",
    "ParseError",
    "ToolFailure",
    "ToolRecord",
    "ValueState",
    "Reading",
    "effective",
    "effective_field",
    "NO_PARAMETERS",
    "guarded",
    "is_sentence",
    "launch_failures",
    "lost_gpu",
    "not_tool_output",
    "numbered_lines",
    "Pasted",
    "as_pasted",
    "clean_paste",
    "parse_state",
    "reading",
    "skip_line",
    "skipped_lines",
    "unread_lines",
    "strip_launcher_prefix",
    "to_float",
    "to_int",
    "split_kv",
]


class ValueState(enum.StrEnum):
    """A value a tool printed instead of a number. Never read as 0.

    ``[N/A]`` and ``N/A`` -> ``NA``; ``[Not Supported]`` -> ``NOT_SUPPORTED``;
    ``ERR!`` -> ``ERROR``; ``[GPU requires reset]`` -> ``RESET_REQUIRED``;
    ``[Unknown Error]`` -> ``UNKNOWN_ERROR``; ``[Insufficient Permissions]`` -> ``NO_PERMISSION``.
    """

    NA = "N/A"
    NOT_SUPPORTED = "Not Supported"
    ERROR = "ERR!"
    RESET_REQUIRED = "GPU requires reset"
    UNKNOWN_ERROR = "Unknown Error"
    NO_PERMISSION = "Insufficient Permissions"

    @property
    def is_fault(self) -> bool:
        """True for states that say the GPU or driver is unhealthy (not merely N/A)."""
        return self in (ValueState.ERROR, ValueState.RESET_REQUIRED, ValueState.UNKNOWN_ERROR)


_STATES: dict[str, ValueState] = {
    "n/a": ValueState.NA,
    "na": ValueState.NA,
    "not supported": ValueState.NOT_SUPPORTED,
    "notsupported": ValueState.NOT_SUPPORTED,
    "err!": ValueState.ERROR,
    "gpu requires reset": ValueState.RESET_REQUIRED,
    "unknown error": ValueState.UNKNOWN_ERROR,
    "insufficient permissions": ValueState.NO_PERMISSION,
}

#: A number read from the output, or the state the tool printed in its place.
Reading = float | ValueState

_NUM_RE = re.compile(r"^[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


def parse_state(text: str) -> ValueState | None:
    """Return the :class:`ValueState` for ``text`` (brackets optional, case-insensitive), else None."""
    t = text.strip()
    if t.startswith("[") and t.endswith("]"):
        t = t[1:-1].strip()
    return _STATES.get(t.lower())


def reading(text: str) -> Reading | None:
    """Read ``"28.16 W"``, ``"16280"``, ``"[N/A]"``, ``"ERR!"``: a float, a state, or None if neither.

    A trailing unit (anything after the number) is ignored; the caller names the unit.
    """
    state = parse_state(text)
    if state is not None:
        return state
    m = _NUM_RE.match(text.strip())
    if not m:
        return None
    try:
        return float(m.group(0))
    except ValueError:  # pragma: no cover - the regex admits only valid floats
        return None


def to_float(text: str) -> float | None:
    """A float from the start of ``text`` (unit suffix allowed), or None. ``nan``/``inf`` are None."""
    try:
        value = float(text)
    except ValueError:
        m = _NUM_RE.match(text.strip())
        return float(m.group(0)) if m else None
    return value if value - value == 0.0 else None


def to_int(text: str) -> int | None:
    """An int from ``text`` (decimal, or hex with ``0x``), or None."""
    if text.isdigit():
        return int(text)
    t = text.strip()
    try:
        if t.lower().startswith(("0x", "-0x")):
            return int(t, 16)
        return int(t)
    except ValueError:
        return None


# Open MPI --tag-output ``[1,0]<stdout>:``, srun --label ``0: ``, pdsh ``node001: ``-style labels
# are not stripped here (a hostname prefix is ambiguous with real content).
_LAUNCHER_PREFIX_RE = re.compile(r"^(?:\[\d+,\d+\]<std(?:out|err)>:|\d+: )")


def strip_launcher_prefix(line: str) -> str:
    """Remove an Open MPI ``[job,rank]<stdout>:`` tag or a srun ``N: `` label from one line."""
    if line[:1] == "[" or line[:1].isdigit():
        return _LAUNCHER_PREFIX_RE.sub("", line, count=1)
    return line


def numbered_lines(text: str, *, strip_prefix: bool = False) -> Iterator[tuple[int, str]]:
    """Yield ``(line_number, line)`` with 1-based numbers, ``\\r`` removed, right side stripped.

    With ``strip_prefix`` the launcher tags of :func:`strip_launcher_prefix` are removed first.
    """
    for no, raw in enumerate(text.splitlines(), start=1):
        line = raw.replace("\r", "")
        if strip_prefix:
            line = strip_launcher_prefix(line)
        yield no, line.rstrip()


def split_kv(line: str, sep: str = ":") -> tuple[str, str] | None:
    """Split ``"  Key  : value "`` into ``("Key", "value")``; None when there is no separator."""
    key, found, value = line.partition(sep)
    if not found:
        return None
    return key.strip(), value.strip()


F = TypeVar("F", bound=Callable[..., object])


def guarded(tool: str) -> Callable[[F], F]:
    """Decorate a parser so that any exception other than ParseError becomes one.

    Such a conversion is a parser bug: its message starts with ``internal error`` so that
    tests can tell it from a deliberate ParseError. Callers only ever see ParseError.
    """

    def wrap(func: F) -> F:
        @functools.wraps(func)
        def inner(*args: object, **kwargs: object) -> object:
            try:
                return func(*args, **kwargs)
            except ParseError:
                raise
            except Exception as exc:  # noqa: BLE001 - the contract: only ParseError escapes
                raise ParseError(
                    tool,
                    f"internal error: {type(exc).__name__}: {exc}",
                    expected="well-formed input",
                ) from exc

        return inner  # type: ignore[return-value]

    return wrap


_LOST_GPU_RE = re.compile(
    r"Unable to determine the device handle for (?:GPU\s*)?(?:\d+:\s*)?"
    r"([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.?\d?)",
    re.IGNORECASE,
)


def lost_gpu(line: str) -> str | None:
    """PCI bus id named by nvidia-smi's ``Unable to determine the device handle for GPU...`` line.

    nvidia-smi (all versions since ~450) prints it for a GPU it lists but can no longer reach
    (fallen off the bus, needs reset); returns e.g. ``"0000:3B:00.0"``, or None for other lines.
    """
    if "Unable to determine the device handle" not in line:
        return None
    m = _LOST_GPU_RE.search(line)
    return m.group(1) if m else "unknown"


StateT = TypeVar("StateT")

#: What a rule of a :class:`LineDispatch` matches: a prefix of the line (``str``), any one of
#: several prefixes (``tuple[str, ...]``), a compiled regex tried with ``search`` (so it may match
#: anywhere; anchor it with ``^`` for a prefix-style match), or a predicate on the line.
LinePattern = str | tuple[str, ...] | re.Pattern[str] | Callable[[str], bool]

#: A rule's handler, called as ``handler(state, line_number, line, match)``. ``match`` is the
#: regex's match; for a prefix rule, the match of the (longest) prefix, so ``line[match.end():]``
#: is the rest; for a predicate rule, an empty match at 0. Returning ``False`` declines the line,
#: which then goes on to the next rules (a handler may also note something and decline, to let a
#: later rule take the line too); any other value (normally None) means the line was handled.
LineHandler = Callable[[StateT, int, str, re.Match[str]], bool | None]

#: A dispatcher's default handler, ``default(state, line_number, line)``: lines no rule took.
LineDefault = Callable[[StateT, int, str], None]

_EMPTY_RE = re.compile("")
_PREFIX, _REGEX, _PREDICATE = 0, 1, 2


def _rule(pattern: LinePattern) -> tuple[int, object, re.Pattern[str]]:
    """``(kind, test, regex)`` for ``pattern``: a prefix is tested with ``str.startswith`` (the
    fast path) and its regex gives the match; a regex is searched; a predicate is called."""
    if isinstance(pattern, str):
        return _PREFIX, pattern, re.compile(re.escape(pattern))
    if isinstance(pattern, tuple):
        if not pattern or not all(isinstance(p, str) for p in pattern):
            raise TypeError("a prefix tuple needs at least one str")
        # longest first, so that the match is the longest prefix the line starts with
        ordered = sorted(pattern, key=len, reverse=True)
        return _PREFIX, pattern, re.compile("|".join(re.escape(p) for p in ordered))
    if isinstance(pattern, re.Pattern):
        return _REGEX, pattern.search, pattern
    if callable(pattern):
        return _PREDICATE, pattern, _EMPTY_RE
    raise TypeError(f"not a line pattern: {pattern!r}")


class LineDispatch(Generic[StateT]):
    """A table of line rules for a parser that reads its input line by line.

    ``rules`` is a sequence of ``(pattern, handler)`` pairs (:data:`LinePattern`,
    :data:`LineHandler`). Calling the dispatcher with ``(state, line_number, line)`` tries the
    rules in order: the first whose pattern matches and whose handler does not decline (return
    ``False``) handles the line, and no later rule sees it. A line no rule handled goes to
    ``default`` (:data:`LineDefault`), when there is one. Patterns test the line exactly as
    given: strip it, and skip blank lines, before the call.

    The table holds no parse state, so one module-level instance serves every parse (and every
    thread); the state travels in ``state``, typically a small mutable reader object whose
    methods are the handlers. Handlers raise what the parser raises (ParseError); the
    dispatcher itself raises only ``TypeError``, at construction, for a pattern of no known kind.

    Example (an nvbandwidth-like format)::

        _LINES = LineDispatch(
            [
                ("Running ", _Reader.testcase),                 # a prefix
                (("SUM ", "COEFFICIENT_OF_VARIATION "), _Reader.total),  # one of several
                (re.compile(r"^(.*) \\((GB/s|ns)\\)$"), _Reader.matrix),  # a regex
                (lambda s: s[0].isdigit(), _Reader.row),        # a predicate
            ],
            default=_Reader.other,
        )
        reader = _Reader()
        for no, line in numbered_lines(text):
            if s := line.strip():
                _LINES(reader, no, s)
    """

    __slots__ = ("_default", "_rules")

    def __init__(
        self,
        rules: Sequence[tuple[LinePattern, LineHandler[StateT]]],
        default: LineDefault[StateT] | None = None,
    ) -> None:
        self._rules: tuple[tuple[int, Any, re.Pattern[str], LineHandler[StateT]], ...] = tuple(
            (*_rule(pattern), handler) for pattern, handler in rules
        )
        self._default = default

    def __call__(self, state: StateT, no: int, line: str) -> bool:
        """Dispatch one line; True when a rule handled it, False when it went to the default."""
        for kind, test, rx, handler in self._rules:
            if kind == _PREFIX:
                if not line.startswith(test):
                    continue
                m = rx.match(line)
            elif kind == _REGEX:
                m = test(line)
                if m is None:
                    continue
            elif test(line):
                m = rx.match(line)
            else:
                continue
            if m is not None and handler(state, no, line, m) is not False:
                return True
        if self._default is not None:
            self._default(state, no, line)
        return False

    def feed(self, state: StateT, lines: Iterable[tuple[int, str]]) -> StateT:
        """Dispatch every ``(line_number, line)`` of ``lines`` in order; returns ``state``."""
        for no, line in lines:
            self(state, no, line)
        return state


def skip_line(_state: object, _no: int, _line: str, _match: re.Match[str]) -> None:
    """A :data:`LineHandler` that takes the line and does nothing (lines to pass over)."""


# ------------------------------------------------------------------ the tool's own failures


class FailureKind(enum.StrEnum):
    """Where a tool stopped, as its own output shows (the value of :attr:`ToolFailure.kind`).

    - ``could_not_start``: the tool never reached its device or peer: a launcher or connection
      failure, a service it needs not running (DCGM's host engine), permission denied.
    - ``no_device``: the tool ran and says it found none of its devices (``No devices were
      found``, ``No IB devices found``, ``No CUDA devices``). Not proof of absence: what a node
      has comes from the PCI bus.
    - ``init_failure``: the tool found its devices but could not initialise them or its library
      before measuring (NVML/CUDA/NCCL init, ``Couldn't init a GPU test``, ``RmInitAdapter``).
    - ``crash_after_partial_output``: part of the result was printed (a table header, rows, a
      testcase banner), then the tool died or reported an error mid-run.
    - ``plugin_not_loaded``: a plugin or helper process of the tool did not load or did not
      run (DCGM's diagnostic plugins and their child processes, NCCL's network plugin).
    - ``unsupported_format``: recognisably the tool's output, in a version or schema the parser
      does not read (a new JSON schema, a table layout no reader matches).
    - ``error_banner``: the tool printed an error in place of (part of) its report and no more
      specific kind applies (``Unable to determine the device handle for GPU...``).
    """

    COULD_NOT_START = "could_not_start"
    NO_DEVICE = "no_device"
    INIT_FAILURE = "init_failure"
    CRASH_AFTER_PARTIAL_OUTPUT = "crash_after_partial_output"
    PLUGIN_NOT_LOADED = "plugin_not_loaded"
    UNSUPPORTED_FORMAT = "unsupported_format"
    ERROR_BANNER = "error_banner"


@dataclass(frozen=True)
class ToolFailure:
    """A failure the tool printed, in its own words.

    Attributes:
        kind: where the tool stopped (:class:`FailureKind`).
        message: the tool's failure line as printed (stripped; a launcher tag removed).
        line: 1-based line number of ``message`` in the text, None when not line-based.
        code: a code the tool printed with it, as printed: an error name (``CUDA_ERROR_UNKNOWN``,
            ``'system not yet initialized'``), a work-completion status (``10``), a source site
            (``common.cu:392``), a return code; None when it printed none.
        device: the device the message names (PCI bus id, HCA, GPU index), as printed.
        detail: the tool's supporting lines, in order (an NCCL WARN before the failure, the
            call chain after it, a launcher's abort banner); at most a few, stripped.
    """

    kind: FailureKind
    message: str
    line: int | None = None
    code: str | None = None
    device: str | None = None
    detail: tuple[str, ...] = ()

    @property
    def reason(self) -> str:
        """One line for a verdict: ``"<kind>: <message>"``."""
        return f"{self.kind.value}: {self.message}"


class ToolRecord:
    """What every parser's record that carries a ``failure`` (a :class:`ToolFailure` or
    None) answers: whether the tool completed, and its failure in one line."""

    failure: ToolFailure | None

    @property
    def completed(self) -> bool:
        """False when the tool printed a failure (see :attr:`failure`)."""
        return self.failure is None

    @property
    def failure_reason(self) -> str | None:
        """The failure in one line, or None."""
        return self.failure.reason if self.failure else None


#: One row of a :class:`FailureTable`: a regex searched in a line, the kind it means, and where
#: the wording comes from (tool and version), for the reader of the table.
FailureRule = tuple[re.Pattern[str], FailureKind, str]


def _bare(rx: re.Pattern[str]) -> str:
    """``rx`` as one branch of an alternation: named groups unnamed, IGNORECASE scoped."""
    pattern = re.sub(r"\(\?P<\w+>", "(?:", rx.pattern)
    if rx.flags & re.IGNORECASE:
        pattern = f"(?i:{pattern})"
    return f"(?:{pattern})"


def launch_failures(binaries: str) -> tuple[FailureRule, ...]:
    """The rows every tool shares: the shell or the loader could not start it. ``binaries`` is
    a regex of the tool's executable names (``dcgmi``, ``all_\\w+_perf``); the row needs the
    name, so another tool's launch failure is not this tool's output."""
    exe = rf"(?:^|[\s/])(?:{binaries}): "
    return (
        (
            re.compile(exe + r"error while loading shared libraries: (?P<code>[^:]+): cannot open"),
            FailureKind.COULD_NOT_START,
            "ld.so (glibc): a library the binary links is not installed or not on LD_LIBRARY_PATH",
        ),
        (
            re.compile(exe + r"(?P<code>command not found|No such file or directory|Permission denied)$"),
            FailureKind.COULD_NOT_START,
            "bash/sh: the binary is not installed, not on PATH, or not executable",
        ),
    )


class FailureTable:
    """A tool's failure wordings: ``(regex, kind, source)`` rows tried in order on each line.

    A regex may name groups ``code`` and ``device``; they fill :attr:`ToolFailure.code` and
    :attr:`ToolFailure.device`. The table is pure data plus two lookups; one module-level
    instance per parser. ``tests/parsers/test_contract.py`` checks that every row of every
    parser's table is exercised by at least one corpus file or a case in the tests.
    """

    __slots__ = ("_any", "rules")

    def __init__(self, rules: Sequence[FailureRule], *, binaries: str | None = None) -> None:
        self.rules: tuple[FailureRule, ...] = tuple(rules) + (launch_failures(binaries) if binaries else ())
        # one alternation of every row (groups unnamed, flags scoped) tried first: most lines
        # are no failure, and one search rejects them where a search per row would not
        self._any = re.compile("|".join(_bare(rx) for rx, _, _ in self.rules)) if rules else None

    def match(self, line: str) -> tuple[FailureKind, re.Match[str]] | None:
        """The kind and match of the first row whose regex is found in ``line``, or None."""
        if self._any is None or self._any.search(line) is None:
            return None
        for rx, kind, _source in self.rules:
            m = rx.search(line)
            if m is not None:
                return kind, m
        return None

    def failure(
        self,
        no: int | None,
        line: str,
        *,
        kind: FailureKind | None = None,
        detail: Sequence[str] = (),
    ) -> ToolFailure | None:
        """A :class:`ToolFailure` for ``line`` when a row matches it (``kind`` overrides the
        row's kind, e.g. to ``crash_after_partial_output`` once results were printed)."""
        hit = self.match(line)
        if hit is None:
            return None
        row_kind, m = hit
        groups = m.groupdict()
        return ToolFailure(
            kind or row_kind,
            line.strip(),
            no,
            groups.get("code"),
            groups.get("device"),
            tuple(detail),
        )

    def scan(self, lines: Iterable[tuple[int, str]]) -> ToolFailure | None:
        """The failure of the first line (``(number, text)`` pairs) any row matches, or None."""
        for no, line in lines:
            f = self.failure(no, line)
            if f is not None:
                return f
        return None


def effective(**params: object) -> Mapping[str, object]:
    """The ``effective`` mapping of a record: the parameters that took effect, as the tool
    printed them. Keys with value None (not printed) are left out; the mapping is read-only."""
    return types.MappingProxyType({k: v for k, v in params.items() if v is not None})


#: The ``effective`` of a record that read no parameter.
NO_PARAMETERS: Mapping[str, object] = types.MappingProxyType({})


def _no_parameters() -> Mapping[str, object]:
    return NO_PARAMETERS


def effective_field() -> Any:
    """The dataclass field of a record's ``effective``: empty by default and left out of the
    record's hash (a mapping is not hashable), so frozen records stay hashable."""
    return field(default_factory=_no_parameters, hash=False)


def not_tool_output(tool: str, expected: str, text: str) -> ParseError:
    """The :class:`~nvtest.errors.ParseError` for text that is not ``tool``'s output at all
    (rule 2 of the contract); the message says how much text there was, never its content."""
    n = len(text.splitlines())
    what = "empty text" if not text.strip() else f"{n} line(s) with no {tool} output"
    return ParseError(tool, f"not {tool} output: {what}", expected=expected)


# ------------------------------------------------------------------ outputs as people paste them

#: A shell prompt line as pasted before (or after) a tool's output: ``user@host:~/dir$ cmd``,
#: ``(venv) user@host:~$``, ``[root@node045 ~]# cmd``, ``~$ cmd``, ``$ cmd``, and a root
#: ``# cmd`` only when the command is one of the tools read here (nccl-tests' own lines start
#: with ``# `` too).
_PROMPT_RE = re.compile(
    r"^\s*(?:\([\w.-]+\)\s*)?(?:"
    r"[\w.-]+@[\w.-]+(?::[^\s$#%>]*)?\s?[$#%>]"  # user@host:dir$
    r"|\[[\w.-]+@[\w.-]+(?: [^\]]*)?\][$#]"  # [user@host dir]#
    r"|[\w.~/-]*\$"  # ~$ or $ or dir$
    r"|#(?= +(?:sudo +)?(?:\S*/)?(?:ib_\w+|ibstat\w*|ibv_devinfo|nvidia-smi|dcgmi|lspci|dmesg"
    r"|journalctl|\w+_perf|gpu_burn|nvbandwidth|stream\w*|vllm)\b)"
    r")(?: +(?P<command>\S.*))?$"
)

#: Prefixes a log collector or launcher puts on every line, tried in order; each is stripped
#: only where it stands on most lines (see :func:`clean_paste`), never from one stray line.
_COLLECTOR_PREFIXES: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "a bracketed ISO timestamp",
        re.compile(r"^\[\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?\]:? ?"),
    ),
    (
        "an ISO timestamp",
        re.compile(r"^\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)? "),
    ),
    ("a 'host | ' label", re.compile(r"^[\w.-]+ *\| ")),
    # a host name has a digit, a dot or a hyphen ("node001", "gpu-a", "10.0.0.1"): "Error: "
    # on every line of a failure-only output is the tool's word, not a host
    ("a 'host: ' label", re.compile(r"^(?P<host>[A-Za-z_]*[\d.-][\w.-]*): ")),
)
#: Share of the non-blank lines that must carry a prefix for it to be a collector's.
_PREFIX_SHARE = 0.6
#: Terminal widths at which a paste may have been hard-wrapped (no tool read here prints lines
#: of exactly these widths as its own layout: nvidia-smi's are 79, 89 and 91 wide, dcgmi's 78).
_TERMINAL_WIDTHS = (80, 100, 120, 132, 160, 200)


@dataclass(frozen=True)
class Pasted:
    """Text as pasted, made readable: ``text`` has the same lines (a skipped line is left
    blank, so line numbers still point into what the user gave), ``warnings`` says what was
    skipped or removed and why."""

    text: str
    warnings: tuple[str, ...] = ()


def _strip_collector(lines: list[str], keep: frozenset[str]) -> tuple[list[str], list[str]]:
    """Remove each collector prefix of :data:`_COLLECTOR_PREFIXES` that stands on most
    non-blank lines (a ``host: `` label only when it names one host); prefixes named in
    ``keep`` are the tool's own and stay."""
    notes: list[str] = []
    for what, rx in _COLLECTOR_PREFIXES:
        if what in keep:
            continue
        body = [ln for ln in lines if ln.strip()]
        if not body:
            break
        hits = [rx.match(ln) for ln in body]
        hosts = {m.groupdict().get("host") for m in hits if m is not None}
        n = sum(m is not None for m in hits)
        if n == 0 or n < _PREFIX_SHARE * len(body) or len(hosts) > 1:
            continue
        if hosts != {None} and n < 2:
            # one "name: message" line is a program's own words ("nvidia-smi: error while
            # loading shared libraries"), not a collector's label
            continue
        lines = [rx.sub("", ln, count=1) for ln in lines]
        notes.append(f"removed {what} prefix from {n} line(s)")
    return lines, notes


def _same_layout(line: str, nxt: str) -> bool:
    """Whether two lines start as lines of one layout do: the same first 8 characters (a
    label, a row's indentation), or the same digit pattern there (``[  123.456]``,
    ``Dec 01 12:``: digits as ``9``, letters as ``a``)."""
    a, b = line[:8], nxt[:8]
    if a == b:
        return True
    shape_a = re.sub(r"\d", "9", re.sub(r"[A-Za-z]", "a", a))
    return "9" in shape_a and shape_a == re.sub(r"\d", "9", re.sub(r"[A-Za-z]", "a", b))


def _unwrap(lines: list[str]) -> tuple[list[str], list[str]]:
    """Undo a terminal's hard wrap: when the longest lines are exactly one terminal width, each
    such line is joined with the (non-blank) line after it; the continuation line is left
    blank so that line numbers keep pointing into the paste. A text where every such line is
    followed by one of the same layout (:func:`_same_layout`: a timestamp, a label, a row's
    indentation) is a layout whose longest lines happen to have that length, not a wrap, and
    stays as it is."""
    longest = max((len(ln) for ln in lines), default=0)
    if longest not in _TERMINAL_WIDTHS:
        return lines, []
    pairs = [(ln, nxt) for ln, nxt in zip(lines, lines[1:], strict=False) if len(ln) == longest and nxt.strip()]
    if not pairs or all(_same_layout(ln, nxt) for ln, nxt in pairs):
        return lines, []
    out = list(lines)
    joined = 0
    i = 0
    while i < len(out) - 1:
        j = i
        while j < len(out) - 1 and len(lines[j]) == longest and lines[j + 1].strip():
            out[i] += lines[j + 1]
            out[j + 1] = ""
            joined += 1
            j += 1
        i = j + 1
    return out, [f"joined {joined} line(s) wrapped at {longest} columns"] if joined else []


#: A mail reader's quote prefix (``> ``, nested ``> > ``).
_QUOTE_RE = re.compile(r"^>(?: ?>)* ?")
#: The widths a mail client wraps at (RFC 3676 format=flowed: 72 to 78 columns).
_MAIL_WIDTHS = (72, 78)
#: The shortest line a mail client's wrap leaves before its cut (three quarters of 72).
_MAIL_SHORTEST = 54
#: At most this many lines are joined into one.
_MAIL_PIECES = 4


def _unquote(lines: list[str]) -> tuple[list[str], list[str]]:
    """Remove a quoted reply's ``> `` prefix when it stands on every non-blank line."""
    body = [ln for ln in lines if ln.strip()]
    if not body or not all(_QUOTE_RE.match(ln) for ln in body):
        return lines, []
    out = [_QUOTE_RE.sub("", ln, count=1) for ln in lines]
    return out, [f"removed a '> ' mail quote prefix from {len(body)} line(s)"]


def _wrapped_at_mail_width(line: str, nxt: str) -> bool:
    """Whether a mail client that wraps on word boundaries at 72 to 78 columns may have cut
    ``line`` before ``nxt``: the line fits that width and fills most of it (the run of spaces
    at the cut is dropped, so a cut line of a table may end well before the width), and the
    next line has a word."""
    return bool(nxt.strip()) and _MAIL_SHORTEST <= len(line.rstrip()) <= _MAIL_WIDTHS[1]


def _rejoin_mail(
    lines: list[str], shape: re.Pattern[str], own: Callable[[str], bool] | None
) -> tuple[list[str], list[str]]:
    """Undo a mail client's wrap of the tool's long lines: a line cut on a word boundary at
    72 to 78 columns (:func:`_wrapped_at_mail_width`) is joined with the lines after it when the
    joined line has the tool's ``shape`` (a result row, a header), or is a failure line of the
    tool (``own``: its failure table) that the cut line alone is not, and the line cut off is
    neither a row by itself nor a failure line; the continuation lines are left blank.
    Ambiguous text stays as it is."""
    out = list(lines)
    joined: list[int] = []
    i = 0
    while i < len(out) - 1:
        head = out[i]
        if not head.strip() or shape.match(head):
            i += 1
            continue
        acc, j, done = head, i + 1, False
        while j < len(out) and j - i < _MAIL_PIECES:
            piece = out[j]
            if not _wrapped_at_mail_width(out[j - 1], piece):
                break
            if shape.match(piece) or (own is not None and own(piece)):
                break
            acc = f"{acc.rstrip()} {piece.strip()}"
            if shape.match(acc) or (own is not None and own(acc) and not own(head)):
                out[i] = acc
                for k in range(i + 1, j + 1):
                    out[k] = ""
                joined.append(i + 1)
                i, done = j + 1, True
                break
            j += 1
        if not done:
            i += 1
    if not joined:
        return lines, []
    where = ", ".join(map(str, joined))
    return out, [f"joined line(s) {where} with the line(s) after them (wrapped by a mail client)"]


#: A terminal escape sequence: CSI (``ESC [ ... m`` colours, cursor moves: ECMA-48 5.4), OSC
#: (``ESC ] ... BEL`` or ``ESC ] ... ESC \\``: titles, hyperlinks) or a two-character escape.
#: ``dmesg --color=always``, ``grep --color``, ``ls``, a pty under ``ssh -t``/``script``/tmux
#: print them; none is a tool's text.
_ANSI_RE = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)"  # OSC
    r"|\x1b[@-Z\\-_]"  # Fe two-character escape
    r"|\x9b[0-?]*[ -/]*[@-~]"  # 8-bit CSI
)


def _strip_ansi(text: str) -> tuple[str, list[str]]:
    """``text`` without terminal escape sequences (:data:`_ANSI_RE`), and a note saying how
    many lines had them (none when there were none)."""
    if "\x1b" not in text and "\x9b" not in text:
        return text, []
    n = sum(1 for ln in text.split("\n") if _ANSI_RE.search(ln))
    if not n:
        return text, []
    return _ANSI_RE.sub("", text), [f"removed terminal colour/escape codes from {n} line(s)"]


def clean_paste(
    text: str,
    *,
    keep: frozenset[str] = frozenset(),
    shape: re.Pattern[str] | None = None,
    own: Callable[[str], bool] | None = None,
) -> Pasted:
    """Undo what pasting did to a tool's output, keeping the line count.

    - terminal escape sequences (ANSI colours of ``dmesg --color=always``, ``grep --color``,
      a pty's cursor moves: :data:`_ANSI_RE`) are removed, so every parser reads coloured
      output as it reads plain output;
    - ``\r\n`` and lone ``\r`` line ends become ``\n``;
    - lines a terminal hard-wrapped at its width (80, 100, 120, 132, 160 or 200 columns) are
      joined again (:func:`_unwrap`; the continuation line left blank);
    - a shell prompt line (``user@host:~$ ./all_reduce_perf ...``, ``[root@node ~]# ibstat``,
      ``$ dcgmi diag -r 3``) becomes ``$ <command>`` (the parsers that read the command line
      find it there), or a blank line when no command follows the prompt;
    - a log collector's per-line prefix (``[2026-12-01T10:00:00Z] ``, an ISO timestamp,
      ``host | ``, one ``host: `` label) is removed where it stands on most lines; ``keep``
      names prefixes that are the tool's own (dmesg's ISO timestamps).

    - a mail reader's ``> `` quote prefix is removed when it stands on every non-blank line;
    - with ``shape`` (the tool's whole row or header, the module's ``WRAPPED_SHAPE``), lines a
      mail client wrapped on a word boundary at 72 to 78 columns are joined back where the
      joined line has that shape or is a failure line (``own``) and the rest is neither
      (:func:`_rejoin_mail`; the continuation lines left blank).

    Markdown code fences (```` ``` ````) around the output are left blank too. Pure; raises
    nothing.
    """
    text, colours = _strip_ansi(text)
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    lines, warnings = _unquote(lines)
    warnings = colours + warnings
    lines, notes = _unwrap(lines)
    warnings += notes
    lines, notes = _strip_collector(lines, keep)
    warnings += notes
    prompts: list[int] = []
    fences: list[int] = []
    for i, ln in enumerate(lines):
        pm = _PROMPT_RE.match(ln)
        if pm:
            prompts.append(i + 1)
            lines[i] = f"$ {pm.group('command')}" if pm.group("command") else ""
        elif ln.strip().startswith("```"):
            fences.append(i + 1)
            lines[i] = ""
    if prompts:
        warnings.append(f"read line(s) {', '.join(map(str, prompts))} as a shell prompt (only its command kept)")
    if fences:
        warnings.append(f"skipped markdown fence line(s) {', '.join(map(str, fences))}")
    if shape is not None:
        lines, notes = _rejoin_mail(lines, shape, own)
        warnings += notes
    return Pasted("\n".join(lines), tuple(warnings))


#: A word of a sentence: letters, an apostrophe or hyphen inside, punctuation after.
_WORD_RE = re.compile(r"^[(\"']?[A-Za-z][A-Za-z'-]*[,.;:?!)\"']*$")
#: The fewest words a line needs to read as a sentence, and the share of its tokens they are.
_SENTENCE_WORDS, _SENTENCE_SHARE = 6, 0.75
#: At most this many sentence-like lines are tried per parse (each costs one parse).
_UNREAD_TRIES = 24
#: At most this many unread lines are named one by one; the rest are counted.
_UNREAD_NAMED = 3


#: A labelled line: ``NVRM: ...``, ``NOTE: ...``, ``Flags: ...``, ``NODE = ...`` (a tool's).
_LABEL_RE = re.compile(r"^[\w.#/()-]+(?: [\w.#/()-]+){0,2} ?[:=] ")
#: A launcher's banner sentence (Open MPI's abort and peer-lost banners, around any tool's
#: output): the launcher's words, not a poster's.
_LAUNCHER_SENTENCE_RE = re.compile(
    r"MPI|mpirun|non-zero (?:exit code|status)|the job (?:has been|to be)|peer process"
    r"|behave unpredictably|hang or crash|first process to do so"
)


#: A poster's mark of lines left out: ``[... 40 lines snipped ...]``, ``....``, ``...``, ``…``.
_ELISION_RE = re.compile(r"^\s*(?:\[\s*(?:\.\.\.|…)[^\]]*\]|\.{3,}|…|<snip(?:ped)?>|\[snip(?:ped)?\])\s*$")


def is_sentence(line: str) -> bool:
    """Whether ``line`` reads as a person's sentence rather than a tool's line: six or more
    words, most of its tokens plain words, not indented, single spaces only (tools align their
    columns and key/value pairs with runs of spaces or tabs), no label (``NVRM: ``)."""
    if line[:1].isspace():
        return False
    s = line.strip()
    if "  " in s or "\t" in s or s[:1] in '#|[<{+-="' or _LABEL_RE.match(s):
        return False
    tokens = s.split(" ")
    words = sum(1 for t in tokens if _WORD_RE.match(t))
    if _LAUNCHER_SENTENCE_RE.search(s):
        return False
    return words >= _SENTENCE_WORDS and words >= _SENTENCE_SHARE * len(tokens)


def _excerpt(line: str, width: int = 40) -> str:
    s = line.strip()
    return repr(s if len(s) <= width else s[: width - 3] + "...")


def skipped_lines(lines: Sequence[tuple[int, str]], why: str) -> tuple[str, ...]:
    """The warnings for lines a parser did not read (``(line_number, line)``, in order): each
    of the first few named with its number and an excerpt, the rest counted; ``why`` says why
    they were not read. Empty for no lines."""
    named = [f"line {no} not read ({why}): {_excerpt(ln)}" for no, ln in lines[:_UNREAD_NAMED]]
    rest = len(lines) - len(named)
    if rest > 0:
        more = ", ".join(str(no) for no, _ in lines[_UNREAD_NAMED:])
        named.append(f"{rest} more line(s) not read ({why}): line(s) {more}")
    return tuple(named)


def _shape(value: Any) -> Any:
    """``value`` (a record) as plain data for comparing two readings: its ``warnings`` and the
    count of lines read left out, mappings and sequences compared by content."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return tuple(
            (f.name, _shape(getattr(value, f.name))) for f in dataclasses.fields(value) if f.name != "warnings"
        )
    if isinstance(value, Mapping):
        return tuple(sorted((str(k), _shape(v)) for k, v in value.items() if k != "lines"))
    if isinstance(value, (list, tuple)):
        return tuple(_shape(v) for v in value)
    return value


def unread_lines(
    text: str,
    parse: Callable[[str], object],
    record: object,
    own: re.Pattern[str] | None = None,
) -> tuple[str, ...]:
    """The warnings for the lines of ``text`` that read as a person's sentence (a poster's own
    words inside the paste) or a poster's mark of lines left out (``[... snipped ...]``,
    ``....``), and that ``parse`` did not read: the reading of the text with that
    line left blank is the same as ``record``'s (warnings and line counts aside). A line whose
    removal changes the reading, or makes it unreadable, was the tool's. The tool's own lines
    (rows, key/value pairs, indented lines, and the sentences ``own`` matches: the module's
    ``OWN_SENTENCES``) are never named; a few sentence-like lines
    are tried at most (one parse each). Raises nothing."""
    lines = text.split("\n")
    base: Any = None
    unread: list[tuple[int, str]] = []
    elided: list[tuple[int, str]] = []
    tries = 0
    for i, ln in enumerate(lines):
        if tries >= _UNREAD_TRIES:
            break
        elision = _ELISION_RE.match(ln) is not None
        if not (elision or is_sentence(ln)) or (own is not None and own.search(ln)):
            continue
        tries += 1
        if base is None:
            base = _shape(record)
        trial = [*lines[:i], "", *lines[i + 1 :]]
        try:
            other = parse("\n".join(trial))
        except ParseError:
            continue
        if _shape(other) == base:
            (elided if elision else unread).append((i + 1, ln))
    return (
        *skipped_lines(unread, "not the tool's"),
        *skipped_lines(elided, "the poster's mark of lines left out"),
    )


RecordT = TypeVar("RecordT")


def as_pasted(
    parse: Callable[[str], RecordT],
    *,
    keep: frozenset[str] = frozenset(),
    own: re.Pattern[str] | None = None,
    shape: re.Pattern[str] | None = None,
    failure: Callable[[str], object] | None = None,
) -> Callable[[str], RecordT]:
    """``parse`` made to read a pasted output (:func:`clean_paste`): the record gets the
    paste's warnings first in its ``warnings``, then the lines it did not read
    (:func:`unread_lines`: a poster's sentence or mark of lines left out inside the output;
    ``own`` matches the tool's own sentences, which are not named). ``shape`` and ``failure``
    (the tool's :meth:`FailureTable.match`) let :func:`clean_paste` join rows a mail client
    wrapped. Raises what ``parse`` raises."""

    @functools.wraps(parse)
    def inner(text: str) -> RecordT:
        tools_line = None if failure is None else (lambda ln: failure(ln) is not None)
        pasted = clean_paste(text, keep=keep, shape=shape, own=tools_line)
        record = parse(pasted.text)
        if not hasattr(record, "warnings"):
            return record
        said = (*pasted.warnings, *unread_lines(pasted.text, parse, record, own))
        if said:
            old = tuple(record.warnings or ())
            record = dataclasses.replace(record, warnings=(*said, *old))  # type: ignore[type-var]
        return record

    return inner
