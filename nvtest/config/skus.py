"""The SKU catalog: load profiles, apply overlays, match a node to its profile.

Profiles are ``configs/skus/*.yaml`` (bundled) plus any directory given with
``--sku-dir``. Matching uses, in the profile's ``match`` block, the PCI device ids
and count of the NVIDIA GPUs on the node's PCI bus (the source that cannot lie by
failing), then the GPU product names and memory that nvidia-smi reports. A node
whose bus shows NVIDIA GPUs never matches ``cpu-generic``, even when nvidia-smi
reports none; ``cpu-generic`` needs a bus that was read and shows no NVIDIA GPU.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nvtest.config.inventory import Inventory
from nvtest.config.loader import load_model, load_yaml_with_lines, salvage_model, validate_model
from nvtest.config.resources import configs_dir
from nvtest.config.thresholds import Overlay, SkuProfile
from nvtest.errors import ConfigError

__all__ = [
    "Catalog",
    "GpuSummary",
    "MatchResult",
    "add_profile",
    "check_inventory_skus",
    "load_catalog",
    "load_overlay",
    "profile_files",
]

GENERIC = "cpu-generic"


@dataclass(frozen=True)
class GpuSummary:
    """What SKU matching needs to know of a node's GPUs.

    Attributes:
        names: product name per GPU as nvidia-smi reports it (``NVIDIA H100 80GB HBM3``).
        memory_mib: total memory per GPU, MiB (nvidia-smi).
        bus_device_ids: PCI device id of each NVIDIA GPU function on the bus (``2330``).
        bus_read: whether the PCI bus could be read at all (absence is proven only then).
        bus_text: how the bus was read, for the reasons (``sysfs ...: 6 functions``).
    """

    names: tuple[str, ...] = ()
    memory_mib: tuple[int | None, ...] = ()
    bus_device_ids: tuple[str, ...] = ()
    bus_read: bool = True
    bus_text: str = ""

    @property
    def count(self) -> int:
        """GPUs the node has: the larger of the bus's and nvidia-smi's counts."""
        return max(len(self.names), len(self.bus_device_ids))


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

        A profile matches when every criterion in its ``match`` block holds; a
        criterion on what nvidia-smi reports (name, memory) is not applied when
        nvidia-smi reports no GPU while the bus shows some (the profile is then
        matched on the bus alone, and says so). Specificity = the number of
        criteria applied. No GPU on a bus that was read -> ``cpu-generic``; a bus
        that could not be read and no GPU reported: no profile (absence unproven).
        Returns a MatchResult with profile None (and the reasons each candidate
        was rejected) when nothing matches.
        """
        if gpus.count == 0:
            if not gpus.bus_read:
                return MatchResult(
                    None, (f"no GPU reported and the PCI bus could not be read ({gpus.bus_text}): absence unproven",)
                )
            prof = self.profiles.get(GENERIC)
            where = f" ({gpus.bus_text})" if gpus.bus_text else ""
            return MatchResult(prof, (f"the PCI bus shows no NVIDIA GPU{where} -> cpu-generic",))
        best: tuple[int, SkuProfile, list[str]] | None = None
        rejected: list[str] = []
        bus_only = not gpus.names
        bus_ids = [d for d in gpus.bus_device_ids if d and d != "?"]
        for prof in self.profiles.values():
            m = prof.match
            if m.gpu_name is None and m.gpu_count is None and not m.pci_device_ids:
                continue
            if m.gpu_count == 0:
                continue
            why: list[str] = []
            ok = True
            score = 0
            if m.pci_device_ids and bus_ids:
                score += 1
                ids = {i.lower() for i in m.pci_device_ids}
                if all(d.lower() in ids for d in bus_ids):
                    why.append(f"PCI bus: {len(bus_ids)} x 10de:{bus_ids[0]}")
                else:
                    ok = False
                    rejected.append(f"{prof.name}: PCI device ids {sorted(set(bus_ids))} not in {sorted(ids)}")
            elif bus_only and not (m.pci_device_ids and bus_ids):
                ok = False
                rejected.append(f"{prof.name}: no pci_device_ids to match on the bus alone (nvidia-smi reports no GPU)")
            if ok and m.gpu_name is not None and bus_only:
                why.append("GPU name not checked: nvidia-smi reports no GPU")
            elif ok and m.gpu_name is not None:
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
            if ok and not bus_only and (m.gpu_memory_mib_min is not None or m.gpu_memory_mib_max is not None):
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


def profile_files(dirs: Iterable[Path]) -> list[Path]:
    """The ``*.yaml`` files of ``dirs``, each directory's sorted, in the order given.

    Raises:
        ConfigError: a directory does not exist.
    """
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
    for path in profile_files([configs_dir() / "skus", *extra_dirs]):
        add_profile(cat, path)
    if overlay is not None:
        apply_overlay(cat, load_overlay(overlay, cat), str(overlay))
    return cat


def overlay_part(loc: tuple[Any, ...]) -> tuple[Any, ...] | None:
    """The part of an overlay an error at ``loc`` breaks that can be left out (see
    :func:`nvtest.config.loader.salvage_model`): a key of a recipe section, a whole recipe
    section, a metric's threshold or a check's thresholds; the profile's own value of a part
    left out stays. None for the rest (``name``, ``applies_to``, the file's shape): without
    them the overlay's intent is unknown."""
    return tuple(loc[:3]) if len(loc) >= 2 and loc[0] in ("recipe", "thresholds") else None


def profile_part(loc: tuple[Any, ...]) -> tuple[Any, ...] | None:
    """As :func:`overlay_part`, for a profile: a key of its ``recipe.gate`` only (the gate
    judges without it: the checks that read it are ``unknown``). A profile's other parts
    (``expect``, thresholds) are what its checks judge against: a profile missing one would
    judge less than it says, so an error there leaves the whole profile out."""
    return tuple(loc[:3]) if len(loc) >= 3 and tuple(loc[:2]) == ("recipe", "gate") else None


def add_profile(cat: Catalog, path: Path, cut: list[ConfigError] | None = None) -> SkuProfile:
    """Load the profile file ``path`` into ``cat`` (replacing one of the same name).

    With ``cut`` (a list), an invalid key of its ``recipe.gate`` is left out
    (:func:`profile_part`) and its error appended to ``cut``; the rest loads.

    Raises:
        ConfigError: the file is invalid (beyond what ``cut`` takes), or its ``name`` is not
            its file name.
    """
    if cut is None:
        prof = load_model(SkuProfile, path)
    else:
        data, lines = load_yaml_with_lines(path)
        if data is None:
            raise ConfigError("file is empty", path=str(path))
        prof = salvage_model(SkuProfile, data, path=str(path), lines=lines, part=profile_part, cut=cut)
    if prof.name != path.stem:
        raise ConfigError(f"name {prof.name!r} differs from the file name {path.stem!r}", path=str(path), field="name")
    cat.profiles[prof.name] = prof
    cat.files[prof.name] = str(path)
    return prof


def load_overlay(path: Path, cat: Catalog, cut: list[ConfigError] | None = None) -> Overlay:
    """Read and validate the overlay at ``path``; every SKU its ``applies_to`` names is in ``cat``.

    With ``cut`` (a list), each invalid part :func:`overlay_part` names is left out and its
    error appended to ``cut``; the rest of the overlay is returned.

    Raises:
        ConfigError: unreadable, empty, invalid (beyond what ``cut`` takes), or an unknown
            SKU in ``applies_to`` (file, line, field).
    """
    data, lines = load_yaml_with_lines(path)
    if data is None:
        raise ConfigError("file is empty", path=str(path))
    if cut is None:
        ov = validate_model(Overlay, data, path=str(path), lines=lines)
    else:
        ov = salvage_model(Overlay, data, path=str(path), lines=lines, part=overlay_part, cut=cut)
    for i, name in enumerate(ov.applies_to or []):
        if name not in cat.profiles:
            try:
                cat.get(name)
            except ConfigError as exc:
                line = lines.get(("applies_to", i)) or lines.get(("applies_to",))
                raise ConfigError(exc.reason, path=str(path), line=line, field=f"applies_to.{i}") from None
    return ov


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
