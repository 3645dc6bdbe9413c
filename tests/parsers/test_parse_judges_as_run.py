"""One judgement for ``nvtest parse`` and ``nvtest run`` (issue 24, class 6).

Every tool ``nvtest parse`` accepts is walked: each corpus output of the tool is read by
``nvtest parse``'s reading (:func:`nvtest.checks.standalone.judge_reading`) and judged by
the run's own function for that output (:data:`RUN`: the nccl checks' ``judge_run``, the
pair check's perftest rules, the ``xid_scan`` check, the inference check's ``judge_vllm``,
the ``dcgm_diag`` check's ``dcgm_diag`` applied to a Judge as the check applies it;
for the other tools the tool's own
verdict and its reading's failed states, which is all the run judges before a threshold
it needs a SKU for), and the two must agree. Then the three outputs of the issue through
the CLI itself: a capped nccl-tests sweep, a perftest row at -27 Gb/s, an Xid of catalog
severity ``error``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from nvtest.checks.api import Judge
from nvtest.checks.health import apply
from nvtest.checks.health.dcgm import dcgm_diag
from nvtest.checks.health.kernel_log import xid_scan
from nvtest.checks.standalone import judge_reading
from nvtest.checks.workload.inference import judge_vllm
from nvtest.config.metrics import Hardware
from nvtest.config.thresholds import assess
from nvtest.errors import ProbeError
from nvtest.jobs.nccl import REDUCED_RE, judge_run
from nvtest.jobs.pair_jobs import implausible_rows
from nvtest.parsers import PARSERS, dcgmi, detect, dmesg, nccl_tests, parse, perftest
from nvtest.playbook.readings import assess as states
from nvtest.playbook.xid import XID_CATALOG
from tests.parsers.conftest import CORPUS, corpus_files

_ORDER = ("pass", "warn", "error", "fail")


def _worst(verdicts: list[str]) -> str:
    return max(verdicts, key=_ORDER.index, default="pass")


def _run_nccl(text: str) -> str:
    """As the nccl checks judge each test's output (jobs/nccl.py judge_output, per test)."""
    log = nccl_tests.parse(text)
    m = REDUCED_RE.search(text)
    reduced = (int(m.group(1)), m.group(2)) if m else None
    return _worst([judge_run(t, op="x", reduced=reduced).verdict.value for t in log.tests]) if log.tests else "error"


def _run_perftest(text: str) -> str:
    """As PerftestPairJob.judge_complete judges the client's output (no SKU: bounds alone)."""
    log = perftest.parse(text)
    if log.errors:
        return "fail"
    if not any(r.bw_rows for r in log.runs):
        return "fail" if log.passed is False else "pass"  # a latency test: the run judges none

    def judge(v: float):  # noqa: ANN202 - the pair check's per-value judgement
        a = assess("ib_write_bw", "bw_avg_gbit_s", v, "Gb/s", None)
        return a.verdict, a.reason

    return "error" if implausible_rows(log, judge) else "pass"


def _run_dmesg(text: str) -> str:
    """The xid_scan check on the same kernel log."""
    return xid_scan(text).verdict.value


def _run_vllm(text: str) -> str:
    """The inference check's judge_vllm on the same output (a Judge of no SKU)."""
    judge = Judge(None, "inference", "n", None, Hardware())
    judge_vllm(judge, {"status": "ok", "raw": text})
    return judge.verdict.value


def _run_dcgmi(text: str) -> str:
    """The dcgm_diag check (suites/health/test_dcgm.py) on the same output: no SKU, no
    required test, its outcome applied to a Judge (an outcome's error is raised as the
    ProbeError the check runner records as ERROR)."""
    judge = Judge(None, "dcgm_diag", "n", None, Hardware())
    try:
        apply(dcgm_diag(dcgmi.parse(text), None, ()), judge)
    except ProbeError:
        return "error"
    return judge.verdict.value


def _run_tool_states(tool: str) -> Callable[[str], str]:
    """The tool's own failure and its reading's failed states: what the run's checks judge of
    these outputs before a threshold (which needs a SKU ``nvtest parse`` has not)."""

    def judge(text: str) -> str:
        record = parse(tool, text)
        own = [
            getattr(record, k, None)
            for k in ("passed", "completed")
            if isinstance(getattr(type(record), k, None), property)
        ]
        if False in own or states(record).failures:
            return "fail"
        return "warn" if states(record).warnings else "pass"

    return judge


#: Every tool nvtest parse accepts -> the run's judgement of its output.
RUN: dict[str, Callable[[str], str]] = {
    "nccl-tests": _run_nccl,
    "perftest": _run_perftest,
    "dmesg": _run_dmesg,
    "vllm-bench": _run_vllm,
    "dcgmi": _run_dcgmi,
    **{t: _run_tool_states(t) for t in PARSERS if t not in ("nccl-tests", "perftest", "dmesg", "vllm-bench", "dcgmi")},
}

OWN = [(p, detect(p.read_text(encoding="utf-8"))) for p in corpus_files()]


def test_every_tool_nvtest_parse_accepts_is_walked() -> None:
    assert set(RUN) == set(PARSERS)
    assert {t for _, t in OWN} >= {"nccl-tests", "perftest", "dmesg", "vllm-bench", "dcgmi"}


@pytest.mark.parametrize(("path", "tool"), OWN, ids=[f"{p.parent.name}/{p.name}" for p, _ in OWN])
def test_parse_and_run_judge_every_corpus_output_alike(path: Path, tool: str) -> None:
    text = path.read_text(encoding="utf-8")
    reading = judge_reading(parse(tool, text), text)
    assert reading.verdict == RUN[tool](text), reading


runner = CliRunner()
#: nccl-tests 2.18.3 with -d all on 2 x 8 H200: the tool reduced maxBytes below its -e (48 GiB).
CAPPED = CORPUS / "nccl-tests" / "all_reduce_perf-2node-16xh200-nccl-tests-2.18.3-datatype-all-12-types-blocks.txt"
PERFTEST = CORPUS / "perftest" / "ib_write_bw-roce-a-sweep-2B-8MB-mixed-tab-formatting.txt"


def _cli(path: Path, tool: str) -> tuple[int, dict]:
    import nvtest.cli

    res = runner.invoke(nvtest.cli.app, ["parse", tool, str(path), "--json"])
    return res.exit_code, json.loads(res.stdout)


def test_a_capped_sweep_is_not_passed() -> None:
    code, doc = _cli(CAPPED, "nccl-tests")
    assert code == 1 and doc["passed"] is False and doc["verdict"] == "error" == _run_nccl(CAPPED.read_text())
    assert any("Reducing maxBytes" in e for e in doc["errors"]), doc["errors"]


def test_a_perftest_row_at_minus_27_gbits_is_not_passed(tmp_path: Path) -> None:
    text = PERFTEST.read_text(encoding="utf-8")
    bad = text.replace(
        " 8388608    5000             52.52              52.52 ",
        " 8388608    5000             -27.00             -27.00",
    )
    assert bad != text
    f = tmp_path / "ib_write_bw.txt"
    f.write_text(bad)
    code, doc = _cli(f, "perftest")
    assert code == 1 and doc["passed"] is False and doc["verdict"] == "error" == _run_perftest(bad)
    assert any("implausible: -27 Gb/s" in e for e in doc["errors"]), doc["errors"]
    assert _cli(PERFTEST, "perftest") == (0, _cli(PERFTEST, "perftest")[1]) and _run_perftest(text) == "pass"


def test_an_xid_of_severity_error_is_judged_as_the_run_judges_it(tmp_path: Path) -> None:
    code = next(
        c for c, x in sorted(XID_CATALOG.items()) if x.severity == "error" and not x.hardware and c not in (79, 154)
    )
    line = f"[ 1234.5] NVRM: Xid (PCI:0000:3b:00): {code}, pid=1, name=python, Ch 00000010\n"
    assert dmesg.parse(line).events[0].code == code
    f = tmp_path / "dmesg.txt"
    f.write_text(line)
    rc, doc = _cli(f, "dmesg")
    assert doc["verdict"] == _run_dmesg(line) == "warn" and rc == 0 and doc["passed"] is True, doc


def _ib_1024(tmp_path: Path) -> Path:
    """The RoCE sweep of the corpus as an InfiniBand link that perftest lowered to MTU 1024,
    with perftest's own CPU-frequency notice (perftest get_cpu_mhz)."""
    text = PERFTEST.read_text(encoding="utf-8").replace(" Link type       : Ethernet", " Link type       : IB")
    head, _, rest = text.partition("\n")
    notices = (
        "Requested mtu is higher than active mtu \nChanging to active mtu - 3\n"
        "Conflicting CPU frequency values detected: 1200.000000 != 3400.000000. CPU Frequency is not max.\n"
    )
    path = tmp_path / "ib-1024.txt"
    path.write_text(f"{head}\n{notices}{rest}", encoding="utf-8")
    return path


def test_an_ib_link_below_mtu_4096_warns_and_perftests_own_notice_is_its_own(tmp_path: Path) -> None:
    code, doc = _cli(_ib_1024(tmp_path), "perftest")
    assert code == 0 and doc["verdict"] == "warn", doc
    assert any("MTU 1024 B after 'Changing to active mtu', below 4096 B" in w for w in doc["warnings"]), doc["warnings"]
    assert not any("Conflicting CPU frequency" in w for w in doc["warnings"]), doc["warnings"]
    # the same output on RoCE (it follows the netdev MTU) is not warned for its MTU
    code, doc = _cli(PERFTEST, "perftest")
    assert not any("MTU" in w for w in doc["warnings"]), doc["warnings"]
