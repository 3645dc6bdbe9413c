"""``nvtest gate`` in a real Slurm's path: Prolog, Epilog and HealthCheckProgram run the gate
on each simulated node (its stand-in tools picked by ``$SLURMD_NODENAME``). A job is kept off
a node with an injected fault, the node is drained with an ``nvtest:`` reason (``sinfo -R``),
the health check resumes it when the fault is cleared, and a node a person drained stays
drained. ``nvtest history`` then shows the drains and resumes. A broken site overlay does not
let a job onto a node that lost a GPU."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from nvtest.testing.slurm_cluster import SlurmCluster
from nvtest.testing.standin import StandInTools
from nvtest.testing.standin_nodes import FAULTS, healthy_h100, node_bin
from tests.conftest import REPO, run_nvtest, started_slurm_cluster

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

HOOK = """#!/bin/sh
# nvtest gate as slurmd's {mode} hook on a simulated node: that node's stand-in tools first on PATH
node=${{SLURMD_NODENAME:-unknown}}
base={base}
export PATH="$base/nodes/$node/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
[ -n "$SLURM_CONF" ] || SLURM_CONF=$(cat "$base/slurm_conf" 2>/dev/null)
export SLURM_CONF PYTHONPATH={repo}
{guard}
site=$(cat "$base/site-flags" 2>/dev/null)  # a test's site options (--overlay FILE), as a site's hook has
exec {python} -m nvtest.cli gate --mode {mode} --node "$node" {flags} $site --budget 20 \\
  --state-dir "$base/state" --history "$base/history.sqlite" >>"$base/gate-$node.jsonl" 2>>"$base/gate-$node.log"
"""


def _hook(base: Path, mode: str, flags: str) -> str:
    guard = '[ -e "$base/healthcheck.on" ] || exit 0' if mode == "healthcheck" else ""
    path = base / f"{mode}.sh"
    path.write_text(HOOK.format(mode=mode, base=base, repo=REPO, python=sys.executable, flags=flags, guard=guard))
    path.chmod(0o755)
    return str(path)


@pytest.fixture(scope="module")
def hooked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SlurmCluster, Path]]:
    base = tmp_path_factory.mktemp("gate-hooks")
    base.chmod(0o755)
    for n in ("node1", "node2"):
        node_bin(base / "nodes", n)
    with started_slurm_cluster(
        activate=True,
        prolog=_hook(base, "prolog", "--drain"),
        epilog=_hook(base, "epilog", "--drain"),
        health_check_program=_hook(base, "healthcheck", "--drain --resume"),
        health_check_interval_s=10,
        scheduler_parameters=("nohold_on_prolog_fail",),
    ) as cluster:
        (base / "slurm_conf").write_text(str(cluster.conf))
        yield cluster, base


def _node(cluster: SlurmCluster, name: str) -> tuple[str, str]:
    """(State, Reason) of a node, from ``scontrol show node -o``."""
    from nvtest.transports._slurm_parse import parse_node_records, states_from_records

    out = cluster.client("scontrol", "show", "node", "-o", name).stdout
    st = states_from_records(parse_node_records(out))[name]
    return st.state, st.reason


def _wait(what: str, ok: Callable[[], bool], timeout: float = 240.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ok():
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")


def _gates_running(node: str, mode: str) -> bool:
    """Whether an ``nvtest gate --mode MODE --node NODE`` process is running on this machine."""
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            argv = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        if b"gate" in argv and mode.encode() in argv and node.encode() in argv:
            return True
    return False


def _docs(base: Path, node: str) -> list[dict]:
    path = base / f"gate-{node}.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []


def test_a_job_is_kept_off_a_faulty_node_which_is_drained_then_resumed(hooked: tuple[SlurmCluster, Path]) -> None:
    cluster, base = hooked
    FAULTS["lost_gpu"][0](StandInTools(base / "nodes" / "node1" / "bin"))
    job = cluster.client(
        "sbatch",
        "--parsable",
        "-N1",
        "-w",
        "node1",
        "-o",
        str(base / "job-%j.out"),
        "--wrap",
        "echo ran on $SLURMD_NODENAME",
    ).stdout.strip()
    _wait("node1 drained by its Prolog", lambda: "DRAIN" in _node(cluster, "node1")[0])
    state, reason = _node(cluster, "node1")
    assert reason.startswith("nvtest: gpus "), reason
    sinfo = cluster.client("sinfo", "-R", "-h", "-o", "%N|%E").stdout
    print("sinfo -R after the Prolog failed:\n" + sinfo)
    assert "node1|nvtest: gpus " in sinfo
    _wait("the Prolog's verdict document", lambda: any(d["mode"] == "prolog" for d in _docs(base, "node1")), 120)
    prolog = [d for d in _docs(base, "node1") if d["mode"] == "prolog"]
    assert prolog and prolog[-1]["verdict"] == "fail" and prolog[-1]["job_id"] == job.split(";")[0]
    assert prolog[-1]["slurm"]["drain"]["action"] == "drain"
    time.sleep(2)  # the job is requeued: it must not have run on node1
    out = base / f"job-{job}.out"
    assert "ran on" not in (out.read_text() if out.exists() else "")
    cluster.client("scancel", job)
    other = cluster.client(
        "sbatch", "--parsable", "-N1", "-o", str(base / "job-%j.out"), "--wrap", "echo ran on $SLURMD_NODENAME"
    ).stdout.strip()
    _wait("the second job to finish", lambda: not cluster.client("squeue", "-h", "-j", other).stdout.strip(), 240)
    assert (base / f"job-{other}.out").read_text().strip() == "ran on node2"  # not on the drained node1
    healthy_h100(StandInTools(base / "nodes" / "node1" / "bin"))  # the fault is cleared
    (base / "healthcheck.on").touch()
    _wait("node1 resumed by the health check", lambda: "DRAIN" not in _node(cluster, "node1")[0])

    def resumed() -> list[dict]:
        return [
            d
            for d in _docs(base, "node1")
            if d["mode"] == "healthcheck" and (d["slurm"]["resume"] or {}).get("action") == "resume"
        ]

    _wait("the health check's verdict document", lambda: bool(resumed()), 120)
    assert resumed()[-1]["verdict"] == "pass"


def test_the_health_check_drains_and_resumes_and_leaves_a_persons_drain(hooked: tuple[SlurmCluster, Path]) -> None:
    cluster, base = hooked
    (base / "healthcheck.on").touch()
    FAULTS["ib_port_down"][0](StandInTools(base / "nodes" / "node1" / "bin"))
    _wait("node1 drained by the health check", lambda: _node(cluster, "node1")[1].startswith("nvtest: ib_ports"))
    assert "6 of 8 ports Active" in _node(cluster, "node1")[1]
    healthy_h100(StandInTools(base / "nodes" / "node1" / "bin"))
    _wait("node1 resumed", lambda: "DRAIN" not in _node(cluster, "node1")[0])
    cluster.client("scontrol", "update", "nodename=node2", "state=drain", "reason=bad fan, ticket 4711")
    t0 = time.time()
    _wait(
        "a health check of node2 after the person's drain",
        lambda: any(d["started_at"] > t0 and d["mode"] == "healthcheck" for d in _docs(base, "node2")),
    )
    state, reason = _node(cluster, "node2")
    assert "DRAIN" in state and reason == "bad fan, ticket 4711"
    doc = [d for d in _docs(base, "node2") if d["started_at"] > t0][-1]
    assert doc["verdict"] == "pass" and doc["slurm"]["resume"]["action"] == "refused"
    print("sinfo -R with a person's drain:\n" + cluster.client("sinfo", "-R", "-h", "-o", "%N|%E").stdout)
    cluster.client("scontrol", "update", "nodename=node2", "state=resume")
    assert max(d["duration_s"] for d in _docs(base, "node2")) < 20.0  # every hook within its budget
    _history_shows(str(base / "history.sqlite"))


def test_an_xid_during_a_job_drains_in_the_epilog_until_an_operator_clears_it(
    hooked: tuple[SlurmCluster, Path],
) -> None:
    cluster, base = hooked
    (base / "healthcheck.on").unlink(missing_ok=True)  # no health check may race the job's fresh cursor
    _wait("no health check of node2 in flight", lambda: not _gates_running("node2", "healthcheck"))
    prepared = base / "prepared" / "node2" / "bin"
    FAULTS["fatal_xid"][0](healthy_h100(StandInTools(prepared)))
    # the job "makes" its GPU fall off the bus: node2's kernel log becomes the recorded one; its
    # clock is of another boot, so the job also starts node2's cursor afresh (as after a reboot:
    # both generations of the state, or the gate reads the previous one's cursor)
    job = cluster.client(
        "sbatch",
        "--parsable",
        "-N1",
        "-w",
        "node2",
        "-o",
        str(base / "job-%j.out"),
        "--wrap",
        f"cp -a {prepared}/. {base}/nodes/node2/bin/ && rm -f {base}/state/gate-node2.json {base}/state/gate-node2.json.prev && echo ran on $SLURMD_NODENAME",
    ).stdout.strip()
    _wait("node2 drained by its Epilog", lambda: _node(cluster, "node2")[1].startswith("nvtest: xid_scan"))
    assert "fell off the bus (Xid 79)" in _node(cluster, "node2")[1]
    (base / "healthcheck.on").touch()
    assert (base / f"job-{job}.out").read_text().strip() == "ran on node2"  # the job itself ran
    healthy_h100(StandInTools(base / "nodes" / "node2" / "bin"))
    (base / "nodes" / "node2" / "bin" / "dmesg").unlink()  # the kernel log is clean again...
    t0 = time.time()
    _wait(
        "a health check of node2 after the log cleared",
        lambda: any(d["started_at"] > t0 and d["mode"] == "healthcheck" for d in _docs(base, "node2")),
    )
    assert "DRAIN" in _node(cluster, "node2")[0]  # ...but the GPU fell off the bus this boot: still drained
    proc = run_nvtest(
        "gate",
        "--node",
        "node2",
        "--clear-xids",
        "--resume",
        "--state-dir",
        str(base / "state"),
        "--history",
        str(base / "history.sqlite"),
        env={**cluster.env, "PATH": StandInTools(base / "nodes" / "node2" / "bin").path_prefix()},
        timeout=120,
    )
    doc = json.loads(proc.stdout)
    assert proc.returncode == 0 and doc["verdict"] == "pass" and doc["slurm"]["resume"]["action"] == "resume"
    assert "DRAIN" not in _node(cluster, "node2")[0]


def test_a_broken_overlay_still_keeps_a_job_off_a_node_that_lost_a_gpu(hooked: tuple[SlurmCluster, Path]) -> None:
    """Issue 23: a misspelt key in the site's overlay, given to the Prolog, and a lost GPU: the
    GPU failure is judged from the shipped profile, the node drained, the job kept off it, and
    the configuration error named in the document and in the log Slurm's hook writes."""
    cluster, base = hooked
    (base / "healthcheck.on").unlink(missing_ok=True)  # the Prolog alone judges
    _wait("no health check of node1 in flight", lambda: not _gates_running("node1", "healthcheck"))
    assert "DRAIN" not in _node(cluster, "node1")[0]
    overlay = base / "site-gate.yaml"
    overlay.write_text("schema_version: 1\nname: site\nrecipe:\n  gate:\n    disk_fre_gib: {'/': 5}\n")
    (base / "site-flags").write_text(f"--overlay {overlay}")
    FAULTS["lost_gpu"][0](StandInTools(base / "nodes" / "node1" / "bin"))
    t0 = time.time()
    try:
        job = cluster.client(
            "sbatch",
            "--parsable",
            "-N1",
            "-w",
            "node1",
            "-o",
            str(base / "job-%j.out"),
            "--wrap",
            "echo ran on $SLURMD_NODENAME",
        ).stdout.strip()
        _wait("node1 drained by its Prolog", lambda: "DRAIN" in _node(cluster, "node1")[0])
        assert _node(cluster, "node1")[1].startswith("nvtest: gpus "), _node(cluster, "node1")
        _wait(
            "the Prolog's document",
            lambda: any(d["mode"] == "prolog" and d["started_at"] > t0 for d in _docs(base, "node1")),
            120,
        )
        doc = [d for d in _docs(base, "node1") if d["mode"] == "prolog" and d["started_at"] > t0][-1]
        assert doc["verdict"] == "fail" and doc["exit_code"] == 1 and doc["slurm"]["drain"]["action"] == "drain"
        [problem] = doc["configuration"]["problems"]
        assert (problem["file"], problem["line"], problem["key"]) == (str(overlay), 5, "recipe.gate.disk_fre_gib")
        log = (base / "gate-node1.log").read_text()
        assert f"configuration error: {overlay}:5: recipe.gate.disk_fre_gib: unknown key" in log
        time.sleep(2)
        out = base / f"job-{job}.out"
        assert "ran on node1" not in (out.read_text() if out.exists() else "")  # the job never ran there
        cluster.client("scancel", job)
    finally:
        (base / "site-flags").unlink(missing_ok=True)
        healthy_h100(StandInTools(base / "nodes" / "node1" / "bin"))
        cluster.client("scontrol", "update", "nodename=node1", "state=resume")


def _history_shows(db: str) -> None:
    """``nvtest history`` of node1: the health check's drain (ib_ports) and its resume."""
    proc = run_nvtest("history", "node1", "--history", db, "--json", "--limit", "1000", timeout=120)
    assert proc.returncode == 0, proc.stderr
    entries = json.loads(proc.stdout)
    drains = [e["text"] for e in entries if e["kind"] == "drain"]
    assert any("nvtest: ib_ports" in t for t in drains) and any(e["kind"] == "resume" for e in entries)
    lemons = run_nvtest(
        "history", "--lemons", "--min-days", "1", "--window-days", "1", "--history", db, "--json", timeout=120
    )
    rows = {r["node"]: r for r in json.loads(lemons.stdout)}
    assert rows["node1"]["drains"] >= 1 and rows["node1"]["days"] == 1
    table = run_nvtest("history", "node1", "--history", db, timeout=120, env={"COLUMNS": "250"})
    assert "drain: nvtest: ib_ports" in table.stdout and "resume" in table.stdout
