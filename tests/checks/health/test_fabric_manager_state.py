"""The fabric manager's service state is what ``systemctl is-active`` says it is, never
systemctl's own error: where systemctl cannot answer (no systemd as PID 1, as in this
container), the state is unknown and the GPUs' fabric state decides."""

from __future__ import annotations

import pytest

from nvtest.checks.health.nvlink import FM_SCRIPT, fabric_manager, split_sections
from nvtest.config.inventory import Node
from nvtest.transports.local import LocalTransport
from nvtest.verdict import Verdict

#: systemctl 252 (Debian 12) in a container without systemd, recorded on this project's CI
#: machine: ``systemctl is-active nvidia-fabricmanager 2>&1`` (exit 1)
NO_SYSTEMD = (
    "System has not been booted with systemd as init system (PID 1). Can't operate.\n"
    "Failed to connect to bus: Host is down\n"
)
REGISTERED = "index, fabric.state, fabric.status\n0, Completed, Success\n1, Completed, Success\n"


def _sections(service: str, fabric: str = "") -> dict[str, str]:
    return {"service": service, "version": "", "fabric": fabric, "journal": ""}


def test_systemctl_error_is_not_the_service_state() -> None:
    out = fabric_manager(_sections(NO_SYSTEMD), "535.161.08", nvswitches=4)
    assert out.verdict is Verdict.ERROR, out.text()
    assert out.error and "state of nvidia-fabricmanager is unknown" in out.error
    assert "Failed to connect to bus" in out.error  # systemctl's words, quoted as such
    assert not any("is Failed" in f or "is System" in f for f in out.failures), out.failures
    assert out.details["fabric_manager"]["service"] is None


def test_unknown_service_state_but_registered_gpus_pass_with_a_note() -> None:
    out = fabric_manager(_sections(NO_SYSTEMD, REGISTERED), "535.161.08", nvswitches=4)
    assert out.verdict is Verdict.PASS, out.text()
    assert any("could not report the service state" in n for n in out.notes), out.notes


@pytest.mark.parametrize("state", ["inactive", "failed", "activating"])
def test_a_real_state_other_than_active_fails(state: str) -> None:
    out = fabric_manager(_sections(f"{state}\n", REGISTERED), "535.161.08", nvswitches=4)
    assert out.verdict is Verdict.FAIL and f"nvidia-fabricmanager is {state}" in out.failures[0]


def test_the_probe_on_this_machine() -> None:
    """The real probe script, run here: no systemd and no fabric manager."""
    res = LocalTransport().run([Node("here")], ["sh", "-c", FM_SCRIPT], timeout_s=30)["here"]
    sections = split_sections(res.stdout)
    said = sections["service"].strip()
    if said in ("active", "inactive", "failed"):
        pytest.skip(f"systemd runs here (systemctl says {said!r}): not the no-systemd case")
    out = fabric_manager(sections, "535.161.08", nvswitches=4)
    assert out.verdict is Verdict.ERROR, out.text()
    assert said.splitlines()[-1] in (out.error or "")


#: nvidia-smi --query-gpu=index,fabric.state,fabric.status right after boot (r550+ prints
#: "In Progress" and "N/A" until the fabric manager registers the GPU)
IN_PROGRESS = "index, fabric.state, fabric.status\n0, Completed, Success\n1, In Progress, N/A\n"


@pytest.mark.parametrize(
    ("uptime", "verdict", "said"),
    [
        (
            "120.45 900.10\n",
            Verdict.WARN,
            "GPU 1: fabric state In Progress, status N/A, 120 s after boot: within the 600 s grace window",
        ),
        (
            "3600.00 9000.00\n",
            Verdict.FAIL,
            "GPU 1: fabric state In Progress, status N/A (GPU not registered with the NVLink fabric); 3600 s after boot, past the 600 s grace window",
        ),
        ("", Verdict.FAIL, "uptime unknown, past the 600 s grace window"),
    ],
)
def test_fabric_in_progress_warns_within_the_grace_window_after_boot(uptime, verdict, said) -> None:
    sections = {**_sections("active\n", IN_PROGRESS), "uptime": uptime}
    out = fabric_manager(sections, None, nvswitches=4)
    assert out.verdict is verdict, out.text()
    assert said in out.text()


def test_the_probe_reads_the_uptime() -> None:
    """FM_SCRIPT's ``### uptime`` section is /proc/uptime, which the judge reads."""
    import subprocess

    text = subprocess.run(["sh", "-c", FM_SCRIPT], capture_output=True, text=True, timeout=60).stdout
    uptime = split_sections(text).get("uptime", "")
    assert float(uptime.split()[0]) > 0, text


@pytest.mark.parametrize(
    "fabric",
    [
        "sh: 1: nvidia-smi: not found\n",  # the tool missing
        "stand-in nvidia-smi: no recording for: --query-gpu=index,fabric.state,fabric.status --format=csv\n",
        "",  # nothing printed
    ],
)
def test_an_unread_fabric_state_is_unknown_not_a_pass(fabric: str) -> None:
    """NVSwitch system, service active, driver 565 (has the fabric fields): no GPU's state read."""
    out = fabric_manager(_sections("active\n", fabric), "565.57.01", nvswitches=4)
    assert out.verdict is Verdict.ERROR, out.text()
    assert "fabric state is unknown" in (out.error or "")
    assert fabric.strip()[:20] in (out.error or "")  # the tool's words


def test_too_old_only_where_the_driver_version_read_proves_it() -> None:
    old = fabric_manager(_sections("active\n", "sh: 1: nvidia-smi: not found\n"), "525.85.12", nvswitches=4)
    assert old.verdict is Verdict.PASS and "older than the fabric fields" in old.text(), old.text()
    unread = fabric_manager(_sections("active\n", ""), None, nvswitches=4)
    assert unread.verdict is Verdict.ERROR and "older" not in unread.text(), unread.text()


def test_the_fabric_state_from_nvidia_smi_q_where_the_query_gave_none() -> None:
    from tests.conftest import REPO

    q = (REPO / "tests/data/corpus/nvidia-smi/q-h100-sxm-x8-driver565-all-gpus.txt").read_text()
    said = "stand-in nvidia-smi: no recording for: --query-gpu\n"
    ok = fabric_manager(_sections("active\n", said), "565.57.01", nvswitches=4, smi_q=q)
    assert ok.verdict is Verdict.PASS and "fabric state Completed/Success in nvidia-smi -q" in ok.text()
    no_fabric = "\n".join(ln for ln in q.splitlines() if ln.strip().split(" ")[0] not in ("Fabric", "State", "Status"))
    out = fabric_manager(_sections("active\n", said), "565.57.01", nvswitches=4, smi_q=no_fabric)
    assert out.verdict is Verdict.ERROR and "nvidia-smi -q lists no GPU fabric state" in (out.error or "")
