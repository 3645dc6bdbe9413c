"""A tool's terminal escapes reach no sink raw: consoles, drain reasons, CSV, junit, reports.

A stand-in nvidia-smi (a real "driver not loaded" failure, exit 9) prints ``ESC [2J`` (clear
the screen), ``ESC ]0;x BEL`` (retitle the window) and a carriage return around its words.
Its words become check reasons: the run's console and files, the gate's summary line and
JSON, the history's timeline, the parse command's table, the drain reasons and the sweep
page all show them as ``\\x1b``-style escapes (:func:`nvtest.text.visible`). The raw
evidence logs keep the bytes as the tool printed them (they are evidence, not a display).
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

from rich.live import Live
from rich.table import Table
from rich.text import Text

from nvtest.ops.gate.slurm import gate_reason
from nvtest.ops.sweep_report import render_sweep_html
from nvtest.report.console import make_console, print_table
from nvtest.run.drain import drain_reason
from nvtest.testing.standin import Recording
from nvtest.testing.standin_nodes import SMI_DRIVER_NOT_LOADED, install
from nvtest.text import has_controls, one_line, visible
from nvtest.transports._slurm_cmd import drain_argv
from tests.conftest import DATA, run_nvtest

HOSTILE = "\x1b[2J\x1b]0;x\x07\r"
RAW = frozenset({"\x1b", "\x07", "\r"})


def _raw(text: str) -> frozenset[str]:
    return RAW & set(text)


def _hostile_node(base: Path) -> dict[str, str]:
    """PATH of a node whose nvidia-smi says the driver is not loaded, escapes around it."""
    tools = install("h100_driver_down", base / "n1" / "bin")
    words = (DATA / "standin" / "nvidia-smi-driver-not-loaded.txt").read_text().strip()
    words = words.replace("NVIDIA-SMI has", "NVIDIA-SMI \x1b[2J\x1b]0;x\x07has", 1)  # a CR would end the line
    tools.add("nvidia-smi", Recording(stdout=f"{HOSTILE}{words}{HOSTILE}\n", exit_code=SMI_DRIVER_NOT_LOADED))
    return {"PATH": tools.path_prefix()}


def test_every_command_line_sink_shows_the_escapes(tmp_path: Path) -> None:
    env = _hostile_node(tmp_path)
    hist = str(tmp_path / "h.sqlite")
    gate = run_nvtest(
        "gate", "--node", "n1", "--state-dir", str(tmp_path / "s"), "--history", hist, env=env, timeout=120
    )
    doc = json.loads(gate.stdout)
    gpus = next(c for c in doc["checks"] if c["check"] == "gpus")
    assert gpus["verdict"] == "fail" and "\x1b[2J\x1b]0;x\x07" in gpus["reason"]  # the record keeps the words
    assert gate.stderr.startswith("nvtest gate n1: FAIL") and not _raw(gate.stdout + gate.stderr)
    history = run_nvtest("history", "n1", "--history", hist, env={"COLUMNS": "400"}, timeout=120)
    assert history.returncode == 0 and "\\x1b[2J" in history.stdout and not _raw(history.stdout + history.stderr)

    suite = tmp_path / "one.yaml"
    suite.write_text("name: one\ndescription: one check\nchecks:\n  - inventory/test_inventory.py::test_gpus\n")
    run = run_nvtest(
        "run",
        "--suite",
        str(suite),
        "--backend",
        "local",
        "--out",
        str(tmp_path / "out"),
        "--progress",
        "plain",
        env={**env, "NVTEST_HISTORY": "off"},
        timeout=300,
    )
    assert run.returncode == 1 and "\\x1b[2J" in run.stdout, run.stdout[-2000:]
    assert not _raw(run.stdout + run.stderr)
    out = tmp_path / "out" / "latest"
    for name in ("results.csv", "junit.xml", "report.html"):
        text = (out / name).read_bytes().decode()
        assert "\\x1b[2J" in text and not _raw(text), name

    # nvtest parse removes terminal escape sequences before reading (clean_paste, said in the
    # record's warnings); a control character that is no sequence (a lone BEL) is shown escaped
    dmesg = tmp_path / "dmesg.txt"
    dmesg.write_text(f"[ 1.0] NVRM: Xid (PCI:0000:01:00): 79, pid=1, GPU has \x07fallen off the bus.{HOSTILE}\n")
    parsed = run_nvtest("parse", "dmesg", str(dmesg), env={"COLUMNS": "400"}, timeout=60)
    assert "removed terminal colour/escape codes from 1 line(s)" in parsed.stdout, parsed.stdout
    assert "\\x07" in parsed.stdout and not _raw(parsed.stdout + parsed.stderr), parsed.stdout


def test_drain_reasons_consoles_and_the_sweep_page_show_the_escapes() -> None:
    words = f"nvidia-smi: {HOSTILE}couldn't communicate\nwith the driver \u202e{HOSTILE}"
    for reason in (gate_reason("gpus", words), drain_reason("run-1", "gpus", words), one_line(words)):
        assert not has_controls(reason) and "\n" not in reason and "\\x1b[2J" in reason, reason
        assert not _raw(" ".join(drain_argv("n1", reason)))
    assert drain_argv("n1", words)[-1] == "reason=" + one_line(words)  # the last gate before scontrol
    buf = io.StringIO()
    console = make_console(file=buf, force_terminal=True, width=200)
    table = Table("node", "reason")
    table.add_row("n1", words)
    table.add_row(Text("n2"), Text(words, style="red"))
    for printed in (words, Text(words, style="bold"), table):
        console.print(printed)
    print_table(make_console(file=buf, width=200), ["node", "reason"], [["n3", words]])
    styled = re.sub(r"\x1b\[[0-9;]*m", "", buf.getvalue())  # rich's own colours (SGR) only
    assert "\\x1b[2J" in buf.getvalue() and not _raw(styled) and "\u202e" not in styled
    live_out = io.StringIO()  # the live view: rich's cursor moves stay controls, the words do not
    with Live(
        Text("n1 running"), console=make_console(file=live_out, force_terminal=True, width=200), auto_refresh=False
    ) as live:
        live.update(Text(words), refresh=True)
    own = re.sub(r"\x1b\[(\?25[lh]|2K|1A|[0-9;]*m)|\r\x1b", "", live_out.getvalue())
    assert "\\x1b[2J" in live_out.getvalue() and "\x1b[1A" in live_out.getvalue() and not _raw(own)
    page = render_sweep_html(
        {
            "sweep_id": "s1",
            "nodes": {"n1": {"verdict": "fail", "why": words}},
            "batches": [],
            "drained": {"n1": {"action": "drain", "reason": words}},
            "warnings": [words],
        }
    )
    assert "\\x1b[2J" in page and not _raw(page)
    assert visible(visible(words)) == visible(words)
