"""Multi-node launches use what the inventory and the controller's ssh config say, over the
real sshd cluster, for real (mpirun, torchrun): node names that resolve nowhere but in
~/.ssh/config, and a node reachable only through a bastion, whose name the other nodes
cannot resolve: the preflight names it in seconds instead of a launch that hangs."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from nvtest.testing.sshd_cluster import SSHDCluster
from tests.conftest import PROBES, run_nvtest
from tests.jobs.conftest import PYTHON, SIM_SKU, by_check

pytestmark = [pytest.mark.sshd, pytest.mark.slow]

#: the collective first: a node mpi failed would be left out of it (a known-bad node), and
#: this file is about each launcher's own preflight naming the node in seconds
CHECKS = ["interconnect/test_collectives.py::test_collectives_multinode", "interconnect/test_mpi.py"]


def _run(
    d: Path, inventory: Path, *args: str, env: dict[str, str] | None = None
) -> tuple[subprocess.CompletedProcess[str], dict, float]:
    sku = copy.deepcopy(SIM_SKU)
    sku["recipe"]["mpi"] = {"ranks_per_node": 1, "tcp_if_include": "lo", "sizes": "8192", "iters": 2, "barriers": 10}
    (d / "skus").mkdir()
    (d / "skus" / "sim-cpu.yaml").write_text(yaml.safe_dump(sku))
    suite = d / "suite.yaml"
    suite.write_text(yaml.safe_dump({"name": "t", "description": "t", "checks": CHECKS}))
    t0 = time.monotonic()
    proc = run_nvtest(
        "run",
        "--backend",
        "ssh",
        "--inventory",
        str(inventory),
        *args,
        "--sku-dir",
        str(d / "skus"),
        "--sku",
        "sim-cpu",
        "--suite",
        str(suite),
        "--out",
        str(d / "reports"),
        "--progress",
        "plain",
        timeout=600,
        env={**os.environ, "OMP_NUM_THREADS": "1", **(env or {})},
    )
    took = time.monotonic() - t0
    results = d / "reports" / "latest" / "results.json"
    return proc, json.loads(results.read_text()) if results.exists() else {}, took


def test_names_that_resolve_only_through_ssh_config(sim_cluster: SSHDCluster, tmp_path: Path) -> None:
    """The inventory names the nodes only; ~/.ssh/config says where they are. mpirun reaches
    them through the run's generated config, torchrun's rendezvous uses the address the
    config gives the first node, never the bare name."""
    assert subprocess.run(["getent", "hosts", "sim01"], capture_output=True).returncode != 0  # resolves nowhere
    inv = sim_cluster.write_inventory(tmp_path / "inventory.yaml", addresses=False, probe_dir=str(PROBES))
    home = sim_cluster.client_home()  # ~/.ssh/config includes the cluster's, known_hosts trusts it
    proc, doc, _ = _run(tmp_path, inv, env={"HOME": str(home)})
    tail = proc.stdout[-3000:] + proc.stderr[-2000:]
    mpi, coll = by_check(doc, "mpi"), by_check(doc, "collectives_multinode")
    assert set(mpi) == set(coll) == {"sim01", "sim02", "sim03"}, tail
    for node in sim_cluster.names:
        assert mpi[node]["verdict"] == "pass", (node, mpi[node])
        assert "plm_rsh_args '-F /tmp/nvtest-" in mpi[node]["details"]["command"]
        assert coll[node]["verdict"] == "pass", (node, coll[node])
    run_dir = tmp_path / "reports" / "latest"
    first = sim_cluster.node("sim01")
    launch = (run_dir / "logs" / "sim02" / "collectives_multinode.log").read_text()
    assert f"--master-addr {first.address}" in launch, launch[:400]
    assert (run_dir / "logs" / "sim02" / "collectives_multinode.reach.log").is_file()
    assert proc.returncode == 0, tail


def test_a_node_the_others_cannot_resolve_is_named_in_seconds(tmp_path: Path) -> None:
    """sim01 is reached only through a bastion (ProxyCommand; its HostName resolves nowhere)
    and, first in the inventory, hosts the rendezvous: no node can resolve it, so the
    multi-node collective fails at its preflight in seconds, naming what could not be
    reached; mpirun's preflight names it too, and the MPI job runs on the two nodes that can
    reach each other."""
    with SSHDCluster(3, prefix="sim", python=PYTHON, bastion_only=["sim01"]) as cluster:
        inv = cluster.write_inventory(tmp_path / "inventory.yaml", probe_dir=str(PROBES))
        proc, doc, took = _run(
            tmp_path,
            inv,
            "--ssh-config",
            str(cluster.ssh_config_path),
            "--known-hosts",
            str(cluster.known_hosts_path),
        )
    tail = proc.stdout[-3000:] + proc.stderr[-2000:]
    coll = by_check(doc, "collectives_multinode")
    assert set(coll) == {"sim01", "sim02", "sim03"}, tail
    where = "the rendezvous sim01.bastion.invalid:"
    for node in ("sim02", "sim03"):
        r = coll[node]
        assert r["verdict"] == "fail", r
        assert f"{node} could not reach {where}" in r["reason"], r["reason"]
        assert "cannot resolve 'sim01.bastion.invalid'" in r["reason"], r["reason"]
        assert r["diagnosis"]["rule"] == "rendezvous_unreachable", r["diagnosis"]
    assert coll["sim01"]["verdict"] == "fail" and "no other node could reach" in coll["sim01"]["reason"]
    # in seconds: the preflight, not a rendezvous' join timeout (600 s); nothing launched
    logs = tmp_path / "reports" / "latest" / "logs"
    header = (logs / "sim02" / "collectives_multinode.reach.log").read_text()
    assert float(header.split("# duration:")[1].split()[0]) < 15, header[:300]
    assert not (logs / "sim02" / "collectives_multinode.log").exists()
    mpi = by_check(doc, "mpi")
    assert mpi["sim01"]["verdict"] == "fail", mpi["sim01"]
    assert "node-to-node ssh from sim01 to sim01 failed" in mpi["sim01"]["reason"]
    assert "Could not resolve hostname sim01.bastion.invalid" in mpi["sim01"]["reason"]
    assert mpi["sim01"]["diagnosis"]["rule"] == "launcher_ssh", mpi["sim01"]["diagnosis"]
    for node in ("sim02", "sim03"):
        assert mpi[node]["verdict"] == "pass", (node, mpi[node])
        assert mpi[node]["details"]["world_size"] == 2
    assert took < 240, f"the run took {took:.0f} s"
    assert proc.returncode == 1, tail
