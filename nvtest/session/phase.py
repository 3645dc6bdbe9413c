"""The phase runner: one check's probe on all its target nodes at once.

A check is a phase, not a loop: the first pytest item of a check that asks for
its probe's output runs the probe on every target node concurrently through the
transport, keeps each node's :class:`CommandResult` as evidence under
``logs/<node>/<check>.log``, and caches the results; the check's other items
(one per node) read their node's result from the cache.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from nvtest.config.inventory import Node
from nvtest.transports.base import Command, CommandResult, Transport, render_command

__all__ = ["Hang", "PhaseRunner", "write_evidence"]


@dataclass(frozen=True)
class Hang:
    """A tool or device that hung on a node: the phase whose deadline it ran past.

    Attributes:
        need: the tool (``nvidia-smi``) or device (``gpu``) that hung.
        key: the phase (check) that timed out.
        error: that command's error (``timed out after 120 s; ...``).
    """

    need: str
    key: str
    error: str

    def blocked_message(self) -> str:
        """The error of a later command on the node that needs the same tool or device."""
        why = self.error if len(self.error) <= 240 else self.error[:237] + "..."
        return f"blocked: {self.need} hung on this node in {self.key} ({why}); not started"


def _safe(name: str, limit: int = 120) -> str:
    """A file-name-safe form of ``name``; long names are cut and tagged with a hash."""
    safe = "".join(c if c.isalnum() or c in "-_.@+" else "_" for c in name).lstrip(".") or "_"
    if len(safe) > limit:
        import hashlib

        safe = f"{safe[: limit - 13]}-{hashlib.sha1(name.encode()).hexdigest()[:12]}"
    return safe


def write_evidence(run_dir: Path, check: str, result: CommandResult) -> str:
    """Write one node's raw evidence; return its path relative to ``run_dir``.

    Layout: ``logs/<node>/<check>.log``: a header (command, exit code, duration,
    error), then stdout, then stderr, each under its own banner.
    """
    rel = Path("logs") / _safe(result.node) / f"{_safe(check)}.log"
    path = run_dir / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    header = [
        f"# node:      {result.node}",
        f"# check:     {check}",
        f"# command:   {result.command}",
        f"# exit code: {result.exit_code if result.exit_code is not None else 'none'}",
        f"# duration:  {result.duration_s:.3f} s",
    ]
    if result.error:
        header.append(f"# error:     {result.error}")
    body = "\n".join(header) + "\n\n===== stdout =====\n" + result.stdout
    if not body.endswith("\n"):
        body += "\n"
    body += "\n===== stderr =====\n" + result.stderr
    with path.open("a", encoding="utf-8") as fh:
        fh.write(body + ("\n" if not body.endswith("\n") else ""))
    return str(rel)


class PhaseRunner:
    """Runs and caches one command per (key, node) over a transport.

    Thread-safe: a second caller of the same key waits for the first.

    A hang blocks: when a phase's command runs past its deadline on a node (a timeout, or
    an unkillable process), each tool and device the phase ``needs`` is marked hung on that
    node, and a later phase there that needs one of them is not started: its result is a
    ``blocked`` error naming the phase that hung, at once, instead of waiting out its own
    timeout.
    """

    def __init__(self, transport: Transport, run_dir: Path) -> None:
        self.transport = transport
        self.run_dir = run_dir
        self._cache: dict[str, dict[str, CommandResult]] = {}
        self._logs: dict[tuple[str, str], str] = {}
        self._lock = threading.Lock()
        self._key_locks: dict[str, threading.Lock] = {}
        self._hung: dict[str, dict[str, Hang]] = {}

    def run(
        self,
        key: str,
        nodes: Sequence[Node],
        command: Callable[[Node], Command],
        *,
        timeout_s: float,
        env: Mapping[str, str] | None = None,
        needs: Sequence[str] = (),
    ) -> dict[str, CommandResult]:
        """Run ``command(node)`` on every node of ``nodes`` at once (first call),
        or return the cached results of ``key``.

        ``needs``: the tools and devices the command needs (see the class text): a node
        where one of them hung gets a ``blocked`` result without running anything, and a
        node where this command runs past its deadline marks them all hung.

        Returns node name -> CommandResult. Evidence is written as it arrives.
        """
        with self._lock:
            lock = self._key_locks.setdefault(key, threading.Lock())
        with lock:
            if key in self._cache:
                return self._cache[key]
            commands = {n.name: command(n) for n in nodes}
            blocked = {n.name: hang for n in nodes if (hang := self.blocking(n.name, needs))}
            live = [n for n in nodes if n.name not in blocked]
            results = (
                self.transport.run(live, {n.name: commands[n.name] for n in live}, timeout_s=timeout_s, env=env)
                if live
                else {}
            )
            for name, hang in blocked.items():
                results[name] = CommandResult(
                    node=name,
                    command=render_command(commands[name], env),
                    error=hang.blocked_message(),
                    failure="blocked",
                )
            for name, res in results.items():
                if res.failure in ("timeout", "unkillable"):
                    self._mark_hung(name, key, needs, res)
                self._logs[(key, name)] = write_evidence(self.run_dir, key, res)
            self._cache[key] = results
            return results

    def blocking(self, node: str, needs: Sequence[str]) -> Hang | None:
        """The hang on ``node`` of one of ``needs`` (the first that hung), or None."""
        with self._lock:
            hung = self._hung.get(node, {})
            found = [hung[n] for n in needs if n in hung]
        return found[0] if found else None

    def hangs(self, node: str) -> list[Hang]:
        """What hung on ``node`` so far, in the order it was marked."""
        with self._lock:
            return list(self._hung.get(node, {}).values())

    def _mark_hung(self, node: str, key: str, needs: Sequence[str], res: CommandResult) -> None:
        error = res.error or "timed out"
        with self._lock:
            marks = self._hung.setdefault(node, {})
            for need in needs:
                marks.setdefault(need, Hang(need, key, error))

    def log_path(self, key: str, node: str) -> str | None:
        """The evidence path (relative to the run dir) of ``key`` on ``node``."""
        return self._logs.get((key, node))

    def cached(self, key: str) -> dict[str, CommandResult] | None:
        return self._cache.get(key)
