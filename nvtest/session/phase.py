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
from pathlib import Path

from nvtest.config.inventory import Node
from nvtest.transports.base import Command, CommandResult, Transport

__all__ = ["PhaseRunner", "write_evidence"]


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
    """

    def __init__(self, transport: Transport, run_dir: Path) -> None:
        self.transport = transport
        self.run_dir = run_dir
        self._cache: dict[str, dict[str, CommandResult]] = {}
        self._logs: dict[tuple[str, str], str] = {}
        self._envs: dict[str, dict[str, str]] = {}
        self._lock = threading.Lock()
        self._key_locks: dict[str, threading.Lock] = {}

    def run(
        self,
        key: str,
        nodes: Sequence[Node],
        command: Callable[[Node], Command],
        *,
        timeout_s: float,
        env: Mapping[str, str] | None = None,
    ) -> dict[str, CommandResult]:
        """Run ``command(node)`` on every node of ``nodes`` at once (first call),
        or return the cached results of ``key``.

        Returns node name -> CommandResult. Evidence is written as it arrives.
        """
        with self._lock:
            lock = self._key_locks.setdefault(key, threading.Lock())
        with lock:
            if key in self._cache:
                return self._cache[key]
            commands = {n.name: command(n) for n in nodes}
            results = self.transport.run(nodes, commands, timeout_s=timeout_s, env=env) if nodes else {}
            for name, res in results.items():
                self._logs[(key, name)] = write_evidence(self.run_dir, key, res)
                self._envs[self._logs[(key, name)]] = dict(env or {})
            self._cache[key] = results
            return results

    def log_path(self, key: str, node: str) -> str | None:
        """The evidence path (relative to the run dir) of ``key`` on ``node``."""
        return self._logs.get((key, node))

    def env_of(self, log: str | None) -> dict[str, str] | None:
        """The environment the harness gave the command whose evidence is ``log`` (None: unknown)."""
        return self._envs.get(log) if log else None

    def cached(self, key: str) -> dict[str, CommandResult] | None:
        return self._cache.get(key)
