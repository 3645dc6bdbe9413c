"""Stand-in node profiles: named GPU nodes built from recorded real tool outputs.

A profile maps each tool to its recordings (a default, and recordings chosen by the
arguments the tool is called with) for :class:`nvtest.testing.standin.StandInTools`.
:func:`install` writes a profile's stand-ins into a bin directory; put it first on a
node's ``PATH`` (``env={"PATH": tools.path_prefix()}`` for a local run,
``SSHDCluster(node_env={name: {"PATH": tools.path_prefix()}})`` for one node of a
cluster) and ``nvtest run`` sees that node as the profile describes, on this machine.

What cannot be stood in (the kernel's sysfs, torch's CUDA) is this machine's own: the
sysfs PCI bus here shows no NVIDIA function and torch is a CPU build, so on every GPU
profile CUDA cannot start (torch says ``Torch not compiled with CUDA enabled``), exactly
the "CUDA cannot start on a GPU node" case. The bus union (sysfs and lspci, by slot)
makes the lspci recording's GPUs expected.

Recordings are files under ``tests/data/corpus`` (real captures, see its INDEX.md) and
``tests/data/standin`` (real failure outputs no parser reads yet, and outputs assembled
from real captures where no whole capture was public; each with its source in INDEX.md):
the profiles are read from a checkout (the tests and ``bench/gate_bench.py``,
``bench/gate_faults_bench.py`` use them), not from an installed wheel.

=====================  ===================================================================
profile                what the node is
=====================  ===================================================================
``cpu_only``           this machine as it is: no stand-in (the PCI bus shows no GPU)
``h100_healthy``       HGX H100: 8 GPUs and 4 NVSwitches on the bus, nvidia-smi reports all
                       8 (driver 565.57.01), 18 NVLinks each, fabric manager active, 8 NDR HCAs
``h100_driver_down``   the bus shows the 8 H100s; nvidia-smi: "couldn't communicate with the
                       NVIDIA driver" (exit 9); the kernel log: the driver's probe routine was
                       not called (nouveau owned the devices)
``h100_nvml_mismatch`` nvidia-smi: "Failed to initialize NVML: Driver/library version
                       mismatch" (exit 18)
``h100_gpu_lost``      nvidia-smi reports 7 of 8 ("Unable to determine the device handle for
                       GPU 0000:DF:00.0"); the kernel log: a GPU fallen off the bus
``h100_hca_missing``   as healthy, but ibstat lists 7 HCAs (mlx5_3 absent)
``h100_hca_renamed``   as healthy, but the HCAs are enumerated mlx5_0,3,4,5,6,9,10,11
=====================  ===================================================================

:data:`XID79_WEDGED` (not in :data:`PROFILES`: the walkers over every profile would each wait
out the inventory's nvidia-smi deadline on it): the kernel log shows a GPU fallen off the bus
(Xid 79, the driver 570+ form) and nvidia-smi hangs (every call sleeps 600 s: a wedged driver).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from nvtest.testing.standin import Recording, StandInTools

__all__ = [
    "FAULTS",
    "PROFILES",
    "NodeProfile",
    "Tool",
    "fatal_xid",
    "healthy_h100",
    "hung",
    "ib_port_down",
    "XID79_WEDGED",
    "install",
    "lost_gpu",
    "node_bin",
    "pcie_sysfs",
    "recovery_action",
]

#: The checkout's test data: recorded real tool outputs (a profile reads them from a checkout).
DATA = Path(__file__).resolve().parents[2] / "tests" / "data"
CORPUS = DATA / "corpus"
STANDIN = DATA / "standin"

#: nvidia-smi's exit codes (nvidia-smi(1) "RETURN VALUE"; NVML's nvmlReturn_t for 18).
SMI_DRIVER_NOT_LOADED = 9
SMI_LIB_RM_VERSION_MISMATCH = 18

#: ``--query-gpu`` of the fabric manager probe (nvlink.FM_SCRIPT).
FABRIC_QUERY = "--query-gpu=index,fabric.state,fabric.status --format=csv"


@dataclass(frozen=True)
class Tool:
    """One stand-in tool: ``default`` for any arguments, ``by_args`` by glob of the joined
    arguments (tried first, in order); ``default`` None: other arguments exit 127."""

    default: Recording | None = None
    by_args: Mapping[str, Recording] = field(default_factory=dict)


@dataclass(frozen=True)
class NodeProfile:
    """A named node: its stand-in tools (tool name -> :class:`Tool`)."""

    name: str
    description: str
    tools: Mapping[str, Tool] = field(default_factory=dict)


def _file(rel: str, *, exit_code: int = 0, stderr: bool = False) -> Recording:
    """A recording of a file under tests/data (``corpus/...`` or ``standin/...``)."""
    text = (DATA / rel).read_text(encoding="utf-8")
    return Recording(stderr=text, exit_code=exit_code) if stderr else Recording(stdout=text, exit_code=exit_code)


def _fabric_csv(gpus: int) -> Recording:
    rows = "".join(f"{i}, Completed, Success\n" for i in range(gpus))
    return Recording(stdout="index, fabric.state, fabric.status\n" + rows)


LSPCI = Tool(_file("corpus/lspci/Dnn-egrep-hgx-h100-8gpu-4nvswitch-ids.txt"))
IBSTAT_8 = Tool(_file("standin/ibstat-8x-ndr-mt4129-assembled.txt"))
#: Fabric manager running at the driver's version (systemctl(1) is-active; the version line
#: as nv-fabricmanager --version prints it, NVIDIA Fabric Manager User Guide).
FM_TOOLS = {
    "systemctl": Tool(by_args={"is-active nvidia-fabricmanager": Recording(stdout="active\n")}),
    "nv-fabricmanager": Tool(Recording(stdout="Fabric Manager version is : 565.57.01\n")),
}


def _smi_healthy(gpus: int = 8) -> Tool:
    if gpus == 8:
        xml, nvlink = "nvidia-smi-q-x-h100-sxm-x8-assembled.xml", "nvidia-smi-nvlink-s-h100-x8-18-links-assembled.txt"
    else:
        xml, nvlink = (
            "nvidia-smi-q-x-h100-sxm-7-of-8-handle-lost-assembled.xml",
            "nvidia-smi-nvlink-s-h100-7-of-8-18-links-assembled.txt",
        )
    return Tool(
        _file("corpus/nvidia-smi/plain-h100-sxm-x8-driver565.txt"),
        by_args={
            "-q -x": _file(f"standin/{xml}"),
            "nvlink -s": _file(f"standin/{nvlink}"),
            FABRIC_QUERY: _fabric_csv(gpus),
        },
    )


def _healthy_tools(**overrides: Tool) -> dict[str, Tool]:
    return {"lspci": LSPCI, "nvidia-smi": _smi_healthy(), "ibstat": IBSTAT_8, **FM_TOOLS, **overrides}


PROFILES: dict[str, NodeProfile] = {
    p.name: p
    for p in (
        NodeProfile("cpu_only", "this machine as it is: the PCI bus shows no NVIDIA GPU, no RDMA device"),
        NodeProfile("h100_healthy", "HGX H100 8-GPU node, every tool reporting", _healthy_tools()),
        NodeProfile(
            "h100_driver_down",
            "HGX H100 whose NVIDIA driver is not loaded (nouveau owns the devices)",
            _healthy_tools(
                **{
                    "nvidia-smi": Tool(
                        _file("standin/nvidia-smi-driver-not-loaded.txt", exit_code=SMI_DRIVER_NOT_LOADED)
                    ),
                    "dmesg": Tool(_file("corpus/dmesg-xid/nvrm-probe-routine-not-called-3-devices-nouveau.txt")),
                }
            ),
        ),
        NodeProfile(
            "h100_nvml_mismatch",
            "HGX H100 after a driver upgrade without a reboot: NVML library != kernel module",
            _healthy_tools(
                **{
                    "nvidia-smi": Tool(
                        _file(
                            "standin/nvidia-smi-nvml-driver-library-mismatch.txt",
                            exit_code=SMI_LIB_RM_VERSION_MISMATCH,
                        )
                    )
                }
            ),
        ),
        NodeProfile(
            "h100_gpu_lost",
            "HGX H100 with one GPU fallen off the bus: nvidia-smi reports 7 of the 8 on the bus",
            _healthy_tools(
                **{
                    "nvidia-smi": _smi_healthy(7),
                    "dmesg": Tool(_file("corpus/dmesg-xid/fallen-off-bus-multiline-no-xid-driver570.txt")),
                }
            ),
        ),
        NodeProfile(
            "h100_hca_missing",
            "HGX H100 whose ibstat lists 7 of its 8 HCAs (mlx5_3 absent)",
            _healthy_tools(ibstat=Tool(_file("standin/ibstat-7x-ndr-mt4129-mlx5_3-absent-assembled.txt"))),
        ),
        NodeProfile(
            "h100_hca_renamed",
            "HGX H100 whose 8 HCAs are enumerated differently from its peers",
            _healthy_tools(
                ibstat=Tool(_file("standin/ibstat-8x-ndr-mt4129-enumerated-0-3-4-5-6-9-10-11-assembled.txt"))
            ),
        ),
    )
}


#: See the module doc: a run must block NVML on it from its kernel log, never wait for nvidia-smi.
XID79_WEDGED = NodeProfile(
    "h100_xid79_wedged",
    "HGX H100 with a GPU fallen off the bus (Xid 79) and an nvidia-smi that never answers",
    _healthy_tools(
        **{
            "nvidia-smi": Tool(Recording(stdout="", sleep_s=600)),
            "dmesg": Tool(_file("corpus/dmesg-xid/fallen-off-bus-multiline-no-xid-driver570.txt")),
        }
    ),
)


def install(profile: NodeProfile | str, bin_dir: Path) -> StandInTools:
    """Write ``profile``'s stand-ins into ``bin_dir``; return them (``path_prefix()`` for PATH)."""
    prof = PROFILES[profile] if isinstance(profile, str) else profile
    tools = StandInTools(bin_dir)
    for name, tool in prof.tools.items():
        tools.add(name, tool.default, by_args=dict(tool.by_args))
    return tools


# Layered stand-ins for the node-local verbs (gate, sweep, export): a healthy HGX H100 as the
# gate reads it (``nvidia-smi -q`` text, ``nvlink -s``, lspci, ibstat, the fabric manager's
# unit), and faults put on top of it. The kernel log is this machine's own ``dmesg`` (a real
# log without any NVIDIA line) unless a fault replaces it::
#
#     tools = healthy_h100(StandInTools(tmp_path / "bin"))
#     lost_gpu(tools)                       # then a fault on top
#     env = {"PATH": tools.path_prefix()}

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
        by_args={
            "-q": Recording(stdout="", stderr=lost.read_text(), exit_code=15),
            "nvlink -s": Recording.of_file(H100["nvlink"]),
        },
    )
    return tools


def fatal_xid(tools: StandInTools) -> StandInTools:
    """A kernel log in which a GPU fell off the bus (NVSentinel#155: Xid 79 without an Xid line)."""
    tools.add("dmesg", Recording.of_file(CORPUS / "dmesg-xid/fallen-off-bus-multiline-no-xid-driver570.txt"))
    return tools


def recovery_action(tools: StandInTools) -> StandInTools:
    """A kernel log in which the driver asks for a GPU reset: Xid 51, then Xid 154 "GPU recovery
    action changed from 0x0 (None) to 0x1 (PF FLR)" (corpus INDEX.md)."""
    tools.add(
        "dmesg",
        Recording.of_file(CORPUS / "dmesg-xid/kmsg-xid51-then-xid154-recovery-action-pf-flr-reset-required.txt"),
    )
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
    "recovery_action": (recovery_action, "xid_scan"),
    "ib_port_down": (ib_port_down, "ib_ports"),
}


def node_bin(base: Path, name: str) -> StandInTools:
    """A fresh stand-in directory ``base/<name>/bin`` holding a healthy H100."""
    return healthy_h100(StandInTools(base / name / "bin"))


#: The GPUs of the ``h100_healthy`` profile's lspci recording (PCI slots).
H100_GPU_SLOTS = (
    "0000:1b:00.0",
    "0000:43:00.0",
    "0000:52:00.0",
    "0000:61:00.0",
    "0000:9d:00.0",
    "0000:c3:00.0",
    "0000:d1:00.0",
    "0000:df:00.0",
)
#: An H100 SXM5's PCIe link as sysfs shows it (Gen5 x16: ``LnkCap``/``LnkSta`` ``Speed 32GT/s,
#: Width x16``; the kernel's ``current_link_speed`` reads ``32.0 GT/s PCIe``).
GEN5 = "32.0 GT/s PCIe"


def pcie_sysfs(root: Path, slots: tuple[str, ...] = H100_GPU_SLOTS, widths: Mapping[str, int] | None = None) -> Path:
    """A sysfs tree under ``root`` for the ``pcie_link`` check's ``$NVTEST_SYSFS_ROOT`` seam:
    each GPU slot (vendor 0x10de, class 0x030200) behind its own Gen5 x16 root port, its link
    trained at Gen5 and ``widths[slot]`` lanes (default 16: healthy; 8: the degraded link
    ``LnkSta x8`` under ``LnkCap x16``); ``sys/bus/pci/devices/<slot>`` links to it. Returns ``root``."""
    widths = widths or {}
    bus = root / "sys/bus/pci/devices"
    bus.mkdir(parents=True, exist_ok=True)
    for slot in slots:
        domain, b = slot[:4], slot[5:7]
        port = root / "sys/devices" / f"pci{domain}:{b}" / f"{domain}:{b}:01.0"  # the root port above it
        gpu = port / slot
        gpu.mkdir(parents=True)
        values = {
            port: {
                "vendor": "0x8086",
                "class": "0x060400",
                "current_link_speed": GEN5,
                "current_link_width": "16",
                "max_link_speed": GEN5,
                "max_link_width": "16",
            },
            gpu: {
                "vendor": "0x10de",
                "device": "0x2330",
                "class": "0x030200",
                "current_link_speed": GEN5,
                "current_link_width": str(widths.get(slot, 16)),
                "max_link_speed": GEN5,
                "max_link_width": "16",
            },
        }
        for where, files in values.items():
            for name, text in files.items():
                (where / name).write_text(text + "\n")
        (bus / slot).symlink_to(gpu)
    return root
