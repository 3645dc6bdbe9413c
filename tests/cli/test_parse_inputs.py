"""``nvtest parse`` reads with a size bound and refuses binary data; the parsers' entry point
refuses binary data for every tool (a lenient parser would read garbage as a clean log)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from typer.testing import CliRunner

from nvtest.errors import ParseError
from nvtest.parsers import detect, parse, tool_names
from nvtest.parsers._binary import binary_reason
from tests.conftest import CORPUS

runner = CliRunner()


def _random_bytes(n: int = 4096, seed: int = 15) -> bytes:
    return random.Random(seed).randbytes(n)


@pytest.mark.parametrize("tool", tool_names())
def test_every_parser_refuses_binary_data(tool: str):
    text = _random_bytes().decode("utf-8", errors="replace")
    with pytest.raises(ParseError) as ei:
        parse(tool, text)
    assert "not text: binary data" in str(ei.value)
    no_nul = bytes(b or 1 for b in _random_bytes(seed=16)).decode("utf-8", errors="replace")
    with pytest.raises(ParseError):
        parse(tool, no_nul)
    assert detect(text) is None


def test_no_recorded_tool_output_reads_as_binary():
    files = [p for p in CORPUS.rglob("*") if p.is_file() and p.name != "INDEX.md"]
    assert len(files) > 30
    flagged = [p.name for p in files if binary_reason(p.read_bytes().decode("utf-8", errors="replace"))]
    assert not flagged


@pytest.fixture
def app():
    import nvtest.cli

    return nvtest.cli.app


def test_cli_refuses_binary_and_oversized_input(app, tmp_path: Path):
    blob = tmp_path / "dmesg.bin"
    blob.write_bytes(_random_bytes())
    res = runner.invoke(app, ["parse", "dmesg", str(blob)])
    assert res.exit_code == 2 and "not a tool's text output: binary data" in res.output, res.output
    res = runner.invoke(app, ["parse", str(blob)])
    assert res.exit_code == 2 and "binary data" in res.output
    res = runner.invoke(app, ["parse", "dmesg", "/dev/zero", "--max-bytes", "1000000"])
    assert res.exit_code == 2 and "larger than 1000000 bytes (--max-bytes sets the limit)" in res.output
    log = CORPUS / "dmesg-xid" / "fallen-off-bus-multiline-no-xid-driver570.txt"
    res = runner.invoke(app, ["parse", "dmesg", str(log), "--max-bytes", "10"])
    assert res.exit_code == 2 and "larger than 10 bytes" in res.output
    res = runner.invoke(app, ["parse", "dmesg", str(log)])
    assert res.exit_code in (0, 1), res.output  # parsed: the tool's verdict decides


def test_parse_with_a_sku_prints_the_judgements_notes(tmp_path: Path) -> None:
    """NVLS unproven (INFO lines, none about NVLS) and NCCL_DEBUG not INFO (no INFO line) are
    the run's notes: `nvtest parse --sku` prints them (stderr, and `notes` in --json)."""
    from typer.testing import CliRunner

    from nvtest.cli.app import app
    from tests.jobs.test_nccl_nvls import _with
    from tests.jobs.test_nccl_path import NORMAL

    runner = CliRunner()
    info = tmp_path / "info.log"
    info.write_text(_with(["Using network IB"]))
    res = runner.invoke(app, ["parse", "nccl-tests", str(info), "--sku", "h100-sxm-80gb"])
    assert res.exit_code == 0 and "note:" in res.output and "NVLS unproven" in res.output, res.output
    warn_level = tmp_path / "warn.log"
    warn_level.write_text(NORMAL)
    res = runner.invoke(app, ["parse", "nccl-tests", str(warn_level), "--sku", "h100-sxm-80gb", "--json"])
    assert res.exit_code == 0 and "NCCL_DEBUG not INFO" in res.output, res.output


def test_parse_has_the_sku_dir_its_unknown_sku_error_advises(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from nvtest.cli.app import app
    from nvtest.config.resources import configs_dir
    from tests.jobs.test_nccl_path import NORMAL

    log = tmp_path / "nccl.log"
    log.write_text(NORMAL)
    runner = CliRunner()
    bad = runner.invoke(app, ["parse", "nccl-tests", str(log), "--sku", "site-h100"])
    assert bad.exit_code == 2 and "--sku-dir" in bad.output, bad.output
    skus = tmp_path / "skus"
    skus.mkdir()
    text = (configs_dir() / "skus" / "h100-sxm-80gb.yaml").read_text()
    (skus / "site-h100.yaml").write_text(text.replace("name: h100-sxm-80gb", "name: site-h100", 1))
    ok = runner.invoke(app, ["parse", "nccl-tests", str(log), "--sku", "site-h100", "--sku-dir", str(skus)])
    assert ok.exit_code in (0, 1) and "unknown SKU" not in ok.output, ok.output
