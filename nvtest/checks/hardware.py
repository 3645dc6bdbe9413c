"""Fail closed: what hardware a check must find, what proves it absent, and what a tool said.

Every check that needs a kind of hardware asks here first, so one rule holds for all of
them (docs/writing-checks.md, "Fail closed"):

- **expected** is the most of: what the PCI bus shows (sysfs, then lspci; the source
  that cannot lie by failing), what the SKU profile's ``expect`` says, what a tool reports;
- **absent** (``skip``) only when nothing expects it *and* the bus was read and shows
  none; the skip reason names that source (``not on this hardware: the PCI bus shows no
  NVIDIA GPU (sysfs /sys/bus/pci/devices: 6 functions; ...)``);
- **unknown** (``error``) when nothing proves absence (the bus could not be read);
- a **tool that cannot report** on expected hardware (nvidia-smi cannot talk to the
  driver, CUDA cannot start, ibstat missing) makes the check ``fail`` with the tool's own
  words (:class:`~nvtest.errors.UnreportedHardware`), never ``skip``;
- a **tool missing** on a node with the hardware (dcgmi, nccl-tests, perftest) is ``error``:
  the check could not measure, and nothing was proven good.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from nvtest.errors import ParseError, ProbeError, ProbeSkip, UnreportedHardware
from nvtest.session.expect import Expected, expected_gpus, expected_hcas, expected_nvswitches
from nvtest.session.facts import NodeFacts
from nvtest.transports.base import CommandResult

T = TypeVar("T")

__all__ = [
    "Expected",
    "expected_gpus",
    "expected_hcas",
    "expected_nvswitches",
    "read_tool",
    "require",
    "require_tool",
    "tool_words",
    "unreported",
]


def require(exp: Expected) -> Expected:
    """Go on when hardware is expected; otherwise end the check here.

    Raises:
        ProbeSkip: absence proven (the reason names the source that proved it).
        ProbeError: absence not proven (``error``: nothing measured, nothing proven).
    """
    if exp.count:
        return exp
    if exp.absent is not None:
        raise ProbeSkip(exp.absent)
    raise ProbeError(exp.unknown or f"absence of {exp.what} not proven")


def tool_words(res: CommandResult, limit: int = 400) -> str:
    """A tool's own words for a run that did not report: exit code and its first lines."""
    said = " ".join(
        line.strip() for line in (res.stdout + "\n" + res.stderr).splitlines() if line.strip()
    )
    return f"exit {res.exit_code}: {said[:limit] or 'no output'}"


def unreported(exp: Expected, tool: str, words: str, cause: str | None = None) -> UnreportedHardware:
    """The ``fail`` of a check whose tool cannot report on expected hardware (raise it);
    ``cause``: its key where finer than ``hardware:unreported`` (``tool:init_failure``)."""
    return UnreportedHardware(f"{exp.text()}; {tool} cannot report on them: {words}", cause=cause)


def require_tool(facts: NodeFacts, exp: Expected, tool: str, package: str) -> None:
    """On a node with the hardware, a missing measuring tool is an ``error``, not a skip.

    Raises:
        ProbeError: ``tool`` is not on the node's PATH (the message names the package).
    """
    if not facts.tools.get(tool):
        raise ProbeError(
            f"{tool} not found on the node's PATH ({package}): nothing measured on the {exp.text()}",
            cause="tool:missing",
        )


def read_tool(
    exp: Expected, tool: str, res: CommandResult, parse: Callable[[str], T], *, stdout_only: bool = False
) -> T:
    """``parse`` the tool's output (stdout and stderr, or stdout only); output that is not
    the tool's report (nothing, another program's text) or the tool's own failure (the
    record's ``failure``: an error banner, an init failure, a crash after part of its
    report) on a node with the hardware fails the check with the tool's words.

    Raises:
        UnreportedHardware: the parser could not read the output, or the tool reported
            its own failure.
    """
    try:
        record = parse(res.stdout if stdout_only else res.stdout + "\n" + res.stderr)
    except ParseError:
        raise unreported(exp, tool, tool_words(res)) from None
    failure = getattr(record, "failure", None)
    if failure is not None:
        raise unreported(exp, tool, f"exit {res.exit_code}: {failure.reason}", f"tool:{failure.kind}")
    return record
