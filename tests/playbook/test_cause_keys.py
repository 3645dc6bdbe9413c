"""Causes travel as data (issue 26, part 4): every transport failure and every tool failure the
code knows becomes a result with a ``cause`` key, and the Playbook diagnoses each key by the key,
not by re-reading the words nvtest wrote for it.

Walks every value :attr:`CommandResult.failure` can take (``FAILURES``), every way a node is
down (``DOWN_WORDS``), every domain an unkillable process is attributed to, both blocked kinds,
and every :class:`FailureKind` a tool's failure record has; then every cause key written in the
package's source.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from nvtest.checks.hardware import read_tool
from nvtest.checks.health import Outcome, apply
from nvtest.checks.health.kernel_log import xid_scan
from nvtest.config.inventory import Node
from nvtest.errors import NodeError, NodeWedged, ParseError, ProbeError, UnreportedHardware
from nvtest.jobs.blame import PairOutcome, attribute
from nvtest.parsers import FailureKind, ToolFailure
from nvtest.playbook.diagnosis import CAUSES, RULES, diagnose
from nvtest.playbook.stuck import DOMAINS, UNKNOWN
from nvtest.playbook.xid import XID_CATALOG
from nvtest.session.context import DOWN_WORDS, NodeState
from nvtest.session.expect import Expected
from nvtest.session.phase import Hang, attribute_unkillable, cause_of
from nvtest.session.probe import require_completed
from nvtest.transports.base import FAILURES, CommandResult

PKG = Path(__file__).resolve().parents[2] / "nvtest"
KEY_RULES = {r.name for r in RULES if r.keys}


def _diagnosed_by_key(exc: BaseException, reason: str) -> None:
    """``exc``'s cause is set, in the Playbook's table, and diagnoses the result it makes."""
    cause = getattr(exc, "cause", None)
    assert cause, (type(exc).__name__, reason)
    assert cause in CAUSES, cause
    verdict = "fail" if isinstance(exc, AssertionError) else "error"
    d = diagnose({"check": "x", "verdict": verdict, "reason": f"{type(exc).__name__}: {exc}", "cause": cause})
    assert d is not None and d.rule in CAUSES[cause], (cause, d)


@pytest.mark.parametrize("failure", sorted(FAILURES))
def test_every_transport_failure_makes_a_result_with_its_cause(failure: str) -> None:
    res = CommandResult(node="n1", command="true", error=f"{FAILURES[failure]}: it failed", failure=failure)
    assert cause_of(res) == f"transport:{failure}"
    with pytest.raises((NodeWedged, NodeError)) as err:
        require_completed(res)
    assert err.value.cause == f"transport:{failure}"
    _diagnosed_by_key(err.value, res.error or "")


@pytest.mark.parametrize("kind", sorted(k for k in DOWN_WORDS if k != "probe"))
def test_every_down_node_has_its_cause(kind: str) -> None:
    state = NodeState(Node("n1"), down_reason="it failed", down_kind=kind)
    _diagnosed_by_key(state.down_error(), state.down_message)


@pytest.mark.parametrize("stuck", [*DOMAINS, UNKNOWN], ids=lambda s: s.domain)
def test_every_unkillable_domain_has_its_cause(stuck) -> None:
    res = CommandResult(
        node="n1",
        command="x",
        failure="unkillable",
        timed_out=True,
        error="timed out after 9 s; unkillable (still alive after SIGKILL: x (pid 1, state D))",
    )
    needs = [
        n
        for n, d in (
            ("storage", "storage"),
            ("gpu", "gpu"),
            ("hca", "network"),
            ("pci", "pci"),
            ("host-memory", "host"),
        )
        if d == stuck.domain
    ]
    res = attribute_unkillable(res, needs)
    assert res.cause == f"transport:unkillable:{stuck.domain}"
    with pytest.raises(NodeWedged) as err:
        require_completed(res)
    _diagnosed_by_key(err.value, res.error or "")
    d = diagnose({"check": "x", "verdict": "fail", "reason": "", "cause": res.cause})
    assert d is not None and d.rule == ("unkillable" if stuck.domain == "gpu" else f"unkillable_{stuck.domain}")


@pytest.mark.parametrize("why", [None, "the kernel log (dmesg) shows Xid 119 (GSP RPC timeout) on GPU 0000:9b:00"])
def test_a_blocked_command_has_its_cause(why: str | None) -> None:
    hang = Hang("nvidia-smi", "nvidia-smi-q-x", "timed out after 120 s", why)
    res = CommandResult(node="n1", command="x", error=hang.blocked_message(), failure="blocked", cause=hang.cause_key)
    with pytest.raises(NodeError) as err:
        require_completed(res)
    _diagnosed_by_key(err.value, res.error or "")
    assert diagnose({"check": "x", "verdict": "error", "reason": res.error, "cause": err.value.cause}).rule == (
        "blocked_by_hang" if why is None else "blocked_by_kernel_log"
    )


@pytest.mark.parametrize("kind", list(FailureKind), ids=str)
def test_every_tool_failure_kind_makes_a_result_with_its_cause(kind: FailureKind) -> None:
    @dataclasses.dataclass
    class Record:
        failure: ToolFailure | None

    record = Record(ToolFailure(kind, "the tool's own words"))
    res = CommandResult(node="n1", command="tool", stdout="the tool's own words", exit_code=1)
    exp = Expected(what="NVIDIA GPU", count=8, sources=("PCI bus: 8 x 10de:2330",))
    with pytest.raises(UnreportedHardware) as err:  # a fail: hardware there, the tool cannot report
        read_tool(exp, "tool", res, lambda _: record)
    assert err.value.cause == f"tool:{kind.value}"
    _diagnosed_by_key(err.value, str(err.value))
    # an error: a health function's outcome that measured nothing, carried by apply
    with pytest.raises(ProbeError) as err2:
        apply(Outcome(error=f"tool: {record.failure.reason}", cause=f"tool:{kind.value}"), _Judge())  # type: ignore[arg-type, union-attr]
    assert err2.value.cause == f"tool:{kind.value}"
    _diagnosed_by_key(err2.value, str(err2.value))


def test_unparsable_output_and_unreported_hardware_have_their_cause() -> None:
    exp = Expected(what="NVIDIA GPU", count=8, sources=("PCI bus: 8 x 10de:2330",))
    res = CommandResult(node="n1", command="tool", stdout="not the tool", exit_code=0)

    def parse(_: str) -> object:
        raise ParseError("tool", "not its output")

    with pytest.raises(UnreportedHardware) as err:
        read_tool(exp, "tool", res, parse)
    assert err.value.cause == "hardware:unreported"
    _diagnosed_by_key(err.value, str(err.value))
    _diagnosed_by_key(ParseError("tool", "not its output"), "")


class _Judge:
    """The part of a Judge :func:`apply` writes (its cause and findings)."""

    def __init__(self) -> None:
        self.cause: str | None = None
        self.failures: list[str] = []

    def fail(self, reason: str) -> None:
        self.failures.append(reason)


def test_apply_carries_the_outcome_cause_to_the_judge() -> None:
    judge = _Judge()
    apply(Outcome(failures=["GPU 0 fell off the bus"], cause="hardware:unreported"), judge)  # type: ignore[arg-type]
    assert judge.cause == "hardware:unreported"


#: A cause key as the source writes it (``cause="tool:missing"``, ``"launch:left_out"``).
_KEY_IN_SOURCE = re.compile(
    r"""["']((?:transport|tool|launch|scheduler|hardware|probe|gpu|ecc|pcie|clocks|nvlink|ib|hca|config|host|storage|threshold|dcgm|metric|check):[a-z_]+(?::[a-z_]+)*)["']"""
)


def _keys_in_source() -> set[str]:
    found: set[str] = set()
    for path in PKG.rglob("*.py"):
        if path.name == "diagnosis.py" and path.parent.name == "playbook":
            continue
        found.update(_KEY_IN_SOURCE.findall(path.read_text(encoding="utf-8")))
    return found


def test_every_key_the_code_sets_is_in_the_playbook() -> None:
    keys = _keys_in_source()
    assert {"tool:missing", "launch:left_out", "scheduler:excluded", "hardware:unreported"} <= keys, keys
    assert {
        "ecc:remap_failure",
        "gpu:lost",
        "pcie:downgraded",
        "nvlink:inactive",
        "hca:missing",
        "ib:mtu",
        "config:site",
    } <= keys, keys
    assert keys - CAUSES.keys() == set()
    # the keys made from data: each transport failure, each tool failure kind, each domain
    made = {f"transport:{f}" for f in FAILURES} | {f"tool:{k.value}" for k in FailureKind}
    made |= {f"transport:unkillable:{s.domain}" for s in (*DOMAINS, UNKNOWN)}
    assert made - CAUSES.keys() == set()
    for key, rules in CAUSES.items():
        assert rules and set(rules) <= KEY_RULES, key


def _own_sentences() -> list[str]:
    """What nvtest itself writes for the causes that have a key."""
    out = [f"NodeError: {words}: it failed" for words in sorted({*FAILURES.values(), *DOWN_WORDS.values()}) if words]
    out += [
        f"NodeWedged: timed out after 9 s; unkillable: {s.words} on n1 (still alive after SIGKILL)"
        for s in (*DOMAINS, UNKNOWN)
    ]
    out.append(Hang("nvidia-smi", "nvidia-smi-q-x", "timed out after 120 s").blocked_message())
    out += [
        "NodeError: left out of the multi-node launch: ib_ports failed on this node",
        "NodeError: too few nodes left for the multi-node launch: 1 of 2 (n1)",
        "NodeError: not judged: the job hung on n2 (a process there survived SIGKILL)",
        "NodeError: torchrun not launched: the rendezvous preflight failed on n2",
        "NodeError: mpirun not launched: the node-to-node ssh preflight failed on n2",
        "ProbeError: dcgmi not found on the node's PATH (DCGM, datacenter-gpu-manager): nothing measured",
        "ProbeError: no RDMA tools on a node with 8 RDMA NIC(s) expected",
        "ProbeError: probe printed no JSON (exit 1)",
        "ParseError: nvidia-smi line 3: could not parse (expected a table)",
    ]
    return out


@pytest.mark.parametrize("reason", _own_sentences())
def test_no_playbook_words_rule_reads_nvtests_own_sentence_for_a_keyed_cause(reason: str) -> None:
    """Without its key a result in nvtest's own words for a keyed cause gets no rule of a key:
    the words rules are the tools' (the removed rules re-read these sentences)."""
    for verdict in ("fail", "error"):
        d = diagnose({"check": "x", "verdict": verdict, "reason": reason})
        assert d is not None and d.rule not in KEY_RULES, (reason, d)


def test_every_xid_key_is_diagnosed_by_its_code() -> None:
    """``xid:<code>`` (the first failing Xid of the kernel log, set by xid_scan): the Xid
    catalog's diagnosis of that code, or the rule of its own for a GPU off the bus and
    uncorrectable ECC; whatever the reason's words."""
    for code in sorted(XID_CATALOG):
        d = diagnose({"check": "xid_scan", "verdict": "fail", "reason": "", "cause": f"xid:{code}"})
        own = {79: "lost_gpu", 48: "ecc_uncorrectable", 94: "ecc_uncorrectable", 95: "ecc_uncorrectable"}
        assert d is not None and d.rule == own.get(code, f"xid_{code}"), (code, d)


def test_xid_scan_sets_the_key_of_its_first_failing_xid() -> None:
    log = (
        "[  100.000000] NVRM: Xid (PCI:0000:18:00): 79, pid=1234, name=python, GPU has fallen off the bus.\n"
        "[  101.000000] NVRM: Xid (PCI:0000:2a:00): 48, pid=1234, name=python, An uncorrectable double bit error\n"
    )
    out = xid_scan(log)
    assert out.failures and out.cause == "xid:79", (out.failures, out.cause)


def test_a_pair_tests_transport_failure_keeps_its_cause_to_the_nodes_finding() -> None:
    """A pair whose command did not complete carries its node's cause key; the node's finding
    (error, or fail for a process of its own that survived SIGKILL) carries it on."""
    names = ["n0", "n1", "n2", "n3"]
    timed_out = PairOutcome(
        ("n1", "n2"), "error", reason="n2: timed out after 60 s", hung=("n1", "n2"), cause="transport:timeout"
    )
    found = attribute(
        names,
        [
            PairOutcome(("n0", "n1"), "pass", 10.0, "Gb/s"),
            timed_out,
            PairOutcome(("n2", "n3"), "pass", 10.0, "Gb/s"),
            PairOutcome(("n3", "n0"), "pass", 10.0, "Gb/s"),
        ],
    )
    bad = [f for f in found.values() if f.verdict == "error"]
    assert bad and all(f.cause == "transport:timeout" for f in bad), found
    wedged = PairOutcome(
        ("n1", "n2"),
        "error",
        reason="n2: timed out after 60 s; unkillable: stuck on storage on n2",
        hung=("n1", "n2"),
        pinned="n2",
        cause="transport:unkillable:storage",
    )
    found = attribute(
        names,
        [PairOutcome(("n0", "n1"), "pass", 10.0, "Gb/s"), wedged, PairOutcome(("n3", "n0"), "pass", 10.0, "Gb/s")],
    )
    assert found["n2"].verdict == "fail" and found["n2"].cause == "transport:unkillable:storage", found["n2"]
    d = diagnose({"check": "ib_write_bw", "verdict": "fail", "reason": found["n2"].reason, "cause": found["n2"].cause})
    assert d is not None and d.rule == "unkillable_storage", d


#: Key rules whose example also quotes the tool's own words the rule keeps (ssh's, the
#: resolver's): without the key those words still name the cause.
_EXAMPLE_IN_A_TOOLS_WORDS = {"name_does_not_resolve", "node_unreachable"}


@pytest.mark.parametrize("rule", [r for r in RULES if r.keys and r.example], ids=lambda r: r.name)
def test_a_key_rule_does_not_read_the_sentence_nvtest_writes_for_it(rule) -> None:
    """A key rule's example (the sentence nvtest writes for that cause) diagnoses the rule with
    its key, and without it is not diagnosed as that rule: no rule re-reads nvtest's words for a
    cause that has a key (rewording the sentence changes no diagnosis)."""
    check = min(rule.checks) if rule.checks else "x"
    verdict = min(rule.verdicts)
    keyed = diagnose({"check": check, "verdict": verdict, "reason": rule.example, "cause": rule.example_cause})
    assert keyed is not None and keyed.rule == rule.name, (rule.name, keyed)
    bare = diagnose({"check": check, "verdict": verdict, "reason": rule.example})
    if rule.name in _EXAMPLE_IN_A_TOOLS_WORDS:
        assert re.search(rule.pattern, rule.example, re.IGNORECASE), rule.name
    else:
        assert bare is None or bare.rule != rule.name, (rule.name, bare)


#: The tool's own line each rule with both keys and words reads (its example is nvtest's
#: sentence for the key): the words part reads the tool, never nvtest.
_KEYED_WORDS = {
    "fabric_manager": "CUDA initialization: Unexpected error from cudaGetDeviceCount(). Did you run some cuda "
    "functions before calling NumCudaDevices() that might have already set an error? Error 802: "
    "system not yet initialized",
    "cuda_cannot_start": "RuntimeError: Unexpected error from cudaGetDeviceCount() ... cudaErrorNoDevice",
    "nccl_wrong": "# Out of bounds values : 3 FAILED",
}


def test_every_words_rule_names_the_tool_whose_words_it_reads() -> None:
    """Every rule with a pattern names the tool whose output it reads (``Rule.tool``); none
    reads a sentence nvtest writes (a cause nvtest finds travels as a key)."""
    words = [r for r in RULES if r.pattern]
    assert all(r.tool for r in words), [r.name for r in words if not r.tool]
    assert [r.name for r in words if r.tool == "nvtest"] == []
    listing = {r.name: r.tool for r in words}
    assert listing == {
        "name_does_not_resolve": "ssh, the resolver",
        "node_unreachable": "ssh",
        "nouveau_owns_gpus": "NVIDIA driver (NVRM, kernel log)",
        "driver_not_loaded": "nvidia-smi, NVIDIA driver (NVRM, kernel log)",
        "fabric_manager": "CUDA runtime",
        "cuda_driver_insufficient": "CUDA runtime",
        "torch_cpu_build": "torch",
        "sweep_shortened": "nccl-tests",
        "cuda_cannot_start": "CUDA runtime",
        "tool_missing": "the tools, dpkg",
        "ecc_uncorrectable": "dmesg (NVRM Xid)",
        "lost_gpu": "dmesg (NVRM Xid), nvidia-smi",
        "nccl_wrong": "nccl-tests",
        "ib_polling": "ibstat (port state)",
        "ib_not_active": "ibstat (port state)",
    }, listing
    assert _KEYED_WORDS.keys() <= {r.name for r in words if r.keys}
    for r in words:
        if r.keys and r.name not in _KEYED_WORDS:
            continue  # its example is nvtest's sentence for the key (the rule above tests it)
        # a tool's words rule: its example (the tool's output, as a reason quotes it), or the
        # tool's line of a rule that has keys too, is read by it
        line = _KEYED_WORDS.get(r.name, r.example)
        assert re.search(r.pattern, line, re.IGNORECASE), r.name


def test_several_keyed_findings_give_the_key_the_playbook_diagnoses_first() -> None:
    """A check that found ECC off on one GPU and a row remapping failure on another gives its
    result the key whose rule comes first (remap_failure), whatever the order of its findings:
    the diagnosis the findings' words gave before they had keys."""
    out = Outcome()
    out.fail("GPU 0 (00000000:18:00.0): ECC mode Disabled, SKU expects Enabled", "ecc:disabled")
    out.fail("GPU 1 (00000000:2a:00.0): row remapping failure (spare rows exhausted): RMA", "ecc:remap_failure")
    assert out.cause == "ecc:disabled" and out.keys[out.failures[1]] == "ecc:remap_failure"
    judge = _Judge()
    apply(out, judge)  # type: ignore[arg-type]
    assert judge.cause == "ecc:remap_failure"
    d = diagnose({"check": "ecc", "verdict": "fail", "reason": "; ".join(out.failures), "cause": judge.cause})
    assert d is not None and d.rule == "remap_failure", d
