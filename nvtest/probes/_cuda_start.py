"""Why CUDA cannot start on this node, in CUDA's own words (standard library + torch/cupy).

A probe asked for ``--device cuda`` (the controller asks for it on every node whose
PCI bus shows NVIDIA GPUs) must not skip or fall back to the CPU when no GPU library
can use a device: it reports an error carrying what CUDA said, e.g. torch's
``CUDA initialization: Unexpected error from cudaGetDeviceCount() ... Error 802:
system not yet initialized`` or ``Torch not compiled with CUDA enabled``.
``torch.cuda.is_available()`` only returns False and warns; ``torch.cuda.init()``
raises with the driver's message, and both are collected here.
"""

from __future__ import annotations

import warnings


def torch_words() -> str | None:
    """torch's own account of CUDA initialisation (the exception and its warnings), or None."""
    try:
        import torch
    except Exception as exc:  # noqa: BLE001 - any import failure is the answer
        return f"torch not importable: {type(exc).__name__}: {exc}"
    said = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            torch.cuda.init()
            count = torch.cuda.device_count()
            if count == 0:
                said.append("torch.cuda.device_count() is 0")
        except Exception as exc:  # noqa: BLE001 - CUDA errors of every kind
            said.append(f"torch.cuda.init(): {type(exc).__name__}: {exc}")
    said = [str(w.message).splitlines()[0] for w in caught] + said
    return "; ".join(dict.fromkeys(s for s in said if s)) or None


#: The cause key of the probe's error (the document's ``cause``; the Playbook's cuda_cannot_start).
CAUSE = "cuda:cannot_start"


def cuda_failure(library_reason: object) -> str:
    """The probe's error for ``--device cuda`` when no GPU library can use a device."""
    words = torch_words()
    return f"CUDA cannot start: {words + '; ' if words else ''}{library_reason}"
