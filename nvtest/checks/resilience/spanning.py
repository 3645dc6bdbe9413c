"""The in-job restart drill as ONE job whose ranks span the check's nodes.

``restart_injob`` takes this form when it runs on two nodes or more (one node keeps the
per-node drill of ``probes/resilience_train.py drill injob``). The job is launched like the
multi-node training check (:func:`nvtest.jobs.torchrun.run_torchrun`): every node
runs its own launcher, ``nproc`` ranks each, at once, with a c10d rendezvous on the first
node; ``ft_launcher`` when every node has nvidia-resiliency-ext, else ``torchrun``. A
node-side driver (``resilience_train.py drill node``) wraps each node's launcher: it gives
the ranks an event directory, kills the chosen rank, and returns its node's events.

Phases, each on all the nodes at once (evidence in ``logs/<node>/<phase>.log``)::

    restart_injob.launchers            which launcher each node can run
    restart_injob.reference(.port)     the uninterrupted job (max-restarts 0), seed 1234
    restart_injob.fault(.port)         the same job (max-restarts 1); one rank SIGKILLed

The kill: node, local rank and step drawn from ``random.Random(seed)`` (recipe
``resilience.kill_seed``, else a fresh one; recorded in the details), the step after the
first checkpoint: ``ckpt_every + 1 .. max(ckpt_every + 1, steps - 3)``.

Checkpoints (every ``ckpt_every`` steps; model + AdamW state, identical on every DDP
replica): with ``ckpt.shared_path`` set, rank 0 alone writes
``<shared_path>/nvtest-injob-<run id>/<reference|fault>/`` and every rank reads it ("job"
scope); otherwise local rank 0 of every node writes its node's copy into
``<ckpt.local_path>/nvtest-injob-<run id>-<reference|fault>/<node>/`` and the ranks of that
node read it ("node" scope). The ranks agree on the step to resume from (the smallest of their newest
checkpoints; two are kept), so a node that lost its last save to the kill does not split
the job. Each node's driver removes its directory at the end (the first node the shared one).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from nvtest.checks.api import NodeError, ProbeSkip, parse_probe_json
from nvtest.checks.resilience.recipe import ckpt_recipe, resilience_recipe
from nvtest.checks.resilience.timeline import (
    RecoveryFigures,
    of_node,
    rank_nodes,
    recovery_figures,
    relabel_incarnations,
)
from nvtest.config.inventory import Node
from nvtest.errors import ProbeError
from nvtest.jobs.base import (
    check_nodes,
    launch_nodes,
    probe_argv,
    profile_of,
    run_commands,
)
from nvtest.jobs.torchrun import TorchrunJob, run_torchrun
from nvtest.session.phase import cause_of

if TYPE_CHECKING:
    from nvtest.session.context import RunContext

__all__ = [
    "CHECK",
    "KillPlan",
    "SpanDrill",
    "SpanRun",
    "job_summary",
    "kill_plan",
    "merge_run",
    "rank_map_json",
    "run_span_drill",
    "spans_nodes",
]

CHECK = "restart_injob"
#: The drill's data seed (the same in both runs: what makes the trajectories comparable).
SEED = 1234
#: Seconds each node's launcher may run, per run; the phase gets two minutes more.
LAUNCH_TIMEOUT_S = 600.0
#: Process-group and store timeout of the ranks, seconds.
RANK_TIMEOUT_S = 300.0
#: Launcher options of the drill (the single-node drill uses the same, ``_resilience_launch``).
COMMON_ARGS = ("--monitor-interval", "0.1")
FT_ARGS = (
    "--workers-stop-timeout",
    "5",
    "--ft-initial-rank-heartbeat-timeout",
    "60",
    "--ft-rank-heartbeat-timeout",
    "30",
    "--ignore-missing-fault-tol-cfg",
)


@dataclass(frozen=True)
class KillPlan:
    """Which rank dies, and when: node name, local rank on it, step; drawn from ``seed``."""

    seed: int
    node: str
    local_rank: int
    step: int

    def to_json(self) -> dict[str, Any]:
        return {
            "kill_seed": self.seed,
            "node": self.node,
            "local_rank": self.local_rank,
            "step_planned": self.step,
        }


def kill_plan(seed: int, nodes: Sequence[str], nproc: int, steps: int, ckpt_every: int) -> KillPlan:
    """The kill drawn from ``random.Random(seed)``: a node, a local rank (< ``nproc``), a step
    in ``ckpt_every + 1 .. max(ckpt_every + 1, steps - 3)`` (after the first checkpoint).

    Raises:
        ValueError: no node, or ``nproc`` < 1.
    """
    if not nodes or nproc < 1:
        raise ValueError(f"a kill needs nodes and ranks: nodes={list(nodes)}, nproc={nproc}")
    rng = random.Random(seed)
    node = rng.choice(list(nodes))
    local = rng.randrange(nproc)
    lo = ckpt_every + 1
    return KillPlan(seed, node, local, rng.randint(lo, max(lo, steps - 3)))


@dataclass(frozen=True)
class SpanRun:
    """One launch of the job, its nodes' documents joined.

    ``events``: every rank's events of every node, with ``node`` and the incarnation
    numbered per rank by process (:func:`~nvtest.checks.resilience.timeline.relabel_incarnations`).
    ``node_errors``: node -> why its share failed (did not finish, no document, launcher
    exit code not 0). ``losses``: step -> mean loss of the job, from rank 0's summary.
    ``completed``: no node error and rank 0 finished.
    """

    name: str
    events: list[dict[str, Any]]
    summaries: list[dict[str, Any]]
    kill: dict[str, Any] | None
    exit_codes: dict[str, int | None]
    node_errors: dict[str, str]
    argv: dict[str, list[str]]
    losses: dict[str, float]
    completed: bool

    def rank_nodes(self) -> dict[int, str]:
        """global rank -> node (as the ranks reported it)."""
        return rank_nodes(self.events)


def merge_run(name: str, job: TorchrunJob, launcher: str) -> SpanRun:
    """Join the nodes' documents of ``job`` (one ``drill node`` document per node)."""
    events: list[dict[str, Any]] = []
    summaries: list[dict[str, Any]] = []
    kill = None
    codes: dict[str, int | None] = {}
    errors: dict[str, str] = {}
    argv: dict[str, list[str]] = {}
    for node in job.nodes:
        res = job.results.get(node)
        doc = job.docs.get(node)
        if res is None or not res.completed:
            errors[node] = f"did not finish: {res.error if res else 'no result'}"
        if doc is None or doc.get("status") != "ok" or not doc.get("results"):
            why = job.doc_errors.get(node) or (doc or {}).get("reason")
            errors.setdefault(node, f"printed no result: {why}")
            continue
        r = doc["results"][0]
        codes[node] = r.get("exit_code")
        argv[node] = r.get("argv") or []
        events.extend(r.get("events") or [])
        summaries.extend(r.get("summaries") or [])
        if r.get("kill"):
            kill = r["kill"]
        if r.get("exit_code") != 0:
            tail = " | ".join((r.get("log_tail") or "").strip().splitlines()[-3:])[-400:]
            code = r.get("exit_code")
            state = "timed out" if code is None else f"exited {code}"
            errors.setdefault(node, f"{launcher} {state}: {tail}")
    losses: dict[str, float] = {}
    for s in sorted(summaries, key=lambda s: int(s.get("start_step", 0))):
        if int(s["rank"]) == 0:
            losses.update(s.get("losses") or {})
    rank0 = any(int(s["rank"]) == 0 for s in summaries)
    return SpanRun(
        name,
        relabel_incarnations(events),
        summaries,
        kill,
        codes,
        errors,
        argv,
        losses,
        not errors and rank0,
    )


@dataclass(frozen=True)
class SpanDrill:
    """The spanning drill of a run: its plan, both runs, and how it was launched.

    ``launchers``: node -> the launcher it could run (and why not ft_launcher);
    ``ckpt``: scope (``job`` | ``node``) and the directories of both runs.
    """

    nodes: tuple[str, ...]
    nproc: int
    steps: int
    ckpt_every: int
    launcher: str
    launcher_fallback_reason: str | None
    launchers: dict[str, dict[str, Any]]
    plan: KillPlan
    ckpt: dict[str, Any]
    reference: SpanRun
    fault: SpanRun

    @property
    def world_size(self) -> int:
        return self.nproc * len(self.nodes)

    def figures(self, node: str | None = None) -> RecoveryFigures | None:
        """Recovery figures of the fault run over all ranks (``node`` None) or one node's ranks;
        None when no kill happened."""
        if not self.fault.kill:
            return None
        events = self.fault.events if node is None else of_node(self.fault.events, node)
        return recovery_figures(events, self.fault.kill)


def spans_nodes(ctx: RunContext) -> bool:
    """True when ``restart_injob`` runs as one job over its nodes (two reachable nodes or more)."""
    return len(check_nodes(ctx, CHECK)) >= 2


def _launchers(ctx: RunContext, nodes: Sequence[Node], wanted: str) -> dict[str, dict[str, Any]]:
    """node -> ``drill launchers`` result; ProbeSkip when a node cannot run the drill at all."""
    res = run_commands(
        ctx,
        f"{CHECK}.launchers",
        nodes,
        {n.name: probe_argv(ctx, n, "resilience_train.py", "drill", "launchers", "--launcher", wanted) for n in nodes},
        timeout_s=300,
        needs=(),  # asks the node's Python which launchers it has: no tool or device to block
    )
    out: dict[str, dict[str, Any]] = {}
    for n in nodes:
        r = res[n.name]
        if not r.completed:
            raise NodeError(f"{n.name} did not answer which launcher it has: {r.error}", cause=cause_of(r))
        doc = parse_probe_json(r)
        if doc.get("status") == "skip":
            raise ProbeSkip(f"{n.name}: {doc.get('reason')}")
        if doc.get("status") != "ok":
            raise ProbeError(f"{n.name}: {doc.get('reason')}")
        out[n.name] = {**doc["results"][0], "library": doc.get("library")}
    return out


def run_span_drill(ctx: RunContext) -> SpanDrill:
    """Run the spanning drill once per run (cached): launchers, reference job, fault job.

    The recipe (``resilience``: nproc, steps, ckpt_every, launcher, kill_seed; ``ckpt``:
    shared_path, local_path) is the first node's SKU profile's, except ``ckpt.local_path``,
    which is each node's own.

    Raises:
        ProbeSkip: a node cannot run the drill (no torch; ft_launcher requested and missing).
        NodeError, ProbeError: a node did not answer which launcher it has, or no
            rendezvous port on the first node.
    """

    def compute() -> SpanDrill:
        nodes = launch_nodes(ctx, CHECK)
        first = nodes[0]
        rec = resilience_recipe(profile_of(ctx, first))
        shared = ckpt_recipe(profile_of(ctx, first)).get("shared_path")
        nproc, steps, every = int(rec["nproc"]), int(rec["steps"]), int(rec["ckpt_every"])
        found = _launchers(ctx, nodes, str(rec["launcher"]))
        fallback = [(n, f) for n, f in found.items() if f["launcher"] != "ft_launcher"]
        launcher = "torchrun" if fallback else "ft_launcher"
        why = f"{fallback[0][0]}: {fallback[0][1].get('launcher_fallback_reason')}" if fallback else None
        seed = rec.get("kill_seed")
        seed = int(seed) if seed is not None else random.SystemRandom().randrange(2**31)
        plan = kill_plan(seed, [n.name for n in nodes], nproc, steps, every)
        scope = "job" if shared else "node"
        tag = f"nvtest-injob-{ctx.config.run_id}"

        def ckpt_dir(n: Node, run: str) -> str:
            if shared:
                return f"{str(shared).rstrip('/')}/{tag}/{run}"
            local = ckpt_recipe(profile_of(ctx, n))["local_path"]
            return f"{str(local).rstrip('/')}/{tag}-{run}/{n.name}"

        def launch(run: str, max_restarts: int, kill: KillPlan | None) -> SpanRun:
            def train_args(n: Node) -> list[str]:
                return [
                    "train",
                    "--steps",
                    str(steps),
                    "--seed",
                    str(SEED),
                    "--ckpt-dir",
                    ckpt_dir(n, run),
                    "--ckpt-every",
                    str(every),
                    "--ckpt-scope",
                    scope,
                    "--timeout-s",
                    f"{RANK_TIMEOUT_S:g}",
                    *(["--under-ft"] if launcher == "ft_launcher" else []),
                ]

            def driver(n: Node) -> list[str]:
                argv = [
                    "drill",
                    "node",
                    "--node-name",
                    n.name,
                    "--timeout-s",
                    f"{LAUNCH_TIMEOUT_S:g}",
                ]
                if kill is not None and n.name == kill.node:
                    argv += [
                        "--kill-local-rank",
                        str(kill.local_rank),
                        "--kill-step",
                        str(kill.step),
                    ]
                if scope == "node" or n.name == first.name:
                    argv += ["--remove-dir", ckpt_dir(n, run)]
                return [*probe_argv(ctx, n, "resilience_train.py", *argv), "--"]

            job = run_torchrun(
                ctx,
                CHECK,
                "resilience_train.py",
                train_args,
                nproc_per_node=nproc,
                timeout_s=LAUNCH_TIMEOUT_S + 120,
                key=f"{CHECK}.{run}",
                launcher=launcher,
                rdzv="c10d",
                max_restarts=max_restarts,
                launcher_args=[*COMMON_ARGS, *(FT_ARGS if launcher == "ft_launcher" else ())],
                wrap=driver,
            )
            return merge_run(run, job, launcher)

        reference = launch("reference", 0, None)
        fault = launch("fault", 1, plan) if reference.completed else _not_run("fault")
        return SpanDrill(
            tuple(n.name for n in nodes),
            nproc,
            steps,
            every,
            launcher,
            why,
            found,
            plan,
            {
                "scope": scope,
                "reference": {n.name: ckpt_dir(n, "reference") for n in nodes},
                "fault": {n.name: ckpt_dir(n, "fault") for n in nodes},
            },
            reference,
            fault,
        )

    return ctx.fleet_cache.get(f"{CHECK}:span", compute)


def _not_run(name: str) -> SpanRun:
    return SpanRun(name, [], [], None, {}, {}, {}, {}, False)


def job_summary(drill: SpanDrill) -> dict[str, Any]:
    """The job-level part of every node's details (JSON)."""
    fig = drill.figures()
    return {
        "nodes": list(drill.nodes),
        "nproc_per_node": drill.nproc,
        "world_size": drill.world_size,
        "launcher": drill.launcher,
        "launcher_fallback_reason": drill.launcher_fallback_reason,
        "kill_plan": drill.plan.to_json(),
        "kill": drill.fault.kill,
        "recovery": fig.to_json() if fig else None,
        "ckpt": drill.ckpt,
        "exit_codes": {"reference": drill.reference.exit_codes, "fault": drill.fault.exit_codes},
        "node_errors": {"reference": drill.reference.node_errors, "fault": drill.fault.node_errors},
    }


def rank_map_json(ranks: Mapping[int, str]) -> dict[str, str]:
    """``{rank: node}`` with string keys, sorted by rank."""
    return {str(r): n for r, n in sorted(ranks.items())}
