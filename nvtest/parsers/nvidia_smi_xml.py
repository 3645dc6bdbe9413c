"""Parser for ``nvidia-smi -q -x`` XML (DTDs nvsmi_device_v10 through v12 and later).

Uses :mod:`xml.etree.ElementTree` (the DTD is not fetched) and maps each ``<gpu id=...>``
element to the same :class:`~nvtest.parsers.nvidia_smi_q.SmiGpu` record as the ``-q`` text,
through :func:`~nvtest.parsers.nvidia_smi_q.gpu_from_tree`. Text before the XML declaration
(a prompt, a command line) is skipped.
"""

from __future__ import annotations

import dataclasses
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


def _squeeze(body: str, tag: str, count: str | None = None) -> str:
    """Replace every ``<tag>...</tag>`` block by ``<tag count="N"/>`` before parsing.

    Used for bulk the record does not read (supported clocks, MIG device details); ``N`` is the
    number of ``<count>`` elements the block held, so MIG devices can still be counted per GPU.
    """
    open_t, close_t = f"<{tag}>", f"</{tag}>"
    start = body.find(open_t)
    while start >= 0:
        end = body.find(close_t, start)
        if end < 0:
            break
        n = body.count(f"<{count}>", start, end) if count else 0
        stub = f'<{tag} count="{n}"/>'
        body = body[:start] + stub + body[end + len(close_t) :]
        start = body.find(open_t, start + len(stub))
    return body


def _gpu(el: ET.Element) -> SmiGpu:
    gpu = gpu_from_tree(el.get("id", ""), XmlNode(el))
    mig = el.find("mig_devices")
    if mig is not None and mig.get("count", "").isdigit():
        gpu = dataclasses.replace(gpu, mig_device_count=int(mig.get("count", "0")))
    return gpu


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
    for tag in _UNREAD_BLOCKS:
        body = _squeeze(body, tag)
    body = _squeeze(body, "mig_devices", "mig_device")
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
