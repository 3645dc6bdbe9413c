"""Telling a tool's text output from binary data, for the parsers' entry point.

A lenient parser (dmesg, a key=value reader) reads almost anything without an error,
so binary data would parse as a clean log: :func:`nvtest.parsers.parse` and
:func:`nvtest.parsers.detect` refuse it first, for every tool.
"""

from __future__ import annotations

__all__ = ["binary_reason"]

#: Control characters a tool's text output may carry (tab, newlines, form feed, vertical tab,
#: backspace, bell, and ESC of ANSI colours); any other C0 character is not text.
_TEXT_CONTROLS = frozenset("\t\n\r\f\v\b\a\x1b")
#: Share of characters that may be undecodable (U+FFFD) or control characters in text.
_MAX_NON_TEXT = 0.05


def binary_reason(text: str) -> str | None:
    """Why ``text`` is not a tool's text output (a NUL character, or more than 5 % of it
    undecodable bytes and control characters), or None when it reads as text.

    ``text`` is the file or stream decoded as UTF-8 with ``errors="replace"``.
    """
    nul = text.find("\x00")
    if nul >= 0:
        return f"binary data: a NUL byte at character {nul}"
    if not text:
        return None
    odd = sum(1 for ch in text if ch == "\ufffd" or (ch < " " and ch not in _TEXT_CONTROLS) or ch == "\x7f")
    if odd > _MAX_NON_TEXT * len(text):
        return f"binary data: {100 * odd / len(text):.0f}% of it is undecodable bytes or control characters"
    return None
