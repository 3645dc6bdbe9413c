"""The hung-tool case of rule 5, shared by every transport's test: a stand-in ``nvidia-smi``
that sleeps on some nodes, then the suites' own nvidia-smi checks one after another."""

from __future__ import annotations

import importlib.util
import time
from pathlib import Path
from types import ModuleType

import pytest

from nvtest.config.resources import suites_dir
from nvtest.errors import NodeError
from nvtest.session.context import RunConfig, RunContext
from nvtest.session.probe import raw_output
from nvtest.testing.standin import Recording, StandInTools

#: nvidia-smi probes get 120 s (the fabric-manager probe 60 s); this scale makes it 2 s (1 s).
TIMEOUT_SCALE = 1 / 60


def gpu_health_module() -> ModuleType:
    """``suites/health/test_gpu_health.py``, whose probes the checks really use."""
    path = suites_dir() / "health" / "test_gpu_health.py"
    spec = importlib.util.spec_from_file_location("nvtest_suite_gpu_health", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def nvidia_smi(bin_dir: Path, *, hung: bool) -> StandInTools:
    """A stand-in nvidia-smi: one that hangs (sleeps 120 s), or one that answers at once."""
    tools = StandInTools(bin_dir)
    tools.add("nvidia-smi", Recording(stdout="stand-in\n", sleep_s=120 if hung else 0))
    return tools


def context(run_dir: Path, backend: str, **cfg: object) -> RunContext:
    """A run's context on ``backend`` whose probes time out after 2 s."""
    config = RunConfig(
        run_id="hung-tool",
        run_dir=str(run_dir),
        backend=backend,
        timeout_scale=TIMEOUT_SCALE,
        **cfg,  # type: ignore[arg-type]
    )
    return RunContext.from_config(config)


def assert_hung_tool_blocks(ctx: RunContext, hung: set[str]) -> None:
    """nvidia-smi -q -x times out on the ``hung`` nodes; the next two checks that need
    nvidia-smi (nvlink -s, the fabric-manager script) are blocked there at once, with the
    reason, while the other nodes run them."""
    mod = gpu_health_module()
    nodes = ctx.nodes
    first = time.monotonic()
    outcomes = _outcomes(ctx, mod.SMI_XML, nodes)
    assert time.monotonic() - first >= 2.0 if hung else True
    for name in hung:
        assert "timed out after 2 s" in str(outcomes[name]), outcomes[name]
        assert "nvidia-smi" in str(outcomes[name]), outcomes[name]  # running at the deadline
    for later in (mod.NVLINK, mod.FABRIC):
        t0 = time.monotonic()
        outcomes = _outcomes(ctx, later, nodes)
        took = time.monotonic() - t0
        limit = later.timeout_s * TIMEOUT_SCALE  # waiting for the hung node would take this
        assert took < limit, f"{later.name} took {took:.1f} s: it waited instead of being blocked"
        for node in nodes:
            got = outcomes[node.name]
            if node.name in hung:
                assert isinstance(got, NodeError), got
                res = ctx.phases.cached(later.name)
                assert res is not None and res[node.name].duration_s == 0.0  # never started
                assert str(got).startswith(
                    "blocked: nvidia-smi hung on this node in nvidia-smi-q-x (timed out after 2 s"
                ), got
                log = (ctx.run_dir / ctx.phases.log_path(later.name, node.name)).read_text()
                assert "blocked: nvidia-smi hung" in log  # the evidence says so too
            else:
                assert not isinstance(got, Exception) and got.completed, got
    ctx.close(interrupted=False)


def _outcomes(ctx: RunContext, probe: object, nodes: list) -> dict[str, object]:
    out: dict[str, object] = {}
    for node in nodes:
        try:
            out[node.name] = raw_output(ctx, probe, node, nodes)  # type: ignore[arg-type]
        except NodeError as exc:
            out[node.name] = exc
        except Exception as exc:  # pragma: no cover - shown in the assertion
            pytest.fail(f"{node.name}: {type(exc).__name__}: {exc}")
    return out
