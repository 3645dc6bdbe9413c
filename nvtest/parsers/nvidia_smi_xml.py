"""Parser for ``nvidia-smi -q -x`` XML (DTDs nvsmi_device_v10 through v12 and later).

Uses :mod:`xml.etree.ElementTree` (the DTD is not fetched) and maps each ``<gpu id=...>``
element to the same :class:`~nvtest.parsers.nvidia_smi_q.SmiGpu` record as the ``-q`` text,
through :func:`~nvtest.parsers.nvidia_smi_q.gpu_from_tree`. Text before the XML declaration
(a prompt, a command line) is skipped.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from nvtest.parsers._common import ParseError, guarded, lost_gpu, parse_state
from nvtest.parsers.nvidia_smi_q import Node, SmiQuery, gpu_from_tree

TOOL = "nvidia-smi-xml"
DESCRIPTION = "nvidia-smi -q -x XML: the -q record from any DTD version"

__all__ = ["detect", "parse"]


def _node(el: ET.Element) -> Node:
    return Node(el.text, [(child.tag, _node(child)) for child in el])


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
    try:
        root = ET.fromstring(body)
    except ET.ParseError as exc:
        line = exc.position[0] + text.count("\n", 0, start) if exc.position else None
        raise ParseError(
            TOOL, f"malformed XML: {exc}", line=line, expected="well-formed XML"
        ) from None
    if root.tag != "nvidia_smi_log":
        raise ParseError(TOOL, f"root element is <{root.tag}>", line=1, expected="<nvidia_smi_log>")
    gpus = tuple(gpu_from_tree(el.get("id", ""), _node(el)) for el in root.findall("gpu"))
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
