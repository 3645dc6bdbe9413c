"""Parser for ``nvidia-smi -q -x`` XML (DTDs nvsmi_device_v10 through v12 and later).

Uses :mod:`xml.etree.ElementTree` (the DTD is not fetched) and maps each ``<gpu id=...>``
element to the same :class:`~nvtest.parsers.nvidia_smi_q.SmiGpu` record as the ``-q`` text,
through :func:`~nvtest.parsers.nvidia_smi_q.gpu_from_tree`. Text before the XML declaration
(a prompt, a command line) is skipped.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from nvtest.parsers._common import ParseError, guarded, lost_gpu, parse_state
from nvtest.parsers.nvidia_smi_q import SmiGpu, SmiQuery, gpu_from_tree

TOOL = "nvidia-smi-xml"
DESCRIPTION = "nvidia-smi -q -x XML: the -q record from any DTD version"

__all__ = ["XmlNode", "detect", "parse"]


class XmlNode:
    """A read-only view of an Element with the :class:`~nvtest.parsers.nvidia_smi_q.Node` API.

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
    return gpu_from_tree(
        el.get("id", ""), XmlNode(el), int(count) if count and count.isdigit() else None
    )


@guarded(TOOL)
def parse(text: str) -> SmiQuery:
    """Parse ``nvidia-smi -q -x`` output into an :class:`~nvtest.parsers.nvidia_smi_q.SmiQuery`.

    Raises:
        ParseError: no ``<nvidia_smi_log>`` document, or malformed XML (with its line number).
    """
    start = text.find("<?xml")
    if start < 0:
        start = text.find("<nvidia_smi_log")
    if start < 0:
        raise ParseError(TOOL, "no XML document", expected="<?xml ...?> or <nvidia_smi_log>")
    lost = tuple(g for line in text[:start].splitlines() if (g := lost_gpu(line)))
    end = text.rfind("</nvidia_smi_log>")
    body = text[start : end + len("</nvidia_smi_log>")] if end > start else text[start:]
    body = _squeeze(body)
    try:
        root = ET.fromstring(body)
    except ET.ParseError as exc:
        line = exc.position[0] + text.count("\n", 0, start) if exc.position else None
        raise ParseError(
            TOOL, f"malformed XML: {exc}", line=line, expected="well-formed XML"
        ) from None
    if root.tag != "nvidia_smi_log":
        raise ParseError(TOOL, f"root element is <{root.tag}>", line=1, expected="<nvidia_smi_log>")
    gpus = tuple(_gpu(el) for el in root.findall("gpu"))
    attached = (root.findtext("attached_gpus") or "").strip()
    n_attached = int(attached) if attached and attached.isdigit() else None
    warnings = []
    if n_attached is not None and len(gpus) < n_attached:
        warnings.append(f"{n_attached} GPUs attached but {len(gpus)} <gpu> elements read")
    cuda = (root.findtext("cuda_version") or "").strip()
    return SmiQuery(
        gpus=gpus,
        driver_version=(root.findtext("driver_version") or "").strip() or None,
        cuda_version=cuda if cuda and parse_state(cuda) is None else None,
        attached_gpus=n_attached,
        lost_gpus=lost,
        warnings=tuple(warnings),
    )


def detect(text: str) -> bool:
    """True when ``text`` holds an ``nvidia_smi_log`` XML document."""
    return "<nvidia_smi_log" in text[:5000]
