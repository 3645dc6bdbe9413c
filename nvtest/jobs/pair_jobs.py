"""What a pair runs, per tool, and how its output becomes a :class:`PairOutcome`.

- :class:`TcpPairJob`: ``tcp_bw_probe.py serve`` / ``send`` (TCP, any node; the variant that
  runs where no RDMA device exists). Metric ``tcp_gbit_s`` (Gb/s) of check ``tcp_bw``.
- :class:`PerftestPairJob`: perftest ``ib_write_bw`` per HCA (``-d HCA -i PORT -p TCPPORT -s
  SIZE --report_gbits -F -D SECONDS [-x GID] [--use_cuda=GPU]``, the client adds the server's
  address). Metric ``bw_avg_gbit_s`` (Gb/s, the client's average) of check ``ib_write_bw``.
- :class:`NcclPairJob`: nccl-tests over mpirun on the two nodes (launcher style), judged by
  :func:`~nvtest.jobs.nccl.judge_output`; metric ``<op>_busbw_gbps`` (GB/s).

A pair passes when its tool ran, reported no error and its figure is inside the client
node's SKU threshold; a tool-reported fabric error (perftest ``Couldn't connect``,
``Completion with error``; a TCP connection that carried no data; NCCL wrong results) fails
it; a command that never completed (timeout, unreachable) is an ``error``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Literal

from nvtest.config.inventory import Node
from nvtest.errors import ParseError, ProbeError
from nvtest.jobs.base import address, assess_value, judge_value, probe_argv
from nvtest.jobs.blame import PairOutcome
from nvtest.jobs.launch import MpiOptions, mpirun_argv
from nvtest.jobs.nccl import NcclRecipe, judge_output, perf_argv
from nvtest.jobs.pair_runner import PairJob
from nvtest.jobs.pairs import Pair
from nvtest.parsers import perftest
from nvtest.session.probe import parse_probe_json
from nvtest.transports.base import Command, CommandResult
from nvtest.verdict import Verdict

if TYPE_CHECKING:
    from nvtest.session.context import RunContext

__all__ = ["NcclPairJob", "PerftestPairJob", "TcpPairJob", "implausible_rows", "outcome_from_value"]


def outcome_from_value(
    ctx: RunContext,
    node: Node,
    pair: Pair,
    check: str,
    metric: str,
    value: float | None,
    unit: str,
    command: str,
) -> PairOutcome:
    """A measured pair: ``fail`` when the value is outside ``node``'s SKU threshold."""
    a = assess_value(ctx, node, check, metric, value, unit)
    if a.verdict is Verdict.FAIL:
        return PairOutcome(pair, "fail", value, unit, a.reason, command=command, cause=a.cause)
    if a.verdict is Verdict.ERROR:
        return PairOutcome(pair, "error", value, unit, a.reason, command=command, cause=a.cause)
    return PairOutcome(pair, "pass", value, unit, command=command)


def implausible_rows(log: perftest.PerftestLog, plausible: Callable[[float], tuple[Verdict, str]]) -> list[str]:
    """The bandwidth rows of ``log`` that ``plausible`` (a Gb/s value -> (verdict, reason), the
    ``ib_write_bw.bw_avg_gbit_s`` judgement) finds ``error``: implausible (negative, above
    the port rate) or not a number. One such row and the figures are not judged: the run
    (:meth:`PerftestPairJob.judge_complete`) and ``nvtest parse``
    (:mod:`nvtest.checks.standalone`) both say ``error``."""
    out = []
    for run in log.runs:
        for row in run.bw_rows:
            verdict, reason = plausible(row.bw_avg_gbit_s)
            if verdict is Verdict.ERROR:
                out.append(f"{row.size_bytes} bytes: {reason}")
    return out


class TcpPairJob(PairJob):
    """TCP bandwidth with nvtest's own probe (check ``tcp_bw``, metric ``tcp_gbit_s``)."""

    name = "tcp_bw"
    metric = "tcp_gbit_s"
    needs = ("network",)

    def __init__(self, ctx: RunContext, *, seconds: float = 2.0, streams: int = 1, timeout_s: float = 90.0) -> None:
        self.ctx = ctx
        self.seconds = seconds
        self.streams = streams
        self.timeout_s = timeout_s

    def server(self, server: Node, client: Node, label: str, port: int) -> Command:
        return probe_argv(
            self.ctx,
            server,
            "tcp_bw_probe.py",
            "serve",
            "--port",
            str(port),
            "--streams",
            str(self.streams),
            "--timeout-s",
            str(int(self.timeout_s - 10)),
        )

    def client(self, client: Node, server: Node, label: str, port: int) -> Command:
        return probe_argv(
            self.ctx,
            client,
            "tcp_bw_probe.py",
            "send",
            "--host",
            address(self.ctx, server),
            "--port",
            str(port),
            "--seconds",
            f"{self.seconds:g}",
            "--streams",
            str(self.streams),
        )

    def judge_complete(self, pair: Pair, label: str, results: dict[str, CommandResult], command: str) -> PairOutcome:
        a, b = pair
        try:
            doc = parse_probe_json(results[b])
        except ProbeError as exc:
            return PairOutcome(pair, "error", reason=f"client {b}: {exc}", command=command)
        if doc.get("status") != "ok":
            return PairOutcome(pair, "fail", reason=f"client {b}: {doc.get('reason')}", command=command)
        value = float(doc["results"][0]["gbit_s"])
        return outcome_from_value(
            self.ctx, self.ctx.states[b].node, pair, self.name, self.metric, value, "Gb/s", command
        )


class PerftestPairJob(PairJob):
    """perftest ``ib_write_bw`` per HCA (check ``ib_write_bw``, metric ``bw_avg_gbit_s``).

    Recipe (``recipe.ib_write_bw``): ``size_bytes`` (default 8 MiB), ``seconds`` (``-D``,
    default 5), ``ib_port`` (default 1), ``gid_index`` (RoCE; ``-x``), ``use_cuda`` (true:
    ``--use_cuda=<gpu>`` with GPU = HCA position mod the node's GPU count, where the node has
    GPUs), ``hcas`` (names; default the Active HCAs found on both nodes).
    """

    name = "ib_write_bw"
    metric = "bw_avg_gbit_s"
    tool = "ib_write_bw"
    needs = ("hca", "ib_write_bw")

    def __init__(
        self,
        ctx: RunContext,
        hcas: Callable[[Node], Sequence[str]],
        recipe: Callable[[Node], dict[str, object]],
        gpus: Callable[[Node], int],
        timeout_s: float = 120.0,
    ) -> None:
        self.ctx = ctx
        self._hcas = hcas
        self._recipe = recipe
        self._gpus = gpus
        self.timeout_s = timeout_s

    def labels(self, a: Node, b: Node) -> Sequence[str]:
        theirs = set(self._hcas(b))
        return [h for h in self._hcas(a) if h in theirs]

    def argv(self, node: Node, label: str, port: int) -> list[str]:
        """The ib_write_bw command line (server form; the client appends the server address)."""
        r = self._recipe(node)
        argv = [
            self.tool,
            "-d",
            label,
            "-i",
            str(r.get("ib_port", 1)),
            "-p",
            str(port),
            "-s",
            str(r.get("size_bytes", 8 * 1024 * 1024)),
            "--report_gbits",
            "-F",
            "-D",
            str(r.get("seconds", 5)),
        ]
        if r.get("gid_index") is not None:
            argv += ["-x", str(r["gid_index"])]
        gpus = self._gpus(node)
        if r.get("use_cuda") and gpus:
            hcas = list(self._hcas(node))
            argv.append(f"--use_cuda={hcas.index(label) % gpus if label in hcas else 0}")
        return argv

    def server(self, server: Node, client: Node, label: str, port: int) -> Command:
        return self.argv(server, label, port)

    def client(self, client: Node, server: Node, label: str, port: int) -> Command:
        return [*self.argv(client, label, port), address(self.ctx, server)]

    def judge_complete(self, pair: Pair, label: str, results: dict[str, CommandResult], command: str) -> PairOutcome:
        a, b = pair
        errors: list[str] = []
        value = None
        implausible: list[str] = []
        node = self.ctx.states[b].node
        for n in (b, a):
            r = results.get(n)
            if r is None:
                continue
            try:
                log = perftest.parse(r.stdout + "\n" + r.stderr)
            except ParseError as exc:
                if n == b:
                    return PairOutcome(pair, "error", reason=f"client {b}: {exc}", command=command)
                continue
            errors += [f"{n}: {e.message}" for e in log.errors]
            if n == b:
                value = log.best_bw_avg_gbit_s
                implausible = implausible_rows(
                    log, lambda v: judge_value(self.ctx, node, self.name, self.metric, v, "Gb/s")
                )
        if errors:
            return PairOutcome(pair, "fail", value, "Gb/s", "; ".join(errors[:3]), command=command)
        if value is None:
            return PairOutcome(pair, "error", reason=f"client {b}: no bandwidth row", command=command)
        if implausible:  # any row outside the physical bound: the run's figures are not judged
            return PairOutcome(
                pair, "error", value, "Gb/s", f"client {b}: " + "; ".join(implausible[:3]), command=command
            )
        return outcome_from_value(self.ctx, node, pair, self.name, self.metric, value, "Gb/s", command)


class NcclPairJob(PairJob):
    """nccl-tests on two nodes over mpirun, to localize the node behind a failing multi-node run.

    ``rdma_nics(node)``: the RDMA NICs the node's SKU expects (None: none, or no profile); where
    both nodes of a pair have them, the path NCCL took is judged as across the whole fleet
    (:func:`nvtest.jobs.nccl.judge_run`, rule 4: TCP sockets or GDR disabled fail the pair).
    ``nvls(node)``: the node's SKU expects NVLink SHARP; where both nodes do, NCCL's NVLS lines
    are judged as in the whole-fleet run.
    """

    server_client = False
    needs = ("gpu", "network")

    def __init__(
        self,
        ctx: RunContext,
        *,
        check: str,
        op: str,
        recipe: NcclRecipe,
        gpus: Callable[[Node], int],
        env: dict[str, str],
        mpi: MpiOptions,
        timeout_s: float = 1200.0,
        rdma_nics: Callable[[Node], int | None] | None = None,
        nvls: Callable[[Node], bool] | None = None,
    ) -> None:
        self.ctx = ctx
        self.rdma_nics = rdma_nics
        self.nvls = nvls
        self.name = f"{check}.pairs.{op}"
        self.check = check
        self.op = op
        self.recipe = recipe
        self._gpus = gpus
        self.env = env
        self.mpi = mpi
        self.timeout_s = timeout_s

    def launcher(self, a: Node, b: Node, label: str) -> Command:
        hosts = [(a.name, max(1, self._gpus(a))), (b.name, max(1, self._gpus(b)))]
        prog = perf_argv(self.op, self.recipe, 1)
        env = " ".join(f"{k}={v}" for k, v in sorted(self.env.items()))
        return f"env {env} " + " ".join(
            _quote(x) for x in mpirun_argv(hosts, prog, export=list(self.env), opts=self.mpi)
        )

    def judge_complete(self, pair: Pair, label: str, results: dict[str, CommandResult], command: str) -> PairOutcome:
        a, b = pair
        r = results[a]
        ranks = max(1, self._gpus(self.ctx.states[a].node)) + max(1, self._gpus(self.ctx.states[b].node))
        nics = [self.rdma_nics(self.ctx.states[n].node) if self.rdma_nics else None for n in pair]
        both = [n for n in nics if n]
        v = judge_output(
            r.stdout + "\n" + r.stderr,
            op=self.op,
            max_bytes=self.recipe.max_bytes,
            plateau_bytes=self.recipe.plateau_bytes,
            expected_ranks=ranks,
            rdma_nics=min(both) if len(both) == len(nics) else None,
            nvls=self.nvls is not None and all(self.nvls(self.ctx.states[n].node) for n in pair),
        )
        busbw = v.details["busbw_gbps"]
        if v.verdict != Verdict.PASS:
            logged_by = v.details["logged_by"]
            named = logged_by if v.verdict == Verdict.FAIL and logged_by in pair else ""
            status: Literal["fail", "error"] = "fail" if v.verdict == Verdict.FAIL else "error"
            return PairOutcome(pair, status, busbw, "GB/s", v.text(), command=command, named=named or "", cause=v.cause)
        node = self.ctx.states[a].node
        return outcome_from_value(self.ctx, node, pair, self.check, f"{self.op}_busbw_gbps", busbw, "GB/s", command)


def _quote(x: str) -> str:
    import shlex

    return shlex.quote(x)
