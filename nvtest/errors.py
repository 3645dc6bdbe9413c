"""The exception tree of nvtest, and the CLI exit code of each branch.

::

    NvtestError                      exit 3 (harness error) unless a branch says otherwise
    ├── ConfigError                  exit 2: a bad inventory, SKU profile, suite or option;
    │                                 names the file, the line and the field where known
    ├── TransportError               a node could not be reached or a command could not run
    │   ├── ConnectError             connect refused, host key rejected, auth failed
    │   └── CommandTimeout           the command ran past its timeout and was killed
    ├── ParseError                   a tool's output could not be read (tool, line, expectation)
    └── ProbeError                   a probe ran but reported that it could not measure

Transport and parse errors never escape a run: they become an ``error`` verdict
for the (check, node) they belong to, and the run goes on.
"""

from __future__ import annotations

__all__ = [
    "EXIT_CHECK_FAILED",
    "EXIT_CONFIG",
    "EXIT_HARNESS",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "CommandTimeout",
    "ConfigError",
    "ConnectError",
    "NvtestError",
    "ParseError",
    "ProbeError",
    "TransportError",
]

EXIT_OK = 0
EXIT_CHECK_FAILED = 1
EXIT_CONFIG = 2
EXIT_HARNESS = 3
EXIT_INTERRUPTED = 130


class NvtestError(Exception):
    """Base of every error nvtest raises on purpose."""

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
    """The node could not be reached: refused, unreachable, auth or host-key failure."""


class CommandTimeout(TransportError):
    """The command ran past its timeout; its process group was killed."""

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

    def __init__(self, tool: str, message: str, *, line: int | None = None, expected: str | None = None) -> None:
        self.tool = tool
        self.line = line
        self.expected = expected
        loc = f" line {line}" if line else ""
        exp = f" (expected {expected})" if expected else ""
        super().__init__(f"{tool}{loc}: {message}{exp}")


class ProbeError(NvtestError):
    """A probe ran but could not measure (its JSON says why, e.g. a CUDA error)."""
