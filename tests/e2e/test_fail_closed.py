"""End to end, issue 16: `nvtest run` on stand-in GPU nodes (nvtest/testing/standin_nodes.py) gives the
right verdicts and diagnoses, never a skip or a pass by default.

- Rule 1, fail closed, over every check of every suite: on an HGX H100 whose nvidia-smi cannot
  talk to the driver, a check whose subject is the GPUs, NVSwitches or HCAs fails or errors
  with the tools' words; none skips as "not on this hardware"; the CPU checks still run.
  On this machine (no NVIDIA function on the PCI bus) the GPU checks skip naming the bus
  readings that proved it, and the CPU checks pass for real.
- Rule 3, what ran: every result of a probe records what ran beside what was asked.
- Rule 6, causes named: each faulty profile's checks are diagnosed by the cause the tool's
  own words name (driver not loaded, library mismatch, torch CPU build), not by a symptom.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import pytest

from nvtest.config.suites import check_mark_name
from nvtest.results import REASON_MAX_CHARS
from nvtest.testing.standin_nodes import install
from tests.conftest import REPO, run_nvtest

pytestmark = pytest.mark.slow

SUITES = REPO / "suites"

#: Checks whose subject is not the node's GPUs, NVSwitches or HCAs, and why each may pass on
#: a GPU node whose GPU tools fail. Every other check must fail or error there.
NOT_GPU_SUBJECT = {
    "host": "CPU, memory and OS from /proc",
    "stream": "host memory bandwidth (CPU STREAM)",
    "sw_uniformity": "versions against the fleet; one node is its own majority",
    "package_drift": "kernel and driver packages against the fleet; one node is its own majority",
    "mpi": "MPI over the host network (float64 allreduce on the CPU)",
    "resilience_quick": "checkpoint tiers on host memory and disk",
    "ckpt_mem": "checkpoint tier on host memory",
    "ckpt_local": "checkpoint tier on local disk",
    "ckpt_shared": "checkpoint tier on the shared filesystem",
    "shared_fs": "the site's shared filesystem (its checkpoint path), no GPU involved",
    "restart_injob": "restart drill with gloo on the CPU by design (docs/resilience.md)",
    "restart_inprocess": "in-process restart drill with gloo on the CPU by design",
    "requeue": "Slurm requeue drill (the slurm backend only)",
    "straggler": "straggler scores of CPU section timings by design",
    "ib_ports": "the HCAs: ibstat reports them on this profile",
}

#: Checks that need two nodes or another backend: their skip says so, not "no hardware".
TOPOLOGY_SKIPS = {
    "tcp_bw": "ib_write_bw measures its links",
    "collectives_multinode": "needs two nodes",
    "train_multinode": "one node in this run",
    "requeue": "needs the slurm backend",
    "ckpt_shared": "no shared filesystem path configured",
    "shared_fs": "the site declares no shared filesystem (recipe ckpt.shared_path)",
    "container_identity": "container identity is checked under Slurm with a container plugin",
    "imex": "does not share GPU memory across nodes",
    "nvlink_multinode": "does not share GPU memory across nodes",
}

#: The resilience suite's drills take minutes on this machine's 2 cores; they are CPU drills
#: by design (NOT_GPU_SUBJECT), so the run below covers every other suite's modules.
SLOW_MODULES = {"resilience"}


def all_checks() -> dict[str, str]:
    """check name -> suite module (``area/test_x.py``), from every ``@pytest.mark.check``."""
    out: dict[str, str] = {}
    for path in sorted(SUITES.glob("*/test_*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.FunctionDef):
                continue
            for dec in node.decorator_list:
                if (name := check_mark_name(dec)) is not None:
                    out[name] = f"{path.parent.name}/{path.name}"
    return out


CHECKS = all_checks()


def _run(profile: str, tmp: Path, *args: str) -> tuple[int, dict[str, dict[str, Any]], str]:
    """``nvtest run`` (local backend) with ``profile``'s stand-ins first on PATH."""
    tools = install(profile, tmp / "bin")
    out = tmp / "reports"
    proc = run_nvtest(
        "run",
        *args,
        "--out",
        str(out),
        "--progress",
        "none",
        env={"PATH": tools.path_prefix(), "OMP_NUM_THREADS": "1"},
        timeout=600,
    )
    text = proc.stdout[-3000:] + proc.stderr[-3000:]
    assert (out / "latest" / "results.json").exists(), text
    doc = json.loads((out / "latest" / "results.json").read_text())
    return proc.returncode, {r["check"]: r for r in doc["results"]}, text


@pytest.fixture(scope="module")
def driver_down(tmp_path_factory) -> tuple[int, dict[str, dict[str, Any]], str]:
    tmp = tmp_path_factory.mktemp("driver-down")
    modules = sorted({m for m in CHECKS.values() if m.split("/")[0] not in SLOW_MODULES})
    suite = tmp / "all-checks.yaml"
    suite.write_text(
        "name: all-checks\ndescription: every check module but the resilience drills\nchecks:\n"
        + "".join(f"  - {m}\n" for m in modules)
    )
    return _run("h100_driver_down", tmp, "--suite", str(suite), "--duration", "2")


@pytest.fixture(scope="module")
def cpu_machine(tmp_path_factory) -> tuple[int, dict[str, dict[str, Any]], str]:
    return _run("cpu_only", tmp_path_factory.mktemp("cpu"), "--suite", "delivery")


def test_every_check_is_classified():
    """A new check either joins the fail-closed rule below or says here why it may pass."""
    assert set(NOT_GPU_SUBJECT) <= set(CHECKS), sorted(set(NOT_GPU_SUBJECT) - set(CHECKS))
    assert len(CHECKS) >= 30, CHECKS


@pytest.mark.parametrize("check", sorted(c for c, m in CHECKS.items() if m.split("/")[0] not in SLOW_MODULES))
def test_rule1_no_check_passes_or_skips_a_gpu_node_its_tools_cannot_see(driver_down, check):
    code, by, text = driver_down
    assert code == 1, text
    r = by.get(check)
    assert r is not None, f"{check}: no result ({sorted(by)})"
    assert "not on this hardware" not in r["reason"], r
    assert len(r["reason"]) <= REASON_MAX_CHARS and "\n" not in r["reason"], r  # one line; the rest is evidence
    if r["verdict"] == "skip":
        assert check in TOPOLOGY_SKIPS and TOPOLOGY_SKIPS[check] in r["reason"], r
    elif check not in NOT_GPU_SUBJECT:
        assert r["verdict"] in ("fail", "error"), r
        assert r["diagnosis"] and r["diagnosis"]["rule"] not in ("generic_fail", "generic_error"), r


def test_rule1_the_tools_words_and_the_causes_they_name(driver_down):
    _, by, _ = driver_down
    gpus = by["gpus"]
    assert (
        "PCI bus: 8 x 10de:2330" in gpus["reason"] and "couldn't communicate with the NVIDIA driver" in gpus["reason"]
    )
    assert gpus["diagnosis"]["rule"] == "driver_not_loaded"  # not a lost GPU
    assert by["xid_scan"]["diagnosis"]["rule"] == "nouveau_owns_gpus", by["xid_scan"]
    for check in ("gemm", "burnin", "thermal", "devmem", "h2d", "collectives", "train_smoke"):
        r = by[check]
        assert r["verdict"] == "fail" and "CUDA cannot start" in r["reason"], r
        assert "Torch not compiled with CUDA enabled" in r["reason"]
        # the probe's key reaches results.json; torch's own words name the finer cause
        assert r["cause"] == "cuda:cannot_start" and r["diagnosis"]["rule"] == "torch_cpu_build", r
        assert not r["metrics"], f"{check} measured the CPU instead: {r['metrics']}"
    for check, tool in (("dcgm_diag", "dcgmi"), ("nccl", "all_reduce_perf"), ("ib_write_bw", "ib_write_bw")):
        assert by[check]["verdict"] == "error" and tool in by[check]["reason"], by[check]
    assert by["stream"]["verdict"] == "pass" and by["ib_ports"]["verdict"] == "pass"


@pytest.mark.parametrize("check", sorted(c for c, m in CHECKS.items() if m.split("/")[0] not in SLOW_MODULES))
def test_rule1_on_this_machine_every_skip_names_its_proof(cpu_machine, check):
    code, by, text = cpu_machine
    assert code == 0, text
    r = by.get(check)
    if r is None:  # burnin is not in the delivery suite
        assert check == "burnin"
        return
    if r["verdict"] == "skip":
        one_node = check == "tcp_bw" and "a pair test needs two nodes" in r["reason"]
        assert "the PCI bus shows no" in r["reason"] or one_node or TOPOLOGY_SKIPS.get(check, "\0") in r["reason"], r
        if "PCI bus" in r["reason"]:
            assert "sysfs /sys/bus/pci/devices" in r["reason"] and "lspci" in r["reason"], r
    else:
        assert check in NOT_GPU_SUBJECT or check in CPU_PATHS, r
        # one CPU has no peer to compare its SDC digests with: that warns, it does not pass
        assert r["verdict"] == ("warn" if check == "sdc" else "pass"), r


#: checks whose probe runs for real on a CPU where the bus proves no GPU (``device="any"``;
#: xid_scan judges the host events of the kernel log, its GPU part not applicable)
CPU_PATHS = ("gemm", "collectives", "train_smoke", "inference", "sdc", "xid_scan")


def _walk(obj: Any, key: str) -> list[Any]:
    if isinstance(obj, dict):
        return ([obj[key]] if key in obj else []) + [x for v in obj.values() for x in _walk(v, key)]
    if isinstance(obj, list):
        return [x for v in obj for x in _walk(v, key)]
    return []


def test_rule3_every_measured_result_records_what_ran(cpu_machine):
    """Every result with a measured value from a probe carries ``effective`` beside ``requested``,
    and every result on a node carries its effective environment."""
    _, by, _ = cpu_machine
    measured = [r for r in by.values() if r["verdict"] != "skip" and r["metrics"] and r["check"] != "host"]
    assert {r["check"] for r in measured} >= {"stream", "gemm", "collectives", "train_smoke"}
    for r in measured:
        eff = _walk(r["details"], "effective")
        assert eff and all(eff), r["check"]
    assert by["gemm"]["details"]["effective"]["device"] == "cpu"
    assert "--device cpu" in by["gemm"]["details"]["requested"]["command"]
    for r in by.values():
        if r["verdict"] != "skip":
            env = r["details"]["environment"]
            assert env["cpu_affinity"] and "bootstrap" in env and env["variables"]["OMP_NUM_THREADS"]["value"] == "1"


@pytest.mark.parametrize(
    ("profile", "checks", "rule"),
    [
        ("h100_nvml_mismatch", ("gpus", "driver_stack", "ecc", "nvlink"), "driver_library_mismatch"),
        ("h100_gpu_lost", ("gpus", "ecc"), "lost_gpu"),
        ("h100_healthy", ("gemm",), "torch_cpu_build"),
    ],
)
def test_rule6_diagnosis_names_the_most_specific_cause(tmp_path, profile, checks, rule):
    code, by, text = _run(profile, tmp_path, "--suite", "delivery", "-k", " or ".join(checks))
    assert code == 1, text
    for check in checks:
        assert by[check]["diagnosis"]["rule"] == rule, by[check]
    if profile == "h100_gpu_lost":
        assert "0000:DF:00.0" in by["gpus"]["reason"] and "0000:df:00.0 on the PCI bus" in by["gpus"]["reason"]


def test_a_healthy_stand_in_node_passes_what_its_tools_report(tmp_path):
    checks = ("gpus", "driver_stack", "ecc", "nvlink", "fabric_manager", "ib_ports", "xid_scan")
    code, by, text = _run("h100_healthy", tmp_path, "--suite", "delivery", "-k", " or ".join(checks))
    for check in checks:
        assert by[check]["verdict"] == "pass", (by[check], text)
    assert code == 0
    shape = by["gpus"]["details"]["shape"]["gpu_pci"]
    assert len(shape["node"]) == 8 and "no golden" in shape["origin"]  # one node: no fleet majority
