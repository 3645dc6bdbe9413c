"""The kernel log beyond Xid (issue 24, class 4): hung tasks, NFS/Lustre/GPFS client state,
machine checks and EDAC, judged once for ``xid_scan`` (run and gate) and ``nvtest parse``."""

from __future__ import annotations

import re

import pytest

from nvtest.checks.health.kernel_log import xid_scan
from nvtest.parsers import dmesg
from nvtest.playbook.host_events import judge_host_events
from nvtest.playbook.readings import assess
from nvtest.verdict import Verdict
from tests.checks.health.conftest import corpus
from tests.conftest import CORPUS

#: corpus file -> (xid_scan verdict, a words of its reason, the classes read)
CASES = {
    "dmesg-xid/dmesg-nfs-server-flap-ok-then-hung-task-nfs-file-fsync-rpi3.txt": (
        Verdict.WARN,
        "task objcopy:24916 blocked",
        {"nfs", "hung_task"},
    ),
    "dmesg-xid/dmesg-nfs-server-ok-then-not-responding-still-trying-current-ganesha.txt": (
        Verdict.FAIL,
        "NFS server 100.73.159.36: not responding and not recovered",
        {"nfs"},
    ),
    "dmesg-xid/dmesg-lustre-client-osc-connection-lost-two-osts-no-restore.txt": (
        Verdict.FAIL,
        "Lustre DIAS-OST0002 (at 192.168.14.178@tcp): the client's connection was lost",
        {"lustre"},
    ),
    "dmesg-xid/dmesg-ctime-edac-sbridge-262-ce-memory-read-error-overflow.txt": (
        Verdict.WARN,
        "corrected EDAC: MC1 CPU_SrcID#0_Ha#0_Chan#1_DIMM#0 (262 errors)",
        {"edac", "machine_check"},
    ),
    "dmesg-xid/journal-mce-bank4-uncorrected-status-logged-at-boot-mcelog-nuc.txt": (
        Verdict.FAIL,
        "uncorrected machine check: CPU 0 bank 4",
        {"machine_check"},
    ),
}


@pytest.mark.parametrize("rel", sorted(CASES))
def test_host_events_of_real_logs_are_read_and_judged_as_an_operator_would(rel: str) -> None:
    verdict, said, classes = CASES[rel]
    text = corpus(rel)
    assert dmesg.detect(text), "a log of host events alone is a kernel log to `nvtest parse`"
    log = dmesg.parse(text)
    assert {e.cls for e in log.host_events} == classes
    out = xid_scan(text)
    assert out.verdict == verdict, out.text()
    assert said in out.text()


def test_a_recovered_nfs_flap_is_recovered_not_failing() -> None:
    log = dmesg.parse(corpus("dmesg-xid/dmesg-nfs-server-flap-ok-then-hung-task-nfs-file-fsync-rpi3.txt"))
    lost = [e for e in log.host_events if e.kind == "not_responding"]
    assert lost and all(e.recovered_line == 3 and not e.current for e in lost)
    hung = next(e for e in log.host_events if e.cls == "hung_task")
    assert (hung.subject, hung.via) == ("objcopy:24916", "nfs")
    out = xid_scan(corpus("dmesg-xid/dmesg-nfs-server-flap-ok-then-hung-task-nfs-file-fsync-rpi3.txt"))
    assert not out.failures and any("then recovered" in n for n in out.notes), out.text()


def test_lustre_restored_on_the_same_import_recovers_its_loss() -> None:
    # the wording of Lustre's ptlrpc/import.c (LCONSOLE_WARN "Connection restored to %s (at %s)"),
    # as a client printed it with an empty target (CSCS capstor report, INDEX.md of the corpus)
    lost = corpus("dmesg-xid/dmesg-lustre-client-osc-connection-lost-two-osts-no-restore.txt")
    restored = lost + (
        "[87990.100000] Lustre: DIAS-OST0001-osc-ffff9d6153c91000: Connection restored to  (at 192.168.14.178@tcp)\n"
    )
    out = xid_scan(restored)
    assert out.verdict == Verdict.FAIL and "DIAS-OST0002" in out.text()
    assert not any("DIAS-OST0001" in f for f in out.failures), out.failures


def test_gpfs_membership_loss_fails() -> None:
    # IBM Storage Scale 5.2 problem determination, "failures due to a network failure": the
    # GPFS log's words, as a node's /var/log/messages holds them beside the kernel's lines (mmfsd
    # is a daemon: `journalctl -k` alone does not show them, a syslog file pasted to `nvtest
    # parse` or a dmesg that the site forwards them to does)
    text = (
        "Jun 25 16:11:09 c5n109 kernel: nfs: server 192.168.0.1 OK\n"
        "Jun 25 16:11:16 c5n109 mmfs[3340]: Close connection to 89.116.94.81 k155n01\n"
        "Jun 25 16:11:21 c5n109 mmfs[3340]: Lost membership in cluster remote.cluster. Unmounting file systems.\n"
    )
    log = dmesg.parse(text)
    assert [(e.cls, e.kind, e.subject) for e in log.host_events][1:] == [("gpfs", "lost_membership", "remote.cluster")]
    assert xid_scan(text).verdict == Verdict.FAIL


def test_the_gate_warns_on_a_storage_loss_it_never_drains_a_fleet_for() -> None:
    text = corpus("dmesg-xid/dmesg-nfs-server-ok-then-not-responding-still-trying-current-ganesha.txt")
    assert xid_scan(text, storage="warn").verdict == Verdict.WARN


def _dmesg_corpus() -> list[str]:
    return sorted(str(p.relative_to(CORPUS)) for p in (CORPUS / "dmesg-xid").glob("*.txt"))


@pytest.mark.parametrize("rel", _dmesg_corpus())
def test_parse_and_the_run_judge_host_events_the_same_way(rel: str) -> None:
    """One judgement: every host state ``xid_scan`` fails or warns on is a failure or a warning of
    ``nvtest parse``'s reading of the same log, and no other host state is."""
    text = corpus(rel)
    try:
        log = dmesg.parse(text)
    except Exception:  # noqa: BLE001 - not a kernel log: nothing to compare
        return
    judged = judge_host_events(log.host_events)
    states = assess(log)
    out = xid_scan(text)
    for j in judged:
        run = {"fail": out.failures, "warn": out.warnings, "note": out.notes}[j.verdict]
        assert any(j.line in r for r in run), (j, out.text())
        read = {"fail": states.failures, "warn": states.warnings}.get(j.verdict)
        if read is None:
            assert not any(j.line in r for r in (*states.failures, *states.warnings))
        else:
            assert any(j.line in r for r in read), (j, states)


def _healthy_corpus() -> list[str]:
    rows = re.findall(r"^\| *\d+ *\| *`([^`]+)` *\| *[^|]+\| *([^|]+)\|", (CORPUS / "INDEX.md").read_text(), re.M)
    return [f for f, kind in rows if kind.strip().startswith("normal")]


def test_healthy_outputs_give_no_host_event() -> None:
    """The host-event reader walked over every healthy output of the corpus finds nothing."""
    healthy = _healthy_corpus()
    assert len(healthy) >= 20
    for rel in healthy:
        reader = dmesg._HostReader()
        for no, line in enumerate((CORPUS / rel).read_text(errors="replace").splitlines(), 1):
            reader.read(no, None, line)
        assert not reader.events, (rel, reader.events[:2])


NO_GPU = "the PCI bus shows no NVIDIA device (sysfs /sys/bus/pci/devices: 12 functions, none of vendor 10de)"


@pytest.mark.parametrize("rel", sorted(CASES))
def test_a_node_with_no_gpu_has_its_host_events_judged_the_gpu_part_not_applicable(rel: str) -> None:
    """A login or storage node (the bus proves no NVIDIA device): the same host-event verdict
    as on a GPU node, the GPU part a note quoting the bus, no Xid metric."""
    verdict, said, _ = CASES[rel]
    out = xid_scan(corpus(rel), no_gpu=NO_GPU)
    assert out.verdict == verdict and said in out.text(), out.text()
    assert any(n.startswith(f"GPU part not applicable: {NO_GPU}") for n in out.notes), out.notes
    assert not out.metrics and out.details["kernel_log"]["gpu"] == "not applicable"


def test_an_unreadable_kernel_log_on_a_node_with_no_gpu_is_an_error() -> None:
    """Fail closed: the host events could not be read, so nothing was proven (never a skip)."""
    out = xid_scan("dmesg: read kernel buffer failed: Operation not permitted\n", "unreadable", no_gpu=NO_GPU)
    assert out.error and "kernel log not readable" in out.error and out.skip is None
    # a driver line on a node whose bus shows no NVIDIA device is not the GPU part's to judge
    text = "[    5.1] NVRM: No NVIDIA graphics adapter probed!\n[    9.0] EXT4-fs (sda1): mounted filesystem\n"
    assert xid_scan(text).failures and not xid_scan(text, no_gpu=NO_GPU).failures
