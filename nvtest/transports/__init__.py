"""Transports: how commands reach nodes. Loaded lazily by name so optional
dependencies stay optional.

``get_transport("local")`` -> :class:`nvtest.transports.local.LocalTransport`.
"""

from __future__ import annotations

import importlib
from typing import Any

from nvtest.errors import ConfigError
from nvtest.transports.base import Command, CommandResult, Transport, render_command

__all__ = ["BACKENDS", "Command", "CommandResult", "Transport", "get_transport", "render_command"]

#: backend name -> "module:Class"
BACKENDS: dict[str, str] = {
    "local": "nvtest.transports.local:LocalTransport",
    "ssh": "nvtest.transports.ssh:SSHTransport",
    "slurm": "nvtest.transports.slurm:SlurmTransport",
}


def get_transport(name: str, **options: Any) -> Transport:
    """Instantiate the transport called ``name`` with ``options``.

    Raises:
        ConfigError: unknown backend, or its optional dependency is missing.
    """
    try:
        target = BACKENDS[name]
    except KeyError:
        raise ConfigError(f"unknown backend {name!r}; known: {', '.join(BACKENDS)}", field="backend") from None
    module_name, cls_name = target.split(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise ConfigError(
            f"backend {name!r} is not available: {exc}. Install nvtest with its dependencies (pip install nvtest).",
            field="backend",
        ) from exc
    cls = getattr(module, cls_name)
    return cls(**options)  # type: ignore[no-any-return]
