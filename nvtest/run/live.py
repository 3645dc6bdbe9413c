"""The live progress view of a run: rich on a terminal, plain lines otherwise (CI logs).

Shows the current check, items done out of total, and verdict counts so far.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.live import Live
from rich.table import Table

if TYPE_CHECKING:
    from nvtest.session.context import RunContext

__all__ = ["make_progress"]

_COLORS = {"pass": "green", "warn": "yellow", "fail": "red", "error": "magenta", "skip": "dim"}


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

    def finish(self, doc: dict[str, Any]) -> None:
        pass


class _Silent(_Base):
    pass


class _Plain(_Base):
    """One line per result (and per run event) on stderr-free stdout."""

    def __init__(self, ctx: RunContext) -> None:
        super().__init__(ctx)
        self.out = sys.stdout

    def update(self, kind: str, payload: dict[str, Any]) -> None:
        if kind == "phase":
            print(f"[nvtest] {payload['check']}: running on {payload['nodes']} node(s)", file=self.out, flush=True)
        elif kind == "result":
            reason = f"  {payload['reason'][:160]}" if payload.get("reason") else ""
            print(
                f"[nvtest] {self.done}/{self.total} {payload['verdict'].upper():5} {payload['check']}[{payload['node']}]{reason}",
                file=self.out,
                flush=True,
            )


class _Live(_Base):
    """A rich table updated in place."""

    def __init__(self, ctx: RunContext) -> None:
        super().__init__(ctx)
        self.console = Console()
        self.live: Live | None = None
        self.last: list[tuple[str, str, str, str]] = []

    def start(self, total: int) -> None:
        super().start(total)
        self.live = Live(self._render(), console=self.console, refresh_per_second=4, transient=False)
        self.live.start()

    def _render(self) -> Table:
        t = Table(title=f"nvtest {self.ctx.config.run_id}  ({self.ctx.config.suite}, {len(self.ctx.nodes)} node(s))")
        t.add_column("progress")
        t.add_column("current check")
        for k in _COLORS:
            t.add_column(k, style=_COLORS[k], justify="right")
        t.add_row(f"{self.done}/{self.total}", self.current, *[str(self.counts[k]) for k in _COLORS])
        for check, node, verdict, reason in self.last[-6:]:
            t.add_row("", f"{check}[{node}]", f"[{_COLORS.get(verdict, '')}]{verdict}[/]", reason[:60], "", "", "")
        return t

    def update(self, kind: str, payload: dict[str, Any]) -> None:
        if kind == "result" and payload["verdict"] in ("fail", "error", "warn"):
            self.last.append((payload["check"], payload["node"], payload["verdict"], payload.get("reason") or ""))
        if self.live is not None:
            self.live.update(self._render())

    def finish(self, doc: dict[str, Any]) -> None:
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
