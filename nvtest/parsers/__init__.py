"""Pure parsers: tool output text -> typed, frozen records.

Each tool has one module with ``parse(text)``, ``detect(text)``, ``TOOL``, ``DESCRIPTION`` and
``FAILURES`` (the tool's failure wordings, a :class:`~nvtest.parsers._common.FailureTable`);
this package gathers them in :data:`PARSERS`. Parsers do no I/O. The contract (in
``_common``'s docstring and docs/parsers.md): the tool's own failure output is a record whose
``failure`` is a :class:`ToolFailure`; only text that is not the tool's raises
:class:`~nvtest.errors.ParseError` (tool, line, what was expected). Every record carries
``effective``, the parameters that took effect.

    >>> from nvtest.parsers import parse, detect, to_jsonable
    >>> tool = detect(text)                 # e.g. "nccl-tests", or None
    >>> record = parse(tool, text)          # frozen dataclasses
    >>> to_jsonable(record)                 # plain dicts / lists / str / numbers
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from nvtest.errors import ParseError
from nvtest.parsers import (
    dcgmi,
    dmesg,
    gpu_burn,
    ibstat,
    ibstatus,
    ibv_devinfo,
    lspci,
    nccl_tests,
    nvbandwidth,
    nvidia_smi,
    nvidia_smi_csv,
    nvidia_smi_nvlink,
    nvidia_smi_q,
    nvidia_smi_topo,
    nvidia_smi_xml,
    perftest,
    stream,
    vllm_bench,
)
from nvtest.parsers._binary import binary_reason
from nvtest.parsers._common import (
    FailureKind,
    FailureTable,
    ToolFailure,
    ValueState,
    as_pasted,
    clean_paste,
)

__all__ = [
    "PARSERS",
    "FailureKind",
    "ParseError",
    "ParserInfo",
    "ToolFailure",
    "ValueState",
    "detect",
    "parse",
    "readable",
    "to_jsonable",
    "tool_names",
]


@dataclass(frozen=True)
class ParserInfo:
    """One registered parser: its tool name, a one-line description, its two functions and its
    table of the tool's failure wordings."""

    name: str
    description: str
    parse: Callable[[str], Any]
    detect: Callable[[str], bool]
    failures: FailureTable


# Order matters for detect(): the most specific formats first.
_MODULES: tuple[ModuleType, ...] = (
    nvidia_smi_xml,
    dcgmi,
    nvidia_smi_q,
    nvidia_smi_topo,
    nvidia_smi_nvlink,
    nvidia_smi_csv,
    nvidia_smi,
    nccl_tests,
    nvbandwidth,
    perftest,
    stream,
    gpu_burn,
    vllm_bench,
    ibv_devinfo,
    ibstat,
    ibstatus,
    dmesg,
    lspci,
)


def _own_prefixes(module: ModuleType) -> frozenset[str]:
    """The line prefixes that are the tool's own (``OWN_PREFIXES`` of its module): never
    removed as a log collector's."""
    return frozenset(getattr(module, "OWN_PREFIXES", ()))


#: Tool name -> :class:`ParserInfo`, in detection order. ``parse`` reads the output as pasted
#: (:func:`~nvtest.parsers._common.as_pasted`: prompts, collector prefixes, CRLF).
PARSERS: dict[str, ParserInfo] = {
    m.TOOL: ParserInfo(
        m.TOOL,
        m.DESCRIPTION,
        as_pasted(
            m.parse,
            keep=_own_prefixes(m),
            own=getattr(m, "OWN_SENTENCES", None),
            shape=getattr(m, "WRAPPED_SHAPE", None),
            failure=m.FAILURES.match,
        ),
        m.detect,
        m.FAILURES,
    )
    for m in _MODULES
}


_OWN_PREFIXES = {m.TOOL: _own_prefixes(m) for m in _MODULES}
_SHAPES = {m.TOOL: getattr(m, "WRAPPED_SHAPE", None) for m in _MODULES}


def tool_names() -> tuple[str, ...]:
    """All tool names, sorted."""
    return tuple(sorted(PARSERS))


def parse(tool: str, text: str) -> Any:
    """Parse ``text`` as the output of ``tool`` (a key of :data:`PARSERS`).

    Raises:
        ParseError: unknown tool, binary data (:func:`~nvtest.parsers._binary.binary_reason`:
            no tool's output, whatever a lenient parser would make of it), or the parser
            could not read the text.
    """
    info = PARSERS.get(tool)
    if info is None:
        raise ParseError(tool, f"unknown tool; known: {', '.join(tool_names())}")
    why = binary_reason(text)
    if why is not None:
        raise ParseError(tool, f"not text: {why}", expected=f"{tool}'s text output")
    return info.parse(text)


def readable(tool: str, text: str) -> str:
    """``text`` as ``parse(tool, text)`` reads it (:func:`~nvtest.parsers._common.clean_paste`
    with the tool's own prefixes and row shape: colour codes, prompts, collector prefixes, CRLF
    and wrapping undone), so that a judgement of the raw text (``xid_scan``, the NCCL log's
    own lines) reads what the parser read. Raises ParseError for an unknown tool."""
    module = next((m for m in _MODULES if m.TOOL == tool), None)
    if module is None:
        raise ParseError(tool, f"unknown tool; known: {', '.join(tool_names())}")
    own = module.FAILURES.match
    return clean_paste(
        text,
        keep=_OWN_PREFIXES[tool],
        shape=_SHAPES[tool],
        own=lambda ln: own(ln) is not None,
    ).text


def detect(text: str) -> str | None:
    """The name of the first parser whose ``detect`` recognises ``text``, or None (binary data: None)."""
    if binary_reason(text) is not None:
        return None
    for name, info in PARSERS.items():
        try:
            if info.detect(clean_paste(text, keep=_OWN_PREFIXES[name], shape=_SHAPES[name]).text):
                return name
        except Exception:  # noqa: BLE001 - a detector never decides by crashing
            continue
    return None


def to_jsonable(obj: Any) -> Any:
    """Turn records into plain JSON-able values: dataclasses -> dicts, enums -> their string value,
    tuples -> lists, non-finite floats -> strings. Properties are not included."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, Mapping):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, float) and (obj != obj or obj in (float("inf"), float("-inf"))):
        return str(obj)
    return obj
