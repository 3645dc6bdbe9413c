"""The gate's next step for a bad decision is chosen from everything the gate found on the node
(:mod:`nvtest.ops.gate.diagnose`): the tool's own words first, then the node's other findings
of the same gate (the kernel log's events, the driver, the GPUs, the fabric manager, the mounts;
a data-path check's configuration findings as in ``nvtest run``), then the generic step."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nvtest.ops.gate.config import CONFIG_CHECK
from nvtest.ops.gate.diagnose import BENEATH, CHECK_DOMAINS, WEAK, diagnose_gate
from nvtest.ops.gate.document import GateCheck
from nvtest.ops.gate.engine import CHECKS
from nvtest.ops.gate.state import GateState
from nvtest.ops.gate.tools import ToolOutput
from nvtest.playbook.host_events import STORAGE_LOST, UNCORRECTED_MEMORY
from nvtest.testing.standin import Recording, StandInTools
from nvtest.testing.standin_nodes import H100, XID79_WEDGED, fatal_xid, hung, install, node_bin
from tests.conftest import CORPUS
from tests.ops.test_gate import by_check, gate

XID79 = "GPU 0000:b3:00.0 fell off the bus (Xid 79): Drain the node; power-cycle or reseat; check PCIe/AER and power; RMA if repeated"
NFS_LOST = (
    "NFS server 10.0.0.5: not responding and not recovered since; check the server and the "
    "network path from this node (rpcinfo -p, showmount -e), then remount"
)
MCE = "uncorrected machine check: CPU 0 bank 4 status 0xa600000000020408: drain the node, reboot"
#: A kernel-log finding (xid_scan) of each domain a gate check reads, where the gate has one,
#: with the cause key xid_scan gives it.
KERNEL_FINDING = {
    "gpu": (XID79, "xid:79"),
    "storage": (NFS_LOST, STORAGE_LOST),
    "host": (MCE, UNCORRECTED_MEMORY),
}


def steps(check: dict[str, Any]) -> list[dict[str, str]]:
    return [d["next_step"] for d in check["decisions"] if d["verdict"] in ("fail", "unknown")]


def test_gpu_checks_that_did_not_answer_are_the_xid_79_the_kernel_logged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Field case T3 (a GPU fallen off the bus, nvidia-smi wedged): every NVML check times out;
    their next step is the kernel log's Xid 79 (reboot), not "a hung tool, rerun"."""
    tools = node_bin(tmp_path, "n1")
    install(XID79_WEDGED, tmp_path / "n1" / "bin")  # on top of the healthy node
    checks = by_check(gate(tmp_path, monkeypatch, tools, budget_s=2.0))
    assert checks["xid_scan"]["verdict"] == "fail" and "Xid 79" in checks["xid_scan"]["reason"]
    for name in ("gpus", "driver_stack", "ecc", "clocks", "nvlink", "fabric_manager"):
        assert checks[name]["verdict"] == "unknown", (name, checks[name]["reason"])
        for step in steps(checks[name]):
            assert step["rule"] == "node_xid_scan:lost_gpu", (name, step)
            assert step["class"] == "REBOOT" and "Xid 79" in step["cause"], (name, step)
    # the kernel log's own generic line is explained by its Xid 79 too
    assert {s["rule"] for s in steps(checks["xid_scan"])} == {"lost_gpu", "node_xid_scan:lost_gpu"}


def test_a_hung_mount_is_the_storage_client_the_kernel_log_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A required mount whose stat hangs, on a node whose kernel log shows a task hung in the NFS
    client: the mount's next step is the storage client, not "could not produce a result"."""
    overlay = tmp_path / "site.yaml"
    overlay.write_text("schema_version: 1\nname: site\nrecipe:\n  gate:\n    mounts: ['/mnt/nfs']\n")
    tools = node_bin(tmp_path, "n1")
    tools.add(
        "dmesg", Recording.of_file(CORPUS / "dmesg-xid/dmesg-nfs-server-flap-ok-then-hung-task-nfs-file-fsync-rpi3.txt")
    )
    tools.add("mountpoint", Recording(stdout=""))  # it is mounted, and its stat hangs
    tools.add("stat", Recording(stdout="", sleep_s=60))
    checks = by_check(gate(tmp_path, monkeypatch, tools, overlay=overlay, budget_s=2.0))
    assert checks["xid_scan"]["verdict"] == "warn" and "nfs client" in checks["xid_scan"]["reason"]
    assert checks["mounts"]["verdict"] == "unknown", checks["mounts"]["reason"]
    (step,) = steps(checks["mounts"])
    assert step["rule"] == "node_xid_scan:hung_task_in_storage", step
    assert "nfs client" in step["cause"] and "GPU is not implicated" in step["cause"]
    for name in ("gpus", "ecc", "nvlink"):  # a storage event explains nothing of the GPUs
        assert checks[name]["verdict"] == "pass", name


def test_the_tools_own_signature_outranks_the_nodes_other_findings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """NVML says "Driver/library version mismatch" on a node whose kernel log also shows an Xid
    79: each NVML check, the fabric manager's too, keeps the tool's own cause (reboot for the
    mismatch)."""
    tools = node_bin(tmp_path, "n1")
    install("h100_nvml_mismatch", tmp_path / "n1" / "bin")
    checks = by_check(gate(tmp_path, monkeypatch, fatal_xid(tools)))
    assert checks["xid_scan"]["verdict"] == "fail"
    for name in ("gpus", "driver_stack", "ecc", "clocks", "fabric_manager"):
        assert {s["rule"] for s in steps(checks[name])} == {"driver_library_mismatch"}, name
    # the fabric manager runs at its version, NVML is down: the GPUs' fabric state is not
    # reported (never a pass), and the next step is the mismatch, not "install the package"
    fm = checks["fabric_manager"]
    assert fm["verdict"] == "fail" and "nvidia-smi said: Failed to initialize NVML" in fm["reason"], fm


def test_a_thermal_slowdown_stays_a_cooling_matter_beside_a_lost_gpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """HW (thermal) slowdown active at idle on GPU 0 (the real H100 capture with those two
    fields set) on a node whose kernel log shows an Xid 79: the clocks decision names cooling or power
    delivery, its own cause, not the Xid."""
    text = H100["smi_q"].read_text()
    for field in ("HW Slowdown                       :", "HW Thermal Slowdown           :"):
        text = text.replace(f"{field} Not Active", f"{field} Active", 1)
    tools = fatal_xid(node_bin(tmp_path, "n1"))
    tools.add(
        "nvidia-smi", None, by_args={"-q": Recording(stdout=text), "nvlink -s": Recording.of_file(H100["nvlink"])}
    )
    checks = by_check(gate(tmp_path, monkeypatch, tools))
    assert checks["clocks"]["verdict"] == "fail", checks["clocks"]["reason"]
    (step,) = steps(checks["clocks"])
    assert not step["rule"].startswith("node_") and "cooling" in step["cause"], step


def _result(check: str, verdict: str, reason: str, evidence: str = "", cause: str | None = None) -> GateCheck:
    res = GateCheck(check)
    res.add(verdict, check, reason, cause=cause)
    if evidence:
        res.evidence.append(ToolOutput(("tool",), stdout=evidence, exit_code=1))
    return res


def test_a_data_path_failure_names_the_nodes_configuration_finding_unless_its_tool_names_the_cause() -> None:
    """The ranking is ``nvtest run``'s (playbook.diagnosis.diagnose with the node's results): a
    bandwidth below its floor beside a failing IOMMU finding of the same node is the IOMMU; a
    DCGM failure whose own words are a thermal violation stays cooling beside the same finding."""
    iommu = _result("iommu", "fail", "IOMMU translates DMA (iommu=pt not set)")
    bw = _result("nvbandwidth", "fail", "host_to_device_memcpy_ce: 21.3 GB/s < min 45 GB/s")
    dcgm = _result(
        "dcgm_diag",
        "fail",
        "dcgmi diag -r 3 failed: targeted_stress",
        evidence="GPU 2 Thermal violations totaling 12.0 seconds started at 30.0 seconds into the test",
    )
    diagnose_gate([iommu, bw, dcgm])
    assert bw.decisions[0].next_step is not None and bw.decisions[0].next_step["rule"] == "node_iommu"
    assert dcgm.decisions[0].next_step is not None and dcgm.decisions[0].next_step["rule"] == "dcgm_thermal"


def test_the_next_step_reads_the_whole_reason_where_the_line_was_cut() -> None:
    """The tool's words past the one-line bound (kept whole in the check's notes) still count."""
    words = "\n".join(f"package nvidia-driver-{i} 570.{i} differs from the fleet's 565.57.01" for i in range(40))
    res = _result(
        "driver_stack",
        "fail",
        f"nvidia-smi -q gives no reading:\n{words}\nFailed to initialize NVML: Driver/library version mismatch",
    )
    assert "mismatch" not in res.decisions[0].reason
    diagnose_gate([res])
    assert res.decisions[0].next_step is not None and res.decisions[0].next_step["rule"] == "driver_library_mismatch"


def test_a_fatal_xid_the_state_remembers_explains_when_xid_scan_did_not_run() -> None:
    """``nvtest gate --only gpus`` on a node whose state remembers an Xid 79 of this boot."""
    state = GateState(fatal_events=[{"code": 79, "pci": "0000:b3:00.0", "ts": 12.5, "verdict": "fail"}])
    gpus = _result(
        "gpus",
        "unknown",
        "nvidia-smi -q did not answer within the gate's budget (10 s): timed out; not a verdict on the node",
    )
    diagnose_gate([gpus], state)
    step = gpus.decisions[0].next_step
    assert step is not None and step["rule"] == "node_state:lost_gpu", step
    assert "the gate's state remembers" in step["cause"]


def test_every_gate_check_has_its_domains() -> None:
    """A new gate check must say what it reads, or no finding could ever explain it."""
    assert {n for n, _ in CHECKS} <= set(CHECK_DOMAINS), set(n for n, _ in CHECKS) - set(CHECK_DOMAINS)
    assert set(BENEATH) <= set(CHECK_DOMAINS)


@pytest.mark.parametrize("check", [*(n for n, _ in CHECKS), CONFIG_CHECK])
def test_every_check_gets_a_next_step_and_no_generic_one_where_the_node_explains_it(check: str) -> None:
    """Walks every gate check: a bad decision naming only a symptom (it did not answer; it
    failed with no words of a cause) always has a next step; beside a kernel-log finding of a
    domain the check reads, that step is the finding's, never the generic or "rerun" one."""
    symptoms = [
        ("unknown", f"{check} did not answer within the gate's budget (10 s); not a verdict on the node"),
        ("fail", f"{check}: the check failed"),
    ]
    alone = [_result(check, v, r) for v, r in symptoms]
    diagnose_gate(alone)
    for res in alone:
        assert res.decisions[0].next_step is not None and res.decisions[0].next_step["action"], check
    for domain in sorted(CHECK_DOMAINS.get(check, frozenset()) & set(KERNEL_FINDING)):
        if check == "xid_scan":
            continue  # the kernel log's own findings: walked by the tests above
        finding, key = KERNEL_FINDING[domain]
        results = [_result("xid_scan", "fail", finding, cause=key), *(_result(check, v, r) for v, r in symptoms)]
        diagnose_gate(results)
        for res in results[1:]:
            step = res.decisions[0].next_step
            assert step is not None and step["rule"].startswith("node_xid_scan:"), (check, domain, step)
            assert step["rule"].split(":", 1)[1] not in WEAK, (check, domain, step)


def test_a_fabric_manager_probe_that_did_not_answer_is_a_hung_tool_not_a_missing_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """nvidia-smi hangs on a node whose kernel log names nothing: the fabric-manager probe (it
    calls nvidia-smi) did not answer. Its next step is the hung tool (the decision's
    transport:timeout key), never "install the fabric manager package" read from the probe's
    own name (nv-fabricmanager) in the reason."""
    checks = by_check(gate(tmp_path, monkeypatch, hung(node_bin(tmp_path, "n1"), "nvidia-smi", 60), budget_s=2.0))
    fm = checks["fabric_manager"]
    assert fm["verdict"] == "unknown", fm["reason"]
    assert {d["cause"] for d in fm["decisions"]} == {"transport:timeout"}
    assert {s["rule"] for s in steps(fm)} == {"probe_timeout"}, steps(fm)


def _first_bad_step(check: dict[str, Any]) -> dict[str, str]:
    bad = [d for d in check["decisions"] if d["verdict"] in ("fail", "unknown")]
    assert bad and bad[0]["next_step"], check
    return bad[0]["next_step"]


def test_a_gpu_count_above_the_named_sku_is_the_wrong_sku_not_a_lost_gpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gpus = by_check(gate(tmp_path, monkeypatch, node_bin(tmp_path, "n1"), sku="cpu-generic"))["gpus"]
    assert "8 GPUs visible to nvidia-smi, SKU cpu-generic expects 0" in gpus["reason"], gpus
    step = _first_bad_step(gpus)
    assert step["class"] == "CONFIG" and "RMA" not in step["action"], step


@pytest.mark.parametrize(
    "smi",
    [None, Recording(stdout="", stderr="sh: 1: nvidia-smi: not found\n", exit_code=127)],
    ids=["not-on-path", "exit-127"],
)
def test_nvidia_smi_not_installed_is_install_the_driver(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, smi: Recording | None
) -> None:
    tools = node_bin(tmp_path, "n1")
    if smi is None:
        tools.add_missing("nvidia-smi")
    else:
        tools.add("nvidia-smi", smi)
    step = _first_bad_step(by_check(gate(tmp_path, monkeypatch, tools))["gpus"])
    assert step["class"] == "CONFIG" and "install the NVIDIA driver" in step["action"], step


def test_gpus_expected_but_none_on_the_bus_is_the_lost_gpu_rule(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tools = StandInTools(tmp_path / "bare" / "bin")  # this machine's lspci: no NVIDIA function
    tools.add_missing("nvidia-smi")
    tools.add_missing("scontrol")
    gpus = by_check(gate(tmp_path, monkeypatch, tools, expect_gpus=8))["gpus"]
    assert "0 NVIDIA GPUs on the bus; --expect-gpus 8 expects 8" in gpus["reason"], gpus
    step = _first_bad_step(gpus)
    assert step["class"] == "REBOOT" and "RMA" in step["action"], step


def test_a_full_disk_is_free_space(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    overlay = tmp_path / "site.yaml"
    overlay.write_text("schema_version: 1\nname: site\nrecipe:\n  gate:\n    disk_free_gib: {'/': 1000000}\n")
    disk = by_check(gate(tmp_path, monkeypatch, node_bin(tmp_path, "n1"), overlay=overlay))["disk"]
    assert disk["verdict"] == "fail", disk
    step = _first_bad_step(disk)
    assert step["class"] == "CONFIG" and "free space" in step["action"], step
