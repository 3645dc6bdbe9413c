"""Untrusted text made safe to show: a tool's words reach consoles, Slurm and files as seen.

A node's tool can print anything: terminal escape sequences (``ESC [2J`` clears the
operator's screen, ``ESC ]0;...BEL`` retitles the window), carriage returns that overwrite
a line, bytes an XML file may not hold. Every sink of nvtest (the consoles, Slurm drain
reasons, results.csv, junit.xml, report.html, the gate's summary) shows such text through
:func:`visible`, which writes each control character as a Python-style escape: ``ESC`` as
``\\x1b``, ``BEL`` as ``\\x07``, ``CR`` as ``\\r``. Newline and tab are kept (a log is
lines); :func:`one_line` also folds those, for a Slurm reason or a summary line.

Shown as escapes: C0 controls (U+0000-U+001F but newline and tab), DEL (U+007F), C1
controls (U+0080-U+009F: U+009B is a one-character CSI on some terminals), Unicode's bidi
embedding, override and isolate controls (U+202A-U+202E, U+2066-U+2069: text shown in
another order than it is stored), the line and paragraph separators (U+2028, U+2029), the
noncharacters U+FFFE and U+FFFF and lone surrogates (neither may appear in XML).
"""

from __future__ import annotations

__all__ = ["has_controls", "last_words", "one_line", "visible", "visible_value"]

_NAMED = {0x0D: "\\r", 0x0B: "\\x0b", 0x0C: "\\x0c"}


def _escape(cp: int) -> str:
    if cp in _NAMED:
        return _NAMED[cp]
    return f"\\x{cp:02x}" if cp < 0x100 else f"\\u{cp:04x}"


_CODES = (
    [cp for cp in range(0x20) if cp not in (0x09, 0x0A)]
    + [0x7F, *range(0x80, 0xA0), *range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x2028, 0x2029, 0xFFFE, 0xFFFF]
    + list(range(0xD800, 0xE000))
)
_TABLE = {cp: _escape(cp) for cp in _CODES}
_LINE_TABLE = {**_TABLE, 0x0A: " ", 0x09: " "}
_CODE_SET = frozenset(chr(cp) for cp in _CODES)


def has_controls(text: str) -> bool:
    """Whether ``text`` holds a character :func:`visible` would escape."""
    return not _CODE_SET.isdisjoint(text)


def visible(text: str) -> str:
    """``text`` with every control character (see the module doc) written as an escape;
    newline and tab kept. Idempotent: its output has nothing left to escape."""
    return text.translate(_TABLE)


def visible_value(value: object) -> object:
    """:func:`visible` of a string (a markupsafe ``Markup`` stays ``Markup``), any other value
    as it is: the ``finalize`` of nvtest's jinja2 environments, so every ``{{ value }}`` of a
    report is shown, not obeyed."""
    return visible(value) if isinstance(value, str) else value


def one_line(text: str, limit: int | None = None) -> str:
    """``text`` as :func:`visible` on one line (newline and tab as a space), at most ``limit``
    characters (None: all of it)."""
    line = text.translate(_LINE_TABLE)
    return line if limit is None else line[:limit]


def last_words(stdout: str, stderr: str = "", lines: int = 3, limit: int = 300) -> str:
    """A tool's last ``lines`` non-blank lines of stdout then stderr, stripped and joined with
    `` / `` (where a tool that stops says why: nvbandwidth's ``[CUDA_ERROR_...]``, a launcher's
    abort), the last ``limit`` characters of them; ``no output`` when it printed nothing."""
    said = [ln.strip() for ln in (stdout + "\n" + stderr).splitlines() if ln.strip()]
    return " / ".join(said[-lines:])[-limit:] or "no output"
