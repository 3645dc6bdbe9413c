"""The SKU catalog: load profiles, apply overlays, match a node to its profile.

Profiles are ``configs/skus/*.yaml`` (bundled) plus any directory given with
``--sku-dir``. Matching uses the node's GPU product names, count and memory
(from the inventory probe), in the profile's ``match`` block; a node with no
NVIDIA GPU matches ``cpu-generic``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nvtest.config.inventory import Inventory
from nvtest.config.loader import load_model, load_yaml_with_lines, validate_model
from nvtest.config.resources import configs_dir
from nvtest.config.thresholds import Overlay, SkuProfile
from nvtest.errors import ConfigError

__all__ = ["Catalog", "GpuSummary", "MatchResult", "check_inventory_skus", "load_catalog"]

GENERIC = "cpu-generic"


@dataclass(frozen=True)
class GpuSummary:
    """What SKU matching needs to know of a node's GPUs.

    Attributes:
        names: product name per GPU (``NVIDIA H100 80GB HBM3``).
        memory_mib: total memory per GPU, MiB.
    """

    names: tuple[str, ...] = ()
    memory_mib: tuple[int | None, ...] = ()

    @property
    def count(self) -> int:
        return len(self.names)


@dataclass(frozen=True)
class MatchResult:
    """Which profile a node matched, and why (one line per criterion)."""

    profile: SkuProfile | None
    reasons: tuple[str, ...] = ()
    forced: bool = False

    @property
    def name(self) -> str | None:
        return self.profile.name if self.profile else None


@dataclass
class Catalog:
    """All known SKU profiles, by name, with the file each came from."""

    profiles: dict[str, SkuProfile] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)
    overlay: Overlay | None = None
    overlay_file: str | None = None
    origins: dict[tuple[str, str, str], str] = field(default_factory=dict)

    def names(self) -> list[str]:
        return sorted(self.profiles)

    def get(self, name: str) -> SkuProfile:
        """The profile ``name``.

        Raises:
            ConfigError: unknown SKU (the message lists the known ones).
        """
        try:
            return self.profiles[name]
        except KeyError:
            raise ConfigError(
                f"unknown SKU {name!r}; known: {', '.join(self.names())}. "
                "Write a profile in configs/skus/ (see docs/skus.md) or pass --sku-dir.",
                field="sku",
            ) from None

    def origin(self, sku: str, check: str, metric: str) -> str:
        """``overlay:<file>`` when the overlay set this threshold, else ``profile:<sku>``."""
        return self.origins.get((sku, check, metric), f"profile:{sku}")

    def match(self, gpus: GpuSummary) -> MatchResult:
        """Find the profile for a node with ``gpus``; the most specific match wins.

        A profile matches when every criterion in its ``match`` block holds.
        Specificity = the number of criteria. No GPU -> ``cpu-generic``.
        Returns a MatchResult with profile None (and the reasons each candidate
        was rejected) when nothing matches.
        """
        if gpus.count == 0:
            prof = self.profiles.get(GENERIC)
            return MatchResult(prof, ("no NVIDIA GPU found -> cpu-generic",))
        best: tuple[int, SkuProfile, list[str]] | None = None
        rejected: list[str] = []
        for prof in self.profiles.values():
            m = prof.match
            if m.gpu_name is None and m.gpu_count is None:
                continue
            why: list[str] = []
            ok = True
            score = 0
            if m.gpu_name is not None:
                score += 1
                if all(re.search(m.gpu_name, n, re.IGNORECASE) for n in gpus.names):
                    why.append(f"GPU name matches /{m.gpu_name}/")
                else:
                    ok = False
                    rejected.append(f"{prof.name}: GPU name {gpus.names[0]!r} does not match /{m.gpu_name}/")
            if ok and m.gpu_count is not None:
                score += 1
                if gpus.count == m.gpu_count:
                    why.append(f"{gpus.count} GPUs")
                else:
                    ok = False
                    rejected.append(f"{prof.name}: {gpus.count} GPUs, profile has {m.gpu_count}")
            mems = [x for x in gpus.memory_mib if x is not None]
            if ok and (m.gpu_memory_mib_min is not None or m.gpu_memory_mib_max is not None):
                score += 1
                lo = m.gpu_memory_mib_min or 0
                hi = m.gpu_memory_mib_max or 1 << 40
                if mems and all(lo <= x <= hi for x in mems):
                    why.append(f"GPU memory {min(mems)} MiB within [{lo}, {hi}]")
                else:
                    ok = False
                    rejected.append(f"{prof.name}: GPU memory {mems} MiB outside [{lo}, {hi}]")
            if ok and (best is None or score > best[0]):
                best = (score, prof, why)
        if best is None:
            return MatchResult(None, tuple(rejected) or ("no profile has match criteria",))
        return MatchResult(best[1], tuple(best[2]))


def _profile_files(dirs: Iterable[Path]) -> list[Path]:
    files: list[Path] = []
    for d in dirs:
        if not d.is_dir():
            raise ConfigError("SKU directory does not exist", path=str(d))
        files.extend(sorted(d.glob("*.yaml")))
    return files


def load_catalog(extra_dirs: Sequence[Path] = (), overlay: Path | None = None) -> Catalog:
    """Load the bundled profiles, then ``extra_dirs`` (a later file of the same
    name replaces an earlier one), then apply ``overlay``.

    Raises:
        ConfigError: a profile or the overlay is invalid (file, line, field).
    """
    cat = Catalog()
    for path in _profile_files([configs_dir() / "skus", *extra_dirs]):
        prof = load_model(SkuProfile, path)
        if prof.name != path.stem:
            raise ConfigError(f"name {prof.name!r} differs from the file name {path.stem!r}", path=str(path), field="name")
        cat.profiles[prof.name] = prof
        cat.files[prof.name] = str(path)
    if overlay is not None:
        data, lines = load_yaml_with_lines(overlay)
        if data is None:
            raise ConfigError("file is empty", path=str(overlay))
        ov = validate_model(Overlay, data, path=str(overlay), lines=lines)
        for i, name in enumerate(ov.applies_to or []):
            if name not in cat.profiles:
                try:
                    cat.get(name)
                except ConfigError as exc:
                    line = lines.get(("applies_to", i)) or lines.get(("applies_to",))
                    raise ConfigError(exc.reason, path=str(overlay), line=line, field=f"applies_to.{i}") from None
        apply_overlay(cat, ov, str(overlay))
    return cat


def apply_overlay(cat: Catalog, ov: Overlay, path: str) -> None:
    """Replace thresholds and recipe values of the profiles the overlay applies to.

    Raises:
        ConfigError: ``applies_to`` names an unknown SKU.
    """
    targets = ov.applies_to or list(cat.profiles)
    for name in targets:
        prof = cat.get(name)
        thresholds: dict[str, Any] = {c: dict(ms) for c, ms in prof.thresholds.items()}
        for check, metrics in ov.thresholds.items():
            for metric, thr in metrics.items():
                thresholds.setdefault(check, {})[metric] = thr
                cat.origins[(name, check, metric)] = f"overlay:{path}"
        recipe = {**prof.recipe, **ov.recipe}
        cat.profiles[name] = prof.model_copy(update={"thresholds": thresholds, "recipe": recipe})
    cat.overlay = ov
    cat.overlay_file = path


def check_inventory_skus(inventory: Inventory, catalog: Catalog) -> None:
    """Every SKU the inventory names is a profile of ``catalog``.

    Raises:
        ConfigError: an unknown SKU, naming the inventory file and the line of its ``sku:``.
    """
    for name in sorted({n.sku for n in inventory.nodes if n.sku}):
        if name not in catalog.profiles:
            try:
                catalog.get(name)
            except ConfigError as exc:
                raise ConfigError(
                    exc.reason, path=inventory.source, line=inventory.sku_lines.get(name), field="sku"
                ) from None
