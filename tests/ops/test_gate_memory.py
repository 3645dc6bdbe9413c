"""The gate's memory (its state file) is validated and losing it is loud; a node whose GPUs
vanished from the bus is judged against a second witness; operator requests are manual only.

Stand-in nodes replay recorded real outputs (nvtest/testing/standin_nodes.py); the kernel log of a node
whose ring buffer no longer holds the Xid is this machine's own dmesg without its first
lines (a real log that does not reach back to the boot, as a wrapped ring buffer is).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from nvtest.history import HistoryStore
from nvtest.ops.gate.state import load_state, read_state, save_state, state_path
from nvtest.ops.gate.witnesses import gres_gpus
from nvtest.testing.standin import Recording, StandInTools
from nvtest.testing.standin_nodes import FAULTS, node_bin
from tests.ops.test_gate import by_check, gate

#: What a lost state file looks like: truncated by a crash, zeroed by a disk, valid JSON of
#: the wrong shape or types.
BROKEN = {
    "empty": b"",
    "zeroed": b"\0" * 512,
    "list": b"[]",
    "events_not_a_list": b'{"fatal_events": 5}',
    "cut": b'{"version": 1, "boot_id": "0c1f',
    "event_without_code": b'{"fatal_events": [{"pci": "0000:b3:00.0"}]}',
}
#: ``scontrol show node -o`` of Slurm 22.05.8 (tests/transports/slurm/test_slurm_parse.py),
#: the GPU node's line with this test's node name.
SCONTROL_N1 = (
    "NodeName=n1 Arch=x86_64 AvailableFeatures=h100,ib ActiveFeatures=h100,ib Gres=gpu:h100:8(S:0-1) "
    "OS=Linux 5.15.0 #1 SMP State=IDLE ThreadsPerCore=2 Partitions=gpu\n"
)


def _wrapped_dmesg() -> Recording:
    """This machine's dmesg without its first half: no line from the first seconds of the boot."""
    real = shutil.which("dmesg", path="/usr/bin:/bin:/usr/sbin:/sbin")  # not a stand-in on PATH
    text = subprocess.run([real or "dmesg"], capture_output=True, text=True, check=False).stdout
    lines = text.splitlines()
    tail = [ln for ln in lines[len(lines) // 2 :] if not ln.startswith("[    0.")]
    if not tail:
        pytest.skip("this machine's dmesg is unreadable or too short to stand for a wrapped ring buffer")
    return Recording(stdout="\n".join(tail) + "\n")


def _break(tmp_path: Path, content: bytes, *, keep_prev: bool = False) -> Path:
    path = state_path(tmp_path / "state", "n1")
    path.write_bytes(content)
    if not keep_prev:
        path.with_name(path.name + ".prev").unlink(missing_ok=True)
    return path


@pytest.mark.parametrize("kind", sorted(BROKEN))
def test_a_broken_state_file_is_read_as_unreadable_never_a_crash(tmp_path: Path, kind: str) -> None:
    path = state_path(tmp_path, "n1")
    path.write_bytes(BROKEN[kind])
    got = read_state(path)
    assert got.state is None and got.why and got.why != "missing", got
    st = load_state(tmp_path, "n1")
    assert st.sku_unknown and st.fatal_events_unknown and st.kernel_log_ts is None
    assert str(path) in st.warnings[0] and got.why in st.warnings[0]
    assert read_state(tmp_path / "nothing.json").missing and load_state(tmp_path, "n2").warnings == []  # a first gate


def test_a_failed_write_leaves_no_temporary_file_and_the_old_state(tmp_path: Path) -> None:
    st = load_state(tmp_path, "n1")
    st.sku = "h100-sxm-80gb"
    save_state(tmp_path, "n1", st)
    save_state(tmp_path, "n1", load_state(tmp_path, "n1"))
    assert read_state(state_path(tmp_path, "n1").with_name("gate-n1.json.prev")).state is not None
    killed = state_path(tmp_path, "n1").with_name("gate-n1.json.tmp4242")
    killed.write_bytes(b'{"boot')  # a writer killed mid-write
    save_state(tmp_path, "n1", load_state(tmp_path, "n1"))
    assert not killed.exists()
    state_path(tmp_path, "n1").unlink()  # gone, but its previous generation is there: not a first gate
    back = load_state(tmp_path, "n1")
    assert back.sku == "h100-sxm-80gb" and "missing, but its previous generation exists" in back.warnings[0]
    other = tmp_path / "dir-in-the-way"
    state_path(other, "n1").mkdir(parents=True)  # the rename onto it fails for real
    with pytest.raises(OSError):
        save_state(other, "n1", load_state(tmp_path, "n1"))
    assert not [p for p in other.iterdir() if ".tmp" in p.name]
    assert load_state(tmp_path, "n1").sku == "h100-sxm-80gb"


@pytest.mark.parametrize("kind", sorted(BROKEN))
def test_a_truncated_state_keeps_the_uncleared_xid_failing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """The kernel log still holds the Xid 79: read again from the boot's beginning, it fails again."""
    tools = FAULTS["fatal_xid"][0](node_bin(tmp_path, "n1"))
    assert by_check(gate(tmp_path, monkeypatch, tools))["xid_scan"]["verdict"] == "fail"
    path = _break(tmp_path, BROKEN[kind])
    doc = gate(tmp_path, monkeypatch, tools)
    xid = by_check(doc)["xid_scan"]
    assert xid["verdict"] == "fail" and "fell off the bus (Xid 79)" in xid["reason"], xid
    assert any(str(path) in w and "no good previous generation" in w for w in doc["warnings"]), doc["warnings"]
    again = by_check(gate(tmp_path, monkeypatch, tools))["xid_scan"]  # the rewritten state remembers it
    assert again["verdict"] == "fail" and "not cleared" in again["reason"]


def test_a_wrong_shape_state_uses_the_previous_generation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tools = FAULTS["fatal_xid"][0](node_bin(tmp_path, "n1"))
    gate(tmp_path, monkeypatch, tools)
    gate(tmp_path, monkeypatch, tools)  # a second save: the first is now the previous generation
    _break(tmp_path, BROKEN["list"], keep_prev=True)
    tools.add("dmesg", _wrapped_dmesg())  # the Xid is gone from the log: only the memory has it
    doc = gate(tmp_path, monkeypatch, tools)
    xid = by_check(doc)["xid_scan"]
    assert xid["verdict"] == "fail" and "not cleared" in xid["reason"], xid
    assert any("gate-n1.json.prev" in w and "JSON list" in w for w in doc["warnings"]), doc["warnings"]


def test_a_lost_memory_the_log_cannot_rebuild_is_unknown_until_cleared(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tools = FAULTS["fatal_xid"][0](node_bin(tmp_path, "n1"))
    gate(tmp_path, monkeypatch, tools)
    _break(tmp_path, BROKEN["events_not_a_list"])
    tools.add("dmesg", _wrapped_dmesg())
    first = gate(tmp_path, monkeypatch, tools, mode="prolog")
    xid = by_check(first)["xid_scan"]
    assert xid["verdict"] == "unknown" and first["verdict"] != "pass", xid
    assert "fatal GPU events of this boot not cleared before are unknown" in xid["reason"]
    assert any("fatal_events: Input should be a valid list" in w for w in first["warnings"])
    assert first["exit_code"] == 0  # unknown in a hook: not a drain by itself
    refused = gate(tmp_path, monkeypatch, tools, mode="prolog", clear_xids=True)  # unattended: refused
    assert by_check(refused)["xid_scan"]["verdict"] == "unknown"
    assert any("--clear-xids refused in --mode prolog" in w for w in refused["warnings"])
    cleared = gate(tmp_path, monkeypatch, tools, clear_xids=True)  # an operator, after checking
    assert by_check(cleared)["xid_scan"]["verdict"] == "pass"
    with HistoryStore(f"sqlite:///{tmp_path / 'h.sqlite'}") as store:
        from nvtest.history import queries as q

        assert [e.kind for e in q.timeline(store, "n1")].count("xid_cleared") == 1  # the refused one is not recorded


def _no_gpu_node(tmp_path: Path, scontrol: Recording | None) -> StandInTools:
    """This machine's lspci (no NVIDIA function), no nvidia-smi, a stand-in scontrol."""
    tools = StandInTools(tmp_path / "bare" / "bin")
    tools.add_missing("nvidia-smi")
    if scontrol is None:
        tools.add_missing("scontrol")
    else:
        tools.add("scontrol", None, by_args={"show node -o n1": scontrol})
    return tools


def test_gres_counts() -> None:
    assert gres_gpus("gpu:h100:8(S:0-1)") == 8 and gres_gpus("gpu:8") == 8
    assert gres_gpus("gpu:a100:4(S:0),gpu:h100:4(S:1)") == 8
    assert gres_gpus("(null)") is None and gres_gpus("shard:8") is None


def test_gpus_gone_from_the_bus_fail_on_slurms_word(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    doc = gate(tmp_path, monkeypatch, _no_gpu_node(tmp_path, Recording(stdout=SCONTROL_N1)))
    gpus = by_check(doc)["gpus"]
    assert gpus["verdict"] == "fail", gpus
    assert "0 NVIDIA GPUs on the bus; Slurm Gres=gpu:h100:8(S:0-1) expects 8" in gpus["reason"]
    assert doc["sku"]["name"] is None and doc["sku"]["how"].startswith("witness: lspci lists no NVIDIA GPU")
    assert doc["sku"]["name"] != "cpu-generic" and doc["verdict"] == "fail"


def test_gpus_gone_from_the_bus_fail_on_the_historys_word(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert gate(tmp_path, monkeypatch, node_bin(tmp_path, "n1"))["sku"]["name"] == "h100-sxm-80gb"
    for p in (tmp_path / "state").iterdir():
        p.unlink()  # the node was reinstalled: no saved state
    monkeypatch.undo()  # the H100 stand-ins off PATH: this machine's bus, without a GPU
    doc = gate(tmp_path, monkeypatch, _no_gpu_node(tmp_path, None))
    gpus = by_check(doc)["gpus"]
    assert gpus["verdict"] == "fail", gpus
    assert "the history's last SKU for this node, h100-sxm-80gb, expects 8" in gpus["reason"]


def test_no_gpu_and_no_witness_is_cpu_generic_but_a_lost_sku_is_unknown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tools = _no_gpu_node(tmp_path, None)
    kw: dict[str, Any] = {}  # a fresh history: it knows no SKU of this node
    first = gate(tmp_path, monkeypatch, tools, **kw)
    assert first["sku"]["name"] == "cpu-generic" and by_check(first)["gpus"]["verdict"] == "skip"
    _break(tmp_path, BROKEN["zeroed"])
    lost = gate(tmp_path, monkeypatch, tools, **kw)
    assert lost["sku"]["name"] is None and lost["sku"]["how"].startswith("unknown")
    assert by_check(lost)["gpus"]["verdict"] == "unknown" and "--forget-sku" in by_check(lost)["gpus"]["reason"]
    assert by_check(gate(tmp_path, monkeypatch, tools, **kw))["gpus"]["verdict"] == "unknown"  # stays loud
    forgot = gate(tmp_path, monkeypatch, tools, forget_sku=True, **kw)  # the operator says: a CPU node now
    assert forgot["sku"]["name"] == "cpu-generic" and any("--forget-sku" in w for w in forgot["warnings"])


def test_operator_options_in_a_hook_are_refused_not_an_exit_2(tmp_path: Path) -> None:
    from tests.conftest import run_nvtest

    env = {"PATH": node_bin(tmp_path, "n1").path_prefix()}
    args = (
        "gate",
        "--node",
        "n1",
        "--state-dir",
        str(tmp_path / "s"),
        "--history",
        "off",
        "--clear-xids",
        "--forget-sku",
    )
    hook = run_nvtest(*args, "--mode", "epilog", env=env, timeout=120)
    assert hook.returncode == 0, hook.stderr
    assert "--clear-xids refused in --mode epilog" in hook.stderr and "--forget-sku refused" in hook.stderr
    manual = run_nvtest(*args, env=env, timeout=120)
    assert manual.returncode == 0 and "forgot this node's SKU (h100-sxm-80gb)" in manual.stderr, manual.stderr


def test_a_recovery_action_in_nvidia_smi_fails_the_gpus_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``GPU Recovery Action : Reset`` is what nvidia-smi -q showed on a node after Xid 154 (PF
    FLR, corpus INDEX.md): the healthy H100's -q with GPU 0's line as that node printed it."""
    from nvtest.testing.standin_nodes import H100

    text = H100["smi_q"].read_text()
    i = text.index("GPU Recovery Action")
    text = text[:i] + "GPU Recovery Action                   : Reset" + text[text.index("\n", i) :]
    tools = node_bin(tmp_path, "n1")
    tools.add(
        "nvidia-smi", None, by_args={"-q": Recording(stdout=text), "nvlink -s": Recording.of_file(H100["nvlink"])}
    )
    gpus = by_check(gate(tmp_path, monkeypatch, tools))["gpus"]
    bad = [d for d in gpus["decisions"] if d["verdict"] == "fail"]
    assert gpus["verdict"] == "fail" and len(bad) == 1, gpus
    assert "GPU 00000000:18:00.0: the driver asks for recovery action 'Reset'" in bad[0]["reason"]
    assert bad[0]["next_step"]["class"] == "RESET"


def test_a_hung_scontrol_is_a_note_within_the_budget(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tools = _no_gpu_node(tmp_path, Recording(stdout=SCONTROL_N1, sleep_s=120))
    doc = gate(tmp_path, monkeypatch, tools, budget_s=2.0)
    assert doc["duration_s"] <= 2.0 and doc["total_s"] < 6, doc["total_s"]
    assert doc["sku"]["name"] == "cpu-generic" and "Slurm not read" in doc["sku"]["how"], doc["sku"]


def test_an_xid_the_catalog_does_not_know_stays_unknown_until_cleared(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A code newer than nvtest's catalog (the healthy log plus one such line) is not a warning."""
    tools = node_bin(tmp_path, "n1")
    real = shutil.which("dmesg", path="/usr/bin:/bin:/usr/sbin:/sbin")
    log = subprocess.run([real or "dmesg"], capture_output=True, text=True, check=False).stdout
    tools.add(
        "dmesg",
        Recording(stdout=log + "[99999.000000] NVRM: Xid (PCI:0000:18:00): 200, pid=1, name=python, new words\n"),
    )
    first = by_check(gate(tmp_path, monkeypatch, tools))["xid_scan"]
    assert first["verdict"] == "unknown" and "Xid 200 is not in nvtest's Xid catalog" in first["reason"], first
    again = by_check(gate(tmp_path, monkeypatch, tools))["xid_scan"]  # no new line: remembered
    assert again["verdict"] == "unknown" and "Xid 200 (not in nvtest's Xid catalog)" in again["reason"], again
    assert by_check(gate(tmp_path, monkeypatch, tools, clear_xids=True))["xid_scan"]["verdict"] == "pass"


def test_expect_gpus_is_a_witness_where_neither_slurm_nor_a_history_knows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gpus = by_check(gate(tmp_path, monkeypatch, _no_gpu_node(tmp_path, None), expect_gpus=4))["gpus"]
    assert gpus["verdict"] == "fail" and "0 NVIDIA GPUs on the bus; --expect-gpus 4 expects 4" in gpus["reason"], gpus


@pytest.mark.parametrize("where", ["state", "lock"])
def test_a_fifo_in_the_state_files_place_never_holds_the_gate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """A FIFO where the state file or its lock goes (a mistake, or a hostile user): open() on
    it would block in the kernel, out of reach of the deadline and of SIGTERM. It is read as
    unreadable, the gate ends in its budget, and the uncleared Xid 79 still fails."""
    import os
    import time

    tools = FAULTS["fatal_xid"][0](node_bin(tmp_path, "n1"))
    gate(tmp_path, monkeypatch, tools)
    path = state_path(tmp_path / "state", "n1")
    target = path if where == "state" else path.with_suffix(".lock")
    target.unlink(missing_ok=True)
    path.with_name(path.name + ".prev").unlink(missing_ok=True)
    os.mkfifo(target)
    t0 = time.monotonic()
    doc = gate(tmp_path, monkeypatch, tools, budget_s=3.0)
    assert time.monotonic() - t0 < 3.0 + 2.0
    xid = by_check(doc)["xid_scan"]
    assert xid["verdict"] == "fail" and "Xid 79" in xid["reason"], xid
    said = " ".join(doc["warnings"])
    assert ("not a regular file" in said) if where == "state" else ("gate state not saved" in said), said
