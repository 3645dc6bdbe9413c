"""``nvtest parse``: run a parser on a file collected elsewhere and print the record.

The verdict is the run's own judgement of the output (:func:`nvtest.checks.standalone.judge_reading`:
nccl-tests by ``judge_run``, perftest by the pair check's plausibility rule, a kernel log by
``xid_scan``; the other tools by their own verdict and the states their reading shows).

Exit codes: 0 parsed, verdict ``pass`` or ``warn``; 1 parsed, verdict ``fail`` or ``error``:
the tool's own output says the run failed or was cut short (``passed``/``completed`` false),
the reading shows a failed state (:func:`nvtest.playbook.readings.assess`: ``(rev ff)``, a
port up but not Active, inactive NVLinks, rows pending remap), or a run would not judge it (a
capped sweep, an implausible figure, an Xid not in the catalog); 2 unknown tool, unreadable file, a file
larger than ``--max-bytes`` (64 MiB by default; ``/dev/zero`` stops there), binary data, unrecognised
content or a ParseError.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.text import Text

from nvtest.checks.standalone import judge_reading
from nvtest.cli.app import app
from nvtest.config.loader import read_bounded
from nvtest.config.skus import load_catalog
from nvtest.errors import EXIT_CHECK_FAILED, EXIT_CONFIG, ConfigError, ParseError
from nvtest.parsers import PARSERS, detect, parse, readable, to_jsonable, tool_names
from nvtest.parsers._binary import binary_reason
from nvtest.report.console import make_console, print_table

__all__ = ["DEFAULT_MAX_BYTES", "parse_command"]

#: Largest file ``nvtest parse`` reads, bytes: an NCCL_DEBUG=INFO log of a large job
#: is tens of MB; nothing a parser reads is larger (``--max-bytes`` sets another).
DEFAULT_MAX_BYTES = 64 * 1024 * 1024

_HELP = """Parse a tool's output file into a typed record.

Without TOOL the tool is recognised from the content.

The output is judged by the run's own rules (less the SKU thresholds): the
verdict is pass, warn, fail or error; exit 1 when it is fail or error: the tool
says the run failed or was cut short, the reading shows a failed state (a fatal
Xid, a device at rev ff, a port up but not Active, inactive NVLinks, rows
pending remap), or a run would not judge it (a capped nccl-tests sweep, an
implausible figure such as a negative Gb/s); 2 when the file cannot be read or
parsed (larger than --max-bytes, binary data), else 0 (exit 1: not passed).

Examples:

  nvtest parse nccl-tests logs/node017/nccl.log --json

  nvtest parse nccl-tests nccl.log --sku h100-sxm-80gb

  nvtest parse dmesg.txt

  nvtest parse --list
"""


def _rows(prefix: str, value: Any, out: list[tuple[str, str]], limit: int = 400) -> None:
    """Flatten a JSON-able value into (path, text) rows for the table view."""
    if len(out) >= limit:
        return
    if isinstance(value, dict):
        for k, v in value.items():
            _rows(f"{prefix}.{k}" if prefix else k, v, out, limit)
    elif isinstance(value, list) and value and isinstance(value[0], (dict, list)):
        for i, v in enumerate(value):
            _rows(f"{prefix}[{i}]", v, out, limit)
    else:
        out.append((prefix, json.dumps(value) if not isinstance(value, str) else value))


#: Properties of a record that carry the tool's own verdict (not in ``to_jsonable``).
SIGNALS = ("passed", "completed", "failure_reason")


@dataclasses.dataclass
class _Verdict:
    """What the record says of the run: its failures and warnings, with their paths."""

    passed: bool | None = None
    failures: list[str] = dataclasses.field(default_factory=list)
    warnings: list[str] = dataclasses.field(default_factory=list)


def _with_signals(record: Any, data: Any, path: str, verdict: _Verdict) -> Any:
    """``data`` (``to_jsonable(record)``) with the verdict properties of every record in
    the tree added, first in their mapping; failures and warnings collected in ``verdict``."""
    if isinstance(record, (list, tuple)) and isinstance(data, list):
        return [_with_signals(r, d, f"{path}[{i}]", verdict) for i, (r, d) in enumerate(zip(record, data, strict=True))]
    if not (dataclasses.is_dataclass(record) and isinstance(data, dict)):
        return data
    signals = {
        name: getattr(record, name)
        for name in SIGNALS
        if isinstance(getattr(type(record), name, None), property) and name not in data
    }
    where = f"{path}: " if path else ""
    failed = signals.get("passed") is False or signals.get("completed") is False
    if failed and signals.get("failure_reason"):
        verdict.failures.append(f"{where}{signals['failure_reason']}")
    verdict.warnings.extend(f"{where}{w}" for w in getattr(record, "warnings", ()) or ())
    before = len(verdict.failures)
    out = {**signals, **data}
    for f in dataclasses.fields(record):
        sub = f"{path}.{f.name}".lstrip(".")
        out[f.name] = _with_signals(getattr(record, f.name), data[f.name], sub, verdict)
    if failed and not signals.get("failure_reason") and len(verdict.failures) == before:
        # no reason here nor below: say which signal is false
        false = [k for k in ("passed", "completed") if signals.get(k) is False]
        verdict.failures.append(f"{where}{', '.join(false)}: false")
    return out


def _fail(console: Console, message: str) -> typer.Exit:
    console.print(Text.assemble(("error:", "red"), f" {message}"))
    return typer.Exit(EXIT_CONFIG)


@app.command("parse", help=_HELP)
def parse_command(
    args: Annotated[list[str] | None, typer.Argument(metavar="[TOOL] FILE", show_default=False)] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the record as JSON.")] = False,
    list_tools: Annotated[bool, typer.Option("--list", help="List the tools, one per line.")] = False,
    max_bytes: Annotated[
        int, typer.Option("--max-bytes", min=1, help="Largest input read, bytes (a larger one is an error).")
    ] = DEFAULT_MAX_BYTES,
    sku: Annotated[
        str | None,
        typer.Option(
            "--sku",
            help="The SKU profile the output came from: its expect.nvls judges NCCL's NVLS lines as a run does.",
        ),
    ] = None,
    sku_dir: Annotated[
        list[Path] | None,
        typer.Option("--sku-dir", help="Extra directory of SKU profiles for --sku (repeatable)."),
    ] = None,
) -> None:
    out = make_console()
    err = make_console(stderr=True)
    if list_tools:
        for name in tool_names():
            typer.echo(name)
        return
    args = args or []
    if len(args) not in (1, 2):
        raise _fail(err, "expected [TOOL] FILE")
    tool, file = (None, args[0]) if len(args) == 1 else (args[0], args[1])
    if tool is not None and tool not in PARSERS:
        raise _fail(err, f"unknown tool {tool!r}; known: {', '.join(tool_names())}")
    try:
        data = read_bounded(Path(file), max_bytes, setting="--max-bytes")
    except ConfigError as exc:
        raise _fail(err, f"{file}: {exc.reason}") from None
    text = data.decode("utf-8", errors="replace")
    binary = binary_reason(text)
    if binary is not None:
        raise _fail(err, f"{file}: not a tool's text output: {binary}")
    if tool is None:
        tool = detect(text)
        if tool is None:
            raise _fail(err, f"{file}: no parser recognised the content (tried: {', '.join(PARSERS)})")
    try:
        record = parse(tool, text)
    except ParseError as exc:
        raise _fail(err, f"{file}: {exc}") from None
    try:
        expect = load_catalog(sku_dir or ()).get(sku).expect if sku is not None else None
    except ConfigError as exc:
        raise _fail(err, f"--sku: {exc.reason}") from None
    verdict = _Verdict()
    data = _with_signals(record, to_jsonable(record), "", verdict)
    # the run's own judgement of this output (completeness, plausibility, the Xid catalog as
    # xid_scan applies it; else the tool's verdict and the states its reading shows)
    reading = judge_reading(record, readable(tool, text), nvls=bool(expect and expect.nvls))
    said = verdict.failures  # the record's own signals (passed/completed false, with why)
    errors = list(dict.fromkeys([*reading.errors, *(said if reading.verdict == "error" else [])]))
    verdict.failures = list(dict.fromkeys([*reading.failures, *(said if reading.verdict == "fail" else [])]))
    verdict.warnings = list(dict.fromkeys([*verdict.warnings, *reading.warnings, *(said if reading.passed else [])]))
    verdict.passed = reading.passed
    if as_json:
        doc = {
            "tool": tool,
            "verdict": reading.verdict,
            "passed": verdict.passed,
            "failures": verdict.failures,
            "errors": errors,
            "warnings": verdict.warnings,
            "notes": list(reading.notes),
            "record": data,
        }
        typer.echo(json.dumps(doc, indent=2))
    else:
        rows: list[tuple[str, str]] = []
        _rows("", data, rows)
        print_table(out, ("field", "value"), rows, title=f"{file} ({tool})")
    for w in verdict.warnings:
        err.print(Text.assemble(("warning:", "yellow"), f" {file}: {w}"))
    for n in reading.notes:  # what the run's judgement noted (NVLS unproven, NCCL_DEBUG not INFO)
        err.print(Text.assemble(("note:", "cyan"), f" {file}: {n}"))
    if not verdict.passed:
        why = "; ".join([*verdict.failures, *errors]) or "passed: false"
        what = (
            "not passed: not judged (cut short, incomplete or implausible; a run says error)"
            if reading.verdict == "error"
            else "not passed (the run failed, or its reading shows a failed state)"
        )
        err.print(Text.assemble(("warning:", "yellow"), f" {file}: {tool}: {what}: {why}"))
        raise typer.Exit(EXIT_CHECK_FAILED)
