"""NVLink SHARP and CollNet are part of the path (issue 24, class 1): on a SKU whose profile
expects NVLS (``expect.nvls``: HGX H100/H200/B200, GB200), an all_reduce whose NCCL INFO log
says NVLS is not available, or whose NVLS transport failed, fails naming NCCL's line; a log
with no NVLS line at all (an older NCCL) is a note; a log not taken at INFO is not judged.
The lines are real: NVIDIA/nccl#892 and #1338 (the corpus), NVIDIA/DCGM#304 (the bind failure),
NVIDIA/nccl#1453 (NVLS available and in use on H100), NVIDIA/nccl#1584 (the SHARP collnet plugin)."""

from __future__ import annotations

import pytest

from nvtest.checks.standalone import judge_reading
from nvtest.config.skus import load_catalog
from nvtest.jobs.nccl import judge_output
from nvtest.parsers import nccl_tests
from nvtest.playbook.diagnosis import diagnose
from tests.conftest import CORPUS
from tests.jobs.test_nccl_path import GIB, NORMAL

UNAVAILABLE = (
    CORPUS / "nccl-tests/all_reduce_perf-8xh800-nvls-multicast-not-available-0-nvls-channels-excerpt.txt"
).read_text()
CUDA_FAILURE = (
    CORPUS / "nccl-tests/all_reduce_perf-8xh800-nvls-cuda-failure-invalid-argument-fabric-manager-excerpt.txt"
).read_text()
HOST = "gpu-node-0001:6899:6960 [0] NCCL INFO "
#: NVIDIA/nccl#1453 (3 × 8 H100, NCCL 2.23): NVLS available and set up
NVLS_ON = [
    "NVLS multicast support is available on dev 0",
    "NVLS Head  0:  0  8 16",
    "16 coll channels, 16 collnet channels, 16 nvls channels, 16 p2p channels, 2 p2p channels per peer",
]
#: NVIDIA/DCGM#304: the NVLink fabric in a bad state; all_reduce_perf -g 8 catches it
BIND = (
    "[2026-06-23 15:45:07] gpu-stress-dgc86-xfpt6:420:437 [5] transport/nvls.cc:379 (nvlsAllocateMem) "
    "NCCL WARN Failed to bind NVLink SHARP (NVLS) Multicast memory of size 2097152 : CUDA error 401 "
    "'the operation cannot be performed in the present state'."
)
#: NVIDIA/nccl#1584 (H100, HPC-X): the IB SHARP collnet plugin loaded
COLLNET_PLUGIN = "NET/Plugin: Loaded collnet plugin SHARP (v8)"


def _with(lines: list[str], warn: str | None = None) -> str:
    """The recorded H100 run with NCCL's lines after the rank list, as NCCL prints them."""
    head, sep, rest = NORMAL.partition("#\n#  ")
    return head + "".join(HOST + ln + "\n" for ln in lines) + (warn + "\n" if warn else "") + sep + rest


def _judge(text: str, **kw):
    return judge_output(text, op="all_reduce", max_bytes=8 * GIB, expected_ranks=16, **kw)


def test_the_profiles_with_nvswitch_multicast_expect_nvls():
    cat = load_catalog()
    nvls = {name for name in ("h100-sxm-80gb", "h200-sxm-141gb", "b200-hgx-180gb", "gb200-nvl72-tray")}
    for name in nvls:
        assert cat.get(name).expect.nvls is True, name
    for name in ("a100-sxm-80gb", "a100-pcie-80gb", "h100-pcie-80gb", "h100-nvl-94gb", "l40s"):
        assert not cat.get(name).expect.nvls, name
    assert not any(cat.get(n).expect.collnet for n in nvls)  # CollNet: only where a site says so


def test_corpus_unavailable_lines_are_typed_fields():
    t = nccl_tests.parse(UNAVAILABLE).tests[0]
    p = t.path
    assert p.info_lines == 20
    assert {d: (on, ln.line) for d, (on, ln) in p.nvls.items()} == {
        "036260b61d3a dev 0": (False, 15),
        "036260b61d3a dev 6": (False, 16),
    }
    assert p.nvls_channels is not None and p.nvls_channels[0] == 0 and p.nvls_channels[1].line == 26
    assert p.nvls_used is False and not p.nvls_failures and not p.collnet
    assert p.record()["nvls"] == {"036260b61d3a dev 0": False, "036260b61d3a dev 6": False}


def test_corpus_nvls_cuda_failure_lines_are_typed_fields():
    p = nccl_tests.parse(CUDA_FAILURE).tests[0].path
    assert [ln.line for ln in p.nvls_failures] == [2, 4, 8, 10]
    assert all("transport/nvls.cc:158 NCCL WARN Cuda failure 1 'invalid argument'" in ln.text for ln in p.nvls_failures)
    assert p.nvls_used is False and p.info_lines == 6


def test_nvls_available_and_set_up_passes_and_is_recorded():
    v = _judge(_with(NVLS_ON), nvls=True)
    assert v.verdict == "pass", v.details["reasons"]
    rec = v.details["effective"]["nccl_path"]
    assert rec["nvls"] == {"gpu-node-0001 dev 0": True} and rec["nvls_channels"] == 16 and rec["nvls_used"] is True
    assert "nvls_note" not in v.details["effective"]


def test_nvls_unavailable_fails_naming_nccls_line_whatever_the_busbw():
    text = _with(["NVLS multicast support is not available on dev 3", NVLS_ON[2].replace("16 nvls", "0 nvls")])
    v = _judge(text, nvls=True)
    assert v.details["busbw_gbps"] == pytest.approx(338.82)
    assert v.verdict == "fail", v.details["reasons"]
    assert "NVLS not available on gpu-node-0001 dev 3" in v.text()
    assert "NCCL INFO NVLS multicast support is not available on dev 3' (line" in v.text()
    assert "expect.nvls" in v.text()
    # a SKU without NVLS (A100, PCIe) prints the same line at every init: not judged there
    assert _judge(text).verdict == "pass"
    d = diagnose({"check": "nccl", "verdict": "fail", "reason": v.text()}, evidence=text)
    assert d is not None and d.rule == "nvls_unavailable" and "fabric manager" in d.cause


def test_nvls_bind_failure_fails_with_the_fabric_manager_diagnosis():
    v = _judge(_with(NVLS_ON[:1], warn=BIND), nvls=True)
    assert v.verdict == "fail", v.details["reasons"]
    assert "NVLS failed: '[2026-06-23 15:45:07] gpu-stress-dgc86-xfpt6" in v.text()
    d = diagnose({"check": "nccl", "verdict": "fail", "reason": v.text()}, evidence=BIND)
    assert d is not None and d.rule == "nvls_multicast" and "fabric manager" in d.cause


def test_nvls_cuda_failure_at_init_is_diagnosed_as_the_fabric_manager():
    v = judge_output(CUDA_FAILURE, op="all_reduce", nvls=True)
    assert v.verdict == "fail" and "NVLS failed" in v.text()
    d = diagnose({"check": "nccl", "verdict": "fail", "reason": v.text()}, evidence=CUDA_FAILURE)
    assert d is not None and d.rule == "nvls_cuda_failure" and "fabric manager" in d.cause


def test_no_nvls_line_is_a_note_and_no_info_level_is_not_judged():
    v = _judge(_with(["Using network IB"]), nvls=True)  # INFO lines, none about NVLS (NCCL < 2.17)
    assert v.verdict == "pass", v.details["reasons"]
    assert "NCCL printed no NVLS line" in v.details["effective"]["nvls_note"]
    # NCCL_NVLS_ENABLE=0 (or <= 2 GPUs) on NCCL >= 2.17: no availability line, 0 nvls channels
    off = _judge(
        _with(["16 coll channels, 16 collnet channels, 0 nvls channels, 16 p2p channels, 2 p2p channels per peer"]),
        nvls=True,
    )
    assert off.verdict == "pass", off.details["reasons"]
    assert (
        "0 nvls channels" in off.details["effective"]["nvls_note"]
        and "unproven" in off.details["effective"]["nvls_note"]
    )
    quiet = _judge(NORMAL, nvls=True)  # no NCCL INFO line at all
    assert quiet.verdict == "pass" and "NCCL_DEBUG not INFO" in quiet.details["effective"]["nvls_note"]
    # an NVLS WARN is printed at WARN level too: judged without INFO lines (DCGM#304)
    head, sep, rest = NORMAL.partition("#\n#  ")
    warned = _judge(head + BIND + "\n" + sep + rest, nvls=True)
    assert warned.verdict == "fail" and "NVLS failed" in warned.text()
    # another collective is not judged on NVLS
    other = judge_output(
        _with(["NVLS multicast support is not available on dev 3"]), op="all_gather", max_bytes=8 * GIB, nvls=True
    )
    assert "NVLS" not in other.text()


def test_collnet_expected_across_nodes():
    v = _judge(_with([*NVLS_ON, COLLNET_PLUGIN]), nvls=True, collnet=True)
    assert (
        v.verdict == "fail" and "CollNet not connected across nodes" in v.text() and "collnet plugin SHARP" in v.text()
    )
    ok = _judge(_with([*NVLS_ON, COLLNET_PLUGIN, "Connected Collnet Chains  [0] 0->8->-1"]), nvls=True, collnet=True)
    assert ok.verdict == "pass", ok.details["reasons"] and ok.details["effective"]["nccl_path"]["collnet"] is True


def test_parse_applies_the_same_rule_where_the_sku_is_known():
    text = _with(["NVLS multicast support is not available on dev 3"])
    log = nccl_tests.parse(text)
    assert judge_reading(log, text).verdict == "pass"  # no SKU: not judged
    r = judge_reading(log, text, nvls=True)
    assert r.verdict == "fail" and any("NVLS not available" in f for f in r.failures)


def test_nvtest_parse_with_the_sku_judges_nvls(tmp_path):
    from typer.testing import CliRunner

    from nvtest.cli.app import app

    log = tmp_path / "nccl.log"
    log.write_text(_with(["NVLS multicast support is not available on dev 3"]))
    runner = CliRunner()
    plain = runner.invoke(app, ["parse", "nccl-tests", str(log), "--json"])
    assert plain.exit_code == 0, plain.output
    res = runner.invoke(app, ["parse", "nccl-tests", str(log), "--json", "--sku", "h100-sxm-80gb"])
    assert res.exit_code == 1 and "NVLS not available on gpu-node-0001 dev 3" in res.output
    a100 = runner.invoke(app, ["parse", "nccl-tests", str(log), "--json", "--sku", "a100-sxm-80gb"])
    assert a100.exit_code == 0, a100.output  # the same line is healthy where NVLS is not expected
    bad = runner.invoke(app, ["parse", "nccl-tests", str(log), "--sku", "no-such-sku"])
    assert bad.exit_code == 2 and "unknown SKU 'no-such-sku'" in bad.output


def test_the_pair_retest_judges_nvls_too():
    """A fleet run that failed on NVLS is re-run in pairs: a pair of NVLS nodes whose log says
    NVLS is not available fails with NCCL's line too (else the pairs would clear the failure)."""
    from types import SimpleNamespace
    from typing import Any

    from nvtest.config.inventory import Node
    from nvtest.jobs.launch import MpiOptions
    from nvtest.jobs.nccl import NcclRecipe
    from nvtest.jobs.pair_jobs import NcclPairJob
    from nvtest.transports.base import CommandResult

    nodes = {n: Node(name=n, address="127.0.0.1") for n in ("gpu-node-0001", "gpu-node-0002")}
    ctx: Any = SimpleNamespace(states={n: SimpleNamespace(node=node) for n, node in nodes.items()})
    text = _with(["NVLS multicast support is not available on dev 3"])
    res = {"gpu-node-0001": CommandResult(node="gpu-node-0001", command="mpirun", stdout=text, stderr="", exit_code=0)}
    job = NcclPairJob(
        ctx,
        check="nccl_multinode",
        op="all_reduce",
        recipe=NcclRecipe(max_bytes=8 * GIB),
        gpus=lambda n: 8,
        env={},
        mpi=MpiOptions(),
        nvls=lambda n: True,
    )
    outcome = job.judge_complete(("gpu-node-0001", "gpu-node-0002"), "p", res, "mpirun")
    assert outcome.status == "fail" and "NVLS not available on gpu-node-0001 dev 3" in outcome.reason, outcome


def test_the_tuning_lines_name_the_algorithm():
    # nccl-tests#309: on one HGX H100 node, 2 MB..16 GB ran "Algo NVLS proto SIMPLE"
    lines = [
        "AllReduce: 1048576 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..15}",
        "AllReduce: 8589934592 Bytes -> Algo NVLS proto SIMPLE channel{Lo..Hi}={0..15}",
    ]
    p = nccl_tests.parse(_with(lines)).tests[0].path
    assert dict(p.algorithms) == {"RING": 1, "NVLS": 1} and p.nvls_used is True
