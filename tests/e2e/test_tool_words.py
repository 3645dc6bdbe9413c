"""Every tool failure's own words reach the reason (issue 24, class 7: nvbandwidth's
``CUDA_ERROR_NOT_PERMITTED`` reached the report as "nvbandwidth exited 1:" with its words
dropped; nccl-tests' words were replaced by "unreadable nccl-tests output").

One ``nvtest run`` on a stand-in GPU node (nvtest/testing/standin_nodes.py, HGX H100 judged as a GB200
tray so the IMEX checks run too) where every tool the checks run prints its own error on
stderr and exits 3: each tool-running check fails or errors, and its reason (or, when the
reason is bounded, ``details.reason_full``) carries that tool's words.
"""

from __future__ import annotations

import json

import pytest

from nvtest.testing.standin import Recording
from nvtest.testing.standin_nodes import PROFILES, NodeProfile, Tool, install
from tests.conftest import run_nvtest

#: check -> the tool whose words its reason must carry.
TOOL_CHECKS = {
    "gpus": "nvidia-smi",
    "driver_stack": "nvidia-smi",
    "ecc": "nvidia-smi",
    "nvlink": "nvidia-smi",
    "fabric_manager": "nvidia-smi",
    "dcgm_diag": "dcgmi",
    "ib_ports": "ibstat",
    "h2d": "nvbandwidth",
    "nccl": "all_reduce_perf",
    "nccl_nics_only": "all_reduce_perf",
    "imex": "nvidia-imex-ctl",
}
TOOLS = sorted({*TOOL_CHECKS.values(), "ibv_devinfo", "systemctl"})


def words(tool: str) -> str:
    return f"{tool}: E7731 operation refused by site policy ({tool})"


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> dict[str, dict]:
    tmp = tmp_path_factory.mktemp("tool-words")
    failing = {t: Tool(Recording(stderr=words(t) + "\n", exit_code=3)) for t in TOOLS}
    tools = install(
        NodeProfile("tools_fail", "every tool fails", {**PROFILES["h100_healthy"].tools, **failing}), tmp / "bin"
    )
    out = tmp / "reports"
    proc = run_nvtest(
        "run",
        "--suite",
        "delivery",
        "-k",
        " or ".join(TOOL_CHECKS),
        "--sku",
        "gb200-nvl72-tray",
        "--out",
        str(out),
        "--progress",
        "none",
        env={"PATH": tools.path_prefix(), "OMP_NUM_THREADS": "1", "NVTEST_SYSFS_ROOT": str(tmp)},
        timeout=300,
    )
    path = out / "latest" / "results.json"
    assert path.exists(), proc.stdout[-2000:] + proc.stderr[-2000:]
    return {r["check"]: r for r in json.loads(path.read_text())["results"]}


@pytest.mark.parametrize("check", sorted(TOOL_CHECKS))
def test_a_failing_tools_words_reach_the_reason(results, check):
    r = results.get(check)
    assert r is not None, sorted(results)
    assert r["verdict"] in ("fail", "error"), r
    full = (r.get("details") or {}).get("reason_full") or r["reason"]
    assert words(TOOL_CHECKS[check]) in full, full


def test_the_walk_covers_every_tool_a_check_runs():
    """Every tool a suite's Probe runs by name (``command=("<tool>", ...)``, not a shell) and
    every tool a probe script or job starts for a check is among the failing stand-ins above."""
    import ast

    from nvtest.config.resources import suites_dir

    named = set()
    for path in suites_dir().rglob("test_*.py"):
        for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "Probe":
                cmd = next((k.value for k in n.keywords if k.arg == "command"), None)
                if isinstance(cmd, ast.Tuple) and cmd.elts and isinstance(cmd.elts[0], ast.Constant):
                    named.add(str(cmd.elts[0].value))
    assert named - {"sh", "bash"} <= set(TOOLS), sorted(named - {"sh", "bash"} - set(TOOLS))
    # started from scripts and jobs: nvbandwidth (h2d probe), nccl-tests, systemctl and
    # nvidia-imex-ctl (fabric manager and IMEX scripts)
    assert {"nvbandwidth", "all_reduce_perf", "systemctl", "nvidia-imex-ctl"} <= set(TOOLS)
