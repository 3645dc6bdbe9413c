"""A node that is down at the start is worded by its cause: a hung ``python:`` wrapper is
"inventory probe hung", not "node unreachable", and gets its own next step."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from nvtest.errors import NodeError
from nvtest.playbook.diagnosis import diagnose
from nvtest.session.context import RunConfig, RunContext
from nvtest.session.probe import Probe, raw_output


def test_a_hung_python_wrapper_is_not_an_unreachable_node(tmp_path: Path) -> None:
    wrapper = tmp_path / "python-wrapper"
    wrapper.write_text("#!/bin/sh\nsleep 600\n")  # a site's python: wrapper that hangs
    wrapper.chmod(0o755)
    inv = tmp_path / "inventory.yaml"
    inv.write_text(yaml.safe_dump({"nodes": [{"names": "gpu01", "python": str(wrapper)}]}))
    cfg = RunConfig(
        run_id="down",
        run_dir=str(tmp_path / "run"),
        backend="local",
        inventory=str(inv),
        timeout_scale=1 / 60,
    )
    ctx = RunContext.from_config(cfg)
    try:
        ctx.gather_facts()
        state = ctx.states["gpu01"]
        assert state.down_kind == "timeout", state
        assert state.down_message.startswith("inventory probe hung: timed out after 2 s"), state.down_message
        assert str(wrapper) in state.down_message and "unreachable" not in state.down_message
        node = ctx.nodes[0]
        with pytest.raises(NodeError) as err:
            raw_output(ctx, Probe("x", command=("true",)), node, [node])
        assert str(err.value) == state.down_message
        assert err.value.cause == "transport:timeout:inventory"
        diag = diagnose(
            {"check": "x", "verdict": "error", "reason": f"NodeError: {err.value}", "cause": err.value.cause}
        )
        assert diag is not None and diag.rule == "inventory_probe_hung" and diag.cls == "CONFIG"
        assert "python" in diag.action
    finally:
        ctx.close(interrupted=False)


def test_a_node_the_scheduler_excluded_is_never_started_on_and_says_slurms_words(tmp_path: Path) -> None:
    """Issue 24, class 5: a node Slurm had taken out of service (``RunConfig.excluded``) is a
    node of the run, down from the start with Slurm's state and reason, never probed."""
    marker = tmp_path / "probed"
    wrapper = tmp_path / "python-wrapper"
    wrapper.write_text(f"#!/bin/sh\ntouch {marker}\nexit 1\n")
    wrapper.chmod(0o755)
    inv = tmp_path / "inventory.yaml"
    inv.write_text(yaml.safe_dump({"nodes": [{"names": "gpu01", "python": str(wrapper)}]}))
    said = "Slurm state IDLE+DRAIN, reason: gres/gpu count reported lower than configured (0 < 8)"
    cfg = RunConfig(
        run_id="excl", run_dir=str(tmp_path / "run"), backend="local", inventory=str(inv), excluded={"gpu01": said}
    )
    ctx = RunContext.from_config(cfg)
    try:
        ctx.gather_facts()
        state = ctx.states["gpu01"]
        assert (state.down_kind, state.down_message) == ("excluded", f"excluded by Slurm: {said}")
        assert not marker.exists(), "the inventory probe ran on a node the scheduler excluded"
        assert state.down_error().cause == "scheduler:excluded"
        diag = diagnose(
            {"check": "gpus", "verdict": "error", "reason": f"NodeError: {state.down_message}", "cause": state.cause}
        )
        assert diag is not None and diag.rule == "excluded_by_scheduler" and "scontrol" in diag.action
    finally:
        ctx.close(interrupted=False)
