"""Cause keys for a results.json written before results carried them.

A result names its cause with a key (``cause``, :data:`nvtest.playbook.diagnosis.CAUSES`)
since results.json gained the field; the Playbook matches nvtest's own findings by that key
only. A document written before (no result in it carries ``cause``) still holds the
sentences those findings were written in, and judged again (``nvtest report``, ``nvtest
evaluate``) it must keep the diagnosis it had, not fall to "rerun". :func:`add_legacy_causes`
gives such a document's failing results the key their sentence stands for, read with the
patterns the Playbook used before the keys (nvtest 0.1.0's ``playbook/diagnosis.py``), in
the Playbook's order. A document in which any result carries ``cause`` is left alone: its
findings were keyed where they were made, and nvtest's sentences are never read again.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["LEGACY_SENTENCES", "add_legacy_causes", "legacy_cause"]

#: (cause key, the checks it applies to (None: any), the pattern of the sentence nvtest wrote
#: for it before the key), in the Playbook's order (:data:`nvtest.playbook.diagnosis.RULES`):
#: the first that matches a result's reason gives its key.
LEGACY_SENTENCES: tuple[tuple[str, frozenset[str] | None, re.Pattern[str]], ...] = tuple(
    (key, frozenset(checks.split()) if checks else None, re.compile(pattern, re.IGNORECASE))
    for key, checks, pattern in (
        ("launch:too_few_nodes", "", r"too few nodes left for the multi-node launch"),
        ("scheduler:excluded", "", r"excluded by Slurm"),
        ("launch:left_out", "", r"left out of the multi-node launch"),
        ("launch:peer_wedged", "", r"the job hung on \S+ \(a process there survived SIGKILL\)"),
        ("transport:unkillable:storage", "", r"unkillable: stuck on storage"),
        ("transport:unkillable:gpu", "", r"unkillable: GPU or driver wedged|node wedged|likely wedged"),
        ("transport:unkillable:network", "", r"unkillable: stuck on the network \(HCA or its driver\)"),
        ("transport:unkillable:pci", "", r"unkillable: stuck on a PCI device"),
        ("transport:unkillable:host", "", r"unkillable: stuck in the kernel \(host\)"),
        ("transport:unkillable", "", r"unkillable"),
        ("transport:blocked", "", r"blocked: .* hung on this node"),
        ("transport:blocked:kernel_log", "", r"blocked: the kernel log \S+ shows (?!Xid 79 ).*not started"),
        ("launch:rendezvous", "", r"could not reach the rendezvous|rendezvous preflight"),
        ("launch:node_ssh", "", r"node-to-node ssh"),
        ("transport:config", "", r"key_file .*(does not exist|not a readable file)"),
        ("transport:host_key", "", r"host key rejected|host key for .* (not in known_hosts|does not match)"),
        ("transport:auth", "", r"SSH login refused|authentication failed|key not accepted|no key to offer"),
        ("transport:staging", "", r"files not staged|probes not staged|tar over the exec channel|copy to .* failed"),
        ("transport:timeout:inventory", "", r"inventory probe hung"),
        ("transport:lost", "", r"connection lost"),
        ("transport:interrupted", "", r"not measured: run interrupted|NodeError: interrupted"),
        ("transport:timeout", "", r"\btimed out after \d"),
        ("storage:client_lost", "", r"(?:NFS server|Lustre|GPFS) .*not recovered since"),
        (
            "storage:unreachable",
            "",
            r"shared filesystem .*(?:not reachable|not writable|no answer within|not a directory)",
        ),
        ("host:hung_task:gpu_driver", "", r"blocked for more than .* in the NVIDIA driver"),
        ("host:hung_task:storage", "", r"blocked for more than .* waiting in the (?:nfs|lustre|gpfs) client"),
        ("host:uncorrected_memory", "", r"uncorrected (?:machine check|EDAC)"),
        (
            "config:site",
            "",
            r"configuration error \((overlay|sku_dir|profile|option)\)|come from a file with a configuration error",
        ),
        ("tool:missing", "", r"not found on the node's PATH|no RDMA tools"),
        (
            "fabric:unregistered",
            "fabric_manager",
            r"^(?![\s\S]*nvidia-fabricmanager is )[\s\S]*fabric state In Progress[^;]*"
            r"\(GPU not registered with the NVLink fabric\); [^;]*past the \d+ s grace window",
        ),
        ("fabric:unproven", "fabric_manager", r"fabric state is unknown"),
        ("fabric:manager_down", "", r"fabric ?manager|fabric state|fabricmanager"),
        ("nccl:validation_off", "", r"correctness gate switched off|validation: 0"),
        ("hca:renamed", "", r"HCA \S+ not in the golden shape"),
        ("hca:missing", "", r"HCA \S+ missing|HCA \S+ not measured: this node lacks it|expected HCA\(s\) missing"),
        ("clocks:idle_slowdown", "clocks", r"hw_(power_brake_|thermal_)?slowdown active at idle"),
        ("gpu:mig_mode", "gpus", r"nvidia-smi reports MIG mode \w+; SKU \S+ (is a profile of whole GPUs|expects MIG)"),
        ("ib:mtu", "ib_ports", r"active_mtu \d+, the (SKU expects|fleet's majority is|node's other)"),
        ("cuda:cannot_start", "", r"CUDA cannot start"),
        ("ecc:remap_failure", "", r"remapping failure(?!\s*occurred\s*:\s*no\b)"),
        ("ecc:remap_pending", "", r"remap pending|retirement pending"),
        ("ecc:uncorrectable", "", r"uncorrectable ECC"),
        ("ecc:disable_pending", "", r"ECC disable pending"),
        ("ecc:enable_pending", "", r"ECC enable pending"),
        ("ecc:disabled", "", r"ECC mode (disabled|off)"),
        ("gpu:sku_mismatch", "", r"GPUs visible to nvidia-smi, SKU \S+ expects"),
        ("gpu:lost", "", r"GPU lost|GPUs visible to nvidia-smi|nvidia-smi reports no GPU|announces \d+ GPUs"),
        ("results:wrong", "", r"wrong results|#wrong\s*[=:]?\s*[1-9]|out of bounds values\s*:\s*[1-9]|data corruption"),
        ("pcie:downgraded", "gpus pcie_link", r"PCIe x\d+ of x\d+|trained x\d+|expects x\d+|capable of Gen"),
        ("pcie:state_unread", "pcie_link", r"gave no link attributes"),
        ("nvlink:inactive", "nvlink", r"links? .*inactive|links active|no NVLink|links up below"),
        ("ib:rate_low", "ib_ports", r"HCA|port \d+: (state|Disabled)|rate .* Gb/s <"),
        ("clocks:throttled", "burnin thermal", r"throttl|hw_slowdown \d|slowdown under load"),
        ("drift:firmware", "sw_uniformity", r"^(vbios|hca_firmware)|\b(vbios|hca_firmware)\b.*(has|differs)"),
        ("drift:platform", "sw_uniformity", r"^cpu_(vendor|family)\b"),
        ("drift:software", "", r"has .*nodes have|differs across nodes|older than"),
        ("dcgm:test_failed", "dcgm_diag", r"dcgmi .* failed"),
        ("dcgm:skipped", "dcgm_diag", r"skipped|error code"),
        ("metric:undeclared", "", r"metric not declared"),
        ("metric:unit", "", r"measured in \S+, but \S+ is declared in"),
        ("metric:implausible", "", r"\bimplausible: "),
        ("threshold:unit_mismatch", "", r"unit mismatch"),
        ("threshold:below_floor", "", r"< min|> max"),
        ("check:judged_nothing", "", r"the check judged nothing"),
        ("check:raised", "", r"^check raised \w+"),
        ("hardware:unreported", "", r"cannot report on them"),
        ("probe:error", "", r"no valid measurement|printed no|unreadable|ParseError|ProbeError|could not"),
    )
)


#: Keys whose sentence stands for them in results of one verdict only (a figure below its
#: floor is a ``fail``; a probe that measured nothing an ``error``).
_ONLY = {"threshold:below_floor": "fail", "hardware:unreported": "fail", "probe:error": "error"}


def legacy_cause(result: Mapping[str, Any]) -> str | None:
    """The key the sentence of a failing or erroring ``result`` (a results.json result written
    before the keys) stands for, or None (a pass, or a reason no legacy sentence matches)."""
    if result.get("verdict") not in ("fail", "error"):
        return None
    check, reason = str(result.get("check")), str(result.get("reason") or "")
    for key, checks, pattern in LEGACY_SENTENCES:
        if (checks is None or check in checks) and pattern.search(reason):
            if result.get("verdict") != _ONLY.get(key, result.get("verdict")):
                continue
            return key
    return None


def add_legacy_causes(doc: dict[str, Any]) -> list[str]:
    """Give the failing results of a results.json ``doc`` written before the keys (no result
    carries ``cause``) the key of their sentence (:func:`legacy_cause`); changed in place.
    Returns ``check@node`` of each result given one; a document with any ``cause`` is
    returned unchanged (``[]``)."""
    results = doc.get("results") or []
    if any("cause" in r for r in results):
        return []
    given = []
    for r in results:
        key = legacy_cause(r)
        if key is not None:
            r["cause"] = key
            given.append(f"{r.get('check')}@{r.get('node')}")
    return given
