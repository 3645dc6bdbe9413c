"""The report shows, per check, the effective environment that shaped its results (rule 6)."""

from __future__ import annotations

import copy

from nvtest.report.model import build_view, environment_groups
from nvtest.testing.synthetic import synthetic_doc
from tests.report.conftest import write_run

ENV = {
    "variables": {
        "NCCL_DEBUG": {"value": "INFO", "source": "harness"},
        "NCCL_SOCKET_IFNAME": {"value": "bond0", "source": "node"},
        "NCCL_TOPO_FILE": {"value": "/etc/nccl/topo.xml", "source": "node"},
    },
    "topology_file": "/etc/nccl/topo.xml",
    "cpu_affinity": "0-111",
    "numa_nodes": "0-1",
    "bootstrap": {"NCCL_SOCKET_IFNAME": "bond0"},
}


def test_each_check_lists_its_distinct_environments_with_their_nodes(tmp_path):
    doc = synthetic_doc(4)
    odd = copy.deepcopy(ENV)
    odd["variables"]["NCCL_SOCKET_IFNAME"]["value"] = "eth0"
    odd["bootstrap"] = {"NCCL_SOCKET_IFNAME": "eth0"}
    nccl = [r for r in doc["results"] if r["check"] == doc["results"][0]["check"]]
    for i, r in enumerate(nccl):
        r["details"] = {**(r.get("details") or {}), "environment": odd if i == 0 else ENV}
    groups = environment_groups(nccl)
    assert [len(ns) for _, ns in groups] == [len(nccl) - 1, 1]
    text = groups[0][0]
    assert "NCCL_DEBUG=INFO (harness)" in text and "NCCL_SOCKET_IFNAME=bond0" in text
    assert "topology file: /etc/nccl/topo.xml" in text and "CPUs 0-111, NUMA nodes 0-1" in text
    assert "bootstrap: NCCL_SOCKET_IFNAME=bond0" in text
    view = build_view(doc)
    check = next(c for c in view.checks if c.name == nccl[0]["check"])
    assert check.environments == groups
    html = (write_run(tmp_path / "run", doc) / "report.html").read_text()
    assert "effective environment on 1 node" in html and "NCCL_SOCKET_IFNAME=eth0" in html
