"""Stand-in node profiles for the operating verbs' tests (gate, sweep): a healthy HGX H100
node and its faults, each from real recorded tool outputs (tests/data/corpus, INDEX.md).

To be merged with the shared node profiles of ``tests/standin_nodes.py`` (another branch);
only what the gate reads is here. Put the profile's stand-ins first on a node's PATH::

    tools = StandInTools(tmp_path / "bin")
    healthy_h100(tools)
    lost_gpu(tools)            # then a fault on top
    env = {"PATH": tools.path_prefix()}

The kernel log is this machine's own ``dmesg`` (a real log without any NVIDIA line) unless a
fault replaces it. ``systemctl is-active nvidia-fabricmanager`` answers ``active``, the
one word systemctl(1) prints for a running unit; nothing else is invented.
"""

from __future__ import annotations

from pathlib import Path

from nvtest.testing.standin import Recording, StandInTools
from tests.conftest import CORPUS

__all__ = ["FAULTS", "fatal_xid", "healthy_h100", "hung", "ib_port_down", "lost_gpu", "node_bin"]

#: Real outputs of a healthy HGX H100 node (8 GPUs, 4 NVSwitches, 8 x NDR 400).
H100 = {
    "smi_q": CORPUS / "nvidia-smi/q-h100-sxm-x8-driver565-all-gpus.txt",
    "nvlink": CORPUS / "nvidia-smi/nvlink-s-h100-x8-18-links-p5.txt",
    "lspci": CORPUS / "lspci/grep-h100-p5-8gpu-4nvswitch.txt",
    "ibstat": CORPUS / "ibstat/ibstat-h100-8x-ndr-400-active-plus-bond-200-ethernet.txt",
}


def healthy_h100(tools: StandInTools) -> StandInTools:
    """nvidia-smi (-q, nvlink -s), lspci, ibstat and the fabric manager's unit of a healthy
    H100 node; any other nvidia-smi call exits 127 (no recording), as a missing tool would."""
    tools.add(
        "nvidia-smi",
        None,
        by_args={"-q": Recording.of_file(H100["smi_q"]), "nvlink -s": Recording.of_file(H100["nvlink"])},
    )
    tools.add("lspci", Recording.of_file(H100["lspci"]))
    tools.add("ibstat", Recording.of_file(H100["ibstat"]))
    tools.add("systemctl", None, by_args={"is-active nvidia-fabricmanager": Recording(stdout="active\n")})
    tools.add_missing("nv-fabricmanager")
    return tools


def lost_gpu(tools: StandInTools) -> StandInTools:
    """nvidia-smi -q of a node whose GPU 0000:09:00.0 cannot be reached (nvidia-docker#1553;
    exit 15, nvidia-smi(1)'s code for a GPU that fell off the bus)."""
    lost = CORPUS / "nvidia-smi/q-lost-gpu-unable-to-determine-device-handle.txt"
    tools.add(
        "nvidia-smi",
        None,
        by_args={"-q": Recording(stdout="", stderr=lost.read_text(), exit_code=15), "nvlink -s": Recording.of_file(H100["nvlink"])},
    )
    return tools


def fatal_xid(tools: StandInTools) -> StandInTools:
    """A kernel log in which a GPU fell off the bus (NVSentinel#155: Xid 79 without an Xid line)."""
    tools.add("dmesg", Recording.of_file(CORPUS / "dmesg-xid/fallen-off-bus-multiline-no-xid-driver570.txt"))
    return tools


def ib_port_down(tools: StandInTools) -> StandInTools:
    """ibstat of an H100 node with two of its eight 400 Gb/s ports Down/Disabled (gpud testdata)."""
    tools.add("ibstat", Recording.of_file(CORPUS / "ibstat/ibstat-h100-roce-12-ca-two-400g-ports-down-disabled.txt"))
    return tools


def hung(tools: StandInTools, tool: str = "nvidia-smi", seconds: float = 120.0) -> StandInTools:
    """``tool`` hangs (a wedged driver call): it sleeps ``seconds`` before answering anything."""
    tools.add(tool, Recording(stdout="", sleep_s=seconds))
    return tools


#: fault name -> (the stand-ins, the gate check it must fail).
FAULTS = {
    "lost_gpu": (lost_gpu, "gpus"),
    "fatal_xid": (fatal_xid, "xid_scan"),
    "ib_port_down": (ib_port_down, "ib_ports"),
}


def node_bin(base: Path, name: str) -> StandInTools:
    """A fresh stand-in directory ``base/<name>/bin`` holding a healthy H100."""
    return healthy_h100(StandInTools(base / name / "bin"))
