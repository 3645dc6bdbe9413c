"""Helpers shared by the parsers: value states, prefix stripping, line iteration, numbers.

Nothing here knows about a particular tool's format; each helper is used by at least
two parsers. All functions are pure and raise only :class:`~nvtest.errors.ParseError`.
"""

from __future__ import annotations

import enum
import functools
import re
from collections.abc import Callable, Iterator
from typing import TypeVar

from nvtest.errors import ParseError

__all__ = [
    "ParseError",
    "ValueState",
    "Reading",
    "guarded",
    "lost_gpu",
    "numbered_lines",
    "parse_state",
    "reading",
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
    r"Unable to determine the device handle for (?:GPU\s*)?([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.?\d?)"
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
