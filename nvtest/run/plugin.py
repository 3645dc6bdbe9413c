"""The nvtest pytest plugin: hooks only (registered under the ``pytest11`` entry point).

Inert unless ``--nvtest-config FILE`` is given (``nvtest run`` does that). Then:

- every check function with a ``node`` argument is parametrized over the run's
  nodes, with stable ids (``test_stream[node001]``);
- the passive checks that read only the kernel log (``@pytest.mark.check(..., reads="kernel-log")``)
  run first, before every check that could talk to NVML (:func:`order_items`);
- before the first item, the probes are staged and the inventory probe runs on
  all nodes (facts, SKU matching);
- each item's verdict is appended to ``results.jsonl`` the moment it is known;
- at the end, ``results.json``, ``junit.xml`` and ``report.html`` are written.

State lives in ``config.stash`` (:data:`CONTEXT_KEY`). Fixtures: ``nodes``,
``node``, ``sku``, ``run_dir``, ``measure``, ``raw``, ``read``, ``judge``, ``nvtest_context``.
"""

from __future__ import annotations

import contextlib
import gc
import re
import sys
import time
import traceback
from collections.abc import Callable, Generator
from pathlib import Path
from typing import Any

import pytest

from nvtest.analysis.finish import finish_run
from nvtest.checks.api import Fleet, Judge, note_probe_run
from nvtest.checks.hardware import read_declared, require_declared
from nvtest.config.inventory import Node
from nvtest.config.metrics import site_declarations
from nvtest.config.thresholds import SkuProfile
from nvtest.errors import (
    CheckFailed,
    NodeError,
    NvtestError,
    OutputWriteError,
    ProbeError,
    ProbeSkip,
)
from nvtest.results import CheckResult
from nvtest.run.stop import StopRequest
from nvtest.session.context import RunConfig, RunContext
from nvtest.session.environment import effective_environment
from nvtest.session.probe import Probe, measure_probe, raw_output
from nvtest.text import visible
from nvtest.transports.base import CommandResult
from nvtest.verdict import Verdict

CONTEXT_KEY = pytest.StashKey[RunContext]()
STOP_KEY = pytest.StashKey[StopRequest]()
JUDGE_KEY = pytest.StashKey[Judge]()
STARTED_KEY = pytest.StashKey[float]()
REPORTED_KEY = pytest.StashKey[bool]()
PROGRESS_KEY = pytest.StashKey[Any]()

#: The node name of an item that is not per node (a fleet-wide check).
FLEET = "fleet"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("nvtest", "nvtest acceptance runs")
    group.addoption("--nvtest-config", default=None, metavar="FILE", help="run_config.json written by `nvtest run`")
    group.addoption(
        "--nvtest-progress", default="auto", choices=("auto", "live", "plain", "none"), help="progress view"
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "check(name, area=None, title=None, reads=None): an nvtest check, its report title, and "
        "reads='kernel-log' for a passive check that runs first",
    )
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

    def on_first_signal() -> None:  # on the stop watcher's thread, never in the handler
        with contextlib.suppress(Exception):
            progress.note(
                f"{stop.first_signal}: stopping; the commands in flight are being killed "
                "(a second signal stops at once, the results and reports are written either way)"
            )
        ctx.transport.interrupt()

    stop = StopRequest(on_first_signal)
    stop.install()  # off the main thread (embedded use) signals are left alone
    config.stash[STOP_KEY] = stop


def pytest_unconfigure(config: pytest.Config) -> None:
    stop = config.stash.get(STOP_KEY, None)
    if stop is not None:
        stop.restore()


def pytest_collection_finish(session: pytest.Session) -> None:
    stop = session.config.stash.get(STOP_KEY, None)
    if stop is not None:
        # the handler sets session.shouldstop from now on; not during collection, which
        # pytest would abort before the run began (nothing planned, nothing written): a
        # signal then is recorded and pytest_runtestloop stops the run before its first item
        stop.session = session


def _ctx(config: pytest.Config) -> RunContext | None:
    return config.stash.get(CONTEXT_KEY, None)


def check_name(item: pytest.Item) -> str:
    """The check's name: the ``check`` marker's first argument, else the function name without ``test_``."""
    mark = item.get_closest_marker("check")
    if mark and mark.args:
        return str(mark.args[0])
    name = getattr(item, "originalname", None) or item.name
    return name.removeprefix("test_")


#: The ``reads`` of a check marker whose check runs first (passive: the kernel log only).
FIRST_READS = frozenset({"kernel-log"})


def order_items(items: list[pytest.Item]) -> list[pytest.Item]:
    """``items`` with the checks that read only the kernel log first (their marker says
    ``reads="kernel-log"``), every other item after them in its suite order (a stable sort)."""

    def rank(item: pytest.Item) -> int:
        mark = item.get_closest_marker("check")
        return 0 if mark is not None and mark.kwargs.get("reads") in FIRST_READS else 1

    return sorted(items, key=rank)


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
            (keep if (check_name(item), _node_of(item) or FLEET) in wanted else drop).append(item)
        if drop:
            config.hook.pytest_deselected(items=drop)
        items[:] = keep
    items[:] = order_items(items)
    planned: dict[str, dict[str, None]] = {}
    for item in items:
        check = check_name(item)
        node = _node_of(item)
        if check not in planned:
            planned[check] = {}
            _store_check(ctx, item, check)
        planned[check][node or FLEET] = None
        if node is not None:
            ctx.check_nodes.setdefault(check, []).append(node)
    for check, planned_nodes in planned.items():
        # every item that will run: one without a result at the end is "not measured"
        ctx.store.append("planned", {"check": check, "nodes": list(planned_nodes)})
    for check, listed in ctx.check_nodes.items():
        ctx.check_nodes[check] = list(dict.fromkeys(listed))
    # the items live as long as the run: out of the collector's way (a 4,096-node run has
    # 110,000 of them, each collection of the old generation would walk them all)
    gc.collect()
    gc.freeze()


def _store_check(ctx: RunContext, item: pytest.Item, check: str) -> None:
    """The ``check`` event: title, area, description and module of the check."""
    mark = item.get_closest_marker("check")
    kw = mark.kwargs if mark else {}
    doc = (getattr(item, "function", None).__doc__ or "").strip() if hasattr(item, "function") else ""
    doc = doc.replace("``", "")  # reST literals read as plain text in the report
    area = kw.get("area") or Path(str(item.path)).parent.name
    entry = {
        "name": check,
        "area": area,
        "title": kw.get("title") or check,
        "description": doc,
        "module": item.path.name,
    }
    site = site_declarations(check)
    if site:  # a site check's own metrics: judging the run again needs them without the module
        entry["declared_metrics"] = site
    ctx.store.append("check", entry)


def _node_of(item: pytest.Item) -> str | None:
    callspec = getattr(item, "callspec", None)
    if callspec is not None and "node" in callspec.params:
        return str(callspec.params["node"].name)
    return None


def _stop(config: pytest.Config) -> StopRequest | None:
    return config.stash.get(STOP_KEY, None)


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session: pytest.Session) -> None:
    ctx = _ctx(session.config)
    if ctx is None:
        return
    progress = session.config.stash.get(PROGRESS_KEY, None)
    if progress is not None:
        progress.start(len(session.items))
    ctx.start()
    stop = _stop(session.config)
    if stop is not None and stop.requested:
        raise session.Interrupted(session.shouldstop or "interrupted")
    if stop is None:
        ctx.gather_facts()
        return
    with stop.abortable():
        ctx.gather_facts()
    if stop.requested:
        raise session.Interrupted(session.shouldstop or "interrupted")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> bool | None:
    """After a stop signal no item starts (each is then "not measured" in results.json)."""
    stop = _stop(item.config)
    if stop is not None and stop.requested:
        return True
    return None


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
def fleet(nvtest_context: RunContext) -> Fleet:
    """The run's :class:`~nvtest.checks.fleet.Fleet`: ``fleet.once(key, fn)`` (computed once per
    run), ``fleet.nodes(check)``, ``fleet.recipe(node, section)`` (the typed section)."""
    return Fleet(nvtest_context)


@pytest.fixture(scope="session")
def run_dir(nvtest_context: RunContext) -> Path:
    """The run directory ``reports/<run-id>/``."""
    return nvtest_context.run_dir


class _Item:
    """What the per-item fixtures share: the pytest item, its node (None: a fleet item),
    its check's name and the run (one lookup of pytest's ``request`` per item, not one
    per fixture: each cost pytest a signature inspection)."""

    __slots__ = ("check", "ctx", "item", "node")

    def __init__(self, ctx: RunContext, item: pytest.Item) -> None:
        self.ctx = ctx
        self.item = item
        callspec = getattr(item, "callspec", None)
        node = callspec.params.get("node") if callspec is not None else None
        self.node: Node | None = node if isinstance(node, Node) else None
        self.check = check_name(item)

    def need_node(self) -> Node:
        if self.node is None:
            raise TypeError(f"{self.item.nodeid}: this fixture needs the check's `node` argument")
        return self.node

    def note_log(self, key: str) -> None:
        judge = self.item.stash.get(JUDGE_KEY, None)
        if judge is not None and self.node is not None:
            judge.log = self.ctx.phases.log_path(key, self.node.name)


@pytest.fixture
def _nvtest_item(nvtest_context: RunContext, request: pytest.FixtureRequest) -> _Item:
    return _Item(nvtest_context, request.node)


@pytest.fixture
def sku(_nvtest_item: _Item) -> SkuProfile | None:
    """The SKU profile of this item's node (None: no profile matched, measure only)."""
    node = _nvtest_item.node
    if node is None:
        return None
    st = _nvtest_item.ctx.states[node.name].match
    return st.profile if st else None


def _check_nodes(ctx: RunContext, check: str) -> list[Node]:
    return ctx.check_targets(check)


class _Requiring:
    """A fixture's callable that also requires a probe's declared hardware on its own
    (``measure.require_declared(probe)``, ``read.require_declared(probe)``): for a check whose
    own findings start before the probe runs, and must not start where the hardware is absent."""

    def __init__(self, request: pytest.FixtureRequest, run: Callable[[Probe], Any]) -> None:
        self._request = request
        self._run = run

    def require_declared(self, probe: Probe) -> None:
        """:func:`~nvtest.checks.hardware.require_declared` on this item's node.

        Raises:
            ProbeSkip: absence proven; ProbeError: not proven, or the tool is missing.
        """
        rq = self._request
        require_declared(probe, rq.getfixturevalue("node_facts"), rq.getfixturevalue("sku"))

    def __call__(self, probe: Probe) -> Any:
        return self._run(probe)


@pytest.fixture
def measure(_nvtest_item: _Item, request: pytest.FixtureRequest) -> _Requiring:
    """``measure(probe) -> dict``: this node's JSON document from a probe script. A probe that
    ``expects`` hardware has it required first (:func:`~nvtest.checks.hardware.require_declared`:
    skip where the bus proves it absent, error where absence is not proven)."""
    it = _nvtest_item
    node = it.need_node()

    def _measure(probe: Probe) -> dict[str, Any]:
        if probe.expects:
            measurer.require_declared(probe)
        doc = None
        try:
            doc = measure_probe(it.ctx, probe, node, _check_nodes(it.ctx, it.check))
        finally:
            judge = it.item.stash.get(JUDGE_KEY, None)
            if judge is not None:
                note_probe_run(judge, it.ctx, probe, node, doc)
            it.note_log(probe.name)
        return doc

    measurer = _Requiring(request, _measure)
    return measurer


@pytest.fixture
def raw(_nvtest_item: _Item) -> Callable[[Probe], CommandResult]:
    """``raw(probe) -> CommandResult``: this node's raw tool output, for a parser."""
    it = _nvtest_item
    node = it.need_node()

    def _raw(probe: Probe) -> CommandResult:
        res = raw_output(it.ctx, probe, node, _check_nodes(it.ctx, it.check))
        it.note_log(probe.name)
        return res

    return _raw


@pytest.fixture
def read(
    raw: Callable[[Probe], CommandResult], node_facts: Any, sku: SkuProfile | None, request: pytest.FixtureRequest
) -> _Requiring:
    """``read(probe) -> record``: this node's output of a declared tool probe, read by the
    probe's ``parse``, with every fail-closed rule applied in one place
    (:func:`~nvtest.checks.hardware.read_declared`): the hardware it ``expects`` required
    (skip only where the bus proves it absent), a missing tool an ``error``, output that is not
    the tool's report or its own failure a ``fail`` in the tool's words."""
    return _Requiring(request, lambda probe: read_declared(probe, node_facts, sku, raw))


#: The error of an item whose check took the Judge and recorded no judgement.
JUDGED_NOTHING = "the check judged nothing: no metric, finding or outcome was recorded, so nothing proves the node good"
NO_JUDGE = (
    "the check judged nothing: it takes no judge fixture, so returning records no judgement and nothing "
    "proves the node good (take judge and record what was read, or judge.passed(what was looked at))"
)


@pytest.fixture
def judge(_nvtest_item: _Item, sku: SkuProfile | None) -> Judge:
    """The item's :class:`~nvtest.checks.api.Judge` (metrics judged against the node's SKU)."""
    it = _nvtest_item
    j = Judge(it.ctx, it.check, it.node.name if it.node else FLEET, sku)
    it.item.stash[JUDGE_KEY] = j
    return j


@pytest.fixture
def node_facts(_nvtest_item: _Item, judge: Judge) -> Any:
    """This node's :class:`~nvtest.session.facts.NodeFacts` (error verdict if the node is down)."""
    node = _nvtest_item.need_node()
    st = _nvtest_item.ctx.states[node.name]
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
    stop = _stop(pyfuncitem.config)
    try:
        if stop is None:
            res = yield
        else:
            with stop.abortable():  # a second signal abandons this check, not the run
                res = yield
    except ProbeSkip as exc:
        pytest.skip(str(exc))
    judge = pyfuncitem.stash.get(JUDGE_KEY, None)
    if judge is None:  # fail closed: a check that returns without a Judge recorded no judgement
        raise ProbeError(NO_JUDGE, cause="check:judged_nothing")
    if not judge.judged:  # fail closed: a check that took the Judge and judged nothing
        raise ProbeError(JUDGED_NOTHING, cause="check:judged_nothing")
    for m in judge.metrics:
        pyfuncitem.user_properties.append((m.name, m.value))
    gaps = judge.unmeasured()
    if gaps and not judge.verdict.is_bad:
        raise ProbeError("; ".join(gaps))
    if gaps:
        judge.detail("unmeasured_thresholds", gaps)
    if judge.verdict.is_bad:
        raise CheckFailed(f"{judge.check} on {judge.node}: {judge.summary()}")
    return res


def pytest_runtest_setup(item: pytest.Item) -> None:
    item.stash[STARTED_KEY] = time.time()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> pytest.TestReport | None:
    """In an nvtest run: the item's report, and its result appended to results.jsonl.

    The report is built here, without pytest's rendering of the traceback with its
    source (the terminal plugin is off, and the verdict's reason is the item's own
    words): that rendering cost tens of milliseconds per failed item.
    """
    ctx = _ctx(item.config)
    if ctx is None:
        return None
    report = _report_of(item, call)
    if item.stash.get(REPORTED_KEY, False):
        return report
    if call.when == "call" or (call.when == "setup" and (report.failed or report.skipped)):
        item.stash[REPORTED_KEY] = True
        result = _result_of(ctx, item, call, report)
        ctx.store.result(result)
        ctx.note_result(result.check, result.node, result.verdict.value, result.reason)
        # the result is stored: the item need not keep its judge and metrics to the run's end
        if JUDGE_KEY in item.stash:
            del item.stash[JUDGE_KEY]
        item.user_properties.clear()
        report.user_properties = []
        for fn in ctx.listeners:
            fn(
                "result",
                {"check": result.check, "node": result.node, "verdict": result.verdict.value, "reason": result.reason},
            )
    return report


def _report_of(item: pytest.Item, call: pytest.CallInfo[None]) -> pytest.TestReport:
    """pytest's report of one phase of ``item``: outcome and a short ``longrepr``
    (``(file, line, "Skipped: <reason>")`` for a skip, ``"<Error>: <message>"`` for a
    failure; the formatted traceback only for an exception nvtest did not expect)."""
    excinfo = call.excinfo
    longrepr: Any = None
    if excinfo is None:
        outcome = "passed"
    elif isinstance(excinfo.value, pytest.skip.Exception):
        outcome = "skipped"
        path, line = item.location[0], item.location[1]
        longrepr = (path, (line or 0) + 1, f"Skipped: {excinfo.value.msg}")
    else:
        outcome = "failed"
        exc = excinfo.value
        if isinstance(exc, (NvtestError, AssertionError)):
            longrepr = f"{type(exc).__name__}: {exc}"
        else:
            longrepr = "".join(traceback.format_exception(exc, limit=-8))
    return pytest.TestReport(
        item.nodeid,
        item.location,
        {},
        outcome,  # type: ignore[arg-type]
        longrepr,
        call.when,  # type: ignore[arg-type]
        [],
        call.duration,
        call.start,
        call.stop,
        user_properties=item.user_properties,
    )


def _result_of(
    ctx: RunContext, item: pytest.Item, call: pytest.CallInfo[None], report: pytest.TestReport
) -> CheckResult:
    judge = item.stash.get(JUDGE_KEY, None)
    check = check_name(item)
    node = _node_of(item) or FLEET
    reason = ""
    exc = call.excinfo.value if call.excinfo else None
    # the cause key where the code knew it: the exception's (set where it was raised), else the Judge's
    cause = getattr(exc, "cause", None) or (judge.cause if judge else None)
    if report.skipped:
        verdict = Verdict.SKIP
        lr = report.longrepr
        reason = lr[2] if isinstance(lr, tuple) else str(lr)
        reason = reason.removeprefix("Skipped: ")
    elif report.passed:
        verdict = judge.verdict if judge else Verdict.PASS
        reason = judge.summary() if judge else ""
    else:
        if isinstance(exc, CheckFailed) and judge is not None and judge.verdict.is_bad:
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
            if exc is not None:
                cause = "check:raised"  # the check's own code, whatever the metrics judged before
    stop = _stop(item.config)
    if verdict is Verdict.ERROR and stop is not None and stop.requested:
        # the signal killed the item's commands: it was not measured, whatever words its
        # check found for that ("NodeError: interrupted"), as an item that never started
        reason = f"not measured: run interrupted ({stop.first_signal or 'SIGINT'}): {reason}"
        cause = "transport:interrupted"
    started = item.stash.get(STARTED_KEY, time.time())
    log = judge.log if judge else None
    if log is None and node != FLEET:
        log = ctx.phases.log_path(check, node)
    if log is None and node in ctx.states and ctx.states[node].down_reason:
        log = ctx.states[node].facts_log
    details = dict(judge.details) if judge and judge.details else {}
    env = effective_environment(ctx, node, log) if verdict is not Verdict.SKIP else None
    if env is not None:
        details["environment"] = env
    return CheckResult(
        check=check,
        node=node,
        verdict=verdict,
        reason=reason,
        metrics=tuple(judge.metrics) if judge else (),
        log=log,
        duration_s=round(time.time() - started, 3),
        started_at=started,
        details=details or None,
        nodeid=item.nodeid,
        cause=cause if verdict.is_bad else None,
    )


#: The last internal error's one-line summary (pytest_internalerror gets no config to stash it on).
_internal_error: list[str] = []


def pytest_internalerror(excrepr: object, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
    _internal_error.append(f"{excinfo.typename}: {excinfo.value}"[:500])


#: The check modules pytest could not collect in this process's current run (file: Python's words).
_collect_errors: list[str] = []
#: The module's file in pytest's report of a collection error: ``/x/test_a.py:8: in <module>``
#: (an import that failed) or ``File "/x/test_a.py", line 8`` (a syntax error).
_MODULE_FILE = re.compile(r'^(?:E\s+)?(?:File "([^"]+\.py)", line (\d+)|(/[^:\s]+\.py:\d+): in )')


def pytest_collectreport(report: pytest.CollectReport) -> None:
    """A check module that cannot be imported (a syntax error, a name its import does not
    find) stops pytest before the first item: kept with the file, the line and Python's own
    words, so the run ends as a harness error naming them, never as an interrupt no one sent."""
    if report.failed:
        lines = [ln.strip() for ln in str(report.longrepr).splitlines() if ln.strip()]
        said = next((ln[1:].strip() for ln in reversed(lines) if ln.startswith("E ")), lines[-1] if lines else "")
        found = [m for ln in lines if (m := _MODULE_FILE.search(ln))]
        # a syntax error's own file and line first, then the module's line of the import that failed
        places = (
            f
            for f in [
                *(f"{m.group(1)}:{m.group(2)}" for m in found if m.group(1)),
                *(m.group(3) for m in found if m.group(3)),
            ]
            if "/_pytest/" not in f and "/lib/python" not in f
        )
        where = next(places, "") or report.nodeid or (lines[0] if lines else "a check module")
        _collect_errors.append(f"{where}: {said}"[:500])


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """End the run: the end record, the transport closed (staged files removed), then
    results.json and the reports from results.jsonl. A file that cannot be written is
    one line on stderr and pytest's exit status 3 (a harness error)."""
    ctx = _ctx(session.config)
    if ctx is None:
        return
    stop = _stop(session.config)
    if stop is not None:
        stop.finishing()  # from here a signal is only recorded: the files get written
    gc.unfreeze()
    if not ctx.started:  # a usage error before the run began: nothing measured, nothing to report
        ctx.transport.close()
        ctx.store.close()
        return
    if stop is not None and stop.requested:
        stop.interrupt_now()  # nothing left running on a node before the transport closes
        ctx.interrupted = True
        ctx.interrupt_signal = stop.first_signal
        ctx.store.append(
            "warning",
            {
                "message": f"run interrupted by {stop.describe()}: the items not measured are errors (rerun them with --rerun-failed)"
            },
        )
    collect_errors = list(_collect_errors)
    _collect_errors.clear()
    # pytest stops a run whose modules did not all import as "interrupted": no signal was sent
    interrupted = ctx.interrupted or (exitstatus == pytest.ExitCode.INTERRUPTED and not collect_errors)
    harness_error = None
    if exitstatus == pytest.ExitCode.INTERNAL_ERROR:
        harness_error = _internal_error[-1] if _internal_error else "internal error (see the terminal output)"
    elif collect_errors and not interrupted:
        harness_error = f"check module(s) could not be imported, no check ran: {'; '.join(collect_errors)}"
        sys.stderr.write(visible(f"nvtest: error: {harness_error}") + "\n")
        sys.stderr.flush()
        session.exitstatus = pytest.ExitCode.INTERNAL_ERROR
    if not interrupted and harness_error is None:
        try:
            ctx.collect_bug_reports()  # opt-in (recipe bug_report), failed nodes only, with a deadline
        except Exception as exc:  # the run's results stand without the bug reports
            ctx.store.append("warning", {"message": f"nvidia-bug-report.sh not collected: {exc}"})
    failures = ctx.write_errors()
    if failures and harness_error is None:
        harness_error = str(failures[0])
    ctx.close(interrupted=interrupted, harness_error=harness_error, signals=list(stop.signals) if stop else [])
    progress = session.config.stash.get(PROGRESS_KEY, None)
    doc: dict[str, Any] | None = None
    finish_error: OutputWriteError | None = None
    try:
        doc = finish_run(ctx.run_dir, ctx.catalog, extra=ctx.store.unwritten).doc
    except OutputWriteError as exc:
        finish_error = exc
    if progress is not None:
        progress.finish(doc)
    if _report_write_failures(ctx, finish_error):
        session.exitstatus = pytest.ExitCode.INTERNAL_ERROR


def _report_write_failures(ctx: RunContext, finish_error: OutputWriteError | None) -> bool:
    """One line on stderr for the files the run could not write, the one that matters
    most named (results.jsonl, then results.json and the reports, then evidence logs)
    with its errno; True when there was one."""
    store = [ctx.store.write_error] if ctx.store.write_error else []
    finish = [finish_error] if finish_error else []
    failures = [*store, *finish, *ctx.phases.write_errors]
    if not failures:
        return False
    others = len(store) + len(finish) + ctx.phases.write_error_count - 1
    more = f" (and {others} more file(s) not written)" if others else ""
    sys.stderr.write(visible(f"nvtest: error: {failures[0]}{_write_hint(ctx, failures[0])}{more}") + "\n")
    sys.stderr.flush()
    return True


def _write_hint(ctx: RunContext, exc: OutputWriteError) -> str:
    """What the user can do about a file that could not be written."""
    if exc.path == str(ctx.store.path):
        return " (results.json holds every measurement)" if (ctx.run_dir / "results.json").is_file() else ""
    if exc.path.endswith(("results.json", "report.html", "junit.xml", "results.csv", "results.parquet")):
        return f" (the measurements are in {ctx.store.path}; rebuild with: nvtest report {ctx.run_dir})"
    return ""
