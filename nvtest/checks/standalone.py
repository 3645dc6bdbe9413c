"""One judgement for ``nvtest parse`` and ``nvtest run``: a tool's output read alone, judged
by the run's own rules.

``nvtest parse`` has no node, no SKU profile and no recipe: it cannot apply a threshold. It
applies everything else the run applies to the same output, through the run's own
functions (:data:`RUN_JUDGES`), so a reading never says ``passed`` where the run would not:

- ``nccl-tests``: :func:`nvtest.jobs.nccl.judge_run` per test, with the tool's own requested
  sweep (``maxBytes`` of its parameter line) as the size the plateau needs: wrong results
  and failure lines fail; no row, a correctness gate switched off, a sweep capped below the
  requested size (``Reducing maxBytes ...`` or rows that stop early) are ``error``;
- ``perftest``: the pair check's rules (:class:`nvtest.jobs.pair_jobs.PerftestPairJob`):
  the tool's error lines fail; each bandwidth row is checked against the physical bound
  of ``ib_write_bw.bw_avg_gbit_s`` (:func:`nvtest.config.thresholds.assess`: negative or
  above any port rate is ``error`` "implausible"); no bandwidth row is ``error``; an
  InfiniBand link below the IB MTU of 4096 B warns (the run judges it in ``ib_ports``);
- ``dmesg``: :func:`nvtest.checks.health.kernel_log.xid_scan`, the ``xid_scan`` check itself
  (an Xid of catalog severity ``error`` warns, as in a run; a code nvtest does not know is
  ``error``, not judged);
- ``dcgmi``: the ``dcgm_diag`` check's :func:`nvtest.checks.health.dcgm.dcgm_diag` with no
  SKU and no required test (a failed test fails, a Warn warns, a Skip of the run or a Pass
  with an error code is ``error``, not judged, naming the skipped tests);
- ``vllm-bench``: the inference check's :func:`~nvtest.checks.workload.inference.judge_vllm`
  with a :class:`~nvtest.checks.api.Judge` of no SKU (the tool's failure fails; a token
  rate outside its physical bound is ``error``);
- every other tool: the tool's own verdict (``passed``/``completed``) and the states its
  reading shows (:func:`nvtest.playbook.readings.assess`), which is what the run's checks
  judge of those outputs before any threshold.

Pure: a record and its text in, a :class:`Reading` out; raises nothing.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from nvtest.checks.api import Judge
from nvtest.checks.health import Outcome
from nvtest.checks.health.dcgm import dcgm_diag
from nvtest.checks.health.kernel_log import xid_scan
from nvtest.checks.interconnect.rdma import IB_MAX_MTU
from nvtest.checks.workload.inference import judge_vllm
from nvtest.config.metrics import Hardware
from nvtest.config.thresholds import assess as assess_value
from nvtest.jobs.nccl import REDUCED_RE, judge_run
from nvtest.jobs.pair_jobs import implausible_rows
from nvtest.parsers.dcgmi import DcgmDiag
from nvtest.parsers.dmesg import KernelLog
from nvtest.parsers.nccl_tests import NcclLog
from nvtest.parsers.perftest import PerftestLog
from nvtest.parsers.vllm_bench import VllmThroughput
from nvtest.playbook.readings import assess as assess_states
from nvtest.verdict import Verdict

__all__ = ["RUN_JUDGES", "Reading", "judge_reading"]


@dataclass(frozen=True)
class Reading:
    """The verdict on one tool output read alone: ``pass``, ``warn``, ``fail`` or ``error``
    (could not be judged: incomplete, implausible, unknown), with the lines saying why."""

    verdict: str
    failures: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()
    #: what the run's judgement noted without changing the verdict (NVLS unproven, NCCL_DEBUG
    #: not INFO: ``effective.nvls_note`` of :func:`nvtest.jobs.nccl.judge_run`), one line each
    notes: tuple[str, ...] = ()

    @property
    def passed(self) -> bool:
        """True for ``pass`` and ``warn`` (judged, nothing failed)."""
        return self.verdict in ("pass", "warn")


def _of(failures: list[str], warnings: list[str], errors: list[str]) -> Reading:
    """The verdict of the findings, in the run's order: fail, error, warn, pass."""
    verdict = "fail" if failures else "error" if errors else "warn" if warnings else "pass"
    return Reading(verdict, tuple(failures), tuple(warnings), tuple(errors))


def _nccl(log: NcclLog, text: str, nvls: bool = False) -> Reading:
    m = REDUCED_RE.search(text)
    reduced = (int(m.group(1)), m.group(2)) if m else None
    failures: list[str] = []
    errors: list[str] = []
    notes: list[str] = []
    for i, t in enumerate(log.tests):
        op = t.test_name or f"tests[{i}]"
        if nvls and (t.test_name or "all_reduce").startswith("all_reduce"):
            op = "all_reduce"  # NVLS is judged on all_reduce (an unnamed test: this command's)
        v = judge_run(t, op=op, reduced=reduced, nvls=nvls)
        where = f"tests[{i}]: "
        (failures if v.verdict == Verdict.FAIL else errors if v.verdict == Verdict.ERROR else []).extend(
            where + r for r in v.details["reasons"]
        )
        said = [*v.notes, (v.details.get("effective") or {}).get("nvls_note")]
        notes += [where + n for n in dict.fromkeys(said) if n]
    if not log.tests:
        errors.append(f"no nccl-tests result{': ' + log.failure.reason if log.failure else ''}")
    return dataclasses.replace(_of(failures, [], errors), notes=tuple(notes))


def _perftest(log: PerftestLog, _text: str) -> Reading:
    failures = [e.message for e in log.errors]

    def judge(value: float) -> tuple[Verdict, str]:
        a = assess_value("ib_write_bw", "bw_avg_gbit_s", value, "Gb/s", None, Hardware())
        return a.verdict, a.reason

    errors = implausible_rows(log, judge)
    rows = [row for run in log.runs for row in run.bw_rows]
    if not rows and not failures:
        if any(run.lat_rows for run in log.runs):
            return _generic(log, _text)  # a latency test: the run judges no latency of perftest
        errors.append("no bandwidth row")
    return _of(failures, _mtu_warnings(log), errors)


def _mtu_warnings(log: PerftestLog) -> list[str]:
    """An InfiniBand link that ran below :data:`IB_MAX_MTU` (the run's ``ib_ports`` judges
    ``active_mtu`` against the SKU's ``ib_mtu``; parse has no SKU, so it warns). RoCE links
    follow the netdev MTU and are not judged here."""
    lowered = " after 'Changing to active mtu'" if log.effective.get("mtu_lowered_to_active") else ""
    return [
        f"{run.device or 'the HCA'}: InfiniBand link at MTU {run.mtu_bytes} B{lowered}, below "
        f"{IB_MAX_MTU} B (the run's ib_ports judges active_mtu against the SKU's ib_mtu)"
        for run in log.runs
        if run.link_type == "IB" and run.mtu_bytes is not None and run.mtu_bytes < IB_MAX_MTU
    ]


def _vllm(_record: VllmThroughput, text: str) -> Reading:
    """The inference check's own judgement of vLLM's output (:func:`judge_vllm`), with a Judge
    of no SKU: the tool's failure fails, a rate outside its physical bound is ``error``."""
    judge = Judge(None, "inference", "nvtest parse", None, Hardware())
    judge_vllm(judge, {"status": "ok", "raw": text})
    bad = {v: [f"{m.name}: {m.reason}" for m in judge.metrics if m.verdict is v] for v in (Verdict.FAIL, Verdict.ERROR)}
    return _of([*judge.failures, *bad[Verdict.FAIL]], list(judge.warnings), bad[Verdict.ERROR])


def _outcome(out: Outcome) -> Reading:
    """A health function's :class:`Outcome` as a reading (its error replaces nothing here:
    failures still lead, as :attr:`Outcome.verdict` orders them)."""
    return _of(list(out.failures), list(out.warnings), [out.error] if out.error else [])


def _dmesg(_log: KernelLog, text: str) -> Reading:
    return _outcome(xid_scan(text))


def _dcgmi(diag: DcgmDiag, _text: str) -> Reading:
    return _outcome(dcgm_diag(diag, None, ()))


def _generic(record: Any, _text: str) -> Reading:
    """The tool's own verdict and the reading's states (no run rule beyond them applies)."""
    failures: list[str] = []
    passed = getattr(record, "passed", None) if isinstance(getattr(type(record), "passed", None), property) else None
    completed = (
        getattr(record, "completed", None) if isinstance(getattr(type(record), "completed", None), property) else None
    )
    if passed is False or completed is False:
        failures.append(
            str(getattr(record, "failure_reason", None) or ("passed: false" if passed is False else "completed: false"))
        )
    states = assess_states(record)
    return _of(failures + list(states.failures), list(states.warnings), [])


#: Record type -> the run's judgement of it (see the module docstring); other records: generic.
RUN_JUDGES: dict[type, Callable[[Any, str], Reading]] = {
    NcclLog: _nccl,
    PerftestLog: _perftest,
    KernelLog: _dmesg,
    DcgmDiag: _dcgmi,
    VllmThroughput: _vllm,
}


def judge_reading(record: Any, text: str, *, nvls: bool = False) -> Reading:
    """The verdict ``nvtest parse`` gives ``record`` (a parser's record of ``text``): the
    run's rules for its tool (:data:`RUN_JUDGES`), else the tool's own verdict and states.

    ``nvls``: the SKU is known and expects NVLink SHARP (``expect.nvls``): an all_reduce
    nccl-tests output is judged on NCCL's NVLS lines as the run judges it
    (:func:`nvtest.jobs.nccl.nvls_collnet_fails`); without a SKU they are not judged."""
    judge = RUN_JUDGES.get(type(record), _generic)
    if nvls and isinstance(record, NcclLog):
        judge = functools.partial(_nccl, nvls=True)
    try:
        return judge(record, text)
    except Exception as exc:  # noqa: BLE001 - a judgement that breaks is not a pass
        return Reading("error", errors=(f"not judged: {type(exc).__name__}: {exc}",))
