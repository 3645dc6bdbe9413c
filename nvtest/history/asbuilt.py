"""As-built records in the history, and what changed between two of them.

:func:`diff_records` compares two sets of as-built records (``{node: record}``, the shape of
asbuilt.json's ``nodes``; docs/asbuilt.md) and lists what a customer asks about first::

    [{"node": "gpu017", "kind": "swapped", "part": "gpu 0000:1b:00.0", "field": "serial",
      "before": "1654923012345", "now": "1654923099999"},
     {"node": "gpu017", "kind": "firmware", "part": "hca mlx5_0", "field": "firmware",
      "before": "28.39.1002", "now": "28.43.2026"},
     {"node": "gpu031", "kind": "appeared", ...}, {"node": "gpu030", "kind": "disappeared", ...}]

``kind``: ``swapped`` (a GPU's serial or UUID at the same PCI slot, an HCA's node GUID or
PSID under the same name, or the system's serial changed: the part is another one),
``firmware`` (a version moved: VBIOS, InfoROM, HCA firmware, BIOS, driver, CUDA, fabric
manager, OFED, kernel, OS), ``added`` / ``removed`` (a GPU slot, HCA or NIC slot only on one side; a NIC's model changed at
its slot is ``swapped``),
``appeared`` / ``disappeared`` (a node only on one side). A field that could not be read on
either side is not a change (unknown is not different).

:func:`previous_asbuilt` and :func:`write_asbuilt` keep the records per (cluster, node) in the
``asbuilt`` table (schema v4), so the next acceptance compares with the last one.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.exc import SQLAlchemyError

from nvtest.history.schema import asbuilt as asbuilt_table
from nvtest.history.store import HistoryStore

__all__ = ["diff_records", "previous_asbuilt", "since_last_acceptance", "write_asbuilt"]

#: (field, kind) per part: identity fields first (a swapped part), then versions.
_GPU = (
    ("serial", "swapped"),
    ("uuid", "swapped"),
    ("board_part_number", "swapped"),
    ("vbios", "firmware"),
    ("inforom_image", "firmware"),
    ("inforom_oem", "firmware"),
    ("inforom_ecc", "firmware"),
)
_HCA = (("node_guid", "swapped"), ("psid", "firmware"), ("model", "swapped"), ("firmware", "firmware"))
_NIC = (("device", "swapped"), ("vendor", "swapped"))
_SYSTEM = (("serial", "swapped"), ("product", "swapped"), ("bios_version", "firmware"), ("bios_date", "firmware"))
_SOFTWARE = (
    ("driver", "firmware"),
    ("cuda", "firmware"),
    ("fabric_manager", "firmware"),
    ("ofed", "firmware"),
    ("kernel", "firmware"),
    ("os", "firmware"),
)


def _parts(record: Mapping[str, Any]) -> dict[str, tuple[Mapping[str, Any], tuple[tuple[str, str], ...]]]:
    """part name -> (its fields, the fields compared and their kind of change)."""
    out: dict[str, tuple[Mapping[str, Any], tuple[tuple[str, str], ...]]] = {
        "system": (record.get("system") or {}, _SYSTEM),
        "software": (record.get("software") or {}, _SOFTWARE),
    }
    for g in record.get("gpus") or []:
        out[f"gpu {g.get('slot')}"] = (g, _GPU)
    for h in record.get("hcas") or []:
        out[f"hca {h.get('name')}"] = (h, _HCA)
    for n in record.get("nics") or []:
        out[f"nic {n.get('slot')}"] = (n, _NIC)
    return out


def diff_records(before: Mapping[str, Mapping[str, Any]], now: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """What changed from ``before`` to ``now`` (see the module doc), by node then part."""
    out: list[dict[str, Any]] = []
    for node in sorted(set(before) | set(now)):
        a, b = before.get(node), now.get(node)
        if a is None:
            out.append({"node": node, "kind": "appeared", "part": "node", "field": None, "before": None, "now": None})
            continue
        if b is None:
            out.append(
                {"node": node, "kind": "disappeared", "part": "node", "field": None, "before": None, "now": None}
            )
            continue
        if not a.get("read", True) or not b.get("read", True):
            continue  # a node that did not answer tells nothing of its parts
        pa, pb = _parts(a), _parts(b)
        for part in sorted(set(pa) | set(pb)):
            if part not in pa or part not in pb:
                kind = "added" if part not in pa else "removed"
                out.append({"node": node, "kind": kind, "part": part, "field": None, "before": None, "now": None})
                continue
            (fa, fields), (fb, _) = pa[part], pb[part]
            for name, kind in fields:
                va, vb = fa.get(name), fb.get(name)
                if va is None or vb is None or va == vb:
                    continue
                out.append({"node": node, "kind": kind, "part": part, "field": name, "before": va, "now": vb})
    return out


def previous_asbuilt(
    store: HistoryStore, *, cluster: str, before: float, exclude_key: str
) -> dict[str, tuple[str, float, dict[str, Any]]]:
    """Each node's latest as-built record in ``cluster`` before ``before`` (epoch s), not of the
    run ``exclude_key``: ``{node: (run_key, at, record)}``.

    Raises:
        HistoryError: the database could not be read.
    """
    t = asbuilt_table
    out: dict[str, tuple[str, float, dict[str, Any]]] = {}
    try:
        with store.engine.connect() as conn:
            rows = conn.execute(
                select(t.c.node, t.c.run_key, t.c.at, t.c.record)
                .where(t.c.cluster == cluster, t.c.at < before, t.c.run_key != exclude_key)
                .order_by(t.c.at.desc(), t.c.id.desc())
            )
            for node, key, at, text in rows:
                if node not in out:
                    try:
                        out[node] = (str(key), float(at), json.loads(text))
                    except ValueError:
                        continue
    except SQLAlchemyError as exc:
        raise store.failure(exc) from exc
    return out


def since_last_acceptance(
    store: HistoryStore, records: Mapping[str, Mapping[str, Any]], *, cluster: str, before: float, run_key: str
) -> dict[str, Any]:
    """This run's records against each node's previous one in the history: ``{"previous_runs":
    [run keys], "changes": [...]}`` (:func:`diff_records`); a node of the cluster's latest earlier
    run that is not in this one has ``disappeared``, one never recorded has ``appeared``.

    Raises:
        HistoryError: the database could not be read.
    """
    prev = previous_asbuilt(store, cluster=cluster, before=before, exclude_key=run_key)
    if not prev:
        return {"previous_runs": [], "changes": []}
    last = max(prev.values(), key=lambda p: p[1])[0]
    older = {n: p[2] for n, p in prev.items() if n in records or p[0] == last}
    changes = diff_records(older, records)
    return {"previous_runs": sorted({prev[n][0] for n in older}), "changes": changes}


def write_asbuilt(
    store: HistoryStore, records: Mapping[str, Mapping[str, Any]], *, run_key: str, cluster: str, at: float
) -> None:
    """Keep ``records`` as the run ``run_key``'s (replacing any it had: a rebuild).

    Raises:
        HistoryError: the database could not be written.
    """
    t = asbuilt_table
    rows = [
        {"run_key": run_key, "cluster": cluster, "node": node, "at": at, "record": json.dumps(rec, sort_keys=True)}
        for node, rec in sorted(records.items())
    ]
    try:
        with store.engine.begin() as conn:
            conn.execute(delete(t).where(t.c.run_key == run_key))
            if rows:
                conn.execute(t.insert(), rows)
    except SQLAlchemyError as exc:
        raise store.failure(exc) from exc
