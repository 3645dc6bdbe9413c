"""Run a pair schedule over the run's transport, then the second pass (re-pairing).

One round at a time (every pair of a round at once, in waves of ``max_concurrent_pairs``),
and per round one sub-round per label (e.g. per HCA). For a server/client test:

1. ask each server node for a port free there (``tcp_bw_probe.py free-port``, a different
   starting point per pair, so simulated nodes sharing one host never collide);
2. start the servers (one transport call, in a background thread);
3. wait on each server node until its port is in LISTEN state (``tcp_bw_probe.py
   wait-listen``: no connection is spent on the check);
4. start the clients of the pairs whose server listens; then collect the servers.

A launcher-style test (an mpirun over the two nodes) runs one command on the pair's first node.
Every command goes through the phase runner, so each has its evidence log
(``logs/<node>/<check>.r<round>[.<label>].<role>.log``). After the first pass,
:mod:`~nvtest.jobs.blame` names the suspects; they are re-paired with known-good
nodes, and :func:`~nvtest.jobs.blame.attribute` gives each node its finding.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from nvtest.config.inventory import Node
from nvtest.errors import ProbeError
from nvtest.jobs.base import probe_argv, run_commands
from nvtest.jobs.blame import (
    NodeFinding,
    PairOutcome,
    attribute,
    find_suspects,
    pinned_hangs,
    repair_rounds,
)
from nvtest.jobs.pairs import Pair, Round, Schedule
from nvtest.session.phase import cause_of
from nvtest.session.probe import parse_probe_json
from nvtest.transports.base import Command, CommandResult

if TYPE_CHECKING:
    from nvtest.session.context import RunContext

__all__ = ["PairJob", "PairReport", "node_value", "run_pair_schedule"]

PORT_BASE = 20000
PORT_STRIDE = 16

#: Results that ran past their deadline (or were blocked by an earlier hang): a hung pair.
HANG_FAILURES = frozenset({"timeout", "unkillable", "blocked"})


class PairJob(ABC):
    """What one pair runs and how its output is judged. Subclasses: one per tool.

    Attributes:
        name: the check name (evidence key prefix).
        timeout_s: per command, seconds.
        server_client: True: a server on the pair's first node and a client on the second,
            with a TCP port; False: one launcher command on the first node.
    """

    name: str = "pair"
    timeout_s: float = 120.0
    server_client: bool = True
    #: the devices and tools the pair's commands touch (:data:`nvtest.session.probe.DEVICES`):
    #: they word an unkillable process; a node where one hung earlier is blocked (and the
    #: hang pinned on it) at once; a hang pinned on a node marks them hung there
    needs: tuple[str, ...] = ()

    def labels(self, a: Node, b: Node) -> Sequence[str]:
        """The separate tests of this pair, run one after another (e.g. HCA names)."""
        return ("",)

    def server(self, server: Node, client: Node, label: str, port: int) -> Command:
        raise NotImplementedError

    def client(self, client: Node, server: Node, label: str, port: int) -> Command:
        raise NotImplementedError

    def launcher(self, a: Node, b: Node, label: str) -> Command:
        raise NotImplementedError

    def judge(self, pair: Pair, label: str, results: dict[str, CommandResult]) -> PairOutcome:
        """The pair's outcome from its nodes' results (server and client, or the launcher).

        A command that did not complete (timeout, lost connection) makes the pair an
        ``error`` naming that node; otherwise :meth:`judge_complete` reads the output.
        """
        command = "\n".join(f"{n}: {r.command}" for n, r in results.items())
        hung = tuple(n for n, r in results.items() if r.failure in HANG_FAILURES)
        # the evidence pins a hang on a node when a process there survived SIGKILL, or an
        # earlier hang there blocked the command: not on its peer, whose command only waited
        named = [n for n, r in results.items() if r.failure in ("unkillable", "blocked")]
        pinned = named[0] if len(named) == 1 else ""
        undone = sorted((n for n, r in results.items() if not r.completed), key=lambda n: n != pinned)
        if undone:
            n = undone[0]
            return PairOutcome(
                pair,
                "error",
                reason=f"{n}: {results[n].error or 'did not complete'}",
                command=command,
                hung=hung,
                pinned=pinned,
                cause=cause_of(results[n]),
            )
        return self.judge_complete(pair, label, results, command)

    @abstractmethod
    def judge_complete(self, pair: Pair, label: str, results: dict[str, CommandResult], command: str) -> PairOutcome:
        """The outcome of a pair whose commands all completed; ``command`` is the
        ``node: command line`` text every outcome carries as its evidence."""


@dataclass(frozen=True)
class PairReport:
    """A whole pair check: the schedule, both passes and each node's finding."""

    schedule: Schedule
    first: tuple[PairOutcome, ...]
    second: tuple[PairOutcome, ...]
    findings: dict[str, NodeFinding]


def _key(job: PairJob, round_no: int, label: str, role: str) -> str:
    lab = f".{label}" if label else ""
    return f"{job.name}.r{round_no}{lab}.{role}"


def _error(pair: Pair, label: str, reason: str, round_no: int, second: bool) -> PairOutcome:
    return PairOutcome(pair, "error", reason=reason, round=round_no, second_pass=second, label=label)


def _ports(ctx: RunContext, job: PairJob, servers: list[Node], round_no: int, label: str) -> dict[str, int | str]:
    """server node -> a port free there, or the reason there is none."""
    cmds = {
        n.name: probe_argv(ctx, n, "tcp_bw_probe.py", "free-port", "--start", str(PORT_BASE + PORT_STRIDE * i))
        for i, n in enumerate(servers)
    }
    res = run_commands(ctx, _key(job, round_no, label, "port"), servers, cmds, timeout_s=60)
    out: dict[str, int | str] = {}
    for n in servers:
        r = res.get(n.name)
        try:
            if r is None or not r.completed:
                raise ProbeError(r.error if r else "no result")
            doc = parse_probe_json(r)
            out[n.name] = int(doc["results"][0]["port"]) if doc.get("status") == "ok" else str(doc.get("reason"))
        except (ProbeError, KeyError, IndexError, TypeError, ValueError) as exc:
            out[n.name] = f"no free port: {exc}"
    return out


def _run_wave(
    ctx: RunContext,
    job: PairJob,
    wave: Sequence[Pair],
    by_name: dict[str, Node],
    round_no: int,
    label: str,
    second: bool,
) -> list[PairOutcome]:
    if not job.server_client:
        launchers = [by_name[a] for a, _ in wave]
        cmds = {a: job.launcher(by_name[a], by_name[b], label) for a, b in wave}
        res = run_commands(
            ctx,
            _key(job, round_no, label, "launch"),
            launchers,
            cmds,
            timeout_s=job.timeout_s,
            needs=job.needs,
            mark=False,
        )
        return [_tag(job.judge((a, b), label, {a: res[a]}), round_no, label, second) for a, b in wave]
    servers = [by_name[a] for a, _ in wave]
    ports = _ports(ctx, job, servers, round_no, label)
    ready = [(a, b) for a, b in wave if isinstance(ports[a], int)]
    out = [_error((a, b), label, f"server {a}: {ports[a]}", round_no, second) for a, b in wave if (a, b) not in ready]
    if not ready:
        return out
    srv_nodes = [by_name[a] for a, _ in ready]
    srv_cmds = {a: job.server(by_name[a], by_name[b], label, int(ports[a])) for a, b in ready}
    srv_res: dict[str, CommandResult] = {}

    def serve() -> None:
        srv_res.update(
            run_commands(
                ctx,
                _key(job, round_no, label, "server"),
                srv_nodes,
                srv_cmds,
                timeout_s=job.timeout_s,
                needs=job.needs,
                mark=False,
            )
        )

    thread = threading.Thread(target=serve, name=f"nvtest-{job.name}-servers", daemon=True)
    thread.start()
    wait_cmds = {
        a: probe_argv(
            ctx,
            by_name[a],
            "tcp_bw_probe.py",
            "wait-listen",
            "--port",
            str(ports[a]),
            "--timeout-s",
            "30",
        )
        for a, _ in ready
    }
    waited = run_commands(ctx, _key(job, round_no, label, "listen"), srv_nodes, wait_cmds, timeout_s=60)
    go = [(a, b) for a, b in ready if waited[a].completed and waited[a].exit_code == 0]
    for a, b in ready:
        if (a, b) not in go:
            w = waited[a]
            why = w.error or (w.stdout.strip().splitlines() or [f"exit {w.exit_code}"])[-1][:300]
            out.append(
                _error(
                    (a, b),
                    label,
                    f"server on {a} did not listen on port {ports[a]}: {why}",
                    round_no,
                    second,
                )
            )
    cli_res: dict[str, CommandResult] = {}
    if go:
        cli_cmds = {b: job.client(by_name[b], by_name[a], label, int(ports[a])) for a, b in go}
        cli_res = run_commands(
            ctx,
            _key(job, round_no, label, "client"),
            [by_name[b] for _, b in go],
            cli_cmds,
            timeout_s=job.timeout_s,
            needs=job.needs,
            mark=False,
        )
    thread.join()
    for a, b in go:
        results = {a: srv_res[a], b: cli_res[b]} if a in srv_res else {b: cli_res[b]}
        outcome = job.judge((a, b), label, results)
        logs = {
            a: ctx.phases.log_path(_key(job, round_no, label, "server"), a) or "",
            b: ctx.phases.log_path(_key(job, round_no, label, "client"), b) or "",
        }
        out.append(_tag(outcome, round_no, label, second, logs))
    return out


def _tag(o: PairOutcome, round_no: int, label: str, second: bool, logs: dict[str, str] | None = None) -> PairOutcome:
    from dataclasses import replace

    return replace(o, round=round_no, label=label, second_pass=second, logs=logs or o.logs)


def _pinned(ctx: RunContext, job: PairJob, outcomes: Sequence[PairOutcome], by_name: dict[str, Node]) -> dict[str, str]:
    """node -> why no pair is run with it: a hang the pairs so far pin on it
    (:func:`~nvtest.jobs.blame.pinned_hangs`), or one of the job's needs hung on it earlier in
    the run (a launch of the same check that hung there, an earlier check)."""
    out = pinned_hangs(outcomes)
    for name in by_name:
        hang = ctx.phases.blocking(name, job.needs) if job.needs else None
        if hang is not None and name not in out:
            out[name] = hang.blocked_message()
    return out


def _norm(pair: Pair) -> Pair:
    a, b = pair
    return (a, b) if a <= b else (b, a)


def _not_run(pair: Pair, pinned: dict[str, str], round_no: int, second: bool) -> PairOutcome:
    """The outcome of a pair not run because a hang is pinned on one of its nodes."""
    on = next(n for n in pair if n in pinned)
    return PairOutcome(
        pair,
        "error",
        reason=f"not run: the hang is pinned on {on} ({pinned[on]}); no further pair spends a deadline on it",
        round=round_no,
        second_pass=second,
        pinned=on,
    )


def _run_rounds(
    ctx: RunContext,
    job: PairJob,
    rounds: Sequence[Round],
    by_name: dict[str, Node],
    first_round_no: int,
    second: bool,
    max_concurrent_pairs: int,
    before: Sequence[PairOutcome] = (),
) -> list[PairOutcome]:
    """Run ``rounds`` in order; a pair with a node a hang is pinned on (in ``before`` or an
    earlier round: :func:`~nvtest.jobs.blame.pinned_hangs`) is not run but recorded."""
    out: list[PairOutcome] = []
    for i, rnd in enumerate(rounds):
        round_no = first_round_no + i
        pinned = _pinned(ctx, job, [*before, *out], by_name)
        skipped = [p for p in rnd if any(n in pinned for n in p)]
        out.extend(_not_run(p, pinned, round_no, second) for p in skipped)
        rnd = tuple(p for p in rnd if p not in skipped)
        waves = [rnd[k : k + max_concurrent_pairs] for k in range(0, len(rnd), max_concurrent_pairs)] or [()]
        for w, wave in enumerate(waves):
            if not wave:
                continue
            labels = sorted({lab for a, b in wave for lab in job.labels(by_name[a], by_name[b])})
            for label in labels:
                todo = [p for p in wave if label in job.labels(by_name[p[0]], by_name[p[1]])]
                no = round_no if len(waves) == 1 else round_no * 1000 + w
                # a pair that hung on one label (HCA), or a node a hang is now pinned on, is
                # not run again on the next label: each would wait out the same deadline
                pinned = _pinned(ctx, job, [*before, *out], by_name)
                hung = {_norm(o.pair): o for o in out if o.hung}
                for p in [p for p in todo if any(n in pinned for n in p) or _norm(p) in hung]:
                    todo.remove(p)
                    out.append(
                        _not_run(p, pinned, no, second)
                        if any(n in pinned for n in p)
                        else _error(
                            p,
                            label,
                            f"not run: this pair hung on {hung[_norm(p)].label or 'its first test'}"
                            f" ({hung[_norm(p)].reason})",
                            no,
                            second,
                        )
                    )
                if todo:
                    out.extend(_run_wave(ctx, job, todo, by_name, no, label, second))
    return out


def run_pair_schedule(
    ctx: RunContext,
    job: PairJob,
    nodes: Sequence[Node],
    schedule: Schedule,
    *,
    max_concurrent_pairs: int = 32,
) -> PairReport:
    """Run ``schedule``'s rounds with ``job``, re-pair the suspects, attribute per node."""
    by_name = {n.name: n for n in nodes}
    names = [n.name for n in nodes]
    first = _run_rounds(ctx, job, schedule.rounds, by_name, 1, False, max_concurrent_pairs)
    suspicion = find_suspects(names, first)
    second = _run_rounds(
        ctx,
        job,
        repair_rounds(suspicion),
        by_name,
        len(schedule.rounds) + 1,
        True,
        max_concurrent_pairs,
        first,
    )
    findings = attribute(names, first, second, suspicion)
    for node, why in pinned_hangs([*first, *second]).items():
        # the hang is this node's: a later check that needs the same devices is blocked there
        # at once, and a later multi-node launch leaves it out (nvtest.jobs.base.known_bad)
        ctx.phases.mark_hung(node, job.name, job.needs or ("network",), why)
    return PairReport(schedule, tuple(first), tuple(second), findings)


def node_value(finding: NodeFinding) -> float | None:
    """The figure that stands for a node: the lowest value of its own failing tests when it is
    to blame, else the lowest value of its passing tests (failures blamed on others left out)."""
    own = [o.value for o in finding.outcomes if o.value is not None]
    if finding.verdict == "fail":
        bad = [
            o.value for o in finding.outcomes if o.status == "fail" and o.value is not None and finding.node in o.pair
        ]
        return min(bad or own, default=None)
    good = [o.value for o in finding.outcomes if o.status == "pass" and o.value is not None]
    return min(good, default=None)
