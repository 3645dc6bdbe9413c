"""The exception tree of nvtest, and the CLI exit code of each branch.

Every exception class of the package is defined here (the node-side probes, which
import nothing of nvtest, aside); a test fails when a class outside this tree appears.

::

    Exception
    ├── NvtestError                  exit 3 (harness error) unless a branch says otherwise
    │   ├── ConfigError              exit 2: a bad inventory, SKU profile, suite or option;
    │   │                             names the file, the line and the field where known
    │   ├── TransportError           a node could not be reached or a command could not run
    │   │   ├── ConnectError         connect refused, unreachable, auth failed
    │   │   │   └── HostKeyRejected  the host key is unknown or differs from known_hosts
    │   │   └── CommandTimeout       the command ran past its timeout and was killed
    │   ├── ParseError               a text is not the tool's output (tool, line, expectation)
    │   ├── ProbeError               a probe ran but reported that it could not measure
    │   ├── NodeError                the node could not run the probe (down, timeout, crash)
    │   ├── OutputWriteError         a file of the run could not be written (its path, errno)
    │   ├── ClusterStartError        a test cluster (sshd, Slurm) could not start
    │   └── HistoryError             the history database could not be opened or written
    ├── ProbeSkip                    exit 0: not an error; the check does not apply here
    └── AssertionError
        ├── CheckFailed              exit 1: a check's judged metrics failed
        │   └── UnreportedHardware   hardware the PCI bus or the SKU says is there, and a
        │                             tool that cannot report on it (the tool's words)
        └── NodeWedged               exit 1: a process survived SIGKILL on the node (unkillable)

Each exception carries ``cause``: the key of its cause where the code that raised it knows
one (``transport:auth``, ``tool:missing``, ``hardware:unreported``; the keys are listed in
:data:`nvtest.playbook.diagnosis.CAUSES`), else None. A branch with one cause sets it for the
class (:class:`UnreportedHardware`: ``hardware:unreported``); a raise site that knows a
finer one passes ``cause=``. The run copies it to the result's ``cause``.

Inside a run, transport, parse, probe and node errors never escape: they become the
``error`` verdict of the (check, node) they belong to, a :class:`ProbeSkip` its ``skip``
verdict and a :class:`CheckFailed` its ``fail`` verdict, and the run goes on.
:func:`exit_code_of` maps any exception to the CLI's exit code.
"""

from __future__ import annotations

__all__ = [
    "EXIT_CHECK_FAILED",
    "EXIT_CONFIG",
    "EXIT_HARNESS",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "CheckFailed",
    "ClusterStartError",
    "CommandTimeout",
    "ConfigError",
    "ConnectError",
    "HistoryError",
    "HostKeyRejected",
    "NodeError",
    "NodeWedged",
    "NvtestError",
    "OutputWriteError",
    "ParseError",
    "ProbeError",
    "ProbeSkip",
    "TransportError",
    "UnreportedHardware",
    "exit_code_of",
    "exit_code_of_signal",
]

EXIT_OK = 0
EXIT_CHECK_FAILED = 1
EXIT_CONFIG = 2
EXIT_HARNESS = 3
EXIT_INTERRUPTED = 130


class _Caused:
    """The ``cause`` every exception of the tree carries (see the module text)."""

    cause: str | None = None

    def __init__(self, *args: object, cause: str | None = None) -> None:
        super().__init__(*args)
        if cause is not None:
            self.cause = cause


class NvtestError(_Caused, Exception):
    """Base of every error nvtest raises on purpose.

    ``cause``: the cause key (see the module text), from ``cause=`` or the class's default.
    """

    exit_code = EXIT_HARNESS


class ConfigError(NvtestError):
    """A configuration file, suite or command-line option is invalid.

    ``str(err)`` is one line: ``<file>:<line>: <field>: <reason>`` where known.
    """

    exit_code = EXIT_CONFIG

    def __init__(
        self,
        reason: str,
        *,
        path: str | None = None,
        line: int | None = None,
        field: str | None = None,
    ) -> None:
        self.reason = reason
        self.path = path
        self.line = line
        self.field = field
        where = ""
        if path:
            where = f"{path}:{line}: " if line else f"{path}: "
        fld = f"{field}: " if field else ""
        super().__init__(f"{where}{fld}{reason}")


class TransportError(NvtestError):
    """A command could not be run on a node (the node gets an ``error`` verdict)."""

    def __init__(self, message: str, *, node: str | None = None) -> None:
        self.node = node
        super().__init__(f"{node}: {message}" if node else message)


class ConnectError(TransportError):
    """The node could not be reached: refused, unreachable, auth or host-key failure.

    Attributes:
        kind: the cause, one of ``unreachable`` (refused, no route, connect timeout,
            handshake cut), ``resolve`` (the host name does not resolve), ``auth`` (the key
            was refused, none to offer, or it is passphrase-protected), ``config`` (a
            configuration mistake: a key file that does not exist), ``host_key``.
        retryable: True when another attempt may succeed (``unreachable`` only); a
            configuration mistake is never retried.
    """

    def __init__(
        self,
        message: str,
        *,
        node: str | None = None,
        kind: str = "unreachable",
        retryable: bool = False,
    ) -> None:
        self.kind = kind
        self.retryable = retryable
        super().__init__(message, node=node)
        self.cause = f"transport:{kind}"


class HostKeyRejected(ConnectError):
    """The server's host key is not in known_hosts, or differs from it (never retried)."""

    def __init__(self, message: str, *, node: str | None = None) -> None:
        super().__init__(message, node=node, kind="host_key", retryable=False)


class CommandTimeout(TransportError):
    """The command ran past its timeout; its process group was killed."""

    cause = "transport:timeout"

    def __init__(self, message: str, *, node: str | None = None, timeout_s: float = 0.0) -> None:
        self.timeout_s = timeout_s
        super().__init__(message, node=node)


class ParseError(NvtestError):
    """A tool's output could not be read.

    Attributes:
        tool: the parser's tool name (e.g. ``"nccl-tests"``).
        line: 1-based line number where reading failed, or None for the whole text.
        expected: what the parser was looking for.
    """

    cause = "tool:parse"

    def __init__(self, tool: str, message: str, *, line: int | None = None, expected: str | None = None) -> None:
        self.tool = tool
        self.line = line
        self.expected = expected
        loc = f" line {line}" if line else ""
        exp = f" (expected {expected})" if expected else ""
        super().__init__(f"{tool}{loc}: {message}{exp}")


class ProbeError(NvtestError):
    """A probe ran but could not measure (its JSON says why, e.g. a CUDA error).

    ``cause`` is ``probe:error`` unless the raise site names a finer one (``tool:missing``).
    """

    cause = "probe:error"


class NodeError(NvtestError):
    """The node could not run the probe (unreachable, timeout, crash): an ``error`` verdict."""


class OutputWriteError(NvtestError):
    """A file of the run (results.jsonl, results.json, a report, evidence, ``latest``)
    could not be written: a full disk, a read-only mount, a quota.

    ``str(err)`` is one line: ``cannot write <path>: [Errno <n>] <strerror>``. What was
    measured before stays in results.jsonl wherever that file could be written.

    Attributes:
        path: the file that could not be written.
        errno: the OS error number (``errno.ENOSPC`` ...), or None.
        strerror: the OS's words for it.
    """

    def __init__(self, path: str, errno: int | None, strerror: str | None) -> None:
        self.path = path
        self.errno = errno
        self.strerror = strerror
        code = f"[Errno {errno}] " if errno is not None else ""
        super().__init__(f"cannot write {path}: {code}{strerror or 'write failed'}")

    @classmethod
    def of(cls, path: object, exc: OSError) -> OutputWriteError:
        """The error for ``exc`` raised while writing ``path`` (named as given, not the
        temporary file it was written through)."""
        return cls(str(path), exc.errno, exc.strerror or str(exc))


class ClusterStartError(NvtestError):
    """A test cluster (the sshd or Slurm fixtures of :mod:`nvtest.testing`) could not start.

    The message carries the daemons' log tails.
    """


class HistoryError(NvtestError):
    """The history database (SQLite file or PostgreSQL server) could not be opened, migrated
    or written: unreachable server, permission, a file that is not a database.

    A run or a gate never fails for it: the result is kept and the error is reported beside it.
    """


class ProbeSkip(_Caused, Exception):
    """The probe says this check does not apply here (the item is ``skip`` with this reason).

    Not an :class:`NvtestError`: a skip is not a harness error.
    """

    exit_code = EXIT_OK


class CheckFailed(_Caused, AssertionError):
    """Raised after a check function when its judged metrics fail (a ``fail`` verdict).

    ``cause``: the cause key (see the module text), from ``cause=`` or the class's default.
    """

    exit_code = EXIT_CHECK_FAILED


class NodeWedged(_Caused, AssertionError):
    """A process of the (check, node)'s command survived SIGKILL past its deadline: the
    GPU or driver is likely wedged. A ``fail`` verdict (the node needs a reboot), not an
    ``error``: the node proved it is not good.

    ``cause``: ``transport:unkillable``, or a finer key naming what the process was stuck on
    (``transport:unkillable:storage``) where the raise site knows it.
    """

    exit_code = EXIT_CHECK_FAILED
    cause: str | None = "transport:unkillable"


class UnreportedHardware(CheckFailed):
    """Hardware the PCI bus (or the SKU profile) shows is there, and a tool that cannot
    report on it: the check's ``fail``, carrying the tool's own words. Never a skip.

    ``cause``: ``hardware:unreported``."""

    cause: str | None = "hardware:unreported"


def exit_code_of(exc: BaseException) -> int:
    """The CLI exit code of ``exc``: its branch's ``exit_code``; 130 for Ctrl-C; else 3."""
    if isinstance(exc, KeyboardInterrupt):
        return EXIT_INTERRUPTED
    code = getattr(type(exc), "exit_code", None)
    if isinstance(exc, (NvtestError, ProbeSkip, CheckFailed, NodeWedged)) and isinstance(code, int):
        return code
    return EXIT_HARNESS


def exit_code_of_signal(name: str | None) -> int:
    """The exit status of a verb a signal stopped (``run``, ``gate``, ``sweep`` alike):
    :data:`EXIT_INTERRUPTED` (130) for SIGINT (a person's Ctrl-C, or an unknown signal),
    :data:`EXIT_HARNESS` (3) for SIGTERM (a scheduler or systemd stopped it: the harness
    did not finish)."""
    return EXIT_INTERRUPTED if name in (None, "SIGINT") else EXIT_HARNESS
