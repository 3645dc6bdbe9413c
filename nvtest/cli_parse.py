"""``nvtest parse``: run a parser on a file collected elsewhere and print the record.

``register(app)`` adds the command to a Typer app (the main CLI calls it). Exit codes:
0 parsed; 2 unknown tool, unreadable file, unrecognised content or a ParseError.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from nvtest.errors import EXIT_CONFIG, ParseError
from nvtest.parsers import PARSERS, detect, parse, to_jsonable, tool_names

__all__ = ["register"]

_HELP = """Parse a tool's output file into a typed record.

Without TOOL the tool is recognised from the content.

Examples:

  nvtest parse nccl-tests logs/node017/nccl.log --json

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


def _fail(console: Console, message: str) -> typer.Exit:
    console.print(f"[red]error:[/red] {message}", highlight=False)
    return typer.Exit(EXIT_CONFIG)


def register(app: typer.Typer) -> None:
    """Add the ``parse`` command to ``app``."""

    @app.command("parse", help=_HELP)
    def parse_command(
        args: Annotated[
            list[str] | None, typer.Argument(metavar="[TOOL] FILE", show_default=False)
        ] = None,
        as_json: Annotated[bool, typer.Option("--json", help="Print the record as JSON.")] = False,
        list_tools: Annotated[
            bool, typer.Option("--list", help="List the tools, one per line.")
        ] = False,
    ) -> None:
        out = Console(soft_wrap=True)
        err = Console(stderr=True, soft_wrap=True)
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
            text = Path(file).read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            raise _fail(err, f"cannot read {file}: {exc.strerror or exc}") from None
        if tool is None:
            tool = detect(text)
            if tool is None:
                raise _fail(
                    err, f"{file}: no parser recognised the content (tried: {', '.join(PARSERS)})"
                )
        try:
            record = parse(tool, text)
        except ParseError as exc:
            raise _fail(err, f"{file}: {exc}") from None
        data = to_jsonable(record)
        if as_json:
            typer.echo(json.dumps({"tool": tool, "record": data}, indent=2))
            return
        rows: list[tuple[str, str]] = []
        _rows("", data, rows)
        table = Table(title=f"{file} ({tool})", show_lines=False)
        table.add_column("field")
        table.add_column("value")
        for k, v in rows:
            table.add_row(k, v)
        out.print(table)
