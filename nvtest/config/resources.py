"""Where the bundled suites, configs and probes are, in a checkout or an installed wheel.

In a checkout the top-level ``suites/`` and ``configs/`` are used; in a wheel
they are shipped as ``nvtest/_bundled/{suites,configs}``.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["configs_dir", "probes_dir", "suites_dir"]

_PKG = Path(__file__).resolve().parent.parent  # the nvtest package


def _bundled(name: str) -> Path:
    checkout = _PKG.parent / name
    if checkout.is_dir() and (_PKG.parent / "pyproject.toml").is_file():
        return checkout
    return _PKG / "_bundled" / name


def suites_dir() -> Path:
    """The directory holding ``<area>/test_*.py`` check modules."""
    return _bundled("suites")


def configs_dir() -> Path:
    """The directory holding ``skus/``, ``suites/`` and ``inventories/``."""
    return _bundled("configs")


def probes_dir() -> Path:
    """The node-side probes directory (shipped to nodes as a whole)."""
    return _PKG / "probes"
