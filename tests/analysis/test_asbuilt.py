"""The as-built record from recorded tool outputs, without a run: every field that is null says
why (over every way a source can fail), the fleet's drift lists only what differs, changes
between two records are named by kind, and the history finds a node's previous record."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from nvtest.analysis.asbuilt import SOURCES, drift
from nvtest.analysis.sanitise import Sanitiser
from nvtest.history import HistoryStore
from nvtest.history.asbuilt import diff_records, since_last_acceptance, write_asbuilt
from nvtest.session.asbuilt import asbuilt_record
from nvtest.session.facts import facts_from_probe
from tests.conftest import DATA, REPO

SCHEMA = json.loads((REPO / "docs" / "asbuilt.schema.json").read_text())
ROOT = DATA / "sysfs" / "asbuilt-h100"
XML = (DATA / "standin" / "nvidia-smi-q-x-h100-sxm-x8-assembled.xml").read_text()
IBSTAT = (DATA / "standin" / "ibstat-8x-ndr-mt4129-assembled.txt").read_text()
LSPCI = (DATA / "corpus" / "lspci" / "Dnn-egrep-hgx-h100-8gpu-4nvswitch-ids.txt").read_text()
DRIVER_DOWN = (DATA / "standin" / "nvidia-smi-driver-not-loaded.txt").read_text()


def _probe_module() -> Any:
    spec = importlib.util.spec_from_file_location("inventory_probe", REPO / "nvtest" / "probes" / "inventory_probe.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


PROBE = _probe_module()


#: Two network functions as sysfs lists them (ConnectX-7, 15b3:1021, class 0207): one bound
#: to mlx5_core, one with no driver bound.
NICS = [
    {
        "slot": "0000:18:00.0",
        "vendor": "15b3",
        "device": "1021",
        "class": "020700",
        "numa_node": 0,
        "driver": "mlx5_core",
    },
    {"slot": "0000:2a:00.0", "vendor": "15b3", "device": "1021", "class": "020700", "numa_node": 0, "driver": None},
]


def _raw(stdout: str = "", rc: int | None = 0, reason: str | None = None, stderr: str = "") -> dict[str, Any]:
    return {"cmd": [], "rc": rc, "stdout": stdout, "stderr": stderr, "reason": reason}


def _doc(**raw: dict[str, Any]) -> dict[str, Any]:
    """An inventory probe document of the stand-in H100, its raw outputs replaced by ``raw``."""
    base = {
        "lspci": _raw(LSPCI),
        "nvidia-smi-xml": _raw(XML),
        "ibstat": _raw(IBSTAT),
        "ofed_info": _raw("MLNX_OFED_LINUX-24.10-1.1.4.0:\n"),
        "nv-fabricmanager": _raw("Fabric Manager version is : 565.57.01\n"),
    }
    base.update({k.replace("_", "-") if k == "nvidia_smi_xml" else k: v for k, v in raw.items()})
    return {
        "probe": "inventory",
        "host": "gpu017",
        "cpu": {},
        "memory": {},
        "os": {"pretty_name": "Ubuntu 22.04.5 LTS", "kernel": "5.15.0-122-generic"},
        "pci_sysfs": {"path": "/sys/bus/pci/devices", "devices": NICS, "reason": None},
        "asbuilt": PROBE.asbuilt_sysfs(str(ROOT)),
        "raw": base,
    }


def _record(doc: dict[str, Any], node: str = "gpu017", rack: str = "r1") -> dict[str, Any]:
    return asbuilt_record(node, doc, facts_from_probe(doc), sku="h100-sxm-80gb", rack=rack)


def _nulls(record: dict[str, Any]) -> set[str]:
    out = {f"{part}.{k}" for part in ("system", "software") for k, v in record[part].items() if v is None}
    for g in record["gpus"]:
        out |= {f"gpus[{g['slot']}].{k}" for k, v in g.items() if v is None}
    for h in record["hcas"]:
        out |= {f"hcas[{h['name']}].{k}" for k, v in h.items() if v is None}
    for n in record["nics"]:
        out |= {f"nics[{n['slot']}].{k}" for k, v in n.items() if v is None}
    return out


def _validate(records: dict[str, dict[str, Any]]) -> list[str]:
    doc = {
        "schema": "nvtest-asbuilt/1",
        "run_id": "r",
        "cluster": "c",
        "sources": SOURCES,
        "nodes": records,
        "drift": drift(records),
        "since_last": None,
    }
    return [e.message for e in jsonschema.Draft202012Validator(SCHEMA).iter_errors(doc)]


#: Every way a source can fail: the record keeps the rest, and each null says why.
CASES = {
    "healthy": {},
    "driver_down": {"nvidia_smi_xml": _raw(DRIVER_DOWN, rc=9)},
    "smi_missing": {"nvidia_smi_xml": _raw(rc=None, reason="nvidia-smi not found on PATH")},
    "smi_garbage": {"nvidia_smi_xml": _raw("<nvidia_smi_log><gpu id='x'><serial>")},
    "ibstat_missing": {"ibstat": _raw(rc=None, reason="ibstat not found on PATH")},
    "ofed_fails": {"ofed_info": _raw("", rc=1, stderr="ofed_info: command failed")},
    "fm_timeout": {"nv-fabricmanager": _raw(rc=None, reason="timed out after 10 s")},
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_null_field_says_why(case):
    rec = _record(_doc(**CASES[case]))
    missing = _nulls(rec) - set(rec["unread"])
    assert not missing, missing
    assert _validate({"gpu017": rec}) == []
    assert len(rec["gpus"]) == 8 and len(rec["nvswitches"]) == 4  # the bus shows them whatever the tools say
    assert rec["system"]["bios_version"] == "2.5b" and "product_serial" in rec["unread"]["system.serial"]


def healthy_nics(rec: dict[str, Any]) -> list[tuple[str, str | None, str | None]]:
    return [(n["slot"], n["device"], n["driver"]) for n in rec["nics"]]


def test_the_tools_words_are_the_reason():
    rec = _record(_doc(**CASES["driver_down"]))
    assert "couldn't communicate with the NVIDIA driver" in rec["unread"]["gpus[0000:1b:00.0].serial"]
    assert "couldn't communicate" in rec["unread"]["software.driver"]
    rec = _record(_doc(**CASES["ibstat_missing"]))
    h = rec["hcas"][0]
    assert h["firmware"] == "28.43.2026" and h["psid"] == "MT_0000000838"  # sysfs stands in for ibstat
    assert "ibstat not found on PATH" in rec["unread"]["hcas[mlx5_0].node_guid"]
    assert healthy_nics(rec) == [("0000:18:00.0", "1021", "mlx5_core"), ("0000:2a:00.0", "1021", None)]
    assert "PCI bus" in rec["unread"]["nics[0000:2a:00.0].driver"]
    rec = _record(_doc(**CASES["ofed_fails"]))
    assert rec["unread"]["software.ofed"] == "ofed_info -s exited 1: ofed_info: command failed"
    healthy = _record(_doc())
    assert (
        healthy["software"]["ofed"] == "MLNX_OFED_LINUX-24.10-1.1.4.0"
        and healthy["software"]["fabric_manager"] == "565.57.01"
    )


def test_drift_lists_only_the_nodes_and_fields_that_differ():
    base = _record(_doc())
    odd = json.loads(json.dumps(base))
    odd["node"], odd["rack"] = "gpu031", "r2"
    odd["hcas"][3]["firmware"] = "28.39.1002"
    records = {
        "gpu017": base,
        "gpu018": {**base, "node": "gpu018"},
        "gpu030": {**base, "node": "gpu030", "rack": "r2"},
        "gpu031": odd,
    }
    d = drift(records)
    assert d["majority"]["h100-sxm-80gb"]["HCA firmware"] == "28.43.2026"
    r1, r2 = d["groups"]
    assert (r1["rack"], r1["nodes"], r1["rows"]) == ("r1", 2, [])
    assert (r2["rack"], r2["nodes"], r2["differing"]) == ("r2", 2, 1)
    assert r2["rows"] == [{"node": "gpu031", "values": {"HCA firmware": "28.39.1002, 28.43.2026"}}]
    assert _validate(records) == []


def test_changes_are_named_by_kind_and_unknown_is_not_different():
    before = _record(_doc())
    after = json.loads(json.dumps(before))
    after["gpus"][2]["serial"] = "1654923099999"
    after["gpus"][5]["vbios"] = "96.00.99.00.01"
    after["hcas"][0]["psid"] = None  # unread now: not a change
    after["software"]["driver"] = "570.86.15"
    after["hcas"].pop()
    after["nics"][1]["device"] = "101d"  # another NIC model in the same slot
    changes = diff_records({"a": before, "b": before}, {"a": after, "c": before})
    kinds = {(c["node"], c["kind"], c["part"], c["field"]) for c in changes}
    assert kinds == {
        ("a", "swapped", "gpu 0000:52:00.0", "serial"),
        ("a", "firmware", "gpu 0000:c3:00.0", "vbios"),
        ("a", "firmware", "software", "driver"),
        ("a", "removed", "hca mlx5_7", None),
        ("a", "swapped", "nic 0000:2a:00.0", "device"),
        ("b", "disappeared", "node", None),
        ("c", "appeared", "node", None),
    }


def test_the_history_finds_each_nodes_previous_record(tmp_path):
    rec = _record(_doc())
    swapped = json.loads(json.dumps(rec))
    swapped["gpus"][0]["serial"] = "1654923099999"
    with HistoryStore.open(str(tmp_path / "h.sqlite")) as store:
        write_asbuilt(store, {"a": rec, "b": rec}, run_key="run:1", cluster="west", at=100.0)
        write_asbuilt(store, {"a": rec}, run_key="run:other", cluster="east", at=150.0)  # another cluster's "a"
        write_asbuilt(store, {"a": rec}, run_key="run:2", cluster="west", at=200.0)  # a run of "a" only
        got = since_last_acceptance(store, {"a": swapped}, cluster="west", before=300.0, run_key="run:3")
        # b was not in the latest earlier run (run:2): a run of part of a fleet does not make it disappear
        assert got["previous_runs"] == ["run:2"]
        assert [(c["node"], c["kind"], c["field"]) for c in got["changes"]] == [("a", "swapped", "serial")]
        write_asbuilt(store, {"a": swapped}, run_key="run:3", cluster="west", at=300.0)
        write_asbuilt(store, {"a": swapped}, run_key="run:3", cluster="west", at=300.0)  # a rebuild replaces
        again = since_last_acceptance(store, {"a": swapped}, cluster="west", before=300.0, run_key="run:3")
        assert again == got  # a rebuilt run is compared with the same previous one, never with itself
        later = since_last_acceptance(store, {"a": swapped}, cluster="west", before=400.0, run_key="run:4")
        assert later == {"previous_runs": ["run:3"], "changes": []}


def test_rma_sanitiser_keeps_the_parts_identities_and_replaces_hosts_and_addresses():
    text = "host gpu017 10.1.2.3 aa:bb:cc:dd:ee:ff\n<serial>1654923012345</serial>\nGPU-3f1e8a2b-1c2d-4e5f-8a9b-0c1d2e3f4a5b\nNode GUID: 0x946dae03004e1a2b\n"
    out = Sanitiser(["gpu017"], keep=("serial", "uuid", "guid")).text(text)
    assert "gpu017" not in out and "10.1.2.3" not in out and "aa:bb:cc:dd:ee:ff" not in out
    assert "1654923012345" in out and "GPU-3f1e8a2b-1c2d-4e5f-8a9b-0c1d2e3f4a5b" in out and "0x946dae03004e1a2b" in out
    full = Sanitiser(["gpu017"]).text(text)
    assert "1654923012345" not in full and "0x946dae03004e1a2b" not in full  # nvtest evidence: as before


def test_probe_reads_the_asbuilt_root_and_says_why_for_what_is_absent(tmp_path):
    got = PROBE.asbuilt_sysfs(str(ROOT))
    assert got["dmi"]["fields"]["sys_vendor"] == {"value": "Supermicro", "reason": None}
    assert "No such file" in got["dmi"]["fields"]["product_serial"]["reason"]
    assert got["infiniband"]["devices"]["mlx5_0"]["board_id"]["value"] == "MT_0000000838"
    empty = PROBE.asbuilt_sysfs(str(tmp_path))
    assert empty["infiniband"]["devices"] == {} and "cannot read" in empty["infiniband"]["reason"]
    (tmp_path / "sys/class/dmi/id").mkdir(parents=True)
    (tmp_path / "sys/class/dmi/id/bios_version").write_text("\n")
    assert "empty" in PROBE.asbuilt_sysfs(str(tmp_path))["dmi"]["fields"]["bios_version"]["reason"]


def test_the_schema_is_valid():
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    assert Path(REPO / "docs" / "asbuilt.md").read_text().count("asbuilt.schema.json") >= 1


def test_a_tool_past_its_deadline_is_killed_with_its_children():
    import time

    start = time.monotonic()
    got = PROBE.run_raw(["sh", "-c", "sleep 30 & sleep 30"], timeout_s=1.0)
    assert time.monotonic() - start < 10  # the child holding the pipe did not hold the probe
    assert got["rc"] is None and got["reason"] == "timed out after 1 s"
    assert (
        PROBE.run_raw(["sh", "-c", "echo MLNX_OFED_LINUX-24.10-1.1.4.0:"])["stdout"]
        == "MLNX_OFED_LINUX-24.10-1.1.4.0:\n"
    )
