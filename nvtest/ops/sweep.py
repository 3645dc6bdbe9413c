"""``nvtest sweep``: an active suite on idle nodes, as low-priority Slurm jobs, in batches.

One call sweeps once (schedule it with a systemd timer or cron, docs/operations.md):

1. the partition's nodes and their states (``scontrol show node -o``); only ``IDLE`` nodes
   (no DRAIN, DOWN, RESERVED, MAINT... flag) are swept;
2. at most ``--max-out`` nodes out of service at once: a count, or a share of the
   partition (``10%``); nodes already down or drained count against it;
3. per batch, one exclusive, never-requeued batch job per node (``--nice``, ``--qos``,
   ``--reservation`` as the site chooses) running ``nvtest run --backend local`` there,
   results in ``<out>/sweep-<id>/<node>/``; the batch is followed with ``squeue`` until
   its jobs end (jobs still pending at ``--wait`` are cancelled: the node was not free);
4. each node's results go into the history (kind ``sweep``);
5. the circuit breaker (:mod:`nvtest.ops.breaker`) is judged over every node swept so far:
   when it trips, the sweep stops, drains nothing and says why; else, with ``--drain``,
   the failed nodes are drained (``nvtest: <check> <reason>``; never a node someone else
   drained).

Writes ``sweep.json`` and ``sweep.html`` in the sweep's directory. A SIGTERM (systemd stop)
or SIGINT cancels the jobs it submitted (``scancel``), submits nothing more, drains nothing,
and still writes ``sweep.json`` (``interrupted``) with what it knows. A ``--nodes`` that names
a node the partition does not have is a usage error, never an empty sweep.
"""

from __future__ import annotations

import json
import math
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nvtest.analysis.acting import first_actionable, systemic_pairs
from nvtest.config.inventory import expand_hostlist
from nvtest.errors import ConfigError, HistoryError, NvtestError, TransportError
from nvtest.history.target import resolve_target
from nvtest.ops.breaker import BreakerVerdict, circuit_breaker
from nvtest.ops.gate.budget import on_signals
from nvtest.ops.gate.slurm import SlurmAction, drain_node
from nvtest.results import load_results
from nvtest.transports._slurm_client import SlurmClient
from nvtest.transports._slurm_cmd import sweep_batch_script
from nvtest.transports.slurm import discover_nodes, node_states

__all__ = ["SweepOptions", "max_out_count", "plan_batches", "run_sweep"]

#: squeue states after which a job will not run any more.
FINISHED = frozenset(
    {
        "COMPLETED",
        "FAILED",
        "CANCELLED",
        "TIMEOUT",
        "NODE_FAIL",
        "PREEMPTED",
        "OUT_OF_MEMORY",
        "BOOT_FAIL",
        "DEADLINE",
        "REVOKED",
        "SPECIAL_EXIT",
    }
)


@dataclass
class SweepOptions:
    """What ``nvtest sweep`` was asked (see the module docstring). Times in seconds."""

    partition: str | None = None
    nodes: str | None = None
    suite: str = "quick"
    run_args: Sequence[str] = ()
    max_out: str = "1"
    nice: int | None = 10000
    qos: str | None = None
    reservation: str | None = None
    time_min: int = 60
    wait_s: float | None = None
    out: Path = Path("reports")
    drain: bool = False
    breaker_share: float = 0.5
    breaker_min_nodes: int = 3
    breaker_similar_pct: float = 10.0
    history: str | None = None
    sweep_id: str = ""
    poll_s: float = 2.0
    log: Callable[[str], None] = field(default=lambda _m: None)
    #: The signal that stopped the sweep (``SIGTERM``: systemd stop), else None.
    interrupted: str | None = None


def sweep_id() -> str:
    """``YYYYmmdd-HHMMSS-xxxx`` (UTC time and 4 random hex digits), as a run id."""
    import datetime as dt
    import secrets

    return dt.datetime.now(tz=dt.UTC).strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(2)


#: The largest count ``--max-out`` takes (more nodes than any cluster has is a typo).
MAX_OUT_COUNT = 1_000_000


def max_out_count(spec: str, partition_size: int) -> int:
    """``--max-out``: ``"4"`` -> 4; ``"10%"`` or ``"0.1"`` -> that share of ``partition_size``
    rounded down, at least 1.

    Raises:
        ConfigError: not a positive count or a share in (0, 1].
    """
    text = spec.strip()
    try:
        if text.endswith("%"):
            frac = float(text[:-1]) / 100.0
        elif "." in text:
            frac = float(text)
        else:
            n = int(text)
            if not 1 <= n <= MAX_OUT_COUNT:
                raise ValueError
            return n
    except ValueError:
        raise ConfigError(
            f"--max-out {spec!r}: a count from 1 to {MAX_OUT_COUNT} or a share of the partition (10% or 0.1)",
            field="--max-out",
        ) from None
    if not 0 < frac <= 1:
        raise ConfigError(f"--max-out {spec!r}: a share must be in (0, 100%]", field="--max-out")
    return max(1, math.floor(frac * partition_size))


def plan_batches(idle: Sequence[str], budget: int) -> list[list[str]]:
    """``idle`` nodes in batches of at most ``budget`` (none when ``budget`` < 1)."""
    if budget < 1:
        return []
    return [list(idle[i : i + budget]) for i in range(0, len(idle), budget)]


def _job_options(opts: SweepOptions) -> list[str]:
    out = [f"--nice={opts.nice}"] if opts.nice is not None else []
    out += [f"--qos={opts.qos}"] if opts.qos else []
    out += [f"--reservation={opts.reservation}"] if opts.reservation else []
    out += [f"--partition={opts.partition}"] if opts.partition else []
    return [*out, f"--time={opts.time_min}", f"--comment=nvtest sweep {opts.sweep_id}"]


def _submit(opts: SweepOptions, client: SlurmClient, sweep_dir: Path, node: str) -> str:
    node_dir = sweep_dir / node
    node_dir.mkdir(parents=True, exist_ok=True)
    argv = [
        sys.executable,
        "-m",
        "nvtest.cli",
        "run",
        "--backend",
        "local",
        "--suite",
        opts.suite,
        "--progress",
        "plain",
        "--nodes",
        node,
        *opts.run_args,
    ]
    script = sweep_batch_script(
        name=f"nvtest-sweep-{opts.sweep_id}",
        node=node,
        output=str(node_dir / "slurm-%j.out"),
        argv=argv,
        env={"NVTEST_RUN_DIR": str(node_dir), "NVTEST_HISTORY": "off"},
        options=_job_options(opts),
    )
    path = node_dir / "nvtest-sweep.sbatch"
    path.write_text(script, encoding="utf-8")
    return client.submit(str(path))


def _follow(opts: SweepOptions, client: SlurmClient, jobs: Mapping[str, str]) -> dict[str, str]:
    """Wait for the batch's jobs (node -> job id) to end; node -> the last state seen.
    Jobs still pending at the wait limit are cancelled (``not started``)."""
    limit = time.monotonic() + (opts.wait_s if opts.wait_s is not None else opts.time_min * 60 + 300)
    last: dict[str, str] = {n: "PENDING" for n in jobs}
    by_job = {j: n for n, j in jobs.items()}
    while True:
        try:
            seen = client.queue(list(jobs.values()))
        except TransportError as exc:
            opts.log(f"sweep: squeue failed ({exc}); retrying")
            seen = {j: {"State": last[by_job[j]]} for j in jobs.values()}
        for job, fields in seen.items():
            last[by_job[job]] = (fields.get("State") or "").split()[0] or last[by_job[job]]
        active = [j for j in jobs.values() if j in seen and last[by_job[j]] not in FINISHED]
        if not active:
            return last
        if opts.interrupted:
            _cancel(client, active, last, by_job, f"cancelled: the sweep was stopped by {opts.interrupted}")
            return last
        if time.monotonic() > limit:
            for j in active:
                client.cancel(j)
                if last[by_job[j]] == "PENDING":
                    last[by_job[j]] = "not started (cancelled at the wait limit)"
            return last
        _sleep(opts, opts.poll_s)


def _sleep(opts: SweepOptions, seconds: float) -> None:
    """Sleep ``seconds``, or less when a signal stops the sweep."""
    until = time.monotonic() + seconds
    while not opts.interrupted and (rest := until - time.monotonic()) > 0:
        time.sleep(min(rest, 0.1))


def _cancel(
    client: SlurmClient, active: Sequence[str], last: dict[str, str], by_job: Mapping[str, str], why: str
) -> None:
    """scancel each job of ``active`` (a failure is noted, never raised); its state becomes ``why``."""
    for j in active:
        try:
            client.cancel(j)
            last[by_job[j]] = why
        except NvtestError as exc:
            last[by_job[j]] = f"{why}; scancel failed: {exc}"


def _node_result(sweep_dir: Path, node: str, state: str) -> tuple[dict[str, Any] | None, str]:
    try:
        doc = load_results(sweep_dir / node)
    except ConfigError:
        return None, f"no results.json (job {state})"
    return doc, str((doc.get("summary") or {}).get("verdict"))


def _select(opts: SweepOptions) -> tuple[list[str], dict[str, str], int, int]:
    """(idle nodes, node -> why not swept, nodes out of service now, partition size)."""
    names = discover_nodes(opts.partition, None, include_unavailable=True)
    states = node_states(names)
    wanted = set(expand_hostlist(opts.nodes)) if opts.nodes else set(names)
    unknown = sorted(wanted - set(names))
    if unknown:
        where = f"partition {opts.partition}" if opts.partition else "the default partition"
        raise ConfigError(
            f"{', '.join(unknown)}: not a node of {where} (Slurm lists {len(names)}: "
            f"{', '.join(names[:8])}{' ...' if len(names) > 8 else ''})",
            field="--nodes",
        )
    idle, skipped = [], {}
    out_now = sum(1 for n in names if not states[n].available)
    for n in names:
        st = states[n]
        if n not in wanted:
            continue
        if st.flags == {"IDLE"}:
            idle.append(n)
        else:
            skipped[n] = f"not idle: {st.state}" + (f" ({st.reason})" if st.reason else "")
    return idle, skipped, out_now, len(names)


def run_sweep(opts: SweepOptions) -> dict[str, Any]:
    """Sweep once (see the module docstring); the summary document (also ``sweep.json``).

    Raises:
        ConfigError: a bad ``--max-out``, ``--history`` or partition. TransportError: Slurm
            unreachable.
    """
    max_out_count(opts.max_out, 1)  # a usage error before Slurm is asked or anything is written
    resolve_target(opts.history)  # a history target that is none of the accepted forms: the same
    opts.sweep_id = opts.sweep_id or sweep_id()
    sweep_dir = (opts.out / f"sweep-{opts.sweep_id}").resolve()
    idle, skipped, out_now, size = _select(opts)
    sweep_dir.mkdir(parents=True, exist_ok=True)
    with on_signals(_stopper(opts)):
        return _sweep(opts, sweep_dir, idle, skipped, out_now, size)


def _stopper(opts: SweepOptions) -> Callable[[str], None]:
    def stop(name: str) -> None:  # a signal handler: set the flag, nothing else
        opts.interrupted = name

    return stop


def _sweep(
    opts: SweepOptions, sweep_dir: Path, idle: list[str], skipped: dict[str, str], out_now: int, size: int
) -> dict[str, Any]:
    limit = max_out_count(opts.max_out, size)
    budget = limit - out_now
    batches = plan_batches(idle, budget)
    summary: dict[str, Any] = {
        "sweep_id": opts.sweep_id,
        "started_at": time.time(),
        "partition": opts.partition,
        "suite": opts.suite,
        "max_out": limit,
        "out_of_service_before": out_now,
        "batch_size": max(budget, 0),
        "batches": [],
        "nodes": {n: {"verdict": None, "why": why} for n, why in skipped.items()},
        "breaker": None,
        "drained": {},
        "dir": str(sweep_dir),
    }
    if budget < 1:
        summary["note"] = f"{out_now} of {size} nodes already out of service, --max-out {limit}: nothing swept"
    docs: dict[str, dict[str, Any]] = {}
    pending_drain: list[str] = []
    client = SlurmClient()
    for i, batch in enumerate(batches):
        if opts.interrupted:
            break
        verdict = _batch(opts, client, sweep_dir, batch, summary, docs)
        if opts.interrupted:  # stopped: what ran is recorded; no drain on a sweep cut short
            opts.log(f"sweep: stopped by {opts.interrupted}: its jobs cancelled")
            break
        pending_drain += [n for n in batch if summary["nodes"][n]["verdict"] == "fail"]
        if verdict.tripped:
            summary["breaker"] = verdict.to_json()
            opts.log(f"sweep: circuit breaker tripped: {verdict.reason}")
            break
        # drain once the breaker has enough nodes to judge (or nothing more will come)
        judged = len(docs) >= opts.breaker_min_nodes or i == len(batches) - 1
        if opts.drain and judged:
            for n in pending_drain:
                summary["drained"][n] = _drain(opts, n, docs[n])
            pending_drain = []
    if summary["breaker"] is None:
        summary["breaker"] = circuit_breaker(
            docs, share=opts.breaker_share, min_nodes=opts.breaker_min_nodes, similar_pct=opts.breaker_similar_pct
        ).to_json()
    if opts.interrupted:
        summary["interrupted"] = opts.interrupted
    summary["ended_at"] = time.time()
    _write(sweep_dir, summary)
    return summary


def _batch(
    opts: SweepOptions,
    client: SlurmClient,
    sweep_dir: Path,
    batch: list[str],
    summary: dict[str, Any],
    docs: dict[str, dict[str, Any]],
) -> BreakerVerdict:
    """Submit one batch, wait for it, read and record its nodes; the breaker over all so far."""
    jobs: dict[str, str] = {}
    for node in batch:
        if opts.interrupted:
            summary["nodes"][node] = {
                "verdict": None,
                "why": f"not submitted: the sweep was stopped by {opts.interrupted}",
            }
            continue
        try:
            jobs[node] = _submit(opts, client, sweep_dir, node)
        except NvtestError as exc:
            summary["nodes"][node] = {"verdict": "error", "why": f"not submitted: {exc}"}
    opts.log(f"sweep: batch {len(summary['batches']) + 1}: {', '.join(f'{n} (job {j})' for n, j in jobs.items())}")
    states = _follow(opts, client, jobs)
    summary["batches"].append({"nodes": batch, "jobs": jobs, "states": states})
    for node in jobs:
        doc, verdict = _node_result(sweep_dir, node, states[node])
        if doc is None:
            summary["nodes"][node] = {
                "verdict": "error" if not states[node].startswith("not started") else None,
                "why": verdict,
                "job": jobs[node],
            }
            continue
        docs[node] = doc
        bad = [r for r in doc.get("results") or [] if r.get("verdict") in ("fail", "error")]
        summary["nodes"][node] = {
            "verdict": verdict,
            "job": jobs[node],
            "report": str(sweep_dir / node / "report.html"),
            "why": "; ".join(f"{r['check']}: {r.get('reason') or r['verdict']}" for r in bad[:3]),
        }
        _record(opts, node, doc, summary)
    return circuit_breaker(
        docs, share=opts.breaker_share, min_nodes=opts.breaker_min_nodes, similar_pct=opts.breaker_similar_pct
    )


def _record(opts: SweepOptions, node: str, doc: dict[str, Any], summary: dict[str, Any]) -> None:
    from nvtest.history import HistoryStore

    try:
        store = HistoryStore.open(opts.history)
        if store is None:
            return
        with store:
            store.ingest_results(doc, kind="sweep", key=f"sweep:{opts.sweep_id}:{node}")
    except (HistoryError, ConfigError) as exc:
        summary.setdefault("warnings", []).append(f"history not recorded for {node}: {exc}")


def _drain(opts: SweepOptions, node: str, doc: Mapping[str, Any]) -> dict[str, Any]:
    """Drain ``node`` for its first failure automation may act on
    (:func:`nvtest.analysis.acting.first_actionable`: a failure proven on the node, not one
    flagged systemic or pinned outside it); none: action ``none`` with why, Slurm untouched."""
    first, refused = first_actionable(doc.get("results") or [], systemic_pairs(doc))
    if first is None:
        act = SlurmAction("none", node, "not drained: " + ("; ".join(dict.fromkeys(refused)) or "nothing failed"))
        opts.log(f"sweep: {node}: {act.action}: {act.reason}")
        return act.to_json()
    act = drain_node(node, str(first["check"]), str(first.get("reason") or "failed"))
    if act.action == "drain":
        from nvtest.history import HistoryStore
        from nvtest.history.cluster import cluster_of_run

        try:
            store = HistoryStore.open(opts.history)
            if store is not None:
                with store:
                    store.record_event(
                        node,
                        "drain",
                        act.reason,
                        source=f"sweep {opts.sweep_id}",
                        cluster=cluster_of_run(doc.get("run") or {}),
                    )
        except (HistoryError, ConfigError):
            pass
    opts.log(f"sweep: {node}: {act.action}: {act.reason}")
    return act.to_json()


def _write(sweep_dir: Path, summary: Mapping[str, Any]) -> None:
    from nvtest.ops.sweep_report import render_sweep_html

    tmp = sweep_dir / "sweep.json.tmp"
    tmp.write_text(json.dumps(summary, indent=1, default=str), encoding="utf-8")
    tmp.replace(sweep_dir / "sweep.json")
    (sweep_dir / "sweep.html").write_text(render_sweep_html(summary), encoding="utf-8")
