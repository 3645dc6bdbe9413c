"""Terminal output prints data as it is and stays readable in a pipe at 80 columns.

Two walks: every console nvtest creates comes from :func:`nvtest.report.console.make_console`
(rich's markup, emoji codes and highlighting off), read from the source of every module;
and every printer (the run summary, the inventory, the tables of ``nvtest list``, the
live view in both modes, the error line) is fed data strings that rich would otherwise
rewrite (a PCI bus id ``0000:ab:00.0`` became ``0000🆎00.0``), which must come out as
they went in.
"""

from __future__ import annotations

import ast
import io
import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
from rich.console import Console

from nvtest.report.console import make_console, plain_table, print_table
from tests.architecture.layers import all_modules, module_name

HOSTILE = ["0000:ab:00.0", ":thumbs_up: :ab:", "[bold]not bold[/bold]", "[red]x", "a[/]b", "[link=http://x]y[/link]"]


def test_every_console_comes_from_make_console() -> None:
    found = []
    for path in all_modules():
        mod = module_name(path)
        if mod.startswith("nvtest.probes"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                name = ast.unparse(node.func)
                if (
                    name in ("Console", "rich.console.Console", "rich.print", "print_json")
                    and mod != "nvtest.report.console"
                ):
                    found.append(f"{mod}:{node.lineno}: {name}(...)")
                for kw in node.keywords:
                    if kw.arg in ("markup", "emoji", "highlight") and not (
                        isinstance(kw.value, ast.Constant) and kw.value.value is False
                    ):
                        found.append(f"{mod}:{node.lineno}: {kw.arg}={ast.unparse(kw.value)}")
            if (
                isinstance(node, ast.ImportFrom)
                and node.module == "rich"
                and any(a.name == "print" for a in node.names)
            ):
                found.append(f"{mod}:{node.lineno}: from rich import print")
    assert not found, "a console that may interpret data:\n" + "\n".join(found)


_MARKUP = re.compile(r"\[/?(bold|dim|italic|red|green|yellow|magenta|cyan|blue|white|link)\b[^\]]*\]|\[/\]")


def test_no_markup_in_the_strings_printed() -> None:
    found = []
    for path in all_modules():
        mod = module_name(path)
        if not mod.startswith(("nvtest.cli", "nvtest.run", "nvtest.ops.evidence", "nvtest.report.console")):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {
            id(n.body[0].value)
            for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and n.body
            and isinstance(n.body[0], ast.Expr)
            and isinstance(n.body[0].value, ast.Constant)
        }
        for node in ast.walk(tree):
            if id(node) in docstrings:
                continue
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and _MARKUP.search(node.value):
                found.append(f"{mod}:{node.lineno}: {node.value[:60]!r}")
    assert not found, "markup in a printed string (use Text styles):\n" + "\n".join(found)


def _out(console: Console) -> str:
    assert isinstance(console.file, io.StringIO)
    return console.file.getvalue()


@pytest.mark.parametrize("terminal", [True, False], ids=["terminal", "pipe"])
def test_tables_print_data_as_it_is(terminal: bool) -> None:
    console = make_console(file=io.StringIO(), width=200, force_terminal=terminal, color_system=None)
    print_table(console, ("node", "reason"), [(h, h) for h in HOSTILE])
    text = _out(console)
    for h in HOSTILE:
        assert h in text, (h, text)


def test_make_console_refuses_markup() -> None:
    with pytest.raises(ValueError):
        make_console(markup=True)


def test_a_pipe_table_never_cuts_a_word_at_80_columns() -> None:
    rows = [
        (
            "delivery",
            "27",
            "Acceptance of delivered nodes - inventory, memory, compute, host link, fabric, training smoke run",
        ),
        ("quick", "9", "A few minutes per node for CI on new racks - inventory, STREAM, GEMM"),
    ]
    lines = plain_table(("suite", "checks", "description"), rows, width=80)
    assert all(len(line) <= 80 for line in lines), lines
    words = " ".join(" ".join(line.split()) for line in lines).split()
    for _, _, desc in rows:
        for w in desc.split():
            assert w in words, (w, lines)  # no word cut in two
    wide = [
        (
            "node01",
            "AMD EPYC 7763 64-Core Processor",
            "Debian GNU/Linux 12 (bookworm) / 6.18.44-fc",
            "0 (no NVIDIA device on the PCI bus)",
        )
    ]
    block = plain_table(("node", "CPU", "OS / kernel", "GPUs"), wide, width=80)
    assert block[0] == "node01" and "  CPU: AMD EPYC 7763 64-Core Processor" in block, block
    assert all(len(line) <= 80 for line in block), block


def _doc(tmp: Path) -> Path:
    run = tmp / "run"
    run.mkdir()
    results = [
        {"check": "pcie_link", "node": h, "verdict": v, "reason": f"{h} link x8 < x16", "metrics": []}
        for h, v in zip(HOSTILE, ["fail", "warn", "error", "skip", "warn", "fail"], strict=True)
    ]
    results.append({"check": "host", "node": "n1", "verdict": "pass", "reason": "", "metrics": []})
    doc = {
        "schema_version": 1,
        "run": {
            "run_id": "r",
            "warnings": ["ssh: n1: host key CHANGED for [127.0.0.2]:2222 :ab: accepted (--insecure-host-keys)"],
        },
        "summary": {"verdict": "fail", "nodes": {"fail": 2, "warn": 2, "error": 1, "skip": 1, "pass": 1}},
        "nodes": {},
        "results": results,
    }
    (run / "results.json").write_text(json.dumps(doc))
    return run


def test_the_run_summary_names_every_item_that_did_not_pass(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from nvtest.cli.run import print_summary

    print_summary(_doc(tmp_path))
    raw = capsys.readouterr().out
    assert all(len(line) <= 80 for line in raw.splitlines() if not line.startswith("report: ")), raw
    out = " ".join(raw.split())  # lines wrapped between words at 80 columns
    for h, v in zip(HOSTILE, ["FAIL", "WARN", "ERROR", None, "WARN", "FAIL"], strict=True):
        assert f"{h} link x8 < x16" in out, (h, raw)
        if v:
            assert f"{v} pcie_link[{h}]: {h} link x8 < x16" in out, (v, h, raw)
    assert "skipped, not applicable (1 item(s))" in out and "not passed (5 item(s))" in out
    assert "host key CHANGED for [127.0.0.2]:2222 :ab: accepted" in out
    assert "nodes: 2 fail, 2 warn, 1 error, 1 skip, 1 pass" in out
    assert "{" not in out and "'" not in out, out  # no Python repr


def test_the_summary_folds_nodes_with_the_same_reason(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from nvtest.cli.run import print_summary

    run = tmp_path / "run"
    run.mkdir()
    results = [
        {
            "check": "host",
            "node": f"gpu{i:03d}",
            "verdict": "error",
            "reason": "node unreachable: connection refused",
            "metrics": [],
        }
        for i in range(1, 65)
    ]
    doc = {
        "schema_version": 1,
        "run": {"run_id": "r"},
        "summary": {"verdict": "error", "nodes": {"error": 64}},
        "nodes": {},
        "results": results,
    }
    (run / "results.json").write_text(json.dumps(doc))
    print_summary(run)
    out = " ".join(capsys.readouterr().out.split())
    assert "ERROR host[gpu[001-064]]: node unreachable: connection refused" in out, out


def test_the_inventory_prints_data_as_it_is(capsys: pytest.CaptureFixture[str]) -> None:
    from nvtest.cli.inventory import fleet_summary, print_inventory

    nodes = {
        "0000:ab:00.0": {"inventory": None, "down_reason": "[red]refused[/red] :ab:", "sku": None},
        "n2": {
            "inventory": {
                "gpus": [],
                "cpu_model": ":ab: [bold]cpu",
                "cores": 2,
                "memory_total_kib": 1048576,
                "driver_version": None,
                "os": "Debian",
                "kernel": "6.1",
            },
            "sku": None,
        },
    }
    console = make_console(file=io.StringIO(), width=80)
    print_inventory(console, {"nodes": nodes, "summary": fleet_summary(nodes)})
    out = _out(console)
    assert "unreachable: [red]refused[/red] :ab:" in out and ":ab: [bold]cpu" in out and "0000:ab:00.0" in out, out
    assert "per driver: none (1)" in out and "{" not in out, out
    assert all(len(line) <= 80 for line in out.splitlines()), out


def _ctx() -> SimpleNamespace:
    return SimpleNamespace(config=SimpleNamespace(run_id="r", suite="quick"), nodes=["a", "b"])


@pytest.mark.parametrize("mode", ["plain", "live"])
def test_the_live_view_prints_data_as_it_is(mode: str, capsys: pytest.CaptureFixture[str]) -> None:
    from nvtest.run.live import _Live, _Plain

    view = _Plain(_ctx()) if mode == "plain" else _Live(_ctx())  # type: ignore[arg-type]
    view.start(len(HOSTILE))
    for h in HOSTILE:
        view.on_event("result", {"check": "pcie_link", "node": h, "verdict": "fail", "reason": f"bus {h}"})
    view.on_event("warning", {"message": "ssh: 0000:ab:00.0: host key changed, accepted"})
    view.note("SIGINT: stopping")
    view.finish(None)
    out = capsys.readouterr().out
    for h in HOSTILE:
        assert h in out, (h, out)
    assert "ssh: 0000:ab:00.0: host key changed, accepted" in out and "SIGINT: stopping" in out


def test_the_error_line_prints_data_as_it_is(capsys: pytest.CaptureFixture[str]) -> None:
    from nvtest.cli.app import fail
    from nvtest.errors import ConfigError

    fail(ConfigError("node [bold]0000:ab:00.0[/bold] :ab:", field="nodes"))
    assert "nvtest: error: nodes: node [bold]0000:ab:00.0[/bold] :ab:" in capsys.readouterr().err


def test_the_summary_names_the_report_only_when_it_was_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A full disk can stop report.html after results.json: the last line must not point at it."""
    from nvtest.cli.run import print_summary

    run = _doc(tmp_path)
    print_summary(run)
    assert f"report: not written; rebuild it with: nvtest report {run}" in capsys.readouterr().out
    (run / "report.html").write_text("<html></html>")
    print_summary(run)
    assert f"report: {run / 'report.html'}\n" in capsys.readouterr().out
