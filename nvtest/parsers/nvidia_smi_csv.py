"""Parser for ``nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits]``.

The header names the fields (``fan.speed [%]``: the bracket is the unit, kept even with
``nounits``); values may still carry units (``0 MiB``) when ``nounits`` was not given. Values
``[N/A]``, ``[Not Supported]``, ``[GPU requires reset]``, ``[Unknown Error]`` become
:class:`ValueState`s. Without a header (``noheader``), pass ``fields`` (the ``--query-gpu`` list)
or the columns are named ``col0``, ``col1``... Lines before the header (a prompt) are skipped;
``Unable to determine the device handle`` lines are collected as lost GPUs. nvidia-smi's failure
lines (:data:`~nvtest.parsers.nvidia_smi.FAILURES`, shared by every nvidia-smi mode) set
``failure``. ``effective`` names the queried fields (``columns``), as the header printed them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from nvtest.parsers._common import (
    ParseError,
    Reading,
    ToolFailure,
    ToolRecord,
    ValueState,
    effective,
    effective_field,
    guarded,
    is_sentence,
    lost_gpu,
    not_tool_output,
    numbered_lines,
    reading,
)
from nvtest.parsers.nvidia_smi import FAILURES

TOOL = "nvidia-smi-csv"
DESCRIPTION = "nvidia-smi --query-gpu CSV: one row per GPU, units from the header, states for [N/A] etc."

__all__ = ["FAILURES", "SmiCsv", "SmiCsvRow", "detect", "parse"]

_FIELD_RE = re.compile(r"^[a-z_]+(?:\.[a-z_0-9]+)*(?: \[[^\]]+\])?$")


@dataclass(frozen=True)
class SmiCsvRow:
    """One GPU: ``values[i]`` belongs to column i: a float, a :class:`ValueState` or a string."""

    line: int
    values: tuple[Reading | str, ...]


@dataclass(frozen=True)
class SmiCsv(ToolRecord):
    """The query result. ``units[i]`` is the unit of column i (``MiB``, ``%``, ``W``) or None."""

    columns: tuple[str, ...]
    units: tuple[str | None, ...]
    rows: tuple[SmiCsvRow, ...]
    lost_gpus: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    failure: ToolFailure | None = None
    effective: Mapping[str, object] = effective_field()

    def column(self, name: str) -> tuple[Reading | str, ...]:
        """All values of the column ``name`` (e.g. ``"temperature.gpu"``)."""
        if name not in self.columns:
            return ()
        i = self.columns.index(name)
        return tuple(r.values[i] for r in self.rows)

    def row_dict(self, index: int) -> dict[str, Reading | str]:
        """Row ``index`` as ``{column: value}``."""
        return dict(zip(self.columns, self.rows[index].values, strict=False))

    @property
    def faulty_rows(self) -> tuple[int, ...]:
        """Indexes of rows holding a fault state (reset required, unknown error, ERR!)."""
        return tuple(
            i for i, r in enumerate(self.rows) if any(isinstance(v, ValueState) and v.is_fault for v in r.values)
        )


_TEXT_FIELDS = frozenset({"name", "uuid", "pstate", "pci.bus_id", "driver_version", "serial", "vbios_version"})
_NUMBER_WITH_UNIT_RE = re.compile(r"^[-+]?[\d.]+(?:[eE][-+]?\d+)?(?:\s*[A-Za-z%/]+)?$")
#: Characters nvidia-smi never prints in a ``--query-gpu`` value: a headerless row holding one is
#: another tool's text (JSON, a table, a log), not ``noheader`` output.
_NOT_A_VALUE_RE = re.compile(r'[{}"|=#<>]')
#: A ``label: value`` line (a word, a colon and a space): another tool's summary, never a
#: headerless ``--query-gpu`` row (nvidia-smi's own colons - bus ids, times - have no space).
_LABEL_RE = re.compile(r"^[A-Za-z][\w ]*: ")
#: The field list of a ``--query-gpu=...`` command line printed before ``noheader`` rows.
_QUERY_RE = re.compile(r"--query-gpu[= ](\S+)")


def _value(column: str, raw: str) -> Reading | str:
    """A float (unit suffix dropped), a :class:`ValueState`, or the text as printed."""
    v = raw.strip()
    r = reading(v)
    if isinstance(r, ValueState):
        return r
    if isinstance(r, float) and column not in _TEXT_FIELDS and _NUMBER_WITH_UNIT_RE.match(v):
        return r
    return v


@guarded(TOOL)
def parse(text: str, fields: tuple[str, ...] | None = None) -> SmiCsv:
    """Parse the CSV into an :class:`SmiCsv`.

    Args:
        text: the command's stdout.
        fields: column names for ``noheader`` output (the ``--query-gpu`` list, in order).

    Raises:
        ParseError: not ``--query-gpu`` output (no header, no ``fields``-compatible row and no
            nvidia-smi failure line), or a row whose column count differs from the header's.
    """
    columns: list[str] | None = list(fields) if fields else None
    header = False
    units: list[str | None] = [None] * len(columns) if columns else []
    rows: list[SmiCsvRow] = []
    lost: list[str] = []
    warnings: list[str] = []
    failure: ToolFailure | None = None
    foreign = 0  # lines that are neither a header, a row, a prompt nor nvidia-smi's failure
    for no, line in numbered_lines(text):
        s = line.strip()
        if not s:
            continue
        f = FAILURES.failure(no, s)
        failure = failure or f
        lg = lost_gpu(s)
        if lg or f:
            if lg:
                lost.append(lg)
            continue
        qm = _QUERY_RE.search(s)
        if qm:
            if columns is None:
                columns = [c.strip() for c in qm.group(1).split(",") if c.strip()]
                units = [None] * len(columns)
            continue
        cells = [c.strip() for c in s.split(",")]
        if not header and not rows and len(cells) > 1 and all(_FIELD_RE.match(c) for c in cells):
            header = True
            columns, units = [], []
            for c in cells:
                name, _, unit = c.partition(" [")
                columns.append(name)
                units.append(unit.rstrip("]") or None)
            continue
        if (
            "," not in s
            or is_sentence(s)  # a poster's own words (said by as_pasted), never a row
            or (not header and _NOT_A_VALUE_RE.search(s))
            or (columns is None and _LABEL_RE.match(s))
        ):
            foreign += 1
            continue
        if columns is None:
            columns = [f"col{i}" for i in range(len(cells))]
            units = [None] * len(cells)
            warnings.append("no header: columns named col0, col1, ...")
        if len(cells) != len(columns):
            if not header:
                raise not_tool_output(TOOL, "CSV header and one row per GPU", text)
            raise ParseError(
                TOOL,
                f"{len(cells)} values for {len(columns)} columns",
                line=no,
                expected="one value per column",
            )
        rows.append(SmiCsvRow(no, tuple(_value(c, v) for c, v in zip(columns, cells, strict=True))))
        for i, v in enumerate(cells):
            parts = v.split()
            if units[i] is None and len(parts) == 2 and reading(parts[0]) is not None:
                units[i] = parts[1]
    headerless = not header and not fields and rows
    if failure is None and (columns is None or (not rows and not lost) or (headerless and foreign)):
        raise not_tool_output(TOOL, "CSV header and one row per GPU", text)
    cols = tuple(columns or ())
    return SmiCsv(
        cols,
        tuple(units),
        tuple(rows),
        tuple(lost),
        tuple(warnings),
        failure,
        effective(columns=cols, header=header, rows=len(rows)),
    )


def detect(text: str) -> bool:
    """True when ``text`` looks like ``--query-gpu`` CSV (a header of dotted field names)."""
    for line in text[:5000].splitlines()[:5]:
        cells = [c.strip() for c in line.split(",")]
        if len(cells) > 1 and all(_FIELD_RE.match(c) for c in cells) and any("." in c or c == "index" for c in cells):
            return True
    return False
