"""The phase runner: one check's probe on all its target nodes at once.

A check is a phase, not a loop: the first pytest item of a check that asks for
its probe's output runs the probe on every target node concurrently through the
transport, keeps each node's :class:`CommandResult` as evidence under
``logs/<node>/<check>.log``, and caches the results; the check's other items
(one per node) read their node's result from the cache.
"""

from __future__ import annotations

import dataclasses
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from nvtest.config.inventory import Node
from nvtest.errors import OutputWriteError
from nvtest.playbook.stuck import NEED_DOMAIN, stuck_on, stuck_words
from nvtest.transports._deadline import UNKILLABLE
from nvtest.transports.base import Command, CommandResult, Transport, render_command

__all__ = [
    "GPU_NEEDS",
    "Hang",
    "PhaseRunner",
    "attribute_unkillable",
    "cause_of",
    "hung_needs",
    "node_log_dir",
    "path_part",
    "unkillable_owners",
    "write_evidence",
]

#: A survivor's wait channel in a transport's error (``sleep (pid 7, state D, wchan nfs_wait)``).
_WCHAN = re.compile(r"wchan ([A-Za-z0-9_.]+)")


def cause_of(res: CommandResult) -> str | None:
    """The cause key of ``res``: its own finer one (``transport:unkillable:storage``), else
    ``transport:<failure>`` (:data:`nvtest.transports.base.FAILURES`); None when it completed."""
    if res.cause is not None:
        return res.cause
    return f"transport:{res.failure}" if res.failure else None


def attribute_unkillable(res: CommandResult, touches: Sequence[str]) -> CommandResult:
    """``res`` with what its unkillable process was stuck on, and on which node, in its error
    (``unkillable: stuck on storage (/mnt/ckpt) on node2 (still alive after SIGKILL: ...)``):
    from the survivors' wait channels, else from ``touches``, what the command declared it
    touches (:func:`nvtest.playbook.stuck.stuck_on`); its cause key names the same
    (``transport:unkillable:storage``). Other results are returned as they are."""
    if res.failure != "unkillable" or not res.error or f"{UNKILLABLE} (" not in res.error:
        return res
    stuck = stuck_on(touches, _WCHAN.findall(res.error))

    def word(m: re.Match[str]) -> str:
        owner = m.group(1) or res.node  # a multi-node launch names each node's survivors
        return f"{m.group(0)[: -len(UNKILLABLE) - 2]}{UNKILLABLE}: {stuck_words(stuck, owner, res.command)} ("

    return dataclasses.replace(res, error=_ANCHOR.sub(word, res.error), cause=f"transport:unkillable:{stuck.domain}")


#: The needs that reach the GPU through its driver (``NEED_DOMAIN`` ``gpu``: nvidia-smi, dcgmi,
#: nvbandwidth, the ``gpu`` device ...): all hang once a process is wedged in that driver.
GPU_NEEDS = tuple(need for need, domain in NEED_DOMAIN.items() if domain == "gpu")


def hung_needs(res: CommandResult, needs: Sequence[str]) -> tuple[str, ...]:
    """What ``res`` (a command that ran past its deadline) leaves hung on its node: the
    command's own ``needs``; and where a process it left is stuck in the GPU's driver
    (``transport:unkillable:gpu``, :func:`attribute_unkillable`), every need that talks to that
    driver (:data:`GPU_NEEDS`), so that a later nvidia-smi or CUDA check there is ``blocked``
    at once instead of hanging on the same driver until its own deadline."""
    if res.failure == "unkillable" and res.cause == "transport:unkillable:gpu":
        return tuple(dict.fromkeys([*needs, *GPU_NEEDS]))
    return tuple(needs)


def unkillable_owners(res: CommandResult) -> list[str]:
    """The nodes that own the processes of ``res`` that survived SIGKILL: those its error
    names before their ``unkillable`` (a multi-node launch's), else its own node; [] when
    nothing survived."""
    if res.failure != "unkillable" or not res.error:
        return []
    named = [m.group(1) for m in _OWNER.finditer(res.error)]
    return list(dict.fromkeys(named)) or [res.node]


#: A node's name before its survivors in a multi-node launch's error.
_OWNER = re.compile(rf"(?<![^ ;])([A-Za-z0-9_.\[\]-]+): {UNKILLABLE}\b")

#: Where a transport wrote ``unkillable (``, after the owning node's name in a multi-node
#: launch's error (``node2: unkillable (still alive after SIGKILL: ...)``).
_ANCHOR = re.compile(rf"(?:([A-Za-z0-9_.\[\]-]+): )?{UNKILLABLE} \(")


@dataclass(frozen=True)
class Hang:
    """A tool or device that hung on a node: the phase whose deadline it ran past.

    Attributes:
        need: the tool (``nvidia-smi``) or device (``gpu``) that hung.
        key: the phase (check) that timed out.
        error: that command's error (``timed out after 120 s; ...``).
        cause: set when the tool or device is known unusable without having hung (the kernel
            log shows the GPU needs a reset: :mod:`nvtest.session.kernel_log`): the sentence
            saying why, which the blocked message quotes instead.
    """

    need: str
    key: str
    error: str
    cause: str | None = None

    def blocked_message(self) -> str:
        """The error of a later command on the node that needs the same tool or device."""
        if self.cause is not None:
            from nvtest.session.kernel_log import blocked_message

            return blocked_message(self.cause, self.need)
        why = self.error if len(self.error) <= 240 else self.error[:237] + "..."
        return f"blocked: {self.need} hung on this node in {self.key} ({why}); not started"

    @property
    def cause_key(self) -> str:
        """The cause key of a command it blocks: ``transport:blocked:kernel_log`` where the
        kernel log showed the tool or device unusable, else ``transport:blocked``."""
        return "transport:blocked" if self.cause is None else "transport:blocked:kernel_log"


#: Characters a log path keeps as they are; every other one is written ``%XX`` (UTF-8).
_KEEP = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.@+")


def path_part(name: str, limit: int = 120) -> str:
    """The file-name form of a node or check name: injective, so two names never share a file.

    Letters, digits and ``-_.@+`` stay; every other character (``/``, a space, ``%``,
    ``:``, a leading ``.``) is ``%XX`` per UTF-8 byte, as in a URL: ``a b`` ->
    ``a%20b``, ``a_b`` -> ``a_b``; the empty name is ``%``. A form longer than
    ``limit`` characters is cut and ends ``%~<80-bit SHA-256 of the name>``, which no
    uncut form contains (each ``%`` there is followed by two hex digits).
    """
    out = []
    for i, ch in enumerate(name):
        if ch in _KEEP and not (i == 0 and ch == "."):
            out.append(ch)
        else:
            out.extend(f"%{b:02X}" for b in ch.encode("utf-8", "surrogatepass"))
    safe = "".join(out) or "%"
    if len(safe) > limit:
        import hashlib

        digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:20]
        safe = f"{safe[: limit - 22]}%~{digest}"
    return safe


def node_log_dir(node: str) -> str:
    """The directory of ``node``'s evidence, relative to the run directory (``logs/<node>``)."""
    return f"logs/{path_part(node)}"


def write_evidence(run_dir: Path, check: str, result: CommandResult) -> str:
    """Write one node's raw evidence; return its path relative to ``run_dir``.

    Layout: ``logs/<node>/<check>.log`` (names through :func:`path_part`): a header
    (command, exit code, duration, error, what the capture limit dropped), then stdout,
    then stderr, each under its own banner: at most the capture limit of each
    (:mod:`nvtest.transports.capture`), whatever the node printed.

    Raises:
        OutputWriteError: the file could not be written (a full disk, a read-only mount).
    """
    rel = f"{node_log_dir(result.node)}/{path_part(check)}.log"
    path = run_dir / rel
    header = [
        f"# node:      {result.node}",
        f"# check:     {check}",
        f"# command:   {result.command}",
        f"# exit code: {result.exit_code if result.exit_code is not None else 'none'}",
        f"# duration:  {result.duration_s:.3f} s",
    ]
    if result.error:
        header.append(f"# error:     {result.error}")
    if result.truncated:  # the log holds what was captured: the capture limit caps it
        header.append(f"# truncated: {result.truncated}")
    body = "\n".join(header) + "\n\n===== stdout =====\n" + result.stdout
    if not body.endswith("\n"):
        body += "\n"
    body += "\n===== stderr =====\n" + result.stderr
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as fh:
            fh.write(body + ("\n" if not body.endswith("\n") else ""))
    except OSError as exc:
        raise OutputWriteError.of(path, exc) from None
    return rel


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
        self._envs: dict[str, dict[str, str]] = {}
        self._lock = threading.Lock()
        self._key_locks: dict[str, threading.Lock] = {}
        self._hung: dict[str, dict[str, Hang]] = {}
        #: evidence files that could not be written (the results stand; the run is a
        #: harness error): the first few, and how many in all
        self.write_errors: list[OutputWriteError] = []
        self.write_error_count = 0

    def run(
        self,
        key: str,
        nodes: Sequence[Node],
        command: Callable[[Node], Command],
        *,
        timeout_s: float,
        env: Mapping[str, str] | None = None,
        needs: Sequence[str] = (),
        touches: Sequence[str] | None = None,
        mark: bool = True,
    ) -> dict[str, CommandResult]:
        """Run ``command(node)`` on every node of ``nodes`` at once (first call),
        or return the cached results of ``key``.

        ``needs``: the tools and devices the command needs (see the class text): a node
        where one of them hung gets a ``blocked`` result without running anything, and a
        node where this command runs past its deadline marks them all hung (``mark``
        False: it is blocked, but marks nothing: a pair test, whose two ends time out
        together, leaves marking to the pair's blame). ``touches`` (default ``needs``):
        what the command touches, which words an unkillable result
        (:func:`attribute_unkillable`).

        Returns node name -> CommandResult. Evidence is written as it arrives; a log
        file that cannot be written leaves the result as it is (no log path) and is
        counted in :attr:`write_errors`.
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
                    cause=hang.cause_key,
                )
            for name, res in list(results.items()):
                res = results[name] = attribute_unkillable(res, needs if touches is None else touches)
                if mark and res.failure in ("timeout", "unkillable"):
                    self.mark_hung(name, key, hung_needs(res, needs), res.error or "timed out")
                try:
                    self._logs[(key, name)] = write_evidence(self.run_dir, key, res)
                except OutputWriteError as exc:  # the measurement stands without its log file
                    self.write_error_count += 1
                    if len(self.write_errors) < 3:
                        self.write_errors.append(exc)
                    continue
                self._envs[self._logs[(key, name)]] = dict(env or {})
            self._cache[key] = results
            return results

    def block(self, node: str, needs: Sequence[str], key: str, cause: str) -> None:
        """Mark ``needs`` unusable on ``node`` without a hang: ``key`` (the phase that found it)
        read ``cause`` (one sentence); a later phase there that needs one is ``blocked`` at once."""
        with self._lock:
            marks = self._hung.setdefault(node, {})
            for need in needs:
                marks.setdefault(need, Hang(need, key, cause, cause))

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

    def mark_hung(self, node: str, key: str, needs: Sequence[str], error: str) -> None:
        """Mark each of ``needs`` hung on ``node`` in phase ``key`` (``error``: why), unless
        already marked: later phases there that need one of them are ``blocked``."""
        with self._lock:
            marks = self._hung.setdefault(node, {})
            for need in needs:
                marks.setdefault(need, Hang(need, key, error))

    def log_path(self, key: str, node: str) -> str | None:
        """The evidence path (relative to the run dir) of ``key`` on ``node``."""
        return self._logs.get((key, node))

    def env_of(self, log: str | None) -> dict[str, str] | None:
        """The environment the harness gave the command whose evidence is ``log`` (None: unknown)."""
        return self._envs.get(log) if log else None

    def cached(self, key: str) -> dict[str, CommandResult] | None:
        return self._cache.get(key)
