"""Judging the restart and straggler drills of ``probes/resilience_train.py``.

In-job restart metrics (seconds unless said): ``detect_s``, ``restart_s``,
``reload_s``, ``recovery_s`` (kill -> every rank has trained a step again),
``steps_lost`` (steps), ``loss_max_abs_diff`` (loss units, after the resume
point against the uninterrupted run).  Straggler metrics: ``min_rank_score``
(ratio, 0..1, the slowest rank's relative score).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from nvtest.check import Judge, Probe, measure_probe
from nvtest.errors import NvtestError
from nvtest.resilience.effective import estimate
from nvtest.resilience.recipe import TARGET_SOURCES
from nvtest.resilience.timeline import compare_losses, recovery_figures

if TYPE_CHECKING:
    from nvtest.context import RunContext
    from nvtest.inventory import Node

__all__ = [
    "judge_estimate",
    "judge_injob",
    "judge_stragglers",
    "judge_target",
    "node_scores",
    "stragglers_of",
]


def judge_target(
    judge: Judge, name: str, value: float | None, target: float | None, key: str
) -> None:
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
    judge("detect_s", fig.detect_s, "s")
    judge("restart_s", fig.restart_s, "s")
    judge("reload_s", fig.reload_s, "s")
    judge("recovery_s", fig.recovery_s, "s")
    judge("steps_lost", fig.steps_lost, "steps")
    judge.detail("recovery", fig.to_json())
    if not fault.get("completed"):
        judge.fail(
            f"training did not complete after the restart (launcher exit {fault.get('exit_code')}): "
            f"{(fault.get('log_tail') or '')[-300:]}"
        )
    if fig.resumed_from_step is None:
        judge.fail("the restarted ranks did not resume from a checkpoint")
    else:
        cmp = compare_losses(ref["losses"], fault["losses"], fig.resumed_from_step)
        judge("loss_max_abs_diff", cmp.max_abs_diff, "loss")
        judge.detail("loss_comparison", cmp.to_json())
        if not cmp.matches:
            judge.fail(
                f"loss trajectory after the resume (step {fig.resumed_from_step}) differs from the "
                f"uninterrupted run: max |diff| {cmp.max_abs_diff}, missing steps {list(cmp.missing_steps)}"
            )
    judge_target(judge, "recovery_s", fig.recovery_s, target_s, "injob_recovery_s")
    return fig.to_json()


def judge_estimate(
    judge: Judge,
    est_recipe: Mapping[str, Any],
    restart_s: float | None,
    save_s: float | None,
    save_source: str,
    restart_source: str = "measured recovery_s of this node's in-job drill",
) -> None:
    """Add the effective-training-time estimate (recipe MTBF and interval) to the details and metrics."""
    if restart_s is None or save_s is None:
        judge.detail("effective_time", {"error": "no restart or save time measured"})
        return
    est = estimate(
        float(est_recipe["mtbf_h"]) * 3600.0,
        float(est_recipe["interval_min"]) * 60.0,
        save_s,
        restart_s,
    )
    judge("effective_fraction", est.effective_fraction, "ratio")
    judge.detail(
        "effective_time",
        {**est.to_json(), "save_source": save_source, "restart_source": restart_source},
    )


def stragglers_of(scores: Mapping[str, Any], bound: float) -> list[dict[str, Any]]:
    """Ranks whose relative score is below ``bound``: ``[{rank, host, score}]``."""
    out = []
    for rank, score in sorted(scores.get("rank_scores", {}).items(), key=lambda kv: int(kv[0])):
        if score is not None and score < bound:
            out.append(
                {"rank": int(rank), "host": scores.get("hosts", {}).get(rank), "score": score}
            )
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
        judge.fail(
            f"rank {s['rank']} on {s['host']} is a straggler: relative score {s['score']:.2f} < {bound:g}"
        )
    return slow


def node_scores(ctx: RunContext, probe: Probe, nodes: Sequence[Node]) -> dict[str, Any]:
    """Per node: fastest node's median step time / this node's (ratio, 0..1), from every node's drill."""
    medians: dict[str, float] = {}
    left_out = []
    for n in nodes:
        try:
            run = measure_probe(ctx, probe, n, nodes)["results"][0]["run"]
        except (NvtestError, KeyError, IndexError) as exc:
            left_out.append(f"{n.name}: {exc}")
            continue
        times = [t for ts in run.get("step_times_s", {}).values() for t in ts[1:]]
        if times:
            times.sort()
            medians[n.name] = times[len(times) // 2]
    best = min(medians.values(), default=None)
    scores = {k: best / v for k, v in medians.items()} if best else {}
    return {
        "step_median_s": medians,
        "scores": scores,
        "left_out": left_out,
        "formula": "min over nodes of median step time / this node's median step time",
    }
