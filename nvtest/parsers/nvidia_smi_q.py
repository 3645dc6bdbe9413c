"""Parser for ``nvidia-smi -q`` text (drivers 450-595), and the per-GPU record it shares with ``-q -x``.

The text is read into a tree by indentation (``Key : value`` leaves, bare ``Key`` sections,
``GPU 00000000:18:00.0`` blocks); :func:`gpu_from_tree` then reads the fields below by their
``-q`` names or their ``-q -x`` XML tag names, so one record serves both formats. Trailing
spaces and values such as ``N/A``, ``[Not Supported]``, ``ERR!`` become :class:`ValueState`s.

Units are in field names: MiB, degrees C, W, MHz; PCIe generation and width are plain numbers.

nvidia-smi's failure outputs (the table :data:`~nvtest.parsers.nvidia_smi.FAILURES` shared by
every nvidia-smi mode) give a record with ``failure`` set instead of an error.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from nvtest.parsers._common import (
    Reading,
    ToolFailure,
    ToolRecord,
    ValueState,
    effective,
    effective_field,
    guarded,
    lost_gpu,
    not_tool_output,
    numbered_lines,
    parse_state,
    reading,
)
from nvtest.parsers.nvidia_smi import FAILURES

TOOL = "nvidia-smi-q"
DESCRIPTION = "nvidia-smi -q text: per-GPU identity, memory, ECC, remapping, PCIe, temperatures, power"

__all__ = [
    "FAILURES",
    "SmiGpu",
    "SmiQuery",
    "SmiTextNode",
    "TreeNode",
    "detect",
    "gpu_from_tree",
    "gpu_values",
    "parse",
]

#: A count: an int, a state such as N/A, or None when the field is absent.
Count = int | ValueState | None


@dataclass
class SmiTextNode:
    """A node of ``nvidia-smi -q``'s indented text read as a tree of ``key -> value / children``;
    keys are lower_snake_case (``fb_memory_usage``). (A node of the inventory is
    :class:`nvtest.config.inventory.Node`.)"""

    value: str | None = None
    children: list[tuple[str, SmiTextNode]] = field(default_factory=list)

    def child(self, key: str) -> SmiTextNode | None:
        """First child called ``key``."""
        return next((n for k, n in self.children if k == key), None)

    def get(self, *paths: str) -> SmiTextNode | None:
        """The node at the first of ``paths`` (``"a/b/c"``) that exists."""
        for path in paths:
            node: SmiTextNode | None = self
            for part in path.split("/"):
                node = node.child(part) if node is not None else None
            if node is not None:
                return node
        return None

    def text(self, *paths: str) -> str | None:
        """The stripped value at the first existing path, or None."""
        node = self.get(*paths)
        return node.value.strip() if node is not None and node.value is not None else None


class TreeNode(Protocol):
    """What :func:`gpu_from_tree` needs of a node: :class:`SmiTextNode` (text) or an XML element view."""

    @property
    def value(self) -> str | None: ...

    @property
    def children(self) -> Sequence[tuple[str, TreeNode]]: ...

    def child(self, key: str) -> TreeNode | None: ...

    def get(self, *paths: str) -> TreeNode | None: ...

    def text(self, *paths: str) -> str | None: ...


def snake(key: str) -> str:
    """``"GPU Current Temp"`` -> ``"gpu_current_temp"``."""
    return re.sub(r"[^0-9a-z]+", "_", key.lower()).strip("_")


@dataclass(frozen=True)
class SmiGpu:
    """One GPU of ``nvidia-smi -q`` / ``-q -x``. Numbers or :class:`ValueState`, None when absent.

    ECC counts sum the SRAM and DRAM (or single/double bit) counters of their kind.
    """

    pci_bus_id: str
    product_name: str | None = None
    uuid: str | None = None
    serial: str | None = None
    vbios_version: str | None = None
    persistence_mode: str | None = None
    mig_mode_current: str | None = None
    mig_mode_pending: str | None = None
    mig_device_count: int = 0
    memory_total_mib: Reading | None = None
    memory_reserved_mib: Reading | None = None
    memory_used_mib: Reading | None = None
    memory_free_mib: Reading | None = None
    ecc_mode_current: str | None = None
    ecc_mode_pending: str | None = None
    ecc_volatile_correctable: Count = None
    ecc_volatile_uncorrectable: Count = None
    ecc_aggregate_correctable: Count = None
    ecc_aggregate_uncorrectable: Count = None
    retired_pages_sbe: Count = None
    retired_pages_dbe: Count = None
    retired_pages_pending: str | None = None
    remapped_rows_correctable: Count = None
    remapped_rows_uncorrectable: Count = None
    remapped_rows_pending: str | None = None
    remapped_rows_failure: str | None = None
    pcie_gen_current: Reading | None = None
    pcie_gen_max: Reading | None = None
    pcie_width_current: Reading | None = None
    pcie_width_max: Reading | None = None
    pcie_replays: Count = None
    temperature_gpu_c: Reading | None = None
    temperature_memory_c: Reading | None = None
    power_draw_w: Reading | None = None
    power_limit_w: Reading | None = None
    #: the board's default limit (``Default Power Limit``), W: what the limit returns to
    power_limit_default_w: Reading | None = None
    clock_graphics_mhz: Reading | None = None
    clock_sm_mhz: Reading | None = None
    clock_memory_mhz: Reading | None = None
    clock_graphics_max_mhz: Reading | None = None
    utilization_gpu_pct: Reading | None = None
    fan_speed_pct: Reading | None = None
    performance_state: str | None = None
    clock_event_reasons_active: tuple[str, ...] = ()

    @property
    def row_remap_pending(self) -> bool:
        """True when remapped rows are pending (needs a GPU reset)."""
        return (self.remapped_rows_pending or "").lower() == "yes"

    @property
    def row_remap_failed(self) -> bool:
        """True when a row remapping failure occurred (RMA)."""
        return (self.remapped_rows_failure or "").lower() == "yes"

    @property
    def page_retirement_pending(self) -> bool:
        """True when page retirement is pending (fixable by a reboot)."""
        return (self.retired_pages_pending or "").lower() == "yes"


@dataclass(frozen=True)
class SmiQuery(ToolRecord):
    """A whole ``-q`` / ``-q -x`` output: driver-level values and one :class:`SmiGpu` per GPU block.

    ``attached_gpus`` is what nvidia-smi announced; fewer ``gpus`` means a cut output or a lost GPU.
    """

    gpus: tuple[SmiGpu, ...]
    driver_version: str | None = None
    cuda_version: str | None = None
    attached_gpus: int | None = None
    lost_gpus: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    failure: ToolFailure | None = None
    effective: Mapping[str, object] = effective_field()


def query_effective(
    gpus: Sequence[SmiGpu], attached: int | None, driver: str | None, **extra: object
) -> Mapping[str, object]:
    """The ``effective`` of an :class:`SmiQuery`: GPUs nvidia-smi reported (count, bus ids) and
    announced, the driver, and ``extra`` (the XML's DTD)."""
    return effective(
        gpus_reported=len(gpus),
        bus_ids=tuple(g.pci_bus_id for g in gpus),
        attached_gpus=attached,
        driver_version=driver,
        **extra,
    )


def _reading(node: TreeNode, *paths: str) -> Reading | None:
    t = node.text(*paths)
    return None if t is None else reading(t)


def _first_number(node: TreeNode, *paths: str) -> Reading | None:
    """The first of ``paths`` that reads as a number; else the reading of the first that exists
    (a state such as ``N/A``), else None. For a value the driver moved to a new element while
    the old one may still be printed as ``N/A`` (power draw: ``power_draw`` up to DTD v12,
    ``instant_power_draw``/``average_power_draw`` from v13)."""
    first: Reading | None = None
    for path in paths:
        r = _reading(node, path)
        if isinstance(r, float):
            return r
        first = r if first is None else first
    return first


def _count(node: TreeNode, *paths: str) -> Count:
    r = _reading(node, *paths)
    return int(r) if isinstance(r, float) else r


def _str(node: TreeNode, *paths: str) -> str | None:
    t = node.text(*paths)
    return t if t else None


def _ecc_sum(node: TreeNode | None, uncorrectable: bool) -> Count:
    """Sum the correctable or uncorrectable counters below an ECC ``volatile``/``aggregate`` node."""
    if node is None:
        return None
    want = "double_bit" if uncorrectable else "single_bit"
    bit = node.child(want)
    if bit is not None:
        return _count(bit, "total")
    total = 0
    state: ValueState | None = None
    seen = False
    for key, child in node.children:
        is_unc = "uncorrectable" in key
        if "correctable" not in key or is_unc != uncorrectable or child.value is None:
            continue
        r = reading(child.value)
        if isinstance(r, float):
            total += int(r)
            seen = True
        elif isinstance(r, ValueState):
            state = r
    return total if seen else state


def _active_reasons(node: TreeNode | None) -> tuple[str, ...]:
    if node is None:
        return ()
    return tuple(k for k, n in node.children if (n.value or "").strip() == "Active")


def gpu_from_tree(bus_id: str, g: TreeNode, mig_device_count: int | None = None) -> SmiGpu:
    """Read one GPU block (text ``-q`` or XML ``-q -x`` tree) into an :class:`SmiGpu`.

    ``mig_device_count`` overrides counting the ``mig_device`` children (the XML reader cuts
    those blocks before parsing and counts them itself).
    """
    link = "pci/pci_gpu_link_info" if g.get("pci/pci_gpu_link_info") else "pci/gpu_link_info"
    mig = g.get("mig_devices")
    return SmiGpu(
        pci_bus_id=_str(g, "pci/pci_bus_id", "pci/bus_id") or bus_id,
        product_name=_str(g, "product_name"),
        uuid=_str(g, "uuid", "gpu_uuid"),
        serial=_str(g, "serial", "serial_number"),
        vbios_version=_str(g, "vbios_version"),
        persistence_mode=_str(g, "persistence_mode"),
        mig_mode_current=_str(g, "mig_mode/current_mig", "mig_mode/current"),
        mig_mode_pending=_str(g, "mig_mode/pending_mig", "mig_mode/pending"),
        mig_device_count=mig_device_count
        if mig_device_count is not None
        else (sum(1 for k, _ in mig.children if k == "mig_device") if mig else 0),
        memory_total_mib=_reading(g, "fb_memory_usage/total"),
        memory_reserved_mib=_reading(g, "fb_memory_usage/reserved"),
        memory_used_mib=_reading(g, "fb_memory_usage/used"),
        memory_free_mib=_reading(g, "fb_memory_usage/free"),
        ecc_mode_current=_str(g, "ecc_mode/current_ecc", "ecc_mode/current"),
        ecc_mode_pending=_str(g, "ecc_mode/pending_ecc", "ecc_mode/pending"),
        ecc_volatile_correctable=_ecc_sum(g.get("ecc_errors/volatile"), False),
        ecc_volatile_uncorrectable=_ecc_sum(g.get("ecc_errors/volatile"), True),
        ecc_aggregate_correctable=_ecc_sum(g.get("ecc_errors/aggregate"), False),
        ecc_aggregate_uncorrectable=_ecc_sum(g.get("ecc_errors/aggregate"), True),
        retired_pages_sbe=_count(
            g,
            "retired_pages/multiple_single_bit_retirement/retired_count",
            "retired_pages/single_bit_ecc",
        ),
        retired_pages_dbe=_count(
            g, "retired_pages/double_bit_retirement/retired_count", "retired_pages/double_bit_ecc"
        ),
        retired_pages_pending=_str(
            g,
            "retired_pages/pending_retirement",
            "retired_pages/pending_page_blacklist",
            "retired_pages/pending_page_retirement",
        ),
        remapped_rows_correctable=_count(g, "remapped_rows/remapped_row_corr", "remapped_rows/correctable_error"),
        remapped_rows_uncorrectable=_count(g, "remapped_rows/remapped_row_unc", "remapped_rows/uncorrectable_error"),
        remapped_rows_pending=_str(g, "remapped_rows/remapped_row_pending", "remapped_rows/pending", "remapped_rows"),
        remapped_rows_failure=_str(
            g,
            "remapped_rows/remapped_row_failure",
            "remapped_rows/remapping_failure_occurred",
            "remapped_rows",
        ),
        pcie_gen_current=_reading(g, f"{link}/pcie_gen/current_link_gen", f"{link}/pcie_generation/current"),
        pcie_gen_max=_reading(g, f"{link}/pcie_gen/max_link_gen", f"{link}/pcie_generation/max"),
        pcie_width_current=_reading(g, f"{link}/link_widths/current_link_width", f"{link}/link_width/current"),
        pcie_width_max=_reading(g, f"{link}/link_widths/max_link_width", f"{link}/link_width/max"),
        pcie_replays=_count(g, "pci/replay_counter", "pci/replays_since_reset"),
        temperature_gpu_c=_reading(g, "temperature/gpu_temp", "temperature/gpu_current_temp"),
        temperature_memory_c=_reading(g, "temperature/memory_temp", "temperature/memory_current_temp"),
        power_draw_w=_first_number(
            g,
            "gpu_power_readings/power_draw",
            "power_readings/power_draw",
            "gpu_power_readings/instant_power_draw",
            "gpu_power_readings/average_power_draw",
        ),
        power_limit_w=_reading(
            g,
            "gpu_power_readings/current_power_limit",
            "power_readings/power_limit",
            "gpu_power_readings/power_limit",
            "power_readings/current_power_limit",
        ),
        power_limit_default_w=_reading(
            g, "gpu_power_readings/default_power_limit", "power_readings/default_power_limit"
        ),
        clock_graphics_mhz=_reading(g, "clocks/graphics_clock", "clocks/graphics"),
        clock_sm_mhz=_reading(g, "clocks/sm_clock", "clocks/sm"),
        clock_memory_mhz=_reading(g, "clocks/mem_clock", "clocks/memory"),
        clock_graphics_max_mhz=_reading(g, "max_clocks/graphics_clock", "max_clocks/graphics"),
        utilization_gpu_pct=_reading(g, "utilization/gpu_util", "utilization/gpu"),
        fan_speed_pct=_reading(g, "fan_speed"),
        performance_state=_str(g, "performance_state"),
        clock_event_reasons_active=_active_reasons(g.get("clocks_event_reasons", "clocks_throttle_reasons")),
    )


_GPU_RE = re.compile(r"^GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s*$")


def _tree(
    text: str, skipped: list[str] | None = None
) -> tuple[SmiTextNode, list[tuple[str, SmiTextNode]], list[str], ToolFailure | None]:
    """Build the indentation tree; returns (top level, GPU blocks, lost GPU bus ids, the first
    failure line of :data:`FAILURES`). An unindented line inside a GPU block (a poster's
    ``[...]``, a prompt) is none of the report's: it is skipped, noted in ``skipped``, and the
    block goes on after it."""
    root = SmiTextNode()
    gpus: list[tuple[str, SmiTextNode]] = []
    lost: list[str] = []
    failure: ToolFailure | None = None
    stack: list[tuple[int, SmiTextNode]] = [(-1, root)]
    for no, line in numbered_lines(text):
        if not line.strip() or line.lstrip().startswith("===="):
            continue
        # nvidia-smi prints its failure lines at column 0; the report's lines are indented
        f = FAILURES.failure(no, line) if failure is None and not line[:1].isspace() else None
        failure = failure or f
        lg = lost_gpu(line)
        if lg or f:
            if lg:
                lost.append(lg)
            continue
        indent = len(line) - len(line.lstrip(" \t"))
        s = line.strip()
        gm = _GPU_RE.match(s) if indent == 0 else None
        if indent == 0 and not gm and gpus:
            if skipped is not None:
                skipped.append(f"line {no}: not part of the GPU block, skipped: {s[:60]}")
            continue
        if gm:
            node = SmiTextNode()
            gpus.append((gm.group(1), node))
            stack = [(-1, root), (0, node)]
            continue
        key, sep, value = s.partition(":")
        node = SmiTextNode(value.strip() if sep else None)
        while len(stack) > 1 and stack[-1][0] >= indent:
            stack.pop()
        stack[-1][1].children.append((snake(key), node))
        stack.append((indent, node))
    return root, gpus, lost, failure


@guarded(TOOL)
def parse(text: str) -> SmiQuery:
    """Parse ``nvidia-smi -q`` text into an :class:`SmiQuery`.

    Raises:
        ParseError: not nvidia-smi's output: no ``NVSMI LOG`` banner, ``Attached GPUs`` line,
            ``GPU <bus id>`` block or failure message of :data:`FAILURES`.
    """
    skipped: list[str] = []
    root, blocks, lost, failure = _tree(text, skipped)
    driver = root.text("driver_version")
    own = blocks or failure or "NVSMI LOG" in text[:5000] or root.get("attached_gpus") is not None
    if not own:
        raise not_tool_output(TOOL, "'Attached GPUs : ...' and 'GPU <bus id>' blocks", text)
    attached = root.text("attached_gpus")
    n_attached = int(attached) if attached and attached.isdigit() else None
    gpus = tuple(gpu_from_tree(bus, node) for bus, node in blocks)
    warnings = list(skipped)
    if n_attached is not None and len(gpus) < n_attached:
        warnings.append(f"{n_attached} GPUs attached but {len(gpus)} GPU blocks read")
    cuda = root.text("cuda_version")
    return SmiQuery(
        gpus=gpus,
        driver_version=driver,
        cuda_version=cuda if cuda and parse_state(cuda) is None else None,
        attached_gpus=n_attached,
        lost_gpus=tuple(lost),
        warnings=tuple(warnings),
        failure=failure,
        effective=query_effective(gpus, n_attached, driver),
    )


def gpu_values(text: str, path: str) -> list[tuple[str, str | None]]:
    """Per GPU block of ``nvidia-smi -q`` text, (bus id, the value at ``path``): a ``/``-joined
    path of snake_case keys, e.g. ``fabric/state`` (``Fabric`` / ``State : Completed``), for
    fields :class:`SmiGpu` does not carry. None where the block has no such key."""
    _, blocks, _, _ = _tree(text)
    out = []
    for bus, node in blocks:
        found = node.get(path)
        out.append((bus, found.value.strip() if found is not None and found.value else None))
    return out


def detect(text: str) -> bool:
    """True when ``text`` looks like ``nvidia-smi -q`` output."""
    head = text[:5000]
    return "NVSMI LOG" in head or ("Attached GPUs" in head and "Driver Version" in head and "<" not in head[:200])
