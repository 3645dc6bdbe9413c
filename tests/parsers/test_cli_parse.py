"""``nvtest parse`` through typer's CliRunner on a fresh Typer app."""

from __future__ import annotations

import json

import pytest
import typer
from typer.testing import CliRunner

from nvtest.cli_parse import register
from nvtest.parsers import PARSERS
from tests.parsers.conftest import CORPUS


@pytest.fixture
def app() -> typer.Typer:
    a = typer.Typer()
    register(a)

    @a.command("version")
    def _version() -> None:  # a second command keeps "parse" a named subcommand
        typer.echo("0")

    return a


runner = CliRunner()
NCCL = CORPUS / "nccl-tests" / "all_reduce_perf-2node-16xh100-a3mega-normal-8B-8G.txt"


def test_list(app):
    res = runner.invoke(app, ["parse", "--list"])
    assert res.exit_code == 0 and res.output.split() == sorted(PARSERS)


def test_json_with_tool(app):
    res = runner.invoke(app, ["parse", "nccl-tests", str(NCCL), "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert doc["tool"] == "nccl-tests" and doc["record"]["tests"][0]["avg_busbw_gbps"] == 70.742


def test_detects_tool_and_prints_table(app):
    res = runner.invoke(
        app, ["parse", str(CORPUS / "dmesg-xid" / "fallen-off-bus-multiline-no-xid-driver570.txt")]
    )
    assert res.exit_code == 0, res.output
    assert "dmesg" in res.output and "fallen_off_bus" in res.output


def test_unrecognised_content_exits_2_listing_tools(app, tmp_path):
    f = tmp_path / "x.txt"
    f.write_text("hello world\n")
    res = runner.invoke(app, ["parse", str(f)])
    assert (
        res.exit_code == 2 and "no parser recognised" in res.output and "nccl-tests" in res.output
    )


def test_unknown_tool_and_unreadable_file_exit_2(app, tmp_path):
    res = runner.invoke(app, ["parse", "nope", str(NCCL)])
    assert res.exit_code == 2 and "unknown tool" in res.output
    res = runner.invoke(app, ["parse", "stream", str(tmp_path / "missing.txt")])
    assert res.exit_code == 2 and "cannot read" in res.output


def test_parse_error_exits_2_with_message(app, tmp_path):
    f = tmp_path / "s.txt"
    f.write_text("no table here\n")
    res = runner.invoke(app, ["parse", "stream", str(f)])
    assert res.exit_code == 2 and "stream" in res.output and "no STREAM results table" in res.output


def test_help_has_an_example(app):
    res = runner.invoke(app, ["parse", "--help"])
    assert res.exit_code == 0 and "nvtest parse nccl-tests" in res.output
