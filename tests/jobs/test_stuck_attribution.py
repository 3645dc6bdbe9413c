"""Issue 24, class 3: an unkillable process is attributed by what it touched and by its node.

Walks every probe of the suites (the same walk as tests/checks/test_probe_needs.py) and every
pair job: each need it declares has a domain, the words of an unkillable result name that
domain and the node that owns the process, and the diagnosis gives that domain's cause (a
checkpoint probe stuck in D state is "stuck on storage", never "GPU or driver wedged"). A wait
channel, where the transport read one, wins over the declaration.
"""

from __future__ import annotations

import pytest

from nvtest.jobs.pair_jobs import NcclPairJob, PerftestPairJob, TcpPairJob
from nvtest.playbook.diagnosis import diagnose
from nvtest.playbook.stuck import DOMAINS, NEED_DOMAIN, UNKNOWN, stuck_on
from nvtest.session.phase import attribute_unkillable
from nvtest.session.probe import DEVICES, Probe
from nvtest.transports.base import CommandResult
from tests.checks.test_probe_needs import _module_probes

#: What each walked command is expected to be stuck on, when it declares it touches that.
PAIR_JOBS = {"tcp_bw": TcpPairJob.needs, "ib_write_bw": PerftestPairJob.needs, "nccl pairs": NcclPairJob.needs}


def _wedged(node: str, command: str, wchan: str = "") -> CommandResult:
    """An unkillable result as the transports word it (``_deadline.KillReport.describe``)."""
    where = f", wchan {wchan}" if wchan else ""
    return CommandResult(
        node=node,
        command=command,
        failure="unkillable",
        timed_out=True,
        error=f"timed out after 1800 s; unkillable (still alive after SIGKILL: python3 (pid 4242, state D{where}))",
    )


def _rule_of(domain: str) -> str:
    return "unkillable" if domain == "gpu" else f"unkillable_{domain}"


def test_every_device_has_a_domain():
    assert set(DEVICES) <= set(NEED_DOMAIN)
    assert {s.domain for s in DOMAINS} == set(NEED_DOMAIN.values())


@pytest.mark.parametrize(
    ("name", "needs", "command"),
    [(p.name, p.all_needs(), f"python3 /p/{p.script or 'x'} --path /mnt/ckpt") for p in _module_probes()]
    + [(name, needs, "tcp_bw_probe.py send") for name, needs in PAIR_JOBS.items()],
    ids=lambda v: v if isinstance(v, str) and " " not in v else None,
)
def test_every_probe_attributes_an_unkillable_process_by_what_it_touches(name, needs, command):
    assert needs, f"{name} declares nothing it touches"
    unknown = [n for n in needs if n not in NEED_DOMAIN]
    assert not unknown, f"{name}: no domain for {unknown} (nvtest/playbook/stuck.py NEED_DOMAIN)"
    stuck = stuck_on(needs)
    assert stuck is not UNKNOWN
    if "storage" in needs:
        assert stuck.domain == "storage", name  # a checkpoint/filesystem probe: storage first
    res = attribute_unkillable(_wedged("gpu017", command), needs)
    assert f"unkillable: {stuck.words}" in (res.error or "") and " on gpu017 (" in (res.error or ""), res.error
    if stuck.domain == "storage":
        assert "(/mnt/ckpt) on gpu017" in (res.error or "")
    assert res.cause == f"transport:unkillable:{stuck.domain}"
    d = diagnose({"check": name, "verdict": "fail", "reason": f"NodeWedged: {res.error}", "cause": res.cause})
    assert d is not None and d.rule == _rule_of(stuck.domain) and d.cls == stuck.cls, d


@pytest.mark.parametrize(
    ("wchan", "domain"),
    [
        ("nfs_wait_bit_killable", "storage"),
        ("rpc_wait_bit_killable", "storage"),
        ("ptlrpc_set_wait", "storage"),
        ("io_schedule", "storage"),
        ("mlx5_cmd_exec", "network"),
        ("uvm_wait_for_gpu", "gpu"),
    ],
)
def test_the_wait_channel_wins_over_the_declaration(wchan, domain):
    res = attribute_unkillable(_wedged("gpu017", "nvidia-smi -q", wchan), ("nvidia-smi", "gpu"))
    words = next(s.words for s in DOMAINS if s.domain == domain)
    assert f"unkillable: {words}" in (res.error or ""), res.error


def test_nothing_known_is_not_blamed_on_the_gpu():
    res = attribute_unkillable(_wedged("gpu017", "sh -c true"), ())
    assert "GPU" not in (res.error or "") and UNKNOWN.words in (res.error or "")
    d = diagnose({"check": "x", "verdict": "fail", "reason": f"NodeWedged: {res.error}", "cause": res.cause})
    assert d is not None and d.rule == "unkillable_unknown"
    assert attribute_unkillable(res, ("storage",)) == res  # worded once
    done = CommandResult(node="n", command="true", exit_code=0)
    assert attribute_unkillable(done, ("gpu",)) is done


def test_a_probe_without_storage_is_not_storage():
    assert stuck_on(Probe("x", command=("nvidia-smi",)).all_needs()).domain == "gpu"
    assert stuck_on(("ibstat", "hca")).domain == "network"


def test_a_multi_node_launch_attributes_each_survivor_to_the_node_that_owns_it():
    """srun's step over node[1-3] timed out; the kill step found a survivor on node2 only
    (``slurm._with_node_reports`` words each node after its name)."""
    from nvtest.session.phase import unkillable_owners

    res = CommandResult(
        node="node[1-3]",
        command="srun -N3 all_reduce_perf",
        failure="unkillable",
        timed_out=True,
        error="timed out after 1800 s; step cancelled (scancel 7.0); node1: the tasks killed (running at "
        "the deadline: all_reduce_perf); node2: unkillable (still alive after SIGKILL: all_reduce_perf "
        "(pid 77, state D))",
    )
    done = attribute_unkillable(res, ("gpu",))
    assert "node2: unkillable: GPU or driver wedged on node2 (still alive" in (done.error or ""), done.error
    assert "node1: unkillable" not in (done.error or "") and "node[1-3]" not in (done.error or "")
    assert unkillable_owners(done) == ["node2"] and unkillable_owners(res) == ["node2"]
    single = attribute_unkillable(_wedged("gpu017", "nvidia-smi -q"), ("gpu",))
    assert unkillable_owners(single) == ["gpu017"]
    assert unkillable_owners(CommandResult(node="n", command="x", failure="timeout", error="timed out")) == []


def test_a_process_wedged_in_the_gpu_driver_blocks_every_gpu_need_on_its_node():
    """dcgmi diag left in D state (field case dcgm-diag-unkillable-d-state-blocks-gpu-checks):
    nvidia-smi, nvbandwidth, CUDA all reach the same driver, so every need of the GPU domain is
    marked hung, not only the command's own; a plain timeout or a wedge elsewhere marks only
    the command's needs."""
    from nvtest.session.phase import GPU_NEEDS, hung_needs

    wedged = attribute_unkillable(_wedged("node1", "dcgmi diag -r 2 -j"), ("dcgmi", "gpu"))
    assert wedged.cause == "transport:unkillable:gpu"
    marked = hung_needs(wedged, ("dcgmi", "gpu"))
    assert {"nvidia-smi", "dcgmi", "gpu", "nvbandwidth"} <= set(marked) and set(GPU_NEEDS) <= set(marked)
    storage = attribute_unkillable(_wedged("node1", "python3 /p/ckpt_probe.py"), ("storage",))
    assert hung_needs(storage, ("storage",)) == ("storage",)
    timeout = CommandResult(node="node1", command="dcgmi diag", failure="timeout", timed_out=True, error="timed out")
    assert hung_needs(timeout, ("dcgmi", "gpu")) == ("dcgmi", "gpu")
