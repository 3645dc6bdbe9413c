"""The gate's site settings: a SKU profile's (or overlay's) ``recipe.gate`` block.

::

    recipe:
      gate:
        disk_free_gib: {"/": 5, "/tmp": 10}      # GiB that must be free on each path
        memory_available_gib: 16                 # MemAvailable of /proc/meminfo, GiB
        mounts: [/home, /scratch]                # must be mounted (and answer in time)
        services: [munge, nvidia-persistenced]   # systemctl is-active must say "active"
        hcas: [mlx5_0, mlx5_1]                   # judge exactly these HCAs (default: see ib_ports)
        ib_counter_max_per_h: {symbol_error: 100, port_rcv_errors: 100}

The schema is :class:`nvtest.config.recipes.GateRecipe`, checked where the profile or overlay
loads. Values not given are nvtest's defaults (:data:`DEFAULTS`), which name themselves as the
source of their threshold in every decision.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from nvtest.config.recipes import GateRecipe
from nvtest.config.skus import Catalog
from nvtest.config.thresholds import SkuProfile
from nvtest.errors import ConfigError

__all__ = ["DEFAULTS", "GateRecipe", "gate_recipe", "provisional_recipe"]

#: The source named by a threshold nvtest chose itself.
DEFAULT_SOURCE = "nvtest gate default (docs/operations.md)"


#: nvtest's defaults.
DEFAULTS = GateRecipe()


def gate_recipe(sku: SkuProfile | None, catalog: Catalog) -> tuple[GateRecipe, str]:
    """The SKU's gate recipe and the source its thresholds name (``profile:<sku>
    recipe.gate``, ``overlay:<file> recipe.gate`` or the default's).

    Raises:
        ConfigError: the block has an unknown key or a wrong type (file and field named).
    """
    raw: Any = (sku.recipe.get("gate") if sku else None) or None
    if raw is None:
        return DEFAULTS, DEFAULT_SOURCE
    where = catalog.files.get(sku.name) if sku else None
    origin = f"profile:{sku.name if sku else '?'} recipe.gate"
    if catalog.overlay is not None and "gate" in (catalog.overlay.recipe or {}):
        where, origin = catalog.overlay_file, f"overlay:{catalog.overlay_file} recipe.gate"
    return _validated(raw, where, origin)


def provisional_recipe(catalog: Catalog, name: str | None) -> tuple[GateRecipe, str, SkuProfile | None]:
    """The recipe the gate starts with before nvidia-smi has answered: the profile ``name``'s
    (``--sku``, or the SKU the node last matched), else the site overlay's when it applies to
    every profile, else the defaults; (recipe, its source, the profile or None).

    Raises:
        ConfigError: as :func:`gate_recipe`.
    """
    if name and name in catalog.profiles:
        prof = catalog.profiles[name]
        return (*gate_recipe(prof, catalog), prof)
    ov = catalog.overlay
    if ov is not None and not ov.applies_to and (ov.recipe or {}).get("gate"):
        origin = f"overlay:{catalog.overlay_file} recipe.gate"
        return _validated(ov.recipe["gate"], catalog.overlay_file, origin)[0], origin, None
    return DEFAULTS, DEFAULT_SOURCE, None


def _validated(raw: Any, where: str | None, origin: str) -> tuple[GateRecipe, str]:
    try:
        return GateRecipe.model_validate(raw), origin
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        raise ConfigError(err["msg"], path=where, field=f"recipe.gate.{loc}") from None
