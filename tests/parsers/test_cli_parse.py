"""``nvtest parse`` through typer's CliRunner on the nvtest app."""

from __future__ import annotations

import json

import pytest
import typer
from typer.testing import CliRunner

from nvtest.parsers import PARSERS
from tests.parsers.conftest import CORPUS


@pytest.fixture
def app() -> typer.Typer:
    import nvtest.cli

    return nvtest.cli.app


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
    res = runner.invoke(app, ["parse", str(CORPUS / "dmesg-xid" / "fallen-off-bus-multiline-no-xid-driver570.txt")])
    # a GPU that fell off the bus is a failed state of the reading: exit 1 (issue 25, class 2)
    assert res.exit_code == 1, res.output
    assert "dmesg" in res.output and "fallen_off_bus" in res.output


def test_unrecognised_content_exits_2_listing_tools(app, tmp_path):
    f = tmp_path / "x.txt"
    f.write_text("hello world\n")
    res = runner.invoke(app, ["parse", str(f)])
    assert res.exit_code == 2 and "no parser recognised" in res.output and "nccl-tests" in res.output


def test_unknown_tool_and_unreadable_file_exit_2(app, tmp_path):
    res = runner.invoke(app, ["parse", "nope", str(NCCL)])
    assert res.exit_code == 2 and "unknown tool" in res.output
    res = runner.invoke(app, ["parse", "stream", str(tmp_path / "missing.txt")])
    assert res.exit_code == 2 and "cannot read" in res.output


def test_parse_error_exits_2_with_message(app, tmp_path):
    f = tmp_path / "s.txt"
    f.write_text("no table here\n")
    res = runner.invoke(app, ["parse", "stream", str(f)])
    assert res.exit_code == 2 and "stream" in res.output and "not stream output" in res.output


def test_help_has_an_example(app):
    res = runner.invoke(app, ["parse", "--help"])
    assert res.exit_code == 0 and "nvtest parse nccl-tests" in res.output


STREAM = CORPUS / "stream" / "ppc-linux-verbose-build-based-on-stream-validates.txt"


def _cut(src, tmp_path, stop_before: str):
    """A copy of ``src`` with every line from the first one starting ``stop_before`` dropped."""
    lines = src.read_text().splitlines(keepends=True)
    n = next(i for i, line in enumerate(lines) if line.lstrip().startswith(stop_before))
    f = tmp_path / f"cut-{src.name}"
    f.write_text("".join(lines[:n]))
    return f


def test_truncated_nccl_log_shows_failure_and_exits_1(app, tmp_path):
    f = _cut(NCCL, tmp_path, "# Out of bounds values")
    res = runner.invoke(app, ["parse", "nccl-tests", str(f), "--json"])
    assert res.exit_code == 1, res.output
    doc = json.loads(res.stdout)
    # as the run judges it: cut short is not judged (error), not a failure of the fabric
    assert doc["passed"] is False and doc["verdict"] == "error" and doc["failures"] == []
    assert "tests[0]: run stopped before the summary" in doc["errors"]
    run = doc["record"]["tests"][0]
    assert (run["passed"], run["completed"]) == (False, False)
    assert run["failure_reason"] == "run stopped before the summary"
    assert "warning:" in res.stderr and "run stopped before the summary" in res.stderr


def test_truncated_nccl_log_table_shows_signals(app, tmp_path):
    f = _cut(NCCL, tmp_path, "# Out of bounds values")
    res = runner.invoke(app, ["parse", "nccl-tests", str(f)])
    assert res.exit_code == 1, res.output
    assert "tests[0].completed" in res.stdout and "tests[0].failure_reason" in res.stdout
    assert "cut short" in res.stderr


def test_complete_logs_pass_with_signals(app):
    res = runner.invoke(app, ["parse", "nccl-tests", str(NCCL), "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["passed"] is True and doc["failures"] == []
    assert doc["record"]["tests"][0]["failure_reason"] is None
    res = runner.invoke(app, ["parse", str(STREAM)])
    # the only warning: the poster's shell prompt line before the output
    said = [ln for ln in res.stderr.splitlines() if "warning" in ln]
    assert res.exit_code == 0 and all("shell prompt" in ln for ln in said), res.output


def test_stream_cut_mid_table_is_detected_warned_and_exits_1(app, tmp_path):
    f = _cut(STREAM, tmp_path, "Add:")
    for args in (["parse", str(f), "--json"], ["parse", "stream", str(f), "--json"]):
        res = runner.invoke(app, args)
        assert res.exit_code == 1, res.output
        doc = json.loads(res.stdout)
        assert doc["tool"] == "stream" and doc["passed"] is False
        assert doc["record"]["passed"] is False
        assert "no validation line (run cut short?)" in doc["warnings"]
        assert "warning:" in res.stderr and "run cut short?" in res.stderr


def test_parse_help_documents_exit_1(app):
    res = runner.invoke(app, ["parse", "--help"])
    assert "exit 1" in res.output


def test_a_reading_of_a_failed_state_exits_1_a_healthy_one_0(app):
    """Issue 25, class 2: Xid 119 lines, a GPU at rev ff, a port up but not Active fail the
    reading with the reason; a healthy reading stays at exit 0 with no failure."""
    failed = {
        "dmesg-xid/gpud-scan-xid119-gsp-rpc-timeout-quoted-lines-relative-time.txt": "Xid 119",
        "lspci/nn-grep-dgx-station-4xv100-one-gpu-rev-ff-config-space-all-ones.txt": "revision ff",
        "ibstat/ibstat-prompts-ibpanic-then-unindented-ca-port-initializing-lid-65535.txt": ("state Initializing"),
    }
    for rel, said in failed.items():
        res = runner.invoke(app, ["parse", str(CORPUS / rel), "--json"])
        assert res.exit_code == 1, res.output
        doc = json.loads(res.stdout)
        assert doc["passed"] is False and any(said in f for f in doc["failures"]), doc["failures"]
    healthy = CORPUS / "ibstat" / "ibstat-h100-8x-ndr-400-active-plus-bond-200-ethernet.txt"
    res = runner.invoke(app, ["parse", str(healthy), "--json"])
    assert res.exit_code == 0 and json.loads(res.stdout)["failures"] == [], res.output
