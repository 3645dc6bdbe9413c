"""The run's as-built record: asbuilt.json, the fleet's firmware drift, and changes since the
node's previous acceptance.

Each node's record (:mod:`nvtest.session.asbuilt`) is an ``asbuilt`` line of results.jsonl,
written when the inventory was read. :func:`collect` gathers them; :func:`write_asbuilt_json`
writes ``asbuilt.json`` (docs/asbuilt.md; schema ``docs/asbuilt.schema.json``)::

    {"schema": "nvtest-asbuilt/1", "run_id": ..., "cluster": ..., "sources": SOURCES,
     "nodes": {name: record}, "drift": {...}, "since_last": {...}}

:func:`drift` is what the report shows (results.json's ``asbuilt`` section, compact for
thousands of nodes): per SKU the majority value of each version field over the run's nodes of
that SKU, and per (rack, SKU) only the nodes whose value differs, with only those fields.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from nvtest.results import read_events, write_atomic

__all__ = [
    "DRIFT_FIELDS",
    "SCHEMA",
    "SOURCES",
    "collect",
    "compare_runs",
    "drift",
    "summary",
    "write_asbuilt_json",
    "written",
]

SCHEMA = "nvtest-asbuilt/1"
#: Where each field comes from (``hcas.psid``: the ``psid`` of every HCA).
SOURCES = {
    "system": "sysfs /sys/class/dmi/id (SMBIOS as the kernel exports it)",
    "software.driver": "nvidia-smi -q -x <driver_version>",
    "software.cuda": "nvidia-smi -q -x <cuda_version>",
    "software.fabric_manager": "nv-fabricmanager --version",
    "software.ofed": "ofed_info -s",
    "software.kernel": "the inventory probe (uname -r)",
    "software.os": "/etc/os-release PRETTY_NAME",
    "gpus": "nvidia-smi -q -x (serial, uuid, vbios_version, inforom_version, board_part_number); slot from the PCI bus",
    "nvswitches": "the PCI bus (sysfs /sys/bus/pci/devices, lspci -vmm -nn -D)",
    "nics": "the PCI bus (network class 02xx: sysfs ids, lspci names, the bound driver)",
    "hcas.model": "ibstat CA type, else sysfs /sys/class/infiniband/<hca>/hca_type",
    "hcas.firmware": "ibstat Firmware version, else sysfs /sys/class/infiniband/<hca>/fw_ver",
    "hcas.psid": "sysfs /sys/class/infiniband/<hca>/board_id",
    "hcas.node_guid": "ibstat Node GUID, else sysfs /sys/class/infiniband/<hca>/node_guid",
    "hcas.sys_image_guid": "ibstat System image GUID, else sysfs /sys/class/infiniband/<hca>/sys_image_guid",
    "hcas.port_guids": "ibstat Port GUID",
    "hcas.slot": "sysfs /sys/class/infiniband/<hca>/device",
}

#: How many differing nodes a (rack, SKU) table lists in the report (all are in asbuilt.json).
MAX_ROWS = 50


def _one(part: str, key: str) -> Callable[[Mapping[str, Any]], str | None]:
    def get(rec: Mapping[str, Any]) -> str | None:
        v = (rec.get(part) or {}).get(key)
        return str(v) if v is not None else None

    return get


def _each(part: str, key: str) -> Callable[[Mapping[str, Any]], str | None]:
    """The distinct values of ``key`` over a list part (``gpus``, ``hcas``), joined: a node whose
    GPUs do not all carry the same VBIOS shows both."""

    def get(rec: Mapping[str, Any]) -> str | None:
        vals = sorted({str(x[key]) for x in rec.get(part) or [] if x.get(key) is not None})
        return ", ".join(vals) if vals else None

    return get


#: Column label -> how a record gives it (versions a customer asks about first).
DRIFT_FIELDS: dict[str, Callable[[Mapping[str, Any]], str | None]] = {
    "BIOS": _one("system", "bios_version"),
    "driver": _one("software", "driver"),
    "CUDA": _one("software", "cuda"),
    "fabric manager": _one("software", "fabric_manager"),
    "OFED/DOCA": _one("software", "ofed"),
    "kernel": _one("software", "kernel"),
    "OS": _one("software", "os"),
    "GPU VBIOS": _each("gpus", "vbios"),
    "GPU InfoROM": _each("gpus", "inforom_image"),
    "GPU board": _each("gpus", "board_part_number"),
    "HCA firmware": _each("hcas", "firmware"),
    "HCA PSID": _each("hcas", "psid"),
}


def _from_asbuilt_json(run_dir: Path) -> dict[str, dict[str, Any]] | None:
    """``asbuilt.json``'s per-node records, or None when the file is absent or unreadable."""
    try:
        nodes = json.loads((run_dir / "asbuilt.json").read_text(encoding="utf-8")).get("nodes")
    except (OSError, ValueError, AttributeError):
        return None
    return {str(k): v for k, v in nodes.items() if isinstance(v, dict)} if isinstance(nodes, dict) else None


def collect(run_dir: Path) -> dict[str, dict[str, Any]]:
    """Every node's as-built record of the run (the last ``asbuilt`` line per node wins); from
    ``asbuilt.json`` when results.jsonl has none (a run directory rebuilt from its results.json).
    What the run's finish writes asbuilt.json from; readers of a finished run use
    :func:`written`."""
    records: dict[str, dict[str, Any]] = {}
    jsonl = run_dir / "results.jsonl"
    if jsonl.is_file():
        for ev in read_events(jsonl):
            if ev.get("kind") == "asbuilt" and isinstance(ev.get("record"), dict):
                records[str(ev.get("node"))] = ev["record"]
    if not records:
        records = _from_asbuilt_json(run_dir) or {}
    return dict(sorted(records.items()))


def written(run_dir: Path) -> dict[str, dict[str, Any]]:
    """The as-built records of a finished run as the run wrote them: ``asbuilt.json`` (what the
    report shows and the manifest covers: one source for ``nvtest compare`` and ``nvtest rma``);
    :func:`collect` for a run without one (a run stopped before its finish)."""
    records = _from_asbuilt_json(run_dir)
    return dict(sorted(records.items())) if records is not None else collect(run_dir)


def drift(records: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The fleet's majority per SKU and, per (rack, SKU), the nodes that differ from it.

    ``{"fields": [labels], "majority": {sku: {label: value}}, "groups": [{"rack", "sku",
    "nodes", "differing", "rows": [{"node", "values": {label: value}}], "more"}]}``; a value
    that could not be read is neither majority nor drift. Ties take the smaller value.
    """
    values: dict[str, dict[str, str | None]] = {}
    for node, rec in records.items():
        if rec.get("read", True):
            values[node] = {label: get(rec) for label, get in DRIFT_FIELDS.items()}
    by_sku: dict[str, list[str]] = {}
    for node in values:
        by_sku.setdefault(str(records[node].get("sku") or ""), []).append(node)
    majority: dict[str, dict[str, str]] = {}
    for sku, nodes in by_sku.items():
        maj: dict[str, str] = {}
        for label in DRIFT_FIELDS:
            counts = Counter(str(v) for n in nodes if (v := values[n][label]) is not None)
            if counts:
                maj[label] = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]
        majority[sku] = maj
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    for node in sorted(values):
        rec = records[node]
        sku, rack = str(rec.get("sku") or ""), str(rec.get("rack") or "")
        g = groups.setdefault((rack, sku), {"rack": rack, "sku": sku, "nodes": 0, "differing": 0, "rows": []})
        g["nodes"] += 1
        differ = {
            label: v
            for label, v in values[node].items()
            if v is not None and label in majority[sku] and v != majority[sku][label]
        }
        if differ:
            g["differing"] += 1
            if len(g["rows"]) < MAX_ROWS:
                g["rows"].append({"node": node, "values": differ})
    for g in groups.values():
        g["more"] = g["differing"] - len(g["rows"])
    return {
        "fields": list(DRIFT_FIELDS),
        "majority": majority,
        "groups": [groups[k] for k in sorted(groups)],
    }


def summary(records: Mapping[str, Mapping[str, Any]], since_last: Mapping[str, Any] | None) -> dict[str, Any]:
    """results.json's ``asbuilt`` section: the file, counts, :func:`drift` and the changes
    since the previous acceptance (None: no history was compared)."""
    return {
        "file": "asbuilt.json",
        "nodes": len(records),
        "unreadable": sorted(n for n, r in records.items() if not r.get("read", True)),
        "drift": drift(records),
        "since_last": dict(since_last) if since_last is not None else None,
    }


def write_asbuilt_json(run_dir: Path, doc: Mapping[str, Any], records: Mapping[str, Mapping[str, Any]]) -> Path:
    """Write ``run_dir/asbuilt.json`` (whole or absent, never cut).

    Raises:
        OutputWriteError: the file could not be written.
    """
    run = doc.get("run") or {}
    section = doc.get("asbuilt") or {}
    body = {
        "schema": SCHEMA,
        "run_id": run.get("run_id"),
        "cluster": run.get("history_cluster") or run.get("cluster"),
        "sources": SOURCES,
        "nodes": dict(records),
        "drift": section.get("drift"),
        "since_last": section.get("since_last"),
    }
    return write_atomic(run_dir / "asbuilt.json", json.dumps(body) + "\n")


def compare_runs(run_a: Path, run_b: Path) -> list[dict[str, Any]] | None:
    """What changed in the as-built records from run A to run B (``nvtest compare``): parts
    swapped, firmware moved, nodes that appeared or disappeared
    (:func:`nvtest.history.asbuilt.diff_records`), from each run's asbuilt.json
    (:func:`written`); None when either run has no record.
    ``run_a``/``run_b``: run directories or their results.json."""
    from nvtest.history.asbuilt import diff_records

    a = written(run_a.parent if run_a.suffix == ".json" else run_a)
    b = written(run_b.parent if run_b.suffix == ".json" else run_b)
    if not a or not b:
        return None
    return diff_records(a, b)
