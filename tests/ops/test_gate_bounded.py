"""The gate's tools are read through the bounded reader: a tool that prints without end
costs the gate the capture limit, and what it printed is not judged on a part of it: the
checks that read it are ``unknown`` with what was dropped, never pass, never drain."""

from __future__ import annotations

from pathlib import Path

import pytest

from nvtest.ops.gate.engine import GateOptions, run_gate
from nvtest.testing.standin_nodes import node_bin


@pytest.mark.parametrize("tool", ["nvidia-smi", "dmesg"])
def test_a_tool_printing_past_the_limit_is_unknown_not_judged(
    tool: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tools = node_bin(tmp_path, "n1")
    flood = tools.bin_dir / tool
    flood.write_text("#!/bin/sh\nhead -c 5000000 /dev/zero | tr '\\0' x\n", encoding="utf-8")
    flood.chmod(0o755)
    monkeypatch.setenv("PATH", tools.path_prefix())
    monkeypatch.setenv("NVTEST_CAPTURE_BYTES", "1MiB")
    doc = run_gate(GateOptions(node="n1", state_dir=tmp_path / "state", history="off", drain=True, budget_s=20.0))
    words = "stdout of 5.0 MB exceeded the capture limit of 1 MiB: first and last 512 KiB kept, 4.0 MB dropped"
    said = [c for c in doc["checks"] if words in (c.get("reason") or "")]
    assert said, [(c["check"], c["verdict"], c.get("reason")) for c in doc["checks"]]
    assert all(c["verdict"] in ("unknown", "fail") for c in said)
    assert any(c["verdict"] == "unknown" for c in said)
    assert doc["verdict"] in ("unknown", "fail") and doc["slurm"]["drain"] is None
