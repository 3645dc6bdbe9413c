"""Pure parts: the effective-training-time model, the recovery timeline from events (one node, and
a job spanning nodes), the kill plan and the launcher command lines of the spanning drill."""

from __future__ import annotations

import math

import pytest

from nvtest.checks.api import Judge
from nvtest.checks.resilience.drills import judge_injob_span
from nvtest.checks.resilience.effective import (
    daly_interval,
    effective_fraction,
    estimate,
    young_interval,
)
from nvtest.checks.resilience.spanning import KillPlan, SpanDrill, SpanRun, kill_plan
from nvtest.checks.resilience.timeline import (
    compare_losses,
    of_node,
    rank_nodes,
    ranks_training_again,
    recovery_figures,
    relabel_incarnations,
)
from nvtest.config.inventory import Node
from nvtest.jobs.launch import torchrun_commands


def test_effective_fraction_formula():
    # 1 - C/T - (T/2 + R)/M with C=60 s, T=1800 s, R=120 s, M=24 h
    expected = 1 - 60 / 1800 - (900 + 120) / 86400
    assert effective_fraction(1800, 60, 120, 86400) == pytest.approx(expected)
    assert effective_fraction(10, 100, 0, 50) == 0.0  # clamped
    with pytest.raises(ValueError):
        effective_fraction(0, 1, 1, 1)


def test_daly_optimum_beats_neighbours():
    c, m, r = 60.0, 86400.0, 120.0
    t = daly_interval(c, m, r)
    assert t == pytest.approx(math.sqrt(2 * c * (m + r)) - c)
    assert young_interval(c, m) == pytest.approx(math.sqrt(2 * c * m))
    best = effective_fraction(t, c, r, m)
    assert best >= effective_fraction(t / 2, c, r, m) and best >= effective_fraction(t * 2, c, r, m)
    est = estimate(m, 1800, c, r)
    assert est.effective_at_daly == pytest.approx(best)
    assert est.save_share + est.failure_share == pytest.approx(1 - est.effective_fraction)


def _ev(t, ev, rank, inc, **kw):
    return {"t": t, "ev": ev, "rank": rank, "incarnation": inc, "pid": 100 * inc + rank, **kw}


EVENTS = [
    _ev(0.0, "start", 0, 0),
    _ev(0.0, "start", 1, 0),
    _ev(1.0, "step", 0, 0, step=9),
    _ev(1.0, "step", 1, 0, step=9),
    _ev(1.1, "step", 0, 0, step=10),
    _ev(1.1, "step", 1, 0, step=10),
    _ev(1.35, "error", 0, 0, reason="RuntimeError: Connection closed by peer"),
    _ev(1.4, "sigterm", 0, 0),
    _ev(2.0, "start", 0, 1),
    _ev(2.1, "start", 1, 1),
    _ev(5.0, "ready", 0, 1),
    _ev(5.2, "ready", 1, 1),
    _ev(5.5, "resume", 0, 1, step=8),
    _ev(5.6, "resume", 1, 1, step=8),
    _ev(5.8, "step", 0, 1, step=9),
    _ev(5.9, "step", 1, 1, step=9),
]


def test_recovery_figures_split_the_timeline():
    fig = recovery_figures(EVENTS, {"t": 1.2, "rank": 1, "at_step": 10})
    assert fig.detect_s == pytest.approx(0.15)
    assert "collective failed" in fig.detected_by
    assert fig.restart_s == pytest.approx(5.2 - 1.35)
    assert fig.reload_s == pytest.approx(0.4)
    assert fig.recovery_s == pytest.approx(5.9 - 1.2)
    assert fig.detect_s + fig.restart_s + fig.reload_s + fig.first_step_s == pytest.approx(fig.recovery_s)
    assert (fig.resumed_from_step, fig.last_step_before_kill, fig.steps_lost) == (8, 10, 2)


def test_no_restart_gives_no_recovery():
    fig = recovery_figures(EVENTS[:8], {"t": 1.2, "rank": 1, "at_step": 10})
    assert fig.recovery_s is None and fig.incarnation is None and fig.steps_lost is None


def test_loss_comparison_catches_a_different_trajectory():
    ref = {str(s): 4.0 - 0.1 * s for s in range(1, 11)}
    same = {str(s): ref[str(s)] for s in range(9, 11)}
    assert compare_losses(ref, same, 8).matches
    off = {**same, "10": ref["10"] + 1e-3}
    bad = compare_losses(ref, off, 8)
    assert not bad.matches and bad.max_abs_diff == pytest.approx(1e-3)
    missing = compare_losses(ref, {"9": ref["9"]}, 8)
    assert not missing.matches and missing.missing_steps == (10,)


def _span_ev(t, ev, rank, node, pid, inc=0, **kw):
    return {"t": t, "ev": ev, "rank": rank, "incarnation": inc, "pid": pid, "node": node, **kw}


#: A 2-node job, one rank per node; rank 1 (node b) killed after step 6. Node a's launcher
#: restarted its rank for the rendezvous' new round without counting it (launcher count 0).
SPAN = [
    _span_ev(0.0, "start", 0, "a", 10, local_rank=0),
    _span_ev(0.0, "start", 1, "b", 20, local_rank=0),
    _span_ev(1.0, "step", 0, "a", 10, step=6),
    _span_ev(1.0, "step", 1, "b", 20, step=6),
    _span_ev(1.3, "error", 0, "a", 10, reason="RuntimeError: Connection reset by peer"),
    _span_ev(2.0, "start", 0, "a", 11),
    _span_ev(2.2, "start", 1, "b", 21, inc=1),
    _span_ev(4.0, "ready", 0, "a", 11),
    _span_ev(4.5, "ready", 1, "b", 21, inc=1),
    _span_ev(4.8, "resume", 0, "a", 11, step=4),
    _span_ev(4.9, "resume", 1, "b", 21, inc=1, step=4),
    _span_ev(5.0, "step", 0, "a", 11, step=5),
    _span_ev(5.4, "step", 1, "b", 21, inc=1, step=5),
]


def test_spanning_job_incarnations_numbered_per_rank_by_process():
    events = relabel_incarnations(SPAN)
    incs = {(e["rank"], e["pid"]): e["incarnation"] for e in events}
    assert incs == {(0, 10): 0, (1, 20): 0, (0, 11): 1, (1, 21): 1}
    assert [e["launcher_incarnation"] for e in events if e["pid"] == 11] == [0, 0, 0, 0]
    assert rank_nodes(events) == {0: "a", 1: "b"}
    kill = {"t": 1.2, "rank": 1, "at_step": 6, "node": "b"}
    job = recovery_figures(events, kill)
    assert job.detect_s == pytest.approx(0.1) and "rank 0" in job.detected_by
    assert job.recovery_s == pytest.approx(5.4 - 1.2) and job.steps_lost == 2
    assert ranks_training_again(events, job.incarnation) == [0, 1]
    # node a's own ranks: back at 5.0; node b (the killed rank's) has no survivor to react
    a = recovery_figures(of_node(events, "a"), kill)
    assert a.recovery_s == pytest.approx(5.0 - 1.2) and a.detect_s == pytest.approx(0.1)
    b = recovery_figures(of_node(events, "b"), kill)
    assert b.recovery_s == pytest.approx(5.4 - 1.2) and "no survivor reaction" in b.detected_by
    # without the renumbering node a's restart would look like the first incarnation
    assert recovery_figures(SPAN, kill).restart_s == pytest.approx(4.5 - 1.3)
    assert ranks_training_again(SPAN, 1) == [1]


def test_kill_plan_is_replayed_from_its_seed():
    plans = {kill_plan(s, ["n1", "n2", "n3"], 4, 30, 5) for s in range(200)}
    assert len(plans) > 50
    assert {p.node for p in plans} == {"n1", "n2", "n3"}
    assert {p.local_rank for p in plans} == {0, 1, 2, 3}
    assert min(p.step for p in plans) == 6 and max(p.step for p in plans) == 27
    assert kill_plan(7, ["n1", "n2"], 2, 30, 5) == kill_plan(7, ["n1", "n2"], 2, 30, 5)
    assert kill_plan(7, ["n1"], 1, 4, 5).step == 6  # a run too short still kills after a checkpoint
    with pytest.raises(ValueError):
        kill_plan(1, [], 2, 30, 5)


def test_launcher_commands_for_a_restartable_job_spanning_nodes():
    nodes = [Node(name="n1", address="10.0.0.1"), Node(name="n2", address="10.0.0.2")]
    cmds = torchrun_commands(
        nodes,
        lambda n: ["/p/resilience_train.py", "train", "--ckpt-dir", f"/c/{n.name}"],
        nproc_per_node=2,
        master_addr="10.0.0.1",
        master_port=29500,
        launcher="ft_launcher",
        rdzv="c10d",
        max_restarts=1,
        launcher_args=["--ignore-missing-fault-tol-cfg"],
        rdzv_id="job7",
        local_addr=lambda n: n.address or n.name,
    )
    n1, n2 = cmds["n1"], cmds["n2"]
    assert n1[1:3] == ["-m", "nvidia_resiliency_ext.fault_tolerance.launcher"]
    for argv, node in ((n1, nodes[0]), (n2, nodes[1])):
        assert argv[argv.index("--rdzv-endpoint") + 1] == "10.0.0.1:29500"
        assert argv[argv.index("--local-addr") + 1] == node.address
        assert argv[argv.index("--max-restarts") + 1] == "1"
        assert "--node-rank" not in argv and "--master-addr" not in argv
        assert argv.index("--ignore-missing-fault-tol-cfg") < argv.index("/p/resilience_train.py")
    assert n1[n1.index("--rdzv-conf") + 1] == "is_host=1"
    assert n2[n2.index("--rdzv-conf") + 1] == "is_host=0"
    assert n2[-1] == "/c/n2"
    static = torchrun_commands(nodes, lambda n: ["s.py"], nproc_per_node=1, master_addr="10.0.0.1", master_port=1)
    assert static["n2"][1:3] == ["-m", "torch.distributed.run"]
    assert static["n2"][static["n2"].index("--node-rank") + 1] == "1"
    v6 = torchrun_commands(
        nodes[:1],
        lambda n: ["s.py"],
        nproc_per_node=1,
        master_addr="fd00::1",
        master_port=5,
        rdzv="c10d",
    )
    assert "[fd00::1]:5" in v6["n1"]
    with pytest.raises(ValueError):
        torchrun_commands(nodes, lambda n: [], nproc_per_node=1, master_addr="a", master_port=1, launcher="mpirun")


def _span_drill(fault_events, kill, fault_errors=None, losses=None):
    ref_losses = {str(s): 4.0 - 0.1 * s for s in range(1, 9)}
    ref = SpanRun("reference", [], [], None, {"a": 0, "b": 0}, {}, {}, ref_losses, True)
    fault = SpanRun(
        "fault",
        relabel_incarnations(fault_events),
        [],
        kill,
        {"a": 0, "b": 0 if not fault_errors else 1},
        fault_errors or {},
        {"a": ["python", "-m", "launcher"]},
        losses if losses is not None else {k: v for k, v in ref_losses.items() if int(k) > 4},
        not fault_errors,
    )
    plan = KillPlan(3, "b", 0, 6)
    return SpanDrill(("a", "b"), 1, 8, 4, "ft_launcher", None, {}, plan, {"scope": "node"}, ref, fault)


def test_span_items_pass_with_their_own_figures_and_the_jobs_in_the_details():
    kill = {"t": 1.2, "rank": 1, "at_step": 6, "node": "b", "local_rank": 0}
    for node, recovery in (("a", 5.0 - 1.2), ("b", 5.4 - 1.2)):
        judge = Judge(None, "restart_injob", node, None)
        job = judge_injob_span(judge, _span_drill(SPAN, kill), node, 120.0)
        assert judge.verdict == "pass", judge.summary()
        m = {x.name: x.value for x in judge.metrics}
        assert m["recovery_s"] == pytest.approx(recovery) and m["loss_max_abs_diff"] == 0.0
        assert job["recovery_s"] == pytest.approx(5.4 - 1.2)
        assert judge.details["killed"] == "rank 1 (local rank 0) on b"
        assert judge.details["node_ranks"] == [0 if node == "a" else 1]
        assert judge.details["ranks_training_again"] == [0, 1]


def test_span_items_name_the_failing_node_and_the_ranks_not_back():
    kill = {"t": 1.2, "rank": 1, "at_step": 6, "node": "b", "local_rank": 0}
    events = [e for e in SPAN if not (e["node"] == "b" and e["pid"] == 21)]  # b never came back
    drill = _span_drill(events, kill, {"b": "ft_launcher exited 1: worker group failed"})
    judge = Judge(None, "restart_injob", "a", None)
    judge_injob_span(judge, drill, "a", 120.0)
    assert judge.verdict == "fail"
    assert "the job did not complete: b: ft_launcher exited 1" in judge.summary()
    assert "did not train again after the restart: 1 (b)" in judge.summary()
    no_kill = Judge(None, "restart_injob", "a", None)
    assert judge_injob_span(no_kill, _span_drill(SPAN[:4], None), "a", 120.0) is None
    assert "never killed local rank 0 on b (planned step 6)" in no_kill.summary()
    off = Judge(None, "restart_injob", "b", None)
    judge_injob_span(off, _span_drill(SPAN, kill, losses={"5": 0.0, "6": 0.0}), "b", 120.0)
    assert off.verdict == "fail" and "differs from the uninterrupted run" in off.summary()


def test_straggler_injection_on_one_node_or_every_node(monkeypatch):
    from nvtest.checks.resilience.recipe import resilience_recipe, slow_s_on

    monkeypatch.setenv("NVTEST_STRAGGLER_INJECT", "gpu002/1:0.3")
    rec = resilience_recipe(None)
    assert (rec["slow_rank"], rec["slow_node"]) == (1, "gpu002")
    assert slow_s_on(rec, "gpu002") == 0.3 and slow_s_on(rec, "gpu001") == 0.0
    monkeypatch.setenv("NVTEST_STRAGGLER_INJECT", "0:0.2")
    rec = resilience_recipe(None)
    assert rec["slow_rank"] == 0 and slow_s_on(rec, "gpu001") == slow_s_on(rec, "x") == 0.2
    monkeypatch.delenv("NVTEST_STRAGGLER_INJECT")
    assert slow_s_on(resilience_recipe(None), "gpu001") == 0.0  # the real check: no injection


def test_effective_time_of_a_job_on_n_nodes_divides_the_node_mtbf():
    from nvtest.checks.api import Judge
    from nvtest.checks.resilience.drills import judge_estimate
    from nvtest.checks.resilience.effective import effective_fraction

    est = {"mtbf_h": 24, "interval_min": 30}
    one, four = Judge(None, "restart_injob", "n1", None), Judge(None, "restart_injob", "n1", None)
    judge_estimate(one, est, 60.0, 20.0, "save", "restart")
    judge_estimate(four, est, 60.0, 20.0, "save", "restart", job_nodes=4)
    d1, d4 = one.details["effective_time"], four.details["effective_time"]
    assert (d1["mtbf_s"], d4["mtbf_s"]) == (86400.0, 21600.0) and d4["job_nodes"] == 4
    assert d4["effective_fraction"] == effective_fraction(1800.0, 20.0, 60.0, 21600.0)
    assert d4["effective_fraction"] < d1["effective_fraction"]
    assert d4["mtbf_source"] == "24 h per node / 4 node(s) of the job"
