"""Parser for ``nvidia-smi -q -x`` XML (DTDs nvsmi_device_v10 through v13, drivers up to 595).

DTD v13 (declared by the real 590.44, 595.58 and 595.84 documents of the corpus) drops
``gpu_power_readings/power_draw`` for ``instant_power_draw`` and ``average_power_draw`` (the
power draw is read from the first of them that holds a number), prints ``Requested
functionality has been deprecated`` for ``display_mode``, ``power_state`` and the application
clocks (none of which is read), splits the ECC counters into ``sram_*``/``dram_*`` (summed the
same way), and adds elements the reader ignores (``pdi``, ``platformInfo``, ``addressing_mode``,
``dram_encryption_mode``, ``fabric/health``, ``power_profiles``).

Uses :mod:`xml.etree.ElementTree` (the DTD is not fetched) and maps each ``<gpu id=...>``
element to the same :class:`~nvtest.parsers.nvidia_smi_q.SmiGpu` record as the ``-q`` text,
through :func:`~nvtest.parsers.nvidia_smi_q.gpu_from_tree`. Text before the XML declaration
(a prompt, a command line) is skipped; nvidia-smi's failure lines around the document (the
shared :data:`~nvtest.parsers.nvidia_smi.FAILURES`: ``Failed to initialize NVML``, ``Unable to
determine the device handle ...``), or in place of it, set ``failure``. A document cut short
(a killed command) is ``crash_after_partial_output`` with the GPU blocks that were complete.
``effective`` names the DTD the document declares (``nvsmi_device_v12.dtd``).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass

from nvtest.parsers._common import (
    FailureKind,
    ParseError,
    ToolFailure,
    guarded,
    lost_gpu,
    not_tool_output,
    numbered_lines,
    parse_state,
)
from nvtest.parsers.nvidia_smi import FAILURES
from nvtest.parsers.nvidia_smi_q import SmiGpu, SmiQuery, gpu_from_tree, query_effective

TOOL = "nvidia-smi-xml"
DESCRIPTION = "nvidia-smi -q -x XML: the -q record from any DTD version"

__all__ = ["FAILURES", "GpuIdentity", "XmlNode", "detect", "identities", "parse"]


class XmlNode:
    """A read-only view of an Element with the :class:`~nvtest.parsers.nvidia_smi_q.SmiTextNode` API.

    No tree is copied: lookups go through ElementTree's own ``find`` (tag paths ``a/b/c``).
    """

    __slots__ = ("el",)

    def __init__(self, el: ET.Element) -> None:
        self.el = el

    @property
    def value(self) -> str | None:
        """The element's text."""
        return self.el.text

    @property
    def children(self) -> list[tuple[str, XmlNode]]:
        """``(tag, node)`` of each child element, in order."""
        return [(c.tag, XmlNode(c)) for c in self.el]

    def child(self, key: str) -> XmlNode | None:
        """First child element called ``key``."""
        c = self.el.find(key)
        return None if c is None else XmlNode(c)

    def _find(self, path: str) -> ET.Element | None:
        # one C-level find per step: faster than ElementPath for plain tag paths
        el: ET.Element | None = self.el
        for part in path.split("/"):
            el = el.find(part) if el is not None else None
        return el

    def get(self, *paths: str) -> XmlNode | None:
        """The element at the first of ``paths`` that exists."""
        for path in paths:
            c = self._find(path)
            if c is not None:
                return XmlNode(c)
        return None

    def text(self, *paths: str) -> str | None:
        """The stripped text at the first existing path, or None."""
        for path in paths:
            c = self._find(path)
            if c is not None:
                return c.text.strip() if c.text is not None else None
        return None


#: Blocks the record does not read; cut before parsing (they are most of a -q -x document).
_UNREAD_BLOCKS = (
    "supported_clocks",
    "processes",
    "accounted_processes",
    "encoder_stats",
    "fbc_stats",
    "applications_clocks",
    "default_applications_clocks",
    "deferred_clocks",
    "supported_gpu_target_temp",
    "voltage",
    "capabilities",
    "module_power_readings",
    "gpu_memory_power_readings",
)


_UNREAD_RE = re.compile(r"<(" + "|".join(_UNREAD_BLOCKS) + r")>.*?</\1>", re.S)
_MIG_RE = re.compile(r"<mig_devices>(.*?)</mig_devices>", re.S)


def _squeeze(body: str) -> str:
    """Cut the blocks of :data:`_UNREAD_BLOCKS` and replace each ``<mig_devices>`` block by
    ``<mig_devices count="N"/>`` (one regex pass each), so ElementTree parses less."""
    body = _UNREAD_RE.sub("", body)
    return _MIG_RE.sub(lambda m: f'<mig_devices count="{m.group(1).count("<mig_device>")}"/>', body)


def _gpu(el: ET.Element) -> SmiGpu:
    mig = el.find("mig_devices")
    count = mig.get("count") if mig is not None else None
    return gpu_from_tree(el.get("id", ""), XmlNode(el), int(count) if count and count.isdigit() else None)


_DTD_RE = re.compile(r'<!DOCTYPE\s+nvidia_smi_log\s+SYSTEM\s+"([^"]+)"')
_GPU_BLOCK_RE = re.compile(r"<gpu\b[^>]*>.*?</gpu>", re.S)
_DRIVER_RE = re.compile(r"<driver_version>\s*([^<]*?)\s*</driver_version>")


def _outside(text: str, start: int, end: int) -> tuple[tuple[str, ...], ToolFailure | None]:
    """Lost GPUs and the first failure line in the text before and after the XML document
    (``start < 0``: there is no document, the whole text is outside)."""
    parts = [(0, text)] if start < 0 else [(0, text[:start]), (text.count("\n", 0, end), text[end:])]
    lines = [(offset + no, ln) for offset, part in parts for no, ln in numbered_lines(part)]
    lost = tuple(g for _, ln in lines if (g := lost_gpu(ln)))
    return lost, FAILURES.scan(lines)


def _salvage(body: str, exc: ET.ParseError, line: int | None) -> tuple[list[SmiGpu], ToolFailure]:
    """The complete ``<gpu>`` blocks of a document that does not parse (cut short)."""
    gpus: list[SmiGpu] = []
    for block in _GPU_BLOCK_RE.findall(body):
        try:
            gpus.append(_gpu(ET.fromstring(block)))
        except ET.ParseError:
            break
    where = f" at line {line}" if line else ""
    failure = ToolFailure(
        FailureKind.CRASH_AFTER_PARTIAL_OUTPUT,
        f"XML document cut short or malformed{where}: {exc}",
        None,
        "malformed XML",
    )
    return gpus, failure


@guarded(TOOL)
def parse(text: str) -> SmiQuery:
    """Parse ``nvidia-smi -q -x`` output into an :class:`~nvtest.parsers.nvidia_smi_q.SmiQuery`.

    Raises:
        ParseError: not nvidia-smi's output: no ``<nvidia_smi_log>`` document and no failure
            line of :data:`FAILURES`, or an XML document whose root is another element.
    """
    start = text.find("<?xml")
    if start < 0:
        start = text.find("<nvidia_smi_log")
    end = text.rfind("</nvidia_smi_log>")
    end = end + len("</nvidia_smi_log>") if end > start >= 0 else len(text)
    lost, failure = _outside(text, start, end)
    if start < 0:
        if failure is None:
            raise not_tool_output(TOOL, "<?xml ...?> or <nvidia_smi_log>", text)
        return SmiQuery(gpus=(), lost_gpus=lost, failure=failure, effective=query_effective((), None, None))
    body = _squeeze(text[start:end])
    dtd = _DTD_RE.search(body)
    try:
        root = ET.fromstring(body)
    except ET.ParseError as exc:
        line = exc.position[0] + text.count("\n", 0, start) if exc.position else None
        if "<nvidia_smi_log" not in body:
            raise ParseError(TOOL, f"malformed XML: {exc}", line=line, expected="well-formed XML") from None
        salvaged, cut = _salvage(body, exc, line)
        dm = _DRIVER_RE.search(body)
        driver = dm.group(1) if dm else None
        return SmiQuery(
            gpus=tuple(salvaged),
            driver_version=driver,
            lost_gpus=lost,
            warnings=(f"XML cut short: {len(salvaged)} complete <gpu> element(s) read",),
            failure=failure or cut,
            effective=query_effective(salvaged, None, driver, dtd=dtd.group(1) if dtd else None),
        )
    if root.tag != "nvidia_smi_log":
        raise ParseError(TOOL, f"root element is <{root.tag}>", line=1, expected="<nvidia_smi_log>")
    gpus = tuple(_gpu(el) for el in root.findall("gpu"))
    attached = (root.findtext("attached_gpus") or "").strip()
    n_attached = int(attached) if attached and attached.isdigit() else None
    warnings = []
    if n_attached is not None and len(gpus) < n_attached:
        warnings.append(f"{n_attached} GPUs attached but {len(gpus)} <gpu> elements read")
    cuda = (root.findtext("cuda_version") or "").strip()
    driver = (root.findtext("driver_version") or "").strip() or None
    return SmiQuery(
        gpus=gpus,
        driver_version=driver,
        cuda_version=cuda if cuda and parse_state(cuda) is None else None,
        attached_gpus=n_attached,
        lost_gpus=lost,
        warnings=tuple(warnings),
        failure=failure,
        effective=query_effective(gpus, n_attached, driver, dtd=dtd.group(1) if dtd else None),
    )


def detect(text: str) -> bool:
    """True when ``text`` holds an ``nvidia_smi_log`` XML document."""
    return "<nvidia_smi_log" in text[:5000]


@dataclass(frozen=True)
class GpuIdentity:
    """What a ``<gpu>`` element says the board *is* (the as-built record's fields, not its state).

    Each value is the element's text as printed (``N/A`` kept: the tool's own word for "not
    reported"), or None when the element is absent (older DTDs have no ``gpu_part_number``).
    """

    pci_bus_id: str
    product_name: str | None = None
    serial: str | None = None
    uuid: str | None = None
    vbios_version: str | None = None
    board_part_number: str | None = None
    gpu_part_number: str | None = None
    inforom_image: str | None = None
    inforom_oem: str | None = None
    inforom_ecc: str | None = None
    inforom_pwr: str | None = None


_IDENTITY_PATHS = {
    "product_name": "product_name",
    "serial": "serial",
    "uuid": "uuid",
    "vbios_version": "vbios_version",
    "board_part_number": "board_part_number",
    "gpu_part_number": "gpu_part_number",
    "inforom_image": "inforom_version/img_version",
    "inforom_oem": "inforom_version/oem_object",
    "inforom_ecc": "inforom_version/ecc_object",
    "inforom_pwr": "inforom_version/pwr_object",
}


def identities(text: str) -> tuple[GpuIdentity, ...]:
    """The identity of every complete ``<gpu>`` element of an ``nvidia-smi -q -x`` document,
    in document order (a document cut short gives the GPUs before the cut).

    Raises:
        ParseError: no ``<nvidia_smi_log`` document in ``text``.
    """
    if "<nvidia_smi_log" not in text:
        raise not_tool_output(TOOL, "<nvidia_smi_log>", text)
    out = []
    for block in _GPU_BLOCK_RE.finditer(_squeeze(text)):
        try:
            el = ET.fromstring(block.group(0))
        except ET.ParseError:
            continue
        values = {}
        for name, path in _IDENTITY_PATHS.items():
            found = el.findtext(path)
            values[name] = found.strip() if found is not None and found.strip() else None
        bus = (el.findtext("pci/pci_bus_id") or el.get("id") or "").strip()
        out.append(GpuIdentity(pci_bus_id=bus, **values))
    return tuple(out)
