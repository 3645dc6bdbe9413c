"""End to end over a simulated cluster of 5 real sshd nodes: the inference check on every node,
and silent data corruption found across the fleet.

The nodes are CPU nodes of one configuration, but for two real mechanisms given to some of
them through their sessions' environment (sshd ``SetEnv``):

- ``wl02`` computes wrong: the SDC probe's test hook ``NVTEST_SDC_INJECT`` flips one bit of its
  GEMM chain's last product (a GPU wrong the same way on every run);
- ``wl04`` and ``wl05`` run torch with ``ATEN_CPU_CAPABILITY=default`` (torch's own switch to
  its unvectorised kernels): another configuration whose training steps legitimately give
  other bits, so the two are a group of their own, not corruption.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator

import pytest
import yaml

from nvtest.testing.sshd_cluster import SSHDCluster, sshd_unavailable_reason
from tests.conftest import PROBES, run_nvtest

pytestmark = [pytest.mark.sshd, pytest.mark.slow]

NODE_ENV = {
    "wl02": {"NVTEST_SDC_INJECT": "cpu"},
    "wl04": {"ATEN_CPU_CAPABILITY": "default"},
    "wl05": {"ATEN_CPU_CAPABILITY": "default"},
}


@pytest.fixture(scope="module")
def cluster() -> Iterator[SSHDCluster]:
    reason = sshd_unavailable_reason()
    if reason:
        pytest.skip(reason)
    with SSHDCluster(5, prefix="wl", python=sys.executable, node_env=NODE_ENV) as sim:
        yield sim


@pytest.fixture(scope="module")
def run(cluster: SSHDCluster, tmp_path_factory: pytest.TempPathFactory) -> tuple[int, str, dict]:
    d = tmp_path_factory.mktemp("workloads")
    inv = yaml.safe_load(cluster.inventory_path.read_text())
    inv["defaults"]["probe_dir"] = str(PROBES)  # one shared copy, as on a shared file system
    (d / "inventory.yaml").write_text(yaml.safe_dump(inv))
    proc = run_nvtest(
        "run",
        "--backend",
        "ssh",
        "--inventory",
        str(d / "inventory.yaml"),
        "--insecure-host-keys",
        "--suite",
        "delivery",
        "-k",
        "sdc or inference",
        "--out",
        str(d / "reports"),
        "--progress",
        "plain",
        timeout=900,
    )
    output = proc.stdout[-4000:] + proc.stderr[-3000:]
    results = d / "reports" / "latest" / "results.json"
    assert results.exists(), output
    return proc.returncode, output, json.loads(results.read_text())


def _by_check(doc: dict, check: str) -> dict[str, dict]:
    return {r["node"]: r for r in doc["results"] if r["check"] == check}


def test_the_node_that_computes_wrong_is_named(run) -> None:
    code, output, doc = run
    sdc = _by_check(doc, "sdc")
    assert sorted(sdc) == ["wl01", "wl02", "wl03", "wl04", "wl05"], output
    bad = sdc["wl02"]
    assert bad["verdict"] == "fail", bad
    assert "gemm_chain fp32 on wl02 cpu" in bad["reason"]
    assert (
        "outputs differ from 2 other CPUs of the same configuration: silent data corruption suspected" in bad["reason"]
    )
    assert "train_smoke" not in bad["reason"]  # its training steps agree with its peers
    for node in ("wl01", "wl03"):
        assert sdc[node]["verdict"] == "pass", sdc[node]
        peers = {m["labels"]["workload"]: m["value"] for m in sdc[node]["metrics"]}
        assert peers == {"gemm_chain fp32": 1, "train_smoke fp32": 2}
    assert code == 1 and doc["summary"]["verdict"] == "fail"


def test_a_group_on_another_configuration_is_a_configuration_difference_not_corruption(run) -> None:
    _, output, doc = run
    sdc = _by_check(doc, "sdc")
    for node in ("wl04", "wl05"):
        assert sdc[node]["verdict"] == "pass", sdc[node]
        groups = sdc[node]["details"]["sdc"]["groups"]
        assert {g["config"]["cpu_capability"] for g in groups} == {"DEFAULT"}
        assert all(len(g["members"]) == 2 for g in groups)
    warnings = [w for w in doc["run"]["warnings"] if w.startswith("sdc: ")]
    assert len(warnings) == 1, doc["run"]["warnings"]
    (w,) = warnings
    assert w.startswith("sdc: train_smoke fp32: 3 CPUs (wl01, wl02, wl03) and 2 CPUs (wl04, wl05)")
    assert "cpu_capability" in w and "DEFAULT" in w and "a configuration difference, not corruption" in w
    # the GEMM chain goes to the same BLAS on both configurations: same bits, nothing to report
    assert "gemm_chain" not in w


def test_inference_serves_on_every_node(run) -> None:
    _, output, doc = run
    inf = _by_check(doc, "inference")
    assert sorted(inf) == ["wl01", "wl02", "wl03", "wl04", "wl05"], output
    for node, r in inf.items():
        # a fleet outlier on this shared machine may warn; nothing fails
        assert r["verdict"] in ("pass", "warn"), (node, r)
        assert r["verdict"] == "pass" or "fleet" in r["reason"], r["reason"]
        names = {m["name"]: m for m in r["metrics"]}
        for b in (1, 4):
            for suffix in ("prefill_tokens_per_s", "decode_tokens_per_s", "ttft_ms", "token_p50_ms", "token_p99_ms"):
                m = names[f"fp32_bs{b}_{suffix}"]
                assert m["value"] > 0 and m["labels"]["device"] == "cpu", m
        assert names["fp32_bs1_decode_tokens_per_s"]["threshold"]["min"] == 10
        assert r["details"]["model"]["width"] == 128  # the cpu-generic recipe ran
