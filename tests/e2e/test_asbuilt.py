"""End to end, issue 27: the as-built record and the RMA bundle on stand-in HGX H100 nodes
(nvtest/testing/standin_nodes.py), locally and over a cluster of real sshd nodes.

- asbuilt.json validates against docs/asbuilt.schema.json and names what the stand-ins report:
  the GPUs' serials, UUIDs, VBIOS and InfoROM (nvidia-smi -q -x), the HCAs' firmware (ibstat)
  and PSID (sysfs), the DMI identity (sysfs, through ``$NVTEST_ASBUILT_ROOT``); a field that
  could not be read (ofed_info is not on the stand-in's PATH) says why.
- A GPU whose serial changed between two acceptances (the same slot, another board) is
  reported as swapped: in results.json's ``asbuilt.since_last``, the report and ``nvtest compare``.
- ``nvtest rma`` writes an archive of the failed node's evidence, and no member of it names
  another node of the run.
"""

from __future__ import annotations

import json
import re
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path

import jsonschema
import pytest

from nvtest.testing.sshd_cluster import SSHDCluster, sshd_unavailable_reason
from nvtest.testing.standin import Recording
from nvtest.testing.standin_nodes import PROFILES, NodeProfile, Tool, install
from tests.conftest import DATA, REPO, run_nvtest

pytestmark = pytest.mark.slow

SCHEMA = json.loads((REPO / "docs" / "asbuilt.schema.json").read_text())
ASBUILT_ROOT = DATA / "sysfs" / "asbuilt-h100"
XML = DATA / "standin" / "nvidia-smi-q-x-h100-sxm-x8-assembled.xml"
#: The serial the stand-in reports for its GPU at 0000:1b:00.0, and the one after the swap.
SERIAL_BEFORE, SERIAL_AFTER = "0000000000000", "1654923099999"
CHECKS = "gpus or xid_scan"


def _errors(doc: dict) -> list[str]:
    validator = jsonschema.Draft202012Validator(SCHEMA)
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message[:200]}" for e in validator.iter_errors(doc)]


def _swapped_profile() -> NodeProfile:
    """The healthy H100 whose GPU at 0000:1b:00.0 is another board (another serial)."""
    healthy = PROFILES["h100_healthy"]
    smi = healthy.tools["nvidia-smi"]
    xml = XML.read_text().replace(f"<serial>{SERIAL_BEFORE}</serial>", f"<serial>{SERIAL_AFTER}</serial>", 1)
    by_args = {**smi.by_args, "-q -x": Recording(stdout=xml)}
    return NodeProfile(
        "h100_gpu_swapped", "healthy H100, GPU 0 replaced", {**healthy.tools, "nvidia-smi": Tool(smi.default, by_args)}
    )


def _run(tmp: Path, profile: NodeProfile | str, out: str, history: Path) -> tuple[int, dict, Path, str]:
    path = install(profile, tmp / f"bin-{out}").path_prefix()
    proc = run_nvtest(
        "run",
        "--suite",
        "delivery",
        "-k",
        CHECKS,
        "--out",
        str(tmp / out),
        "--progress",
        "none",
        env={"PATH": path, "NVTEST_ASBUILT_ROOT": str(ASBUILT_ROOT), "NVTEST_HISTORY": str(history)},
        timeout=300,
    )
    run_dir = (tmp / out / "latest").resolve()
    text = proc.stdout[-3000:] + proc.stderr[-3000:]
    assert (run_dir / "results.json").exists(), text
    return proc.returncode, json.loads((run_dir / "results.json").read_text()), run_dir, text


@pytest.fixture(scope="module")
def local(tmp_path_factory) -> tuple[Path, dict, Path, dict]:
    """Two local acceptances of the same node: healthy, then with GPU 0 swapped."""
    tmp = tmp_path_factory.mktemp("asbuilt")
    history = tmp / "history.sqlite"
    _, _, first, _ = _run(tmp, "h100_healthy", "first", history)
    _, doc, second, _ = _run(tmp, _swapped_profile(), "second", history)
    return first, json.loads((first / "asbuilt.json").read_text()), second, doc


def test_asbuilt_json_validates_and_names_the_standins_parts(local):
    _, asbuilt, _, _ = local
    assert _errors(asbuilt) == []
    (rec,) = asbuilt["nodes"].values()
    assert rec["read"] and rec["sku"] == "h100-sxm-80gb"
    assert [g["serial"] for g in rec["gpus"]] == [f"{i:013d}" for i in range(8)]
    gpu = rec["gpus"][0]
    assert gpu["slot"] == "0000:1b:00.0" and gpu["vbios"] == "96.00.74.00.01"
    assert gpu["inforom_image"] == "G520.0200.00.05" and gpu["board_part_number"] == "692-2G520-0200-000"
    assert len(rec["nvswitches"]) == 4
    assert [h["firmware"] for h in rec["hcas"]] == ["28.43.2026"] * 8
    assert {h["psid"] for h in rec["hcas"]} == {"MT_0000000838"} and rec["hcas"][0]["model"] == "MT4129"
    assert rec["system"]["vendor"] == "Supermicro" and rec["system"]["bios_version"] == "2.5b"
    assert rec["software"]["driver"] == "565.57.01" and rec["software"]["fabric_manager"] == "565.57.01"
    # what could not be read says why; every field says its source
    assert rec["software"]["ofed"] is None and "ofed_info not found on PATH" in rec["unread"]["software.ofed"]
    assert "product_serial" in rec["unread"]["system.serial"]
    assert "nvidia-smi -q -x" in asbuilt["sources"]["gpus"] and "ibstat" in asbuilt["sources"]["hcas.firmware"]


def test_a_swapped_gpu_serial_is_reported(local):
    first, _, second, doc = local
    changes = doc["asbuilt"]["since_last"]["changes"]
    assert {
        "node": next(iter(doc["nodes"])),
        "kind": "swapped",
        "part": "gpu 0000:1b:00.0",
        "field": "serial",
        "before": SERIAL_BEFORE,
        "now": SERIAL_AFTER,
    } in changes
    assert all(c["part"] == "gpu 0000:1b:00.0" for c in changes), changes
    assert _errors(json.loads((second / "asbuilt.json").read_text())) == []
    html = (second / "report.html").read_text()
    assert 'id="asbuilt"' in html and SERIAL_AFTER in html and "swapped" in html
    page = first.parent.parent / "diff.html"
    proc = run_nvtest("compare", str(first), str(second), "--html", str(page))
    assert proc.returncode == 0, proc.stderr
    assert 'id="asbuilt-changes"' in page.read_text() and SERIAL_AFTER in page.read_text()
    out = re.sub(r"\s+", " ", proc.stdout)
    assert "as built: 1 change(s)" in out and "swapped" in out and SERIAL_AFTER in out, proc.stdout[-2000:]


def test_rma_refuses_a_node_that_passed(local):
    first, _, _, _ = local
    doc = json.loads((first / "results.json").read_text())
    node = next(iter(doc["nodes"]))
    assert doc["nodes"][node]["verdict"] == "pass"
    proc = run_nvtest("rma", str(first), node)
    assert proc.returncode == 2 and "did not fail" in proc.stderr


LAYOUT = {"gpu01": "h100_healthy", "gpu02": "h100_driver_down"}
BUG_REPORT = DATA / "standin" / "nvidia-bug-report-log-header-assembled.txt"
#: A stand-in nvidia-bug-report.sh: as the real one, it writes the log gzipped to the
#: ``--output-file`` path plus ``.gz`` and prints where.
BUG_REPORT_SH = """#!/bin/sh
out=nvidia-bug-report.log
while [ $# -gt 0 ]; do [ "$1" = --output-file ] && { out="$2"; shift; }; shift; done
case "$out" in *.gz) ;; *) out="$out.gz" ;; esac
gzip -c < '{log}' > "$out" && echo "complete: $out"
"""
#: The site overlay that turns the collection on (recipe bug_report, a 60 s deadline).
OVERLAY = "schema_version: 1\nname: site\napplies_to: [h100-sxm-80gb]\nrecipe:\n  bug_report: {enabled: true, timeout_s: 60}\n"


@pytest.fixture(scope="module")
def cluster_run(tmp_path_factory) -> Iterator[tuple[dict, Path, dict]]:
    reason = sshd_unavailable_reason()
    if reason:
        pytest.skip(reason)
    tmp = tmp_path_factory.mktemp("asbuilt-ssh")
    env = {
        n: {"PATH": install(p, tmp / f"bin-{n}").path_prefix(), "NVTEST_ASBUILT_ROOT": str(ASBUILT_ROOT)}
        for n, p in LAYOUT.items()
    }
    for n in LAYOUT:  # every node has the tool; the run must take it on the failed node only
        sh = tmp / f"bin-{n}" / "nvidia-bug-report.sh"
        sh.write_text(BUG_REPORT_SH.replace("{log}", str(BUG_REPORT)))
        sh.chmod(0o755)
    overlay = tmp / "site.yaml"
    overlay.write_text(OVERLAY)
    with SSHDCluster(len(LAYOUT), prefix="gpu", python=sys.executable, node_env=env) as cluster:
        assert cluster.names == sorted(LAYOUT)
        settings = {n.name: {"address": n.address, "port": n.port} for n in cluster.nodes}
        proc = run_nvtest(
            "run",
            "--backend",
            "ssh",
            "--inventory",
            str(cluster.inventory_path),
            "--suite",
            "delivery",
            "-k",
            CHECKS,
            "--out",
            str(tmp / "r"),
            "--progress",
            "none",
            "--overlay",
            str(overlay),
            env={"HOME": str(cluster.client_home()), "NVTEST_HISTORY": str(tmp / "h.sqlite")},
            timeout=300,
        )
    run_dir = (tmp / "r" / "latest").resolve()
    assert (run_dir / "asbuilt.json").exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    yield json.loads((run_dir / "results.json").read_text()), run_dir, settings


@pytest.mark.sshd
def test_asbuilt_over_ssh_names_each_nodes_parts_or_why_not(cluster_run):
    doc, run_dir, _ = cluster_run
    asbuilt = json.loads((run_dir / "asbuilt.json").read_text())
    assert _errors(asbuilt) == []
    ok, down = asbuilt["nodes"]["gpu01"], asbuilt["nodes"]["gpu02"]
    assert ok["gpus"][7]["serial"] == "0000000000007" and ok["hcas"][0]["firmware"] == "28.43.2026"
    # the driver-down node: the bus shows 8 GPUs, nvidia-smi cannot say their serials, and says why
    assert len(down["gpus"]) == 8 and all(g["serial"] is None for g in down["gpus"])
    slot = down["gpus"][0]["slot"]
    assert "couldn't communicate with the NVIDIA driver" in down["unread"][f"gpus[{slot}].serial"]
    assert down["hcas"][0]["firmware"] == "28.43.2026"
    assert doc["nodes"]["gpu02"]["verdict"] == "fail"
    assert "nvtest rma" in (run_dir / "report.html").read_text()
    # nvidia-bug-report.sh ran on the failed node only (the site enabled it), its log kept
    assert "Start of NVIDIA bug report log file" in (run_dir / "logs" / "gpu02" / "nvidia-bug-report.log").read_text()
    assert not (run_dir / "logs" / "gpu01" / "nvidia-bug-report.log").exists()


@pytest.mark.sshd
def test_rma_bundle_holds_the_failed_nodes_evidence_and_nothing_of_the_others(cluster_run, tmp_path):
    doc, run_dir, settings = cluster_run
    out = tmp_path / "gpu02.tar.gz"
    proc = run_nvtest("rma", str(run_dir), "gpu02", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    with tarfile.open(out) as tar:
        members = {m.name.split("/", 1)[1]: tar.extractfile(m).read().decode() for m in tar.getmembers() if m.isfile()}
    assert {"README.txt", "asbuilt.json", "verdicts.json", "diagnosis.md", "node.json", "events.json"} <= set(members)
    verdicts = json.loads(members["verdicts.json"])
    assert {v["check"] for v in verdicts} >= {"gpus"} and all(v["verdict"] in ("fail", "error") for v in verdicts)
    gpus = next(v for v in verdicts if v["check"] == "gpus")
    assert gpus["diagnosis"]["action"] and gpus["log"] in members  # its raw tool output is in the archive
    assert "couldn't communicate with the NVIDIA driver" in members[gpus["log"]]
    assert "next step" in members["diagnosis.md"] and "verdicts.json" in members["README.txt"]
    assert "NVRM version: NVIDIA UNIX x86_64 Kernel Module  565.57.01" in members["logs/nvidia-bug-report.log"]
    record = json.loads(members["asbuilt.json"])["record"]
    assert record["hcas"][0]["firmware"] == "28.43.2026" and record["hcas"][0]["node_guid"]  # GUIDs kept
    # nothing names a node of the run: not the other node, not this one (sanitised as nvtest evidence does)
    names = set(LAYOUT) | {str(doc["run"].get("host"))}
    for name, text in members.items():
        for n in names:
            assert not re.search(rf"(?<![A-Za-z0-9_]){re.escape(n)}(?![A-Za-z0-9_])", text), (name, n)
    ports = {str(s.get("port")) for n, s in settings.items() if n != "gpu02" and s.get("port")}
    for text in members.values():
        assert not any(f":{p}" in text or f"port {p}" in text for p in ports)
