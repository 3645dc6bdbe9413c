"""The live progress view of a run: rich on a terminal, plain lines otherwise (CI logs).

Shows the current check, items done out of total, verdict counts so far, the latest
items that did not pass, and every run warning (a changed host key accepted, a node
with no SKU profile) the moment it is known. Data strings (node names, PCI bus ids,
tools' words) are printed as they are: no markup, no emoji codes
(:func:`nvtest.report.console.make_console`).
"""

from __future__ import annotations

import sys
import textwrap
import threading
from typing import TYPE_CHECKING, Any, TextIO

from rich.console import Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from nvtest.report.console import make_console
from nvtest.text import visible

if TYPE_CHECKING:
    from nvtest.session.context import RunContext

__all__ = ["make_progress", "short"]

_COLORS = {"pass": "green", "warn": "yellow", "fail": "red", "error": "magenta", "skip": "dim"}


def short(text: str, width: int) -> str:
    """``text`` on one line of at most ``width`` characters, cut between words (`` ...``)."""
    one = " ".join(str(text).split())
    if len(one) <= width:
        return one
    return textwrap.shorten(one, width=width, placeholder=" ...") or one[: max(0, width - 4)] + " ..."


class _Base:
    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx
        self.total = 0
        self.done = 0
        self.counts = {k: 0 for k in _COLORS}
        self.current = ""

    def start(self, total: int) -> None:
        self.total = total

    def on_event(self, kind: str, payload: dict[str, Any]) -> None:
        if kind == "result":
            self.done += 1
            self.counts[payload["verdict"]] = self.counts.get(payload["verdict"], 0) + 1
            self.current = payload["check"]
        elif kind == "phase":
            self.current = payload["check"]
        self.update(kind, payload)

    def update(self, kind: str, payload: dict[str, Any]) -> None:  # pragma: no cover - overridden
        pass

    def finish(self, doc: dict[str, Any] | None) -> None:
        pass

    def note(self, text: str) -> None:
        """A line from the harness itself (a stop signal received), printed at once."""


class _Silent(_Base):
    pass


class _Plain(_Base):
    """One line per result, per phase and per run warning, on stdout (each written whole)."""

    def __init__(self, ctx: RunContext, out: TextIO | None = None) -> None:
        super().__init__(ctx)
        self.out = out or sys.stdout
        self._lock = threading.Lock()  # warnings come from the transport's threads

    def _line(self, text: str) -> None:
        with self._lock:
            self.out.write(visible(text) + "\n")
            self.out.flush()

    def update(self, kind: str, payload: dict[str, Any]) -> None:
        if kind == "phase":
            self._line(f"[nvtest] {payload['check']}: running on {payload['nodes']} node(s)")
        elif kind == "result":
            reason = f"  {short(payload['reason'], 160)}" if payload.get("reason") else ""
            verdict = payload["verdict"].upper()
            self._line(f"[nvtest] {self.done}/{self.total} {verdict:5} {payload['check']}[{payload['node']}]{reason}")
        elif kind == "warning":
            self._line(f"[nvtest] warning: {' '.join(str(payload['message']).split())}")

    def note(self, text: str) -> None:
        self._line(f"[nvtest] {text}")


class _Live(_Base):
    """A rich table updated in place; warnings printed above it as they come."""

    def __init__(self, ctx: RunContext) -> None:
        super().__init__(ctx)
        self.console = make_console()
        self.live: Live | None = None
        self.last: list[tuple[str, str, str, str]] = []

    def start(self, total: int) -> None:
        super().start(total)
        self.live = Live(self._render(), console=self.console, refresh_per_second=4, transient=False)
        self.live.start()

    def _render(self) -> Group:
        cfg = self.ctx.config
        t = Table(title=Text(f"nvtest {cfg.run_id}  ({cfg.suite}, {len(self.ctx.nodes)} node(s))"))
        t.add_column("progress")
        t.add_column("current check", overflow="fold")
        for k in _COLORS:
            t.add_column(k, style=_COLORS[k], justify="right")
        t.add_row(f"{self.done}/{self.total}", Text(self.current), *[str(self.counts[k]) for k in _COLORS])
        if not self.last:
            return Group(t)
        recent = Table(show_header=False, box=None, pad_edge=False)
        recent.add_column("verdict")
        recent.add_column("item", overflow="fold")
        recent.add_column("reason", overflow="fold")
        for check, node, verdict, reason in self.last[-6:]:
            recent.add_row(
                Text(verdict, style=_COLORS.get(verdict, "")), Text(f"{check}[{node}]"), Text(short(reason, 100))
            )
        return Group(t, recent)

    def update(self, kind: str, payload: dict[str, Any]) -> None:
        if kind == "result" and payload["verdict"] in ("fail", "error", "warn"):
            self.last.append((payload["check"], payload["node"], payload["verdict"], payload.get("reason") or ""))
            del self.last[:-6]
        if kind == "warning":
            self.console.print(Text(f"warning: {payload['message']}", style="yellow"))
        if self.live is not None:
            self.live.update(self._render())

    def note(self, text: str) -> None:
        self.console.print(Text(text, style="bold"))

    def finish(self, doc: dict[str, Any] | None) -> None:
        if self.live is not None:
            self.live.update(self._render())
            self.live.stop()


def make_progress(mode: str, ctx: RunContext) -> _Base:
    """``auto``: live on a terminal, plain otherwise; ``live``, ``plain``, ``none``."""
    if mode == "none":
        return _Silent(ctx)
    if mode == "live" or (mode == "auto" and sys.stdout.isatty()):
        return _Live(ctx)
    return _Plain(ctx)
