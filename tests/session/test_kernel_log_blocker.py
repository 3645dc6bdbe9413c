"""What in a kernel log blocks NVML on its node (issue 24, class 4): every class of the Xid
catalog that needs a reset, walked; the real logs of the corpus read as the run reads them."""

from __future__ import annotations

import pytest

from nvtest.playbook.xid import RESET_BUCKETS, XID_CATALOG, needs_reset
from nvtest.session.kernel_log import facts_blocked, reset_blocker
from tests.checks.health.conftest import corpus


def test_every_catalog_class_needing_a_reset_blocks_and_program_errors_do_not() -> None:
    for code, info in XID_CATALOG.items():
        fatal_reset = info.resolution in RESET_BUCKETS and info.severity == "fatal"
        assert needs_reset(code) == (code == 79 or fatal_reset), code
    assert not needs_reset(109)  # RESET_GPU in NVIDIA's catalog, a program's hung kernel as a rule
    assert needs_reset(79) and needs_reset(119) and not needs_reset(13) and not needs_reset(31)
    assert needs_reset(154, "Node Reboot Required") and not needs_reset(154, "None")
    assert not needs_reset(154, None)  # an action not read is not judged here (xid_scan errors)


@pytest.mark.parametrize(
    ("rel", "words"),
    [
        ("dmesg-xid/fallen-off-bus-multiline-no-xid-driver570.txt", "Xid 79 (fallen off the bus)"),
        ("dmesg-xid/gpud-scan-xid119-gsp-rpc-timeout-quoted-lines-relative-time.txt", "Xid 119"),
        ("dmesg-xid/kmsg-xid79-then-xid154-recovery-action-os-reboot-driver610.txt", "Xid 79"),
        (
            "dmesg-xid/dmesg-driver595-open-gsp-heartbeat-timeout-sysmembar-memsys-error-no-xid.txt",
            "gsp heartbeat timeout",
        ),
        ("dmesg-xid/dmesg-ctime-xid13-sm-exception-then-xid109.txt", None),
        ("dmesg-xid/dmesg-nfs-server-ok-then-not-responding-still-trying-current-ganesha.txt", None),
    ],
)
def test_the_first_line_of_a_gpu_needing_a_reset_is_named(rel: str, words: str | None) -> None:
    cause = reset_blocker("### dmesg\n" + corpus(rel))
    if words is None:
        assert cause is None
    else:
        assert cause is not None and words in cause and "at line" in cause, cause


def test_an_unreadable_log_blocks_nothing_and_facts_say_blocked_only_when_not_run() -> None:
    assert reset_blocker("### unreadable\ndmesg: read kernel buffer failed: Operation not permitted\n") is None
    assert facts_blocked("couldn't communicate with the NVIDIA driver") is None
    assert facts_blocked("timed out after 60 s") is None
    said = facts_blocked(
        "stopped: the kernel log (dmesg) shows Xid 79 (fallen off the bus) on GPU 0000:b3:00.0 at line 1: x "
        "(nvidia-smi gave no answer within 10 s)"
    )
    assert (
        said is not None and said.startswith("blocked: the kernel log (dmesg) shows Xid 79") and "not started" in said
    )
