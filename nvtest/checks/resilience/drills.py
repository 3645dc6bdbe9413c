"""Judging the restart and straggler drills of ``probes/resilience_train.py``.

In-job restart metrics (seconds unless said): ``detect_s``, ``restart_s``,
``reload_s``, ``recovery_s`` (kill -> every rank has trained a step again),
``steps_lost`` (steps), ``loss_max_abs_diff`` (loss units, after the resume
point against the uninterrupted run).  The drill spanning nodes
(:mod:`nvtest.checks.resilience.spanning`) gives each node the figures of its own ranks and the
job's over all ranks in the details.  Straggler metrics: ``min_rank_score``
(ratio, 0..1, the slowest rank's relative score).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from nvtest.checks.api import Judge, Probe, each_node, measure_probe
from nvtest.checks.resilience.effective import estimate
from nvtest.checks.resilience.recipe import TARGET_SOURCES
from nvtest.checks.resilience.spanning import SpanDrill, job_summary, rank_map_json
from nvtest.checks.resilience.timeline import (
    RecoveryFigures,
    compare_losses,
    ranks_training_again,
    recovery_figures,
)
from nvtest.errors import ProbeError

if TYPE_CHECKING:
    from nvtest.config.inventory import Node
    from nvtest.session.context import RunContext

__all__ = [
    "judge_estimate",
    "judge_injob",
    "judge_injob_span",
    "judge_stragglers",
    "judge_target",
    "node_scores",
    "stragglers_of",
]


def judge_target(judge: Judge, name: str, value: float | None, target: float | None, key: str) -> None:
    """Keep ``value`` (seconds) beside its target (seconds, recipe ``resilience.targets.<key>``)
    in the details; past the target is a warning.  ``target`` None: no target is set, the
    details say so (``within`` None) and nothing is judged."""
    judge.detail(
        f"{name}_target",
        {
            "value": value,
            "target_s": target,
            "source": TARGET_SOURCES.get(key),
            "within": None if target is None else value is not None and value <= target,
        },
    )
    if target is not None and value is not None and value > target:
        judge.warn(f"{name} {value:.1f} s is past the target of {target:g} s")


def _judge_figures(judge: Judge, fig: RecoveryFigures) -> None:
    judge("detect_s", fig.detect_s, "s")
    judge("restart_s", fig.restart_s, "s")
    judge("reload_s", fig.reload_s, "s")
    judge("recovery_s", fig.recovery_s, "s")
    judge("steps_lost", fig.steps_lost, "steps")
    judge.detail("recovery", fig.to_json())


def _judge_trajectory(
    judge: Judge, reference: Mapping[str, float], resumed: Mapping[str, float], fig: RecoveryFigures
) -> None:
    if fig.resumed_from_step is None:
        judge.fail("the restarted ranks did not resume from a checkpoint")
        return
    cmp = compare_losses(reference, resumed, fig.resumed_from_step)
    judge("loss_max_abs_diff", cmp.max_abs_diff, "loss")
    judge.detail("loss_comparison", cmp.to_json())
    if not cmp.matches:
        judge.fail(
            f"loss trajectory after the resume (step {fig.resumed_from_step}) differs from the "
            f"uninterrupted run: max |diff| {cmp.max_abs_diff}, missing steps {list(cmp.missing_steps)}"
        )


def judge_injob(judge: Judge, result: Mapping[str, Any], target_s: float) -> dict[str, Any] | None:
    """Judge one node's in-job drill; returns the recovery figures as JSON (None when no kill happened)."""
    fault, ref = result["fault"], result["reference"]
    judge.detail(
        "launcher",
        {
            "name": fault.get("launcher"),
            "argv": fault.get("argv"),
            "heartbeats": fault.get("heartbeats"),
            "heartbeat_reason": fault.get("heartbeat_reason"),
        },
    )
    if not fault.get("kill"):
        judge.fail(
            f"the drill never killed rank {result.get('kill_rank')} "
            f"(planned step {result.get('kill_step_planned')}; exit {fault.get('exit_code')})"
        )
        return None
    fig = recovery_figures(fault["events"], fault["kill"])
    _judge_figures(judge, fig)
    if not fault.get("completed"):
        judge.fail(
            f"training did not complete after the restart (launcher exit {fault.get('exit_code')}): "
            f"{(fault.get('log_tail') or '')[-300:]}"
        )
    _judge_trajectory(judge, ref["losses"], fault["losses"], fig)
    judge_target(judge, "recovery_s", fig.recovery_s, target_s, "injob_recovery_s")
    return fig.to_json()


def judge_injob_span(judge: Judge, drill: SpanDrill, node: str, target_s: float) -> dict[str, Any] | None:
    """Judge ``node``'s item of the in-job drill spanning nodes.

    Metrics: this node's ranks' ``detect_s``, ``restart_s``, ``reload_s``, ``recovery_s`` (s)
    and ``steps_lost`` (steps), and the job's ``loss_max_abs_diff`` (loss). The job's figures
    over all ranks of all nodes, the kill (seed, node, rank, step) and the rank -> node map
    are in the details. Fails when the kill did not happen, a node's launcher failed (named),
    a rank of the job did not train again, the job did not resume from a checkpoint, or the
    losses after the resume differ from the uninterrupted job's; ``recovery_s`` of this node
    past ``target_s`` (seconds) warns.

    Returns:
        The job's recovery figures as JSON (None when no kill happened).

    Raises:
        ProbeError: the uninterrupted job failed: this node's own failure when it had one,
            else the failing nodes named (every item of the check gets the error verdict).
    """
    ref, fault = drill.reference, drill.fault
    ranks = fault.rank_nodes() or ref.rank_nodes()
    mine = sorted(r for r, n in ranks.items() if n == node)
    kill = fault.kill or {}
    killed = f"rank {kill.get('rank')} (local rank {kill.get('local_rank')}) on {kill.get('node')}" if kill else None
    judge.detail(
        "launcher",
        {
            "name": drill.launcher,
            "argv": fault.argv.get(node) or ref.argv.get(node),
            "fallback_reason": drill.launcher_fallback_reason,
            "nodes": drill.launchers,
        },
    )
    judge.detail("kill", {**drill.plan.to_json(), "done": fault.kill, "killed": killed})
    judge.detail("rank_nodes", rank_map_json(ranks))
    judge.detail("node_ranks", mine)
    job = job_summary(drill)
    judge.detail("job", job)
    if not ref.completed:
        if node in ref.node_errors:
            raise ProbeError(f"uninterrupted job: {node}: {ref.node_errors[node]}")
        bad = "; ".join(f"{n}: {e}" for n, e in ref.node_errors.items()) or "rank 0 wrote no summary"
        raise ProbeError(f"the uninterrupted job failed: {bad}")
    if not fault.kill:
        judge.fail(
            f"the drill never killed local rank {drill.plan.local_rank} on {drill.plan.node} "
            f"(planned step {drill.plan.step}): {fault.node_errors.get(drill.plan.node, 'no kill logged')}"
        )
        return None
    judge.detail("killed", killed)
    job_fig = drill.figures()
    fig = drill.figures(node)
    if fig is None or job_fig is None:
        return None
    _judge_figures(judge, fig)
    if node in fault.node_errors:
        judge.fail(f"{node}: {fault.node_errors[node]}")
    others = {n: e for n, e in fault.node_errors.items() if n != node}
    if others:
        judge.fail("the job did not complete: " + "; ".join(f"{n}: {e}" for n, e in others.items()))
    again = ranks_training_again(fault.events, job_fig.incarnation)
    judge.detail("ranks_training_again", again)
    missing = sorted(set(range(drill.world_size)) - set(again))
    if missing:
        judge.fail(
            "ranks that did not train again after the restart: "
            + ", ".join(f"{r} ({ranks.get(r, '?')})" for r in missing)
        )
    _judge_trajectory(judge, ref.losses, fault.losses, job_fig)
    judge_target(judge, "recovery_s", fig.recovery_s, target_s, "injob_recovery_s")
    return job_fig.to_json()


def judge_estimate(
    judge: Judge,
    est_recipe: Mapping[str, Any],
    restart_s: float | None,
    save_s: float | None,
    save_source: str,
    restart_source: str = "measured recovery_s of this node's in-job drill",
    job_nodes: int = 1,
) -> None:
    """Add the effective-training-time estimate to the details and metrics
    (``effective_fraction``, ratio 0..1; formula in :mod:`nvtest.checks.resilience.effective`).

    The job is one training job on ``job_nodes`` nodes: its MTBF ``M`` is the recipe's
    per-node ``mtbf_h`` (hours) / ``job_nodes``; ``T`` the recipe's ``interval_min``;
    ``C`` = ``save_s`` (s); ``R`` = ``restart_s`` (s).
    """
    if restart_s is None or save_s is None:
        judge.detail("effective_time", {"error": "no restart or save time measured"})
        return
    nodes = max(1, int(job_nodes))
    node_mtbf_h = float(est_recipe["mtbf_h"])
    est = estimate(
        node_mtbf_h * 3600.0 / nodes,
        float(est_recipe["interval_min"]) * 60.0,
        save_s,
        restart_s,
    )
    judge("effective_fraction", est.effective_fraction, "ratio")
    judge.detail(
        "effective_time",
        {
            **est.to_json(),
            "node_mtbf_h": node_mtbf_h,
            "job_nodes": nodes,
            "mtbf_source": f"{node_mtbf_h:g} h per node / {nodes} node(s) of the job",
            "save_source": save_source,
            "restart_source": restart_source,
        },
    )


def stragglers_of(scores: Mapping[str, Any], bound: float) -> list[dict[str, Any]]:
    """Ranks whose relative score is below ``bound``: ``[{rank, host, score}]``."""
    out = []
    for rank, score in sorted(scores.get("rank_scores", {}).items(), key=lambda kv: int(kv[0])):
        if score is not None and score < bound:
            out.append({"rank": int(rank), "host": scores.get("hosts", {}).get(rank), "score": score})
    return out


def judge_stragglers(judge: Judge, result: Mapping[str, Any], bound: float) -> list[dict[str, Any]]:
    """Judge one node's straggler drill: every rank below ``bound`` is named in a failure."""
    scores = (result.get("run") or {}).get("straggler")
    if not scores:
        judge.fail("the drill returned no section scores")
        return []
    valid = [v for v in scores["rank_scores"].values() if v is not None]
    judge("min_rank_score", min(valid) if valid else None, "ratio")
    slow = stragglers_of(scores, bound)
    judge.detail(
        "straggler",
        {
            **scores,
            "bound": bound,
            "bound_source": TARGET_SOURCES["straggler_min_score"],
            "stragglers": slow,
            "injected": {"rank": result.get("slow_rank"), "extra_s_per_step": result.get("slow_s")},
        },
    )
    for s in slow:
        judge.fail(f"rank {s['rank']} on {s['host']} is a straggler: relative score {s['score']:.2f} < {bound:g}")
    return slow


def node_scores(ctx: RunContext, probe: Probe, nodes: Sequence[Node]) -> dict[str, Any]:
    """Per node: fastest node's median step time / this node's (ratio, 0..1), from every node's drill."""
    medians: dict[str, float] = {}

    def run_of(n: Node) -> dict[str, Any]:
        try:
            return dict(measure_probe(ctx, probe, n, nodes)["results"][0]["run"])
        except (KeyError, IndexError, TypeError) as exc:
            raise ProbeError(f"no run in the drill's document: {exc!r}") from None

    runs, missing = each_node(nodes, run_of)
    left_out = [f"{n}: {why}" for n, why in missing.items()]
    for name, run in runs.items():
        times = [t for ts in run.get("step_times_s", {}).values() for t in ts[1:]]
        if times:
            times.sort()
            medians[name] = times[len(times) // 2]
    best = min(medians.values(), default=None)
    scores = {k: best / v for k, v in medians.items()} if best else {}
    return {
        "step_median_s": medians,
        "scores": scores,
        "left_out": left_out,
        "formula": "min over nodes of median step time / this node's median step time",
    }
