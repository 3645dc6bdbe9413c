"""The nvtest pytest plugin: hooks only (registered under the ``pytest11`` entry point).

Inert unless ``--nvtest-config FILE`` is given (``nvtest run`` does that). Then:

- every check function with a ``node`` argument is parametrized over the run's
  nodes, with stable ids (``test_stream[node001]``);
- before the first item, the probes are staged and the inventory probe runs on
  all nodes (facts, SKU matching);
- each item's verdict is appended to ``results.jsonl`` the moment it is known;
- at the end, ``results.json``, ``junit.xml`` and ``report.html`` are written.

State lives in ``config.stash`` (:data:`CONTEXT_KEY`). Fixtures: ``nodes``,
``node``, ``sku``, ``run_dir``, ``measure``, ``raw``, ``judge``, ``nvtest_context``.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Generator
from pathlib import Path
from typing import Any

import pytest

from nvtest.analysis.finish import finish_run
from nvtest.checks.api import Judge
from nvtest.config.inventory import Node
from nvtest.config.thresholds import SkuProfile
from nvtest.errors import CheckFailed, NodeError, NvtestError, ProbeSkip
from nvtest.results import CheckResult
from nvtest.session.context import RunConfig, RunContext
from nvtest.session.probe import Probe, measure_probe, raw_output
from nvtest.transports.base import CommandResult
from nvtest.verdict import Verdict

CONTEXT_KEY = pytest.StashKey[RunContext]()
JUDGE_KEY = pytest.StashKey[Judge]()
STARTED_KEY = pytest.StashKey[float]()
REPORTED_KEY = pytest.StashKey[bool]()
PROGRESS_KEY = pytest.StashKey[Any]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("nvtest", "nvtest acceptance runs")
    group.addoption("--nvtest-config", default=None, metavar="FILE", help="run_config.json written by `nvtest run`")
    group.addoption("--nvtest-progress", default="auto", choices=("auto", "live", "plain", "none"), help="progress view")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "check(name, area=None, title=None): an nvtest check and its report title")
    path = config.getoption("--nvtest-config", default=None)
    if not path:
        return
    try:
        cfg = RunConfig.model_validate_json(Path(path).read_text(encoding="utf-8"))
        ctx = RunContext.from_config(cfg)
    except (OSError, ValueError, NvtestError) as exc:
        raise pytest.UsageError(f"nvtest: {exc}") from exc
    config.stash[CONTEXT_KEY] = ctx
    from nvtest.run.live import make_progress

    progress = make_progress(config.getoption("--nvtest-progress"), ctx)
    config.stash[PROGRESS_KEY] = progress
    ctx.listeners.append(progress.on_event)
    _install_signal_handlers(ctx)


def _install_signal_handlers(ctx: RunContext) -> None:
    def handler(signum: int, _frame: Any) -> None:
        ctx.interrupted = True
        ctx.interrupt_signal = signal.Signals(signum).name
        ctx.store.append("warning", {"message": f"run interrupted by {signal.Signals(signum).name}"})
        ctx.transport.interrupt()
        raise KeyboardInterrupt

    try:
        signal.signal(signal.SIGINT, handler)
        signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread (embedded use): leave signals alone
        pass


def _ctx(config: pytest.Config) -> RunContext | None:
    return config.stash.get(CONTEXT_KEY, None)


def check_name(item: pytest.Item) -> str:
    """The check's name: the ``check`` marker's first argument, else the function name without ``test_``."""
    mark = item.get_closest_marker("check")
    if mark and mark.args:
        return str(mark.args[0])
    name = getattr(item, "originalname", None) or item.name
    return name.removeprefix("test_")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    ctx = _ctx(metafunc.config)
    if ctx is None or "node" not in metafunc.fixturenames:
        return
    nodes = ctx.nodes
    metafunc.parametrize("node", nodes, ids=[n.name for n in nodes])


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    ctx = _ctx(config)
    if ctx is None:
        return
    if ctx.config.rerun_items is not None:
        wanted = {(c, n) for c, n in ctx.config.rerun_items}
        keep: list[pytest.Item] = []
        drop: list[pytest.Item] = []
        for item in items:
            (keep if (check_name(item), _node_of(item)) in wanted else drop).append(item)
        if drop:
            config.hook.pytest_deselected(items=drop)
        items[:] = keep
    seen: set[str] = set()
    for item in items:
        check = check_name(item)
        node = _node_of(item)
        if node is not None:
            ctx.check_nodes.setdefault(check, [])
            if node not in ctx.check_nodes[check]:
                ctx.check_nodes[check].append(node)
        if check not in seen:
            seen.add(check)
            mark = item.get_closest_marker("check")
            kw = mark.kwargs if mark else {}
            doc = (getattr(item, "function", None).__doc__ or "").strip() if hasattr(item, "function") else ""
            doc = doc.replace("``", "")  # reST literals read as plain text in the report
            area = kw.get("area") or Path(str(item.path)).parent.name
            ctx.store.append(
                "check",
                {"name": check, "area": area, "title": kw.get("title") or check, "description": doc, "module": item.path.name},
            )


def _node_of(item: pytest.Item) -> str | None:
    callspec = getattr(item, "callspec", None)
    if callspec is not None and "node" in callspec.params:
        return str(callspec.params["node"].name)
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session: pytest.Session) -> None:
    ctx = _ctx(session.config)
    if ctx is None:
        return
    progress = session.config.stash.get(PROGRESS_KEY, None)
    if progress is not None:
        progress.start(len(session.items))
    ctx.start()
    ctx.gather_facts()


# -- fixtures --------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def nvtest_context(request: pytest.FixtureRequest) -> RunContext:
    """The run's :class:`RunContext` (skips outside an nvtest run)."""
    ctx = _ctx(request.config)
    if ctx is None:
        pytest.skip("not an nvtest run (no --nvtest-config)")
    return ctx


@pytest.fixture(scope="session")
def nodes(nvtest_context: RunContext) -> list[Node]:
    """All nodes of the run, sorted."""
    return nvtest_context.nodes


@pytest.fixture(scope="session")
def run_dir(nvtest_context: RunContext) -> Path:
    """The run directory ``reports/<run-id>/``."""
    return nvtest_context.run_dir


@pytest.fixture
def sku(nvtest_context: RunContext, request: pytest.FixtureRequest) -> SkuProfile | None:
    """The SKU profile of this item's node (None: no profile matched, measure only)."""
    node = request.getfixturevalue("node") if "node" in request.fixturenames else None
    if node is None:
        return None
    st = nvtest_context.states[node.name].match
    return st.profile if st else None


def _check_nodes(ctx: RunContext, check: str) -> list[Node]:
    by_name = ctx.inventory.by_name()
    names = ctx.check_nodes.get(check) or list(by_name)
    return [by_name[n] for n in names]


@pytest.fixture
def measure(nvtest_context: RunContext, request: pytest.FixtureRequest) -> Callable[[Probe], dict[str, Any]]:
    """``measure(probe) -> dict``: this node's JSON document from a probe script."""
    node: Node = request.getfixturevalue("node")
    check = check_name(request.node)

    def _measure(probe: Probe) -> dict[str, Any]:
        doc = measure_probe(nvtest_context, probe, node, _check_nodes(nvtest_context, check))
        judge = request.node.stash.get(JUDGE_KEY, None)
        if judge is not None:
            judge.log = nvtest_context.phases.log_path(probe.name, node.name)
        return doc

    return _measure


@pytest.fixture
def raw(nvtest_context: RunContext, request: pytest.FixtureRequest) -> Callable[[Probe], CommandResult]:
    """``raw(probe) -> CommandResult``: this node's raw tool output, for a parser."""
    node: Node = request.getfixturevalue("node")
    check = check_name(request.node)

    def _raw(probe: Probe) -> CommandResult:
        res = raw_output(nvtest_context, probe, node, _check_nodes(nvtest_context, check))
        judge = request.node.stash.get(JUDGE_KEY, None)
        if judge is not None:
            judge.log = nvtest_context.phases.log_path(probe.name, node.name)
        return res

    return _raw


@pytest.fixture
def judge(nvtest_context: RunContext, request: pytest.FixtureRequest, sku: SkuProfile | None) -> Judge:
    """The item's :class:`~nvtest.checks.api.Judge` (metrics judged against the node's SKU)."""
    node = request.getfixturevalue("node") if "node" in request.fixturenames else None
    j = Judge(nvtest_context, check_name(request.node), node.name if node else "fleet", sku)
    request.node.stash[JUDGE_KEY] = j
    return j


@pytest.fixture
def node_facts(nvtest_context: RunContext, request: pytest.FixtureRequest, judge: Judge) -> Any:
    """This node's :class:`~nvtest.session.facts.NodeFacts` (error verdict if the node is down)."""
    node: Node = request.getfixturevalue("node")
    st = nvtest_context.states[node.name]
    if st.down_reason:
        raise st.down_error()
    if st.facts is None:
        raise NodeError("no facts")
    judge.log = st.facts_log
    return st.facts


# -- turning outcomes into verdicts ---------------------------------------------------------


@pytest.hookimpl(wrapper=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> Generator[None, object, object]:
    if _ctx(pyfuncitem.config) is None:
        return (yield)
    try:
        res = yield
    except ProbeSkip as exc:
        pytest.skip(str(exc))
    judge = pyfuncitem.stash.get(JUDGE_KEY, None)
    if judge is not None:
        for m in judge.metrics:
            pyfuncitem.user_properties.append((m.name, m.value))
        if judge.verdict.is_bad:
            raise CheckFailed(f"{judge.check} on {judge.node}: {judge.summary()}")
    return res


def pytest_runtest_setup(item: pytest.Item) -> None:
    item.stash[STARTED_KEY] = time.time()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    report = yield
    ctx = _ctx(item.config)
    if ctx is None or item.stash.get(REPORTED_KEY, False):
        return report
    if call.when == "call" or (call.when == "setup" and (report.failed or report.skipped)):
        item.stash[REPORTED_KEY] = True
        result = _result_of(ctx, item, call, report)
        ctx.store.result(result)
        for fn in ctx.listeners:
            fn("result", {"check": result.check, "node": result.node, "verdict": result.verdict.value, "reason": result.reason})
    return report


def _result_of(ctx: RunContext, item: pytest.Item, call: pytest.CallInfo[None], report: pytest.TestReport) -> CheckResult:
    judge = item.stash.get(JUDGE_KEY, None)
    check = check_name(item)
    node = _node_of(item) or "fleet"
    reason = ""
    if report.skipped:
        verdict = Verdict.SKIP
        lr = report.longrepr
        reason = lr[2] if isinstance(lr, tuple) else str(lr)
        reason = reason.removeprefix("Skipped: ")
    elif report.passed:
        verdict = judge.verdict if judge else Verdict.PASS
        reason = judge.summary() if judge else ""
    else:
        exc = call.excinfo.value if call.excinfo else None
        if isinstance(exc, CheckFailed) and judge is not None:
            verdict = judge.verdict
            reason = judge.summary()
        elif isinstance(exc, AssertionError):
            verdict = Verdict.FAIL
            reason = str(exc).splitlines()[0] if str(exc) else "assertion failed"
        elif isinstance(exc, NvtestError):
            verdict = Verdict.ERROR
            # a probe's own reason already starts "ProbeError: ..." (its exception's name)
            name, text = type(exc).__name__, str(exc)
            reason = text if text.startswith(f"{name}: ") else f"{name}: {text}"
        else:
            verdict = Verdict.ERROR
            name = type(exc).__name__ if exc else "error"
            reason = f"check raised {name}: {exc}" if exc else f"{call.when} failed"
    started = item.stash.get(STARTED_KEY, time.time())
    log = judge.log if judge else None
    if log is None and node != "fleet":
        log = ctx.phases.log_path(check, node)
    if log is None and node in ctx.states and ctx.states[node].down_reason:
        log = ctx.states[node].facts_log
    return CheckResult(
        check=check,
        node=node,
        verdict=verdict,
        reason=reason,
        metrics=tuple(judge.metrics) if judge else (),
        log=log,
        duration_s=round(time.time() - started, 3),
        started_at=started,
        details=judge.details if judge and judge.details else None,
        nodeid=item.nodeid,
    )


#: The last internal error's one-line summary (pytest_internalerror gets no config to stash it on).
_internal_error: list[str] = []


def pytest_internalerror(excrepr: object, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
    _internal_error.append(f"{excinfo.typename}: {excinfo.value}"[:500])


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    ctx = _ctx(session.config)
    if ctx is None:
        return
    if not ctx.started:  # a usage error before the run began: nothing measured, nothing to report
        ctx.transport.close()
        ctx.store.close()
        return
    interrupted = ctx.interrupted or exitstatus == pytest.ExitCode.INTERRUPTED
    harness_error = None
    if exitstatus == pytest.ExitCode.INTERNAL_ERROR:
        harness_error = _internal_error[-1] if _internal_error else "internal error (see the terminal output)"
    ctx.close(interrupted=interrupted, harness_error=harness_error)
    progress = session.config.stash.get(PROGRESS_KEY, None)
    doc = finish_run(ctx.run_dir, ctx.catalog).doc
    if progress is not None:
        progress.finish(doc)
