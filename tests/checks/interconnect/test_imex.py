"""Multi-node NVLink (issue 24, class 7): the IMEX channel, service and domain, and the
multi-node nvbandwidth read, judged on real outputs (tests/data/standin, tests/data/corpus)."""

from __future__ import annotations

import subprocess

from nvtest.checks.api import Judge
from nvtest.checks.health import apply
from nvtest.checks.health.nvlink import split_sections
from nvtest.checks.interconnect.imex import (
    IMEX_SCRIPT,
    imex_health,
    multinode_bandwidth,
    read_imex_ctl,
)
from nvtest.verdict import Verdict
from tests.conftest import CORPUS, DATA

HEALTHY_CTL = (DATA / "standin/nvidia-imex-ctl-N-18-nodes-ready-domain-up-p6e-gb200.txt").read_text()
MN_OK = (CORPUS / "nvbandwidth/v0.7-multinode-2x4-gb200-read-ce-dra-example.txt").read_text()
MN_NOT_PERMITTED = (
    CORPUS / "nvbandwidth/v0.8-multinode-4xh200-cuda-error-not-permitted-cumemcreate-imex-cut.txt"
).read_text()


def _verdict(sections: dict[str, str]) -> tuple[Verdict, str]:
    j = Judge(None, "imex", "node001", None)
    apply(imex_health(sections), j)
    return j.verdict, j.summary()


def test_a_healthy_domain_passes():
    d = read_imex_ctl(HEALTHY_CTL)
    assert len(d.nodes) == 18 and d.state == "UP" and len(d.links) == 18 and not d.problems()
    v, why = _verdict({"channels": "channel0\n", "service": "active\n", "ctl": HEALTHY_CTL + "exit=0\n"})
    assert v is Verdict.PASS, why


def test_no_channel_an_inactive_service_and_the_tools_words_fail():
    no_dev = "ls: cannot access '/dev/nvidia-caps-imex-channels': No such file or directory\n"
    v, why = _verdict(
        {"channels": no_dev, "service": "inactive\n", "ctl": "connection to IMEX daemon failed\nexit=1\n"}
    )
    assert v is Verdict.FAIL
    assert "no IMEX channel" in why and "No such file or directory" in why and "CUDA_ERROR_NOT_PERMITTED" in why
    assert "nvidia-imex service is inactive" in why
    assert "nvidia-imex-ctl -N exit 1: connection to IMEX daemon failed" in why


def test_a_node_not_connected_fails_naming_it():
    lines = HEALTHY_CTL.splitlines()
    bad = [ln.replace("- READY ", "- UNAVAILABLE ") if ln.startswith("Node #17 ") else ln for ln in lines]
    bad = [ln[:-1] + "N" if ln.strip().startswith("3 ") and ln.rstrip().endswith("C") else ln for ln in bad]
    d = read_imex_ctl("\n".join(bad))
    assert d.problems() == ["IMEX node #17 (10.0.0.27) is UNAVAILABLE", "IMEX connections not connected (C): 3->17 N"]


def test_the_script_reads_dev_under_the_root_seam(tmp_path):
    (tmp_path / "dev/nvidia-caps-imex-channels").mkdir(parents=True)
    (tmp_path / "dev/nvidia-caps-imex-channels/channel0").write_text("")
    out = subprocess.run(
        ["sh", "-c", IMEX_SCRIPT],
        capture_output=True,
        text=True,
        timeout=30,
        env={"PATH": "/usr/bin:/bin", "NVTEST_SYSFS_ROOT": str(tmp_path)},
    ).stdout
    assert split_sections(out)["channels"] == "channel0\n"


def test_multinode_read_per_gpu_and_the_tools_failure_on_the_node_it_names():
    layout = [("node001", 4), ("node002", 4)]
    shares = multinode_bandwidth(MN_OK, layout, {"node001": "node001", "node002": "node002"})
    assert {n: len(s.values) for n, s in shares.items()} == {"node001": 4, "node002": 4}
    assert min(v for s in shares.values() for _, v in s.values) == 797.65
    failed = multinode_bandwidth(MN_NOT_PERMITTED, [("node001", 2), ("node002", 2)], {"node001": "node001"})
    assert failed["node001"].failed and "CUDA_ERROR_NOT_PERMITTED" in failed["node001"].failed
    assert failed["node002"].unmeasured and "failed on node001" in failed["node002"].unmeasured
