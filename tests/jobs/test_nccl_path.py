"""The path NCCL took is part of the result (issue 24): a multi-node nccl-tests run on an H100
fleet (8 RDMA NICs per node) over TCP sockets, or with GPUDirect RDMA disabled on an HCA, fails
naming NCCL's own line whatever its busbw; IB with GDR passes; no line naming the network is an
error. The runs are the recorded a3mega 2-node output with NCCL's INFO lines of real reports
(NVIDIA/nccl-tests#131, NVIDIA/nccl#1537, NVIDIA/nccl#899) put where NCCL prints them, replayed
by a stand-in ``all_reduce_perf`` on PATH."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest

from nvtest.config.skus import load_catalog
from nvtest.jobs.nccl import judge_output
from nvtest.parsers import nccl_tests
from nvtest.testing.standin import Recording, StandInTools
from tests.conftest import CORPUS

NORMAL = (CORPUS / "nccl-tests/all_reduce_perf-2node-16xh100-a3mega-normal-8B-8G.txt").read_text()
GIB = 1024**3
HOST = "gpu-node-0001:6899:6899 [0] NCCL INFO "

#: NCCL 2.16+ with no usable HCA (nccl-tests#131): IB verbs found nothing, sockets carry the data
SOCKET = [
    "NET/IB : No device found.",
    "NET/Socket : Using [0]eth0:10.0.0.1<0>",
    "Using network Socket",
    "Channel 00/0 : 7[7] -> 8[0] [send] via NET/Socket/0",
]
#: NCCL 2.2x on RoCE without nvidia-peermem taking effect (nccl#1537)
GDR_OFF = [
    "NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [RO]; OOB eth0:10.0.0.1<0>",
    "Using network IB",
    "NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0'",
    "NET/IB : GPU Direct RDMA Enabled for HCA 1 'mlx5_1'",
    "Channel 00/0 : 7[7] -> 8[0] [send] via NET/IB/0",
]
GDR_ON = [
    "NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [RO]; OOB eth0:10.0.0.1<0>",
    "Using network IB",
    "NET/IB : GPU Direct RDMA Enabled for HCA 0 'mlx5_0'",
    "NET/IB : GPU Direct RDMA Enabled for HCA 1 'mlx5_1'",
    "Channel 00/0 : 7[7] -> 8[0] [send] via NET/IB/0/GDRDMA",
]


def _with_info(lines: list[str]) -> str:
    """The recorded run with NCCL's INFO lines after the rank list, as NCCL prints them."""
    head, sep, rest = NORMAL.partition("#\n#  ")  # the blank '#' line before the table header
    return head + "".join(HOST + ln + "\n" for ln in lines) + sep + rest


@pytest.fixture(scope="module")
def h100_rdma_nics() -> int:
    profile = load_catalog().get("h100-sxm-80gb")
    assert profile.expect.ib_hcas == 8
    return profile.expect.ib_hcas


def _run_standin(tmp_path, text: str) -> str:
    """Replay ``text`` through a stand-in all_reduce_perf on PATH, as a node would run it."""
    tools = StandInTools(tmp_path / "bin")
    tools.add("all_reduce_perf", Recording(stdout=text))
    out = subprocess.run(
        ["all_reduce_perf", "-b", "8", "-e", "8G", "-f", "2", "-g", "1", "-c", "1"],
        env={"PATH": tools.path_prefix()},
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return out.stdout


def _judge(text: str, rdma: int | None):
    return judge_output(text, op="all_reduce", max_bytes=8 * GIB, expected_ranks=16, rdma_nics=rdma)


def test_parser_reads_the_path_into_typed_fields():
    t = nccl_tests.parse(_with_info(GDR_OFF)).tests[0]
    assert t.path.net_transport == "IB" and t.effective["net_transport"] == "IB"
    assert t.path.hcas == (("mlx5_0:1", "IB"), ("mlx5_1:1", "IB"))
    assert [h for h, _ in t.path.gdr_disabled] == ["mlx5_0"] and t.path.gdr["mlx5_1"][0] is True
    assert dict(t.path.channels) == {"NET/IB/0": 1}
    s = nccl_tests.parse(_with_info(SOCKET)).tests[0]
    assert s.path.net_transport == "Socket" and s.path.no_ib_device is not None
    roce = nccl_tests.parse(_with_info([GDR_ON[0].replace(":1/IB", ":1/RoCE"), GDR_ON[1]])).tests[0]
    assert roce.path.net_transport == "RoCE"
    # NCCL < 2.12 prints no 'Using network' line: the channel lines say it
    old = nccl_tests.parse(_with_info([SOCKET[3]])).tests[0]
    assert old.path.net_transport == "Socket"


def test_socket_across_nodes_fails_naming_nccls_line_whatever_the_busbw(tmp_path, h100_rdma_nics):
    v = _judge(_run_standin(tmp_path, _with_info(SOCKET)), h100_rdma_nics)
    assert v.details["busbw_gbps"] == pytest.approx(338.82)  # a good number, obtained the wrong way
    assert v.verdict == "fail", v.details["reasons"]
    assert "Using network Socket" in v.text() and "NET/IB : No device found." in v.text()
    assert "8 RDMA NICs" in v.text()
    assert v.details["effective"]["nccl_path"]["net_transport"] == "Socket"


def test_gdr_disabled_on_an_hca_fails_naming_it(tmp_path, h100_rdma_nics):
    v = _judge(_run_standin(tmp_path, _with_info(GDR_OFF)), h100_rdma_nics)
    assert v.verdict == "fail", v.details["reasons"]
    assert "GPUDirect RDMA disabled on mlx5_0" in v.text()
    assert "GPU Direct RDMA Disabled for HCA 0 'mlx5_0'" in v.text() and "mlx5_1" not in v.text()


def test_ib_with_gdr_passes(tmp_path, h100_rdma_nics):
    v = _judge(_run_standin(tmp_path, _with_info(GDR_ON)), h100_rdma_nics)
    assert v.verdict == "pass", v.details["reasons"]
    assert {k: v.details["effective"]["nccl_path"][k] for k in ("net_transport", "hcas", "gdr", "channels")} == {
        "net_transport": "IB",
        "hcas": ["mlx5_0:1/IB", "mlx5_1:1/IB"],
        "gdr": {"mlx5_0": True, "mlx5_1": True},
        "channels": {"NET/IB/0/GDRDMA": 1},
    }


def test_an_rdma_channel_without_gdrdma_fails_naming_the_channel_line(tmp_path, h100_rdma_nics):
    # every HCA says Enabled, but the channel is "via NET/IB/0": staged through host memory
    # (NCCL_NET_GDR_LEVEL, the GPU-NIC distance; NCCL_NET_GDR_LEVEL docs, nccl#1537)
    lines = [*GDR_ON[:4], GDR_ON[4].replace("/GDRDMA", "")]
    v = _judge(_run_standin(tmp_path, _with_info(lines)), h100_rdma_nics)
    assert v.verdict == "fail", v.details["reasons"]
    assert "no /GDRDMA" in v.text() and "via NET/IB/0' (line" in v.text()
    # a send channel without it beside receive channels with it: GDR reads off, NCCL's default
    # without NVLink (NCCL_NET_GDR_READ); a receive channel without it is staged
    recv = "Channel 00/0 : 8[0] -> 7[7] [receive] via NET/IB/0/GDRDMA"
    assert _judge(_with_info([*lines, recv]), h100_rdma_nics).verdict == "pass"
    staged = _judge(_with_info([*GDR_ON, recv.replace("/GDRDMA", "")]), h100_rdma_nics)
    assert staged.verdict == "fail" and "[receive] via NET/IB/0' (line" in staged.text()
    # one finding per fault: a Disabled HCA already names the path
    off = _judge(_with_info(GDR_OFF), h100_rdma_nics)
    assert "no /GDRDMA" not in off.text() and "GPUDirect RDMA disabled on mlx5_0" in off.text()


#: NCCL's WARN lines of a fault on the network path, mid-run (nccl#2157, nccl#1405, nccl#426,
#: nccl#1524): they fail the run even when the collective completed
PATH_FAULT_WARNS = [
    "gpu-node-0001:6899:6917 [0] transport/net_ib.cc:93 NCCL WARN NET/IB : mlx5_0:1 Got async event : port error",
    "gpu-node-0001:6899:6960 [0] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer "
    "10.0.0.2<54862> with status=12 opcode=0 len=0 vendor err 129 (Recv)",
    "gpu-node-0001:6899:6960 [0] transport/net_ib.cc:1021 NCCL WARN NET/IB : Got completion with error 12, "
    "opcode 0, len 0, vendor err 129",
    "gpu-node-0001:6899:6960 [0] transport/net_ib.cc:100 NCCL WARN NET/IB : mlx5_0:1 Got async event : "
    "local access violation work queue error",
]


@pytest.mark.parametrize("warn", PATH_FAULT_WARNS, ids=range(len(PATH_FAULT_WARNS)))
def test_a_path_fault_warning_fails_a_run_that_completed(warn, h100_rdma_nics):
    head, sep, rest = _with_info(GDR_ON).partition("#       size")
    text = head + sep + rest.replace("\n", "\n" + warn + "\n", 10)  # mid-sweep, as NCCL prints it
    for rdma in (h100_rdma_nics, None):  # the run, and `nvtest parse nccl-tests` (no SKU)
        v = _judge(text, rdma)
        assert v.details["busbw_gbps"] == pytest.approx(338.82)
        assert v.verdict == "fail", v.details["reasons"]
        assert f"NCCL WARN during the run: {warn}" in v.failures
    # a benign warning does not
    benign = "gpu-node-0001:6899:6899 [0] NCCL WARN NET/Plugin : Plugin load returned 2 : libnccl-net.so"
    assert _judge(_with_info(GDR_ON).replace("#\n#  ", benign + "\n#\n#  ", 1), h100_rdma_nics).verdict == "pass"


def test_no_line_naming_the_network_is_an_error_not_a_pass(h100_rdma_nics):
    v = _judge(NORMAL, h100_rdma_nics)
    assert v.verdict == "error" and "NCCL did not say which network it used" in v.text()


def test_without_rdma_nics_the_path_is_not_judged():
    assert _judge(_with_info(SOCKET), None).verdict == "pass"
    assert _judge(_with_info(SOCKET), 0).verdict == "pass"


def test_the_pair_retest_judges_the_path_too(tmp_path, h100_rdma_nics):
    """A fleet run that failed on its path is re-run in pairs: the pair over sockets fails
    with NCCL's line too (else the pairs would pass on busbw and clear the fleet's failure)."""
    from types import SimpleNamespace

    from nvtest.config.inventory import Node
    from nvtest.jobs.launch import MpiOptions
    from nvtest.jobs.nccl import NcclRecipe
    from nvtest.jobs.pair_jobs import NcclPairJob
    from nvtest.transports.base import CommandResult

    nodes = {n: Node(name=n, address="127.0.0.1") for n in ("gpu-node-0001", "gpu-node-0002")}
    ctx: Any = SimpleNamespace(states={n: SimpleNamespace(node=node) for n, node in nodes.items()})
    job = NcclPairJob(
        ctx,
        check="nccl_multinode",
        op="all_reduce",
        recipe=NcclRecipe(max_bytes=8 * GIB),
        gpus=lambda n: 8,
        env={},
        mpi=MpiOptions(),
        rdma_nics=lambda n: h100_rdma_nics,
    )
    out = _run_standin(tmp_path, _with_info(SOCKET))
    res = CommandResult(node="gpu-node-0001", command="mpirun ...", stdout=out, stderr="", exit_code=0)
    outcome = job.judge_complete(("gpu-node-0001", "gpu-node-0002"), "p", {"gpu-node-0001": res}, "mpirun ...")
    assert outcome.status == "fail" and "Using network Socket" in outcome.reason, outcome


@pytest.mark.parametrize(
    ("name", "transport", "line", "status"),
    [
        ("all_reduce_perf-2node-eks-efa-disabled-using-network-socket-excerpt.txt", "Socket", 2, "fail"),
        ("all_reduce_perf-2node-eks-efa-using-network-aws-libfabric-excerpt.txt", "AWS Libfabric", 3, "pass"),
    ],
)
def test_corpus_runs_name_the_network_they_used(name, transport, line, status, h100_rdma_nics):
    text = (CORPUS / "nccl-tests" / name).read_text()
    t = nccl_tests.parse(text).tests[0]
    assert t.path.net_transport == transport and t.path.networks[0].line == line
    v = judge_output(text, op="all_reduce", max_bytes=GIB, rdma_nics=h100_rdma_nics)
    assert v.verdict == status, v.details["reasons"]
    if status == "fail":
        assert "'test-nccl-worker-0:22:22 [0] NCCL INFO Using network Socket' (line 2)" in v.text()


def test_the_host_whose_process_printed_the_failure_is_named(h100_rdma_nics):
    warn = PATH_FAULT_WARNS[0]
    head, sep, rest = _with_info(GDR_ON).partition("#       size")
    v = _judge(head + sep + rest.replace("\n", "\n" + warn + "\n", 1), h100_rdma_nics)
    assert v.verdict == "fail" and v.details["logged_by"] == "gpu-node-0001"
    # a fault of the whole launch's path names no one host
    off = _judge(_with_info(GDR_OFF).replace("#       size", warn + "\n#       size", 1), h100_rdma_nics)
    assert off.verdict == "fail" and off.details["logged_by"] is None
