"""Terminal output: consoles that print data as it is, and tables readable in a pipe.

Every console of nvtest comes from :func:`make_console`: rich's markup (``[red]``),
emoji codes (``:ab:``) and highlighting are off, so a node name, a PCI bus id
(``0000:ab:00.0``), a tool's message or a path is printed character for character.
Styles are given as :class:`rich.text.Text` styles, never as markup inside a string.
A tool's control characters are shown, never obeyed: every string and every segment the
console prints goes through :func:`nvtest.text.visible` (``ESC [2J`` is printed as
``\\x1b[2J``, it does not clear the operator's screen).

:func:`print_table` draws a rich table on a terminal; in a pipe or a CI log (not a
terminal) it prints plain text that never cuts a word: aligned columns when they fit
the width (``COLUMNS``, else 80), the last column wrapped at word boundaries under
itself; when even that does not fit, one block per row (``header: value`` lines).
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterable, Sequence
from typing import Any

from rich.console import Console, ConsoleOptions, RenderableType
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

from nvtest.text import has_controls, visible

__all__ = ["VisibleConsole", "fmt_counts", "make_console", "plain_table", "print_table", "wrap_text"]

#: Columns of a plain table below which the last column is not wrapped beside the others.
_MIN_LAST = 24


class VisibleConsole(Console):
    """A rich console that prints control characters as escapes (:func:`nvtest.text.visible`):
    strings before layout, and any segment of data that still holds one (a
    :class:`~rich.text.Text` built from a tool's words). rich's own control segments (the
    live view's cursor moves) and styles are untouched."""

    def render_str(self, text: str, **kwargs: Any) -> Text:
        return super().render_str(visible(text), **kwargs)

    def render(self, renderable: RenderableType, options: ConsoleOptions | None = None) -> Iterable[Segment]:
        for seg in super().render(renderable, options):
            if seg.control is None and has_controls(seg.text):
                yield Segment(visible(seg.text), seg.style)
            else:
                yield seg


def make_console(*, stderr: bool = False, **options: Any) -> Console:
    """A :class:`rich.console.Console` that never interprets what it prints.

    ``soft_wrap``: long lines are not broken by rich (a terminal or a log viewer wraps
    them; nothing is cut). ``options`` go to the Console (``file``, ``width``,
    ``force_terminal`` ... for tests); markup, emoji and highlighting stay off.
    """
    for key in ("markup", "emoji", "highlight"):
        if options.pop(key, False):
            raise ValueError(f"{key} is never turned on for nvtest's output")
    options.setdefault("soft_wrap", True)
    return VisibleConsole(stderr=stderr, markup=False, emoji=False, highlight=False, **options)


def fmt_counts(counts: dict[str, int] | dict[str, Any], empty: str = "none") -> str:
    """``{"H100": 3, None: 1}`` -> ``H100 (3), none (1)`` (a count per name, no Python repr)."""
    parts = [f"{'none' if k in (None, 'None', '') else k} ({v})" for k, v in counts.items()]
    return ", ".join(parts) or empty


def print_table(
    console: Console,
    headers: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    title: str | None = None,
    styles: Sequence[str | None] | None = None,
) -> None:
    """Print ``rows`` under ``headers`` (see the module text for the two layouts).

    ``styles``: a rich style per column for the terminal table (None: plain). A cell
    is printed as text (``str(cell)``; None as empty); a :class:`rich.text.Text` cell
    keeps its style on a terminal.
    """
    cells = [["" if c is None else (c.plain if isinstance(c, Text) else str(c)) for c in row] for row in rows]
    if console.is_terminal:
        t = Table(title=title)
        for i, h in enumerate(headers):
            t.add_column(h, style=(styles[i] if styles else None) or "", overflow="fold")
        for row, texts in zip(rows, cells, strict=True):
            t.add_row(*(c if isinstance(c, Text) else Text(s) for c, s in zip(row, texts, strict=True)))
        console.print(t)
        return
    for line in plain_table(headers, cells, width=console.width, title=title):
        console.print(line, soft_wrap=True)


def plain_table(
    headers: Sequence[str], rows: Sequence[Sequence[str]], *, width: int = 80, title: str | None = None
) -> list[str]:
    """The plain text lines of a table for a pipe (:func:`print_table`), ``width`` columns."""
    out = [title] if title else []
    n = len(headers)
    widths = [max([len(headers[i]), *(len(r[i]) for r in rows)]) for i in range(n)]
    fixed = sum(widths[:-1]) + 2 * (n - 1)
    if fixed + widths[-1] <= width or (n > 1 and width - fixed >= _MIN_LAST):
        last = max(len(headers[-1]), width - fixed) if n > 1 else width
        for row in [list(headers), ["-" * len(h) for h in headers], *rows]:
            head = "  ".join(row[i].ljust(widths[i]) for i in range(n - 1))
            lines = wrap_text(row[-1], last) if n > 1 else wrap_text(row[0], width)
            pad = " " * (fixed if n > 1 else 0)
            out.append(f"{head}{'  ' if n > 1 else ''}{lines[0]}".rstrip())
            out.extend(f"{pad}{more}".rstrip() for more in lines[1:])
        return out
    for row in rows:  # one block per row: the first cell, then "header: value" lines
        out.append(row[0])
        for h, c in zip(headers[1:], row[1:], strict=False):
            if c:
                out.extend(wrap_text(f"{h}: {c}", width - 2, indent="  ", more="      "))
    return out


def wrap_text(text: str, width: int, *, indent: str = "", more: str = "") -> list[str]:
    """``text`` in lines of at most ``width`` characters, broken between words only
    (a word longer than the line stays whole)."""
    if not text:
        return [indent.rstrip()] if indent else [""]
    lines = textwrap.wrap(
        text,
        width=max(10, width),
        initial_indent=indent,
        subsequent_indent=more or indent,
        break_long_words=False,
        break_on_hyphens=False,
    )
    return lines or [""]
