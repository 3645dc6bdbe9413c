"""``nvtest gate`` on simulated nodes: a healthy H100 from recorded real outputs, each fault,
a hung tool, and the rules that hold for every check (fail closed, unknown is not pass,
every decision names its value, threshold and source)."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from nvtest.history import HistoryStore
from nvtest.history import queries as q
from nvtest.ops.gate.checks_gpu import GPU_CHECKS
from nvtest.ops.gate.engine import CHECKS, GateOptions, run_gate
from nvtest.testing.standin import Recording, StandInTools
from nvtest.testing.standin_nodes import FAULTS, healthy_h100, hung, node_bin
from tests.conftest import REPO, run_nvtest

SCHEMA = json.loads((REPO / "docs" / "gate.schema.json").read_text())
GPUD_SYSFS = REPO / "tests" / "data" / "sysfs" / "class-infiniband-h100"


def gate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tools: StandInTools, **kw: Any) -> dict[str, Any]:
    """One gate of node ``n1`` whose PATH starts with ``tools`` (state and history in tmp_path)."""
    monkeypatch.setenv("PATH", tools.path_prefix())
    opts = GateOptions(node="n1", state_dir=tmp_path / "state", history=str(tmp_path / "h.sqlite"), **kw)
    doc = run_gate(opts)
    jsonschema.validate(doc, SCHEMA)
    return doc


def by_check(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["check"]: c for c in doc["checks"]}


def test_a_healthy_h100_passes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    doc = gate(tmp_path, monkeypatch, node_bin(tmp_path, "n1"))
    assert doc["verdict"] == "pass" and doc["exit_code"] == 0
    assert doc["sku"]["name"] == "h100-sxm-80gb" and doc["sku"]["how"].startswith("matched")
    checks = by_check(doc)
    assert [*(n for n, _ in CHECKS), "configuration"] == list(checks)
    assert checks["configuration"]["verdict"] == "pass" and doc["configuration"]["ok"]
    for name in (
        "gpus",
        "driver_stack",
        "ecc",
        "clocks",
        "pcie_link",
        "nvlink",
        "fabric_manager",
        "xid_scan",
        "ib_ports",
        "disk",
        "memory",
    ):
        assert checks[name]["verdict"] == "pass", (name, checks[name]["reason"])
    assert {checks[n]["verdict"] for n in ("mounts", "services")} == {"skip"}  # none configured
    assert checks["gpus"]["decisions"][0]["source"] == "profile:h100-sxm-80gb expect.gpus"
    assert checks["gpus"]["decisions"][0]["value"] == 8


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_each_fault_fails_its_check_with_the_next_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fault: str
) -> None:
    inject, check = FAULTS[fault]
    doc = gate(tmp_path, monkeypatch, inject(node_bin(tmp_path, "n1")))
    assert doc["verdict"] == "fail" and doc["exit_code"] == 1
    bad = by_check(doc)[check]
    assert bad["verdict"] == "fail", bad
    fails = [d for d in bad["decisions"] if d["verdict"] == "fail"]
    assert all(d["next_step"] and d["next_step"]["action"] for d in fails)
    expected_class = {
        "lost_gpu": "REBOOT",
        "fatal_xid": "REBOOT",
        "ib_port_down": "CABLING",
        "recovery_action": "RESET",
    }[fault]
    assert fails[0]["next_step"]["class"] == expected_class


def test_a_lost_gpu_names_the_bus_and_nvidia_smis_words(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    doc = gate(tmp_path, monkeypatch, FAULTS["lost_gpu"][0](node_bin(tmp_path, "n1")))
    reasons = " | ".join(d["reason"] for d in by_check(doc)["gpus"]["decisions"])
    assert "8 NVIDIA GPU(s) expected (PCI bus: 8 x GH100 [H100 SXM5 80GB]; SKU h100-sxm-80gb expects 8)" in reasons
    assert "nvidia-smi reports 0" in reasons
    assert "GPU 0000:09:00.0: nvidia-smi cannot get a device handle" in reasons
    assert doc["sku"]["name"] == "h100-sxm-80gb"  # judged against the closest profile, not skipped


def test_a_fatal_xid_stays_until_cleared(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tools = FAULTS["fatal_xid"][0](node_bin(tmp_path, "n1"))
    first = by_check(gate(tmp_path, monkeypatch, tools))["xid_scan"]
    assert first["verdict"] == "fail" and "fell off the bus (Xid 79)" in first["reason"]
    again = by_check(gate(tmp_path, monkeypatch, tools))["xid_scan"]  # no new line, still unresolved
    assert again["verdict"] == "fail" and "not cleared" in again["reason"]
    cleared = gate(tmp_path, monkeypatch, tools, clear_xids=True)
    assert by_check(cleared)["xid_scan"]["verdict"] == "pass"
    assert any("cleared 1 fatal GPU event" in w for w in cleared["warnings"])
    with HistoryStore(f"sqlite:///{tmp_path / 'h.sqlite'}") as store:
        kinds = [e.kind for e in q.timeline(store, "n1")]
    assert kinds == ["gate", "gate", "gate", "xid_cleared"]


def test_new_kernel_lines_only_since_the_cursor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from nvtest.ops.gate.checks_node import new_kernel_lines

    text = (REPO / "tests/data/corpus/dmesg-xid/fallen-off-bus-multiline-no-xid-driver570.txt").read_text()
    new, last, stamped = new_kernel_lines(text, None)
    assert stamped and last == 1843.439669 and new.count("NVRM") == 5
    assert new_kernel_lines(text, 1843.308145)[0].count("fallen off") == 0  # its continuation lines too
    assert new_kernel_lines(text, 1843.439662)[0].count("NVRM") == 1


def test_a_hung_tool_is_unknown_within_the_budget(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tools = hung(node_bin(tmp_path, "n1"), "nvidia-smi", 120)
    t0 = time.monotonic()
    doc = gate(tmp_path, monkeypatch, tools, budget_s=2.0, drain=True)
    wall = time.monotonic() - t0
    assert doc["duration_s"] <= 2.0, doc["duration_s"]  # the checks ended within the budget
    assert wall < 2.0 + 10, wall  # and the gate never waited for the hung tool (it sleeps 120 s)
    checks = by_check(doc)
    assert checks["gpus"]["verdict"] == "unknown"
    assert "nvidia-smi -q did not answer within the gate's budget (2 s)" in checks["gpus"]["reason"]
    assert checks["disk"]["verdict"] == "pass" and checks["ib_ports"]["verdict"] == "pass"  # the rest answered
    assert doc["verdict"] == "unknown" and doc["exit_code"] == 0
    assert doc["slurm"]["drain"] is None  # an unknown never drains by itself
    strict = gate(tmp_path, monkeypatch, tools, budget_s=2.0, strict=True)
    assert strict["exit_code"] == 1


def test_no_check_passes_when_no_tool_answers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every check, walked: with every tool hung, none may say pass."""
    tools = node_bin(tmp_path, "n1")
    for tool in (
        "nvidia-smi",
        "lspci",
        "ibstat",
        "dmesg",
        "journalctl",
        "systemctl",
        "cat",
        "df",
        "ls",
        "mountpoint",
        "stat",
    ):
        hung(tools, tool, 120)
    doc = gate(tmp_path, monkeypatch, tools, budget_s=2.0)
    assert doc["checks"][-1]["check"] == "configuration"  # judges the site's files, not the node
    for c in doc["checks"][:-1]:
        assert c["verdict"] in ("unknown", "skip"), (c["check"], c["verdict"], c["reason"])
        if c["verdict"] == "skip":  # only where nothing is configured to be judged
            assert c["check"] in ("mounts", "services") and "configured" in c["reason"]


def test_gpu_checks_fail_closed_when_nvidia_smi_is_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every GPU check that reads nvidia-smi, walked: the bus shows GPUs, so no reading is a fail."""
    tools = node_bin(tmp_path, "n1")
    tools.add_missing("nvidia-smi")
    checks = by_check(gate(tmp_path, monkeypatch, tools))
    for name, _ in GPU_CHECKS:
        if name == "fabric_manager":
            continue  # the fabric manager's own state, not a GPU reading
        assert checks[name]["verdict"] == "fail", (name, checks[name]["reason"])
        assert "NVIDIA GPU(s) on the PCI bus" in checks[name]["reason"]


def test_no_sku_and_no_lspci_leaves_the_fabric_manager_unknown_not_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing says the node has no NVSwitch (no profile matched, lspci unreadable): not a skip."""
    tools = node_bin(tmp_path, "n1")
    tools.add_missing("nvidia-smi")
    tools.add_missing("lspci")
    doc = gate(tmp_path, monkeypatch, tools)
    assert doc["sku"]["name"] is None
    fm = by_check(doc)["fabric_manager"]
    assert fm["verdict"] == "unknown", fm
    assert "no SKU profile" in fm["reason"] and "lspci" in fm["reason"]


def test_every_decision_names_value_threshold_and_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for fault in sorted(FAULTS):
        run_dir = tmp_path / fault
        doc = gate(run_dir, monkeypatch, FAULTS[fault][0](node_bin(run_dir, "n1")))
        for c in doc["checks"]:
            for d in c["decisions"]:
                if d["verdict"] in ("fail", "warn", "pass"):
                    assert d["source"], (c["check"], d)
                    assert d["threshold"] or c["check"] in ("driver_stack",), (c["check"], d)
                if d["verdict"] in ("fail", "unknown"):
                    assert d["next_step"], (c["check"], d)


def test_ib_counters_rates_since_the_last_gate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sysfs = tmp_path / "sys"
    shutil.copytree(GPUD_SYSFS, sysfs / "class" / "infiniband")
    tools = node_bin(tmp_path, "n1")
    first = by_check(gate(tmp_path, monkeypatch, tools, sysfs=sysfs))["ib_ports"]
    assert first["verdict"] == "pass" and any("rates from the next gate on" in n for n in first["notes"])
    flap = sysfs / "class/infiniband/mlx5_4/ports/1/counters/link_downed"
    flap.write_text(str(int(flap.read_text()) + 2) + "\n")  # the link went down twice meanwhile
    second = by_check(gate(tmp_path, monkeypatch, tools, sysfs=sysfs))["ib_ports"]
    assert second["verdict"] == "fail"
    assert "mlx5_4 port 1: link went down 2 time(s) since the last gate" in second["reason"]
    assert {m["name"] for m in second["metrics"]} >= {"link_downed_per_h", "port_rcv_errors_per_h"}


def test_site_recipe_mounts_services_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    overlay = tmp_path / "site.yaml"
    overlay.write_text(
        "schema_version: 1\nname: site\nrecipe:\n  gate:\n"
        f"    disk_free_gib: {{'/': 0.001, '{tmp_path}/nope': 1}}\n"
        "    memory_available_gib: 100000\n"
        f"    mounts: ['/', '{tmp_path}']\n"
        "    services: [munge]\n"
    )
    tools = node_bin(tmp_path, "n1")
    tools.add(
        "systemctl",
        None,
        by_args={
            "is-active nvidia-fabricmanager": Recording(stdout="active\n"),
            "is-active munge": Recording(stdout="inactive\n", exit_code=3),
        },
    )
    checks = by_check(gate(tmp_path, monkeypatch, tools, overlay=overlay))
    disk = {d["what"]: d for d in checks["disk"]["decisions"]}
    assert disk["free:/"]["verdict"] == "pass" and disk[f"free:{tmp_path}/nope"]["verdict"] == "fail"
    assert disk["free:/"]["source"] == f"overlay:{overlay} recipe.gate disk_free_gib"
    assert (
        checks["memory"]["verdict"] == "fail"
        and checks["memory"]["decisions"][0]["threshold"] == ">= 100000 GiB available"
    )
    mounts = {d["what"]: d["verdict"] for d in checks["mounts"]["decisions"]}
    assert mounts == {"/": "pass", str(tmp_path): "fail"}
    assert checks["services"]["verdict"] == "fail" and "service munge is inactive" in checks["services"]["reason"]


def test_the_cli_prints_json_a_summary_and_the_hook_exit_code(tmp_path: Path) -> None:
    tools = FAULTS["ib_port_down"][0](node_bin(tmp_path, "n1"))
    env = {"PATH": tools.path_prefix()}
    args = ("gate", "--node", "n1", "--mode", "prolog", "--state-dir", str(tmp_path / "s"), "--history", "off")
    proc = run_nvtest(*args, env=env, timeout=120)
    doc = json.loads(proc.stdout)
    jsonschema.validate(doc, SCHEMA)
    assert proc.returncode == 1 and doc["verdict"] == "fail" and doc["mode"] == "prolog"
    assert proc.stderr.startswith("nvtest gate n1: FAIL in ") and "ib_ports fail: 6 of 8 ports" in proc.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text("schema_version: 1\nname: bad\nrecipe:\n  gate:\n    mounts: 7\n")
    hook = run_nvtest(*args, "--overlay", str(bad), env=env, timeout=120)
    # a broken key leaves unknown only the check that reads it: the down ports still fail
    hook_doc = json.loads(hook.stdout)
    assert hook.returncode == 1 and hook_doc["verdict"] == "fail", hook.stderr
    assert by_check(hook_doc)["ib_ports"]["verdict"] == "fail"
    assert f"{bad}:5: recipe.gate.mounts" in by_check(hook_doc)["mounts"]["reason"]
    assert "configuration error" in hook.stderr and "recipe.gate.mounts" in hook.stderr
    # a file that does not read says nothing of the site's intent: ib_ports reads recipe.gate
    # (which HCAs), so it is not judged; a config error never drains
    unread = tmp_path / "unread.yaml"
    unread.write_text("schema_version: 1\nname: bad\nrecipe:\n  gate: {hcas: [mlx5_0\n")
    hook = run_nvtest(*args, "--overlay", str(unread), env=env, timeout=120)
    hook_doc = json.loads(hook.stdout)
    assert hook.returncode == 0 and hook_doc["verdict"] == "unknown", hook.stderr
    assert f"{unread}:5: invalid YAML" in by_check(hook_doc)["ib_ports"]["reason"]
    healthy = {"PATH": node_bin(tmp_path / "h", "n1").path_prefix()}
    manual = run_nvtest(
        "gate",
        "--node",
        "n1",
        "--history",
        "off",
        "--state-dir",
        str(tmp_path / "s"),
        "--overlay",
        str(bad),
        env=healthy,
        timeout=120,
    )
    assert manual.returncode == 2 and "recipe.gate.mounts" in manual.stderr


def test_a_history_url_without_its_driver_is_a_warning_not_a_crash(tmp_path: Path) -> None:
    """In a Prolog a crash is a non-zero exit (a drain): the gate still prints its verdict."""
    env = {"PATH": node_bin(tmp_path, "n1").path_prefix()}
    proc = run_nvtest(
        "gate",
        "--node",
        "n1",
        "--state-dir",
        str(tmp_path / "s"),
        "--history",
        "mysql://op@db/fleet",
        env=env,
        timeout=120,
    )
    doc = json.loads(proc.stdout)
    jsonschema.validate(doc, SCHEMA)
    assert proc.returncode == 0 and doc["verdict"] == "pass", proc.stderr
    assert "Traceback" not in proc.stderr
    assert any("history not recorded" in w and "mysql://op@db/fleet" in w for w in doc["warnings"]), doc["warnings"]


def test_unknown_sources_and_bad_options_exit_2(tmp_path: Path) -> None:
    proc = run_nvtest("gate", "--check", "nope", "--history", "off", timeout=60)
    assert proc.returncode == 2 and "unknown check 'nope'" in proc.stderr


def test_healthy_from_real_outputs_has_no_invented_recording() -> None:
    """The stand-ins of the healthy node replay corpus files only (and systemctl's one word)."""
    tools = healthy_h100(StandInTools(Path("/tmp") / f"nvtest-probe-{time.time_ns()}"))
    recorded = sorted(p.name for p in tools.bin_dir.joinpath(".recordings").iterdir() if p.suffix == ".out")
    shutil.rmtree(tools.bin_dir, ignore_errors=True)
    assert recorded == sorted(
        [
            "ibstat.default.out",
            "lspci.default.out",
            "nv-fabricmanager.default.out",
            "nvidia-smi.0.out",
            "nvidia-smi.1.out",
            "systemctl.0.out",
        ]
    )


def test_the_drain_reason_is_nvtest_check_reason_on_one_short_line() -> None:
    from nvtest.ops.gate.slurm import REASON_LIMIT, gate_reason

    r = gate_reason("gpus", 'lspci lists 8 NVIDIA GPUs but "nvidia-smi" sees 7\nGPU lost ' + "x" * 300)
    assert r.startswith("nvtest: gpus lspci lists 8") and len(r) == REASON_LIMIT
    assert '"' not in r and "\n" not in r


def test_two_gates_ending_together_merge_their_state(tmp_path: Path) -> None:
    from nvtest.ops.gate.state import load_state, save_state

    a, b = load_state(tmp_path, "n1"), load_state(tmp_path, "n1")
    a.kernel_log_ts, b.kernel_log_ts = 100.0, 50.0
    a.fatal_events = [{"code": 79, "pci": "0000:b3:00.0", "ts": 90.0}]
    b.fatal_events = [{"code": 48, "pci": "0000:18:00.0", "ts": 40.0}]
    save_state(tmp_path, "n1", a)
    save_state(tmp_path, "n1", b)  # the Prolog ends after the health check: nothing lost
    merged = load_state(tmp_path, "n1")
    assert merged.kernel_log_ts == 100.0
    assert sorted(e["code"] for e in merged.fatal_events) == [48, 79]
    merged.fatal_events = []
    save_state(tmp_path, "n1", merged, cleared=True)
    assert load_state(tmp_path, "n1").fatal_events == []


def test_ib_ports_skip_needs_the_bus_to_prove_no_rdma_nic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail closed: no ibstat and an empty (or absent) /sys/class/infiniband prove nothing by
    themselves; the skip needs lspci to show no Mellanox network function, and a bus that
    shows one fails."""
    empty = tmp_path / "no-sys"  # the sysfs root does not exist
    bare = StandInTools(tmp_path / "bare" / "bin")  # this machine's own lspci: no Mellanox function
    bare.add_missing("ibstat")
    got = by_check(gate(tmp_path, monkeypatch, bare, sysfs=empty))["ib_ports"]
    assert got["verdict"] == "skip" and "lspci lists no Mellanox (15b3) network function" in got["reason"], got
    unread = StandInTools(tmp_path / "unread" / "bin")
    unread.add_missing("ibstat")
    unread.add_missing("lspci")
    got = by_check(gate(tmp_path, monkeypatch, unread, sysfs=empty))["ib_ports"]
    assert got["verdict"] == "unknown" and "not proven" in got["reason"], got
    nic = StandInTools(tmp_path / "nic" / "bin")
    nic.add_missing("ibstat")
    nic.add(
        "lspci",
        Recording(stdout="0000:18:00.0 Infiniband controller: Mellanox Technologies MT2910 Family [ConnectX-7]\n"),
    )
    got = by_check(gate(tmp_path, monkeypatch, nic, sysfs=empty))["ib_ports"]
    assert (
        got["verdict"] == "fail" and "lspci lists 1 Mellanox (15b3) network function(s): 0000:18:00.0" in got["reason"]
    ), got


def test_the_fabric_manager_proves_every_gpus_fabric_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Healthy passes because nvidia-smi -q shows every GPU Completed/Success; the same node
    whose -q has no Fabric section (driver 565, which has it) is unknown, not pass."""
    healthy = by_check(gate(tmp_path / "ok", monkeypatch, node_bin(tmp_path / "ok", "n1")))["fabric_manager"]
    assert healthy["verdict"] == "pass"
    assert any("fabric state Completed/Success in nvidia-smi -q" in n for n in healthy["notes"]), healthy["notes"]
    tools = node_bin(tmp_path, "n1")
    q = (REPO / "tests/data/corpus/nvidia-smi/q-h100-sxm-x8-driver565-all-gpus.txt").read_text()
    no_fabric = "\n".join(ln for ln in q.splitlines() if ln.strip().split(" ")[0] not in ("Fabric", "State", "Status"))
    tools.add("nvidia-smi", None, by_args={"-q": Recording(stdout=no_fabric)})
    fm = by_check(gate(tmp_path, monkeypatch, tools))["fabric_manager"]
    assert fm["verdict"] == "unknown", fm
    assert "no recording for: --query-gpu" in fm["reason"] and "nvidia-smi -q lists no GPU fabric state" in fm["reason"]
