"""The gate's next steps, chosen from everything the gate run knows.

A decision's next step is first read from its own reason when the decision is made
(:func:`~nvtest.ops.gate.document.next_step`). Once every check of the gate has answered,
:func:`diagnose_gate` chooses it again for every bad decision (``fail``, ``unknown``) from
the whole run, with the ranking :func:`nvtest.playbook.diagnosis.diagnose` gives a result of
``nvtest run``:

1. the tool's own failure signatures, in the check's evidence (the tails of the tools it
   read) and in the tool's words the reason quotes, then the rules that name a cause from the
   reason itself (an Xid, a driver that is not loaded, a fabric manager that is down);
2. the same node's other findings of the same gate (the run's ``node_results``): a failing
   configuration finding for a data-path check (:data:`~nvtest.playbook.diagnosis.NODE_CAUSES`),
   and, where the decision names only a symptom (:data:`WEAK`: a tool that did not answer, a
   figure below its floor, no reading, nothing named), the first finding of the node beneath it
   (:data:`BENEATH`: the kernel log's events first, then the driver, the GPUs, the fabric
   manager, the mounts) that names a cause in the same domain
   (:data:`CHECK_DOMAINS`), with that finding's own next step; the fatal GPU events the gate's
   state remembers from this boot count as the kernel log's, also when ``xid_scan`` did not run;
3. the fleet: a gate judges one node, so it has none;

and only then the generic step. A decision's own signature or named cause is never replaced
by another decision's (a thermal slowdown stays a cooling matter beside a lost GPU).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from nvtest.ops.gate.checks_node import _remembered
from nvtest.ops.gate.document import Decision, GateCheck
from nvtest.ops.gate.state import GateState
from nvtest.playbook.diagnosis import GENERIC, NODE_SYMPTOMS, Diagnosis, diagnose

__all__ = ["BENEATH", "CHECK_DOMAINS", "WEAK", "GateFinding", "diagnose_gate", "node_findings"]

#: Rules that name no cause, only that something did not work: the tool did not answer, a
#: figure is off its floor, wrong results on a path, no valid reading, nothing matched.
WEAK = frozenset({*(g.rule for g in GENERIC.values()), *NODE_SYMPTOMS, "probe_timeout", "no_measurement", "systemic"})

#: The domains each gate check reads (those of :mod:`nvtest.playbook.stuck`): another finding
#: explains a check's symptom only in a domain the check reads.
CHECK_DOMAINS: dict[str, frozenset[str]] = {
    **{c: frozenset({"gpu"}) for c in ("gpus", "driver_stack", "ecc", "clocks", "nvlink", "fabric_manager")},
    "pcie_link": frozenset({"gpu", "pci", "network"}),
    "ib_ports": frozenset({"network"}),
    "disk": frozenset({"storage"}),
    "mounts": frozenset({"storage"}),
    "memory": frozenset({"host"}),
    "services": frozenset({"host"}),
    "xid_scan": frozenset({"gpu", "storage", "host", "network", "pci"}),
}

#: The checks whose findings explain another's symptom, lowest layer first: what the kernel
#: logged, the driver, the GPUs the driver sees, the fabric manager over them, the mounts the
#: site requires (a hung mount explains its free space unread). A check is explained only by a
#: finding of a check listed before it, or by another decision of its own.
BENEATH = ("xid_scan", "driver_stack", "gpus", "fabric_manager", "mounts")

#: Rules of the kernel log's findings that are not the GPU's (the rest of the kernel log's are).
_RULE_DOMAINS = {
    "storage_client_lost": "storage",
    "hung_task_in_storage": "storage",
    "unkillable_storage": "storage",
    "uncorrected_memory_error": "host",
}
_WHOLE = re.compile(r"^whole reason \((?P<what>.*?)\): (?P<reason>.*)$", re.DOTALL)


@dataclass(frozen=True)
class GateFinding:
    """One thing the gate found on the node that names a cause: the check (``state`` for an
    event the gate's state remembers), its decision's reason and its own diagnosis."""

    check: str
    reason: str
    diagnosis: Diagnosis
    decision: Decision | None = None

    @property
    def domain(self) -> str:
        """What the finding is about: the kernel log's by its rule, another check's by what it reads."""
        if self.check in ("xid_scan", "state"):
            return _RULE_DOMAINS.get(self.diagnosis.rule, "gpu")
        doms = CHECK_DOMAINS.get(self.check, frozenset({"host"}))
        return "gpu" if "gpu" in doms else min(doms)


def _reason(res: GateCheck, d: Decision) -> str:
    """The decision's whole reason: kept in the check's notes where the one-line reason was cut."""
    head = " ".join(d.reason.split("(", 1)[0].split())[:40]  # the one line's start (whitespace joined)
    for note in res.notes:
        m = _WHOLE.match(note)
        if m and m["what"] == d.what and " ".join(m["reason"].split()).startswith(head):
            return m["reason"]
    return d.reason


def _evidence(res: GateCheck) -> str:
    return "\n".join(e.tail(2000) for e in res.evidence)


def _own(res: GateCheck, d: Decision, node_results: Iterable[Mapping[str, Any]] = ()) -> Diagnosis | None:
    """The decision's diagnosis from its own words, its check's evidence and (for a data-path
    check) the node's configuration findings: :func:`~nvtest.playbook.diagnosis.diagnose`."""
    verdict = {"fail": "fail", "unknown": "error"}.get(d.verdict)
    if verdict is None:
        return None
    result = {"check": res.check, "verdict": verdict, "reason": _reason(res, d), "cause": d.cause}
    return diagnose(result, evidence=_evidence(res), node_results=node_results)


def node_findings(results: Sequence[GateCheck], state: GateState | None = None) -> list[GateFinding]:
    """The node's findings that name a cause, in :data:`BENEATH` order: each ``fail`` decision
    (and each ``warn`` of the kernel log) whose own diagnosis is not :data:`WEAK`; then the fatal
    GPU events ``state`` remembers from this boot where ``xid_scan`` did not report them."""
    by_check = {r.check: r for r in results}
    found: list[GateFinding] = []
    for name in BENEATH:
        res = by_check.get(name)
        if res is not None:
            for d in res.decisions:
                if d.verdict == "fail" or (d.verdict == "warn" and name == "xid_scan"):
                    diag = _own(res, replace(d, verdict="fail"))
                    if diag is not None and diag.rule not in WEAK:
                        found.append(GateFinding(name, _reason(res, d), diag, d))
        if name == "xid_scan" and state is not None and (res is None or res.verdict != "fail"):
            for e in state.fatal_events:
                if e.get("verdict") != "unknown":
                    text = _remembered(e)
                    diag = diagnose({"check": "xid_scan", "verdict": "fail", "reason": text})
                    if diag is not None and diag.rule not in WEAK:
                        found.append(GateFinding("state", text, diag))
    return found


def _explained(check: str, d: Decision, own: Diagnosis, findings: Sequence[GateFinding]) -> Diagnosis | None:
    """The node's finding that explains ``d``'s symptom, as its next step (None: none does)."""
    if own.rule not in WEAK:
        return None
    domains = CHECK_DOMAINS.get(check, frozenset())
    rank = BENEATH.index(check) if check in BENEATH else len(BENEATH)
    for f in findings:
        if f.decision is d or f.domain not in domains:
            continue
        if f.check != check and f.check != "state" and BENEATH.index(f.check) >= rank:
            continue
        where = (
            "the gate's state remembers from this boot"
            if f.check == "state"
            else f"this node's {f.check} check found in the same gate"
        )
        return Diagnosis(
            f"{f.diagnosis.cause} ({where}: {f.reason})",
            f"{f.diagnosis.action}; then gate again",
            f.diagnosis.cls,
            f"node_{f.check}:{f.diagnosis.rule}",
        )
    return None


def diagnose_gate(results: Sequence[GateCheck], state: GateState | None = None) -> None:
    """Set the next step of every bad decision of ``results`` (one gate of one node) from
    everything the gate knows, in the module's rank order; ``state``: the node's gate state
    (its remembered fatal events). Changes ``results`` in place; a pass, warn or skip keeps
    no next step."""
    findings = node_findings(results, state)
    node_results = [
        {"check": r.check, "verdict": "fail", "reason": _reason(r, d), "cause": d.cause}
        for r in results
        for d in r.decisions
        if d.verdict == "fail"
    ]
    for res in results:
        for i, d in enumerate(res.decisions):
            own = _own(res, d, node_results)
            if own is None:
                continue
            step = _explained(res.check, d, own, findings) or own
            res.decisions[i] = replace(d, next_step=step.to_json())
