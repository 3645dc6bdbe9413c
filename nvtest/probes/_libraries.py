"""Optional libraries of the probes: lazy imports, the disable switch, version labels.

numpy, torch, cupy and pynvml may or may not be on a node; a probe imports them
only through :func:`optional_import` or :func:`require`, so a missing (or broken)
one is a skip or a fallback, never an ImportError.

Environment switch:

``NVTEST_PROBE_DISABLE=torch,cupy,...``
    behave as if these optional components were absent (``numpy``, ``torch``,
    ``cupy``, ``pynvml``, ``cc`` for the C compiler, ``nvbandwidth``); used by
    tests and by operators to force a fallback path.  Probes that run a tool
    (``cc``, ``nvbandwidth``) check :func:`disabled` themselves.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import _contract as contract

DISABLE_ENV = "NVTEST_PROBE_DISABLE"


def disabled() -> set[str]:
    """Names listed in ``$NVTEST_PROBE_DISABLE`` (comma or space separated, lower case)."""
    raw = os.environ.get(DISABLE_ENV, "")
    return {p.strip().lower() for p in raw.replace(" ", ",").split(",") if p.strip()}


def optional_import(name: str) -> tuple[ModuleType | None, str | None]:
    """Import an optional module: ``(module, None)`` or ``(None, reason it is absent)``.

    ``name`` may be dotted (``"torch.distributed"``); its top-level package is
    what :func:`disabled` is checked against.  Any exception raised by the
    import (not only ImportError: a broken CUDA install can raise OSError or
    RuntimeError) counts as absent, with its text; nothing is raised.
    """
    top = name.split(".")[0].lower()
    if top in disabled():
        return None, f"{top} disabled by {DISABLE_ENV}"
    try:
        return importlib.import_module(name), None
    except Exception as exc:  # noqa: BLE001 - any failure means "not usable here"
        return None, f"{name} not importable: {type(exc).__name__}: {exc}"


def require(name: str) -> ModuleType:
    """Import a module the probe cannot run without.

    Raises:
        ProbeSkip: the module is disabled or not importable (the reason of
            :func:`optional_import`).
    """
    mod, reason = optional_import(name)
    if mod is None:
        raise contract.ProbeSkip(reason)
    return mod


def library_label(mod: ModuleType | None) -> str | None:
    """``"torch 2.13.0"`` style label of an imported module (``__version__``; None for None)."""
    if mod is None:
        return None
    version = getattr(mod, "__version__", "unknown")
    return f"{mod.__name__} {version}"
