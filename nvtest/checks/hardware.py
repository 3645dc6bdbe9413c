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

A check does not write these steps: its :class:`~nvtest.session.probe.Probe` declares
what it ``expects``, how its output is read (``parse``) and what ships the tool
(``package``), and the ``read`` fixture (:func:`read_declared`) and the ``measure``
fixture (:func:`require_declared`) apply them. :func:`require` and :func:`read_tool`
stay for the orchestration in ``nvtest/checks/<area>/`` that reads several nodes' tools.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from nvtest.config.thresholds import SkuProfile
from nvtest.errors import ParseError, ProbeError, ProbeSkip, UnreportedHardware
from nvtest.session.expect import Expected, expected_gpus, expected_hcas, expected_nvswitches
from nvtest.session.facts import NodeFacts
from nvtest.session.probe import DRIVER, Probe
from nvtest.transports.base import CommandResult

T = TypeVar("T")

#: How the run counts each kind of hardware a probe may expect (:data:`~nvtest.session.probe.EXPECTS`).
EXPECTED: dict[str, Callable[[NodeFacts, SkuProfile | None], Expected]] = {
    "gpu": expected_gpus,
    "nvswitch": expected_nvswitches,
    "hca": expected_hcas,
}

__all__ = [
    "EXPECTED",
    "Expected",
    "expected_gpus",
    "expected_hcas",
    "expected_nvswitches",
    "read_declared",
    "read_tool",
    "TOOL_FAILED",
    "require",
    "require_any",
    "require_declared",
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


def require_any(exps: Sequence[Expected], facts: NodeFacts) -> Expected:
    """:func:`require` over several kinds of hardware, any of which the check judges: the
    first that is expected; a skip only where the bus proves every one absent (the reason
    names them all and the bus readings), else an ``error``.

    Raises:
        ProbeSkip: every kind proven absent.
        ProbeError: none expected and the absence of one is not proven.
    """
    for exp in exps:
        if exp.count:
            return exp
    if len(exps) == 1:
        return require(exps[0])
    if all(exp.absent is not None for exp in exps):
        raise ProbeSkip(
            f"not on this hardware: the PCI bus shows no {' and no '.join(e.what for e in exps)} ({facts.bus_text()})"
        )
    return require(next(exp for exp in exps if exp.absent is None))


def require_declared(probe: Probe, facts: NodeFacts, sku: SkuProfile | None) -> Expected:
    """What ``probe`` declares it ``expects`` on this node (:func:`require_any`), then its
    ``skip_if`` for the SKU; a tool from a ``package`` other than the driver must be on the
    node's PATH (:func:`require_tool`).

    Raises:
        TypeError: the probe expects nothing (a check's mistake: nothing to require).
        ProbeSkip: absence proven, or ``skip_if`` said so.
        ProbeError: absence not proven; the tool is missing.
    """
    kinds = probe.expected_kinds()
    if not kinds:
        raise TypeError(f"probe {probe.name!r} declares no expects=: nothing to require")
    exp = require_any([EXPECTED[k](facts, sku) for k in kinds], facts)
    if probe.skip_if is not None and (why := probe.skip_if(sku)) is not None:
        raise ProbeSkip(why)
    if _packaged(probe) and probe.command and probe.command[0] in facts.tools:
        # a tool the inventory looked for (its TOOLS); any other is checked by running it
        require_tool(facts, exp, probe.command[0], probe.package or "")
    return exp


def read_declared(probe: Probe, facts: NodeFacts, sku: SkuProfile | None, run: Callable[[Probe], CommandResult]) -> Any:
    """The typed record of a declared tool probe on one node: the one place the rules of the
    module doc apply to a tool a check reads (the ``read`` fixture).

    :func:`require_declared`, then ``run(probe)`` (this node's result), then
    :func:`read_tool` with the probe's ``parse`` and ``stdout_only``.

    Raises:
        TypeError: the probe declares no ``parse`` or no ``expects``.
        ProbeSkip, ProbeError: see :func:`require_declared`.
        NodeError: the command did not complete (see :func:`~nvtest.session.probe.raw_output`).
        UnreportedHardware: the tool's output is not its report, or it reported its own failure.
    """
    if probe.parse is None:
        raise TypeError(f"probe {probe.name!r} declares no parse=: read it with raw()")
    exp = require_declared(probe, facts, sku)
    res = run(probe)
    if _packaged(probe) and probe.command and probe.command[0] not in facts.tools and res.exit_code == 127:
        # a tool the inventory does not look for (a site's own): its shell could not find it
        raise _tool_missing(probe.command[0], probe.package or "", exp)
    return read_tool(exp, probe.tool(), res, probe.parse, stdout_only=probe.stdout_only)


def _packaged(probe: Probe) -> bool:
    """A tool probe whose tool ships in a package other than the driver (checked for)."""
    return bool(probe.command and probe.package and probe.package != DRIVER)


#: A tool's (or its shell's, or the driver's) own words that the run failed, on any line:
#: nvidia-smi's "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA
#: driver", "Failed to initialize NVML: Driver/library version mismatch", "No devices were
#: found", "Unable to determine the device handle"; sh's "not found"; a line that begins
#: with ERROR/FATAL.
TOOL_FAILED = re.compile(
    r"has failed|failed to initialize|couldn't communicate with|unable to determine the device handle"
    r"|no devices were found|command not found|: not found|^\s*(?:error|fatal)\b",
    re.IGNORECASE | re.MULTILINE,
)


def tool_words(res: CommandResult, limit: int = 400) -> str:
    """A tool's own words for a run that did not report: exit code and its first lines."""
    said = " ".join(line.strip() for line in (res.stdout + "\n" + res.stderr).splitlines() if line.strip())
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
        raise _tool_missing(tool, package, exp)


def _tool_missing(tool: str, package: str, exp: Expected) -> ProbeError:
    """The ``error`` of a measuring tool not on the node's PATH, naming its package."""
    return ProbeError(
        f"{tool} not found on the node's PATH ({package}): nothing measured on the {exp.text()}", cause="tool:missing"
    )


def read_tool(
    exp: Expected, tool: str, res: CommandResult, parse: Callable[[str], T], *, stdout_only: bool = False
) -> T:
    """``parse`` the tool's output (stdout and stderr, or stdout only); output that is not
    the tool's report (nothing, another program's text) or the tool's own failure (the
    record's ``failure``: an error banner, an init failure, a crash after part of its
    report) on a node with the hardware fails the check with the tool's words. A parse
    that returns None (the tool reported nothing to read) is accepted from a tool that
    exited 0 only.

    A parser that raises anything else (a ``ValueError``, an ``IndexError``) on output the
    tool itself marked as failed (a non-zero exit, or its error words: :data:`TOOL_FAILED`)
    fails the same way, with the tool's words: the tool's failure is the finding. On output
    the tool did not mark as failed it is a bug of the parser: an error naming it.

    Raises:
        UnreportedHardware: the parser could not read the output, or the tool reported
            its own failure.
        ProbeError: the parser raised on output the tool did not mark as failed
            (``tool:parse``).
    """
    text = res.stdout if stdout_only else res.stdout + "\n" + res.stderr
    try:
        record = parse(text)
    except ParseError:
        raise unreported(exp, tool, tool_words(res)) from None
    except Exception as exc:  # noqa: BLE001 - a parser's own bug: judged by what the tool said
        if res.exit_code != 0 or TOOL_FAILED.search(res.stdout + "\n" + res.stderr):
            raise unreported(exp, tool, tool_words(res)) from exc
        raise ProbeError(
            f"{tool}: its parser raised {type(exc).__name__}: {exc} on output the tool did not mark as "
            f"failed (exit {res.exit_code}): a parser bug, nothing judged",
            cause="tool:parse",
        ) from exc
    if record is None and res.exit_code != 0:
        raise unreported(exp, tool, tool_words(res))
    failure = getattr(record, "failure", None)
    if failure is not None:
        raise unreported(exp, tool, f"exit {res.exit_code}: {failure.reason}", f"tool:{failure.kind}")
    return record
