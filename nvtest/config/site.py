"""The site's configuration as recorded problems, not exceptions: for the gate and ``nvtest config check``.

:func:`nvtest.config.skus.load_catalog` stops at the first invalid file (``nvtest run`` must
not start on a mistake). The gate must not stop: it runs in every job's path, and a mistake
in a site file must neither switch its judging off nor drain a healthy fleet. So
:func:`load_site` loads every profile file and the overlay one by one; a file that fails is
left out and becomes a :class:`ConfigProblem` (file, line, key, message, nearest name),
and the rest is loaded as usual: the shipped profiles, the valid ``--sku-dir`` profiles,
and the overlay where it is valid.

The unit left out is the key, not the file, where the file still says what it means: an
overlay that reads as a mapping with a valid ``name`` and ``applies_to`` is applied without
its invalid recipe keys and thresholds (:func:`nvtest.config.skus.overlay_part`), a profile
without its invalid ``recipe.gate`` keys (:func:`nvtest.config.skus.profile_part`); each
key left out is a problem of its own. A file that cannot be read (missing, not YAML, not a
mapping, a broken ``name`` or ``applies_to``) is left out whole (``overlay_broken``,
``broken_profiles``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from nvtest.config.loader import nearest_name
from nvtest.config.resources import configs_dir
from nvtest.config.skus import Catalog, add_profile, apply_overlay, load_overlay, profile_files
from nvtest.errors import ConfigError

__all__ = ["ConfigProblem", "SiteConfig", "load_site", "nearest_name"]

_NEAREST = re.compile(r"did you mean '([^']+)'\?")


@dataclass(frozen=True)
class ConfigProblem:
    """One mistake in the site's configuration.

    Attributes:
        kind: ``overlay``, ``sku_dir`` (a profile or a directory of ``--sku-dir``),
            ``profile`` (a shipped profile), ``option`` (a command-line option); ``nvtest
            config check`` adds ``suite`` and ``inventory``.
        message: what is wrong, as the loader says it (with ``did you mean`` where known).
        file: the file (None for an option); line: 1-based, where known; key: the dotted
            key (``recipe.gate.disk_fre_gib``) or the option (``--sku``); nearest: the
            nearest valid name of a misspelt key or value, where there is one.
    """

    kind: str
    message: str
    file: str | None = None
    line: int | None = None
    key: str | None = None
    nearest: str | None = None

    @classmethod
    def from_error(cls, kind: str, exc: ConfigError) -> ConfigProblem:
        """The problem a loader's ConfigError describes."""
        m = _NEAREST.search(exc.reason)
        return cls(kind, exc.reason, exc.path, exc.line, exc.field, m.group(1) if m else None)

    def where(self) -> str:
        """``file:line: key`` (the parts that are known)."""
        place = f"{self.file}:{self.line}" if self.file and self.line else (self.file or "")
        return ": ".join(p for p in (place, self.key or "") if p) or self.kind

    def __str__(self) -> str:
        return f"{self.where()}: {self.message}"

    def to_json(self) -> dict[str, Any]:
        """The problem as docs/gate.schema.json's ``configuration.problems`` item."""
        return asdict(self)


@dataclass
class SiteConfig:
    """What :func:`load_site` loaded, and what it could not.

    Attributes:
        catalog: the shipped profiles, the valid ``--sku-dir`` profiles, the overlay if valid.
        problems: every mistake found, in the order found.
        broken_profiles: names (file stems) of profiles that did not load at all; a node matching
            one of these names is judged with the shipped profile of that name, if any.
        overlay_broken: an overlay was given and is not applied at all (unreadable); an
            overlay applied without some of its keys is not broken (its problems name the keys).
        overlay: the overlay file given (valid or not).
    """

    catalog: Catalog
    problems: list[ConfigProblem] = field(default_factory=list)
    broken_profiles: set[str] = field(default_factory=set)
    overlay_broken: bool = False
    overlay: str | None = None

    def files(self) -> list[str]:
        """The files with a problem (each once, in order)."""
        return list(dict.fromkeys(p.file for p in self.problems if p.file))


def load_site(sku_dirs: Sequence[Path] = (), overlay: Path | None = None) -> SiteConfig:
    """Load every profile and the overlay like :func:`~nvtest.config.skus.load_catalog`, but
    file by file: a file that fails is left out and recorded (see the module docstring).

    Never raises ConfigError for a file; the problems are in the result.
    """
    site = SiteConfig(Catalog(), overlay=str(overlay) if overlay is not None else None)
    for kind, dirs in (("profile", [configs_dir() / "skus"]), ("sku_dir", list(sku_dirs))):
        for d in dirs:
            try:
                files = profile_files([d])
            except ConfigError as exc:
                site.problems.append(ConfigProblem.from_error(kind, exc))
                continue
            for path in files:
                cut: list[ConfigError] = []
                try:
                    add_profile(site.catalog, path, cut)
                except ConfigError as exc:
                    site.problems.append(ConfigProblem.from_error(kind, exc))
                    site.broken_profiles.add(path.stem)
                else:
                    site.problems += [ConfigProblem.from_error(kind, e) for e in cut]
    if overlay is not None:
        cut = []
        try:
            apply_overlay(site.catalog, load_overlay(overlay, site.catalog, cut), str(overlay))
        except ConfigError as exc:
            site.problems.append(ConfigProblem.from_error("overlay", exc))
            site.overlay_broken = True
        else:
            site.problems += [ConfigProblem.from_error("overlay", e) for e in cut]
    return site
