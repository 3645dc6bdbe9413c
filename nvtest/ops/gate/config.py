"""The gate's configuration problems: a verdict like any other, never a reason to stop judging.

The gate loads the site's files with :func:`nvtest.config.site.load_site`: a broken overlay,
``--sku-dir`` profile, a misspelt ``--sku`` or hook-mode option becomes a
:class:`~nvtest.config.site.ConfigProblem`. Then

- everything the shipped profile can judge on its own (GPUs against the bus, driver, ECC,
  Xid, NVLink, fabric manager, PCIe) is judged as without the site's files;
- the checks whose settings come from the broken part are ``unknown``, naming file, line
  and key. The broken part is the key where the file still reads (:func:`recipe_checks_of`):
  a misspelt ``recipe.gate.disk_free_gib`` leaves ``disk`` unknown and ``ib_ports`` judged
  (with the overlay's valid keys); a file that cannot be read at all (missing, not YAML, not
  a mapping, a broken ``name`` or ``applies_to``) leaves every check that reads
  ``recipe.gate`` (:data:`RECIPE_CHECKS`) unknown: the site's intent is unknown;
- a ``configuration`` check is ``unknown`` naming every problem (``pass`` when there is
  none), with the metric ``config_error`` per file (1; 0 when clean) that the history keeps
  and ``nvtest export`` exports as ``nvtest_gate_config_error{node,file}``;
- the exit status ignores them (:func:`gate_exit_code`): a configuration error is not the
  node's fault, so it never exits 1, also not with ``--strict``; a proven failure exits 1
  whatever the configuration. Only ``--mode manual`` (a person at a shell) exits 2 for one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from nvtest.config.site import ConfigProblem, SiteConfig
from nvtest.config.thresholds import SkuProfile
from nvtest.errors import EXIT_CONFIG
from nvtest.ops.gate.document import GateCheck, exit_code, worst

__all__ = [
    "CAUSE",
    "CONFIG_CHECK",
    "NO_FILE",
    "RECIPE_CHECKS",
    "RECIPE_FIELDS",
    "config_verdicts",
    "configuration_json",
    "forced_sku",
    "gate_exit_code",
    "recipe_checks_of",
]

#: The name of the check that carries the configuration's verdict.
CONFIG_CHECK = "configuration"
#: The ``recipe.gate`` fields (nvtest.config.recipes.GateRecipe) -> the gate checks that read
#: them (checks_node.py: ``ctx.recipe.<field>``; context.py: the commands they run).
RECIPE_FIELDS: dict[str, tuple[str, ...]] = {
    "disk_free_gib": ("disk",),
    "memory_available_gib": ("memory",),
    "mounts": ("mounts",),
    "services": ("services",),
    "hcas": ("ib_ports",),
    "ib_counter_max_per_h": ("ib_ports",),
}
#: The gate checks that read ``recipe.gate`` (nvtest/ops/gate/checks_node.py: ``ctx.recipe``).
RECIPE_CHECKS: tuple[str, ...] = tuple(sorted({c for checks in RECIPE_FIELDS.values() for c in checks}))
#: What a configuration error asks of the site (the decisions' threshold).
FIX = "a valid site file and options: fix it and prove it with `nvtest config check` (docs/operations.md)"
#: The cause key of every decision a configuration error makes (the Playbook's site_config_error).
CAUSE = "config:site"
#: The ``file`` label of a problem that is in no file (a command-line option).
NO_FILE = "(command line)"


def forced_sku(sku: str | None, site: SiteConfig) -> str | None:
    """``--sku`` if it names a profile; else None (the node is matched as without it) and a
    problem recorded in ``site``."""
    if not sku or sku in site.catalog.profiles:
        return sku
    from nvtest.config.site import nearest_name

    near = nearest_name(sku, site.catalog.names())
    hint = f" (did you mean {near!r}?)" if near else f"; known: {', '.join(site.catalog.names())}"
    broken = " (its profile did not load)" if sku in site.broken_profiles else ""
    site.problems.append(
        ConfigProblem(
            "option", f"unknown SKU {sku!r}{broken}{hint}; the node is matched instead", key="--sku", nearest=near
        )
    )
    return None


def recipe_checks_of(p: ConfigProblem, whole_file: bool) -> tuple[str, ...]:
    """The gate checks a problem of the overlay or of the node's profile leaves unjudged.

    ``whole_file``: the file was left out whole (its intent is unknown): every check of
    :data:`RECIPE_CHECKS`. Else the key left out decides: a ``recipe.gate`` field, the checks
    :data:`RECIPE_FIELDS` says read it; an unknown key, the checks of its nearest field (of
    every recipe check where there is none: fail closed); ``recipe.gate`` itself or a
    misspelt section whose nearest name is ``gate`` (or none), every recipe check; another
    section's key or a threshold, none (the gate reads neither).
    """
    if whole_file:
        return RECIPE_CHECKS
    parts = (p.key or "").split(".")
    if parts[0] == "thresholds":
        return ()
    if parts[0] != "recipe" or len(parts) < 2:
        return RECIPE_CHECKS
    from nvtest.config.site import nearest_name
    from nvtest.config.thresholds import RecipeSections

    section = parts[1]
    if section not in RecipeSections.model_fields:
        return RECIPE_CHECKS if nearest_name(section, list(RecipeSections.model_fields)) in ("gate", None) else ()
    if section != "gate":
        return ()
    if len(parts) < 3:
        return RECIPE_CHECKS
    name = parts[2] if parts[2] in RECIPE_FIELDS else nearest_name(parts[2], list(RECIPE_FIELDS))
    return RECIPE_FIELDS[name] if name else RECIPE_CHECKS


def _blocking(site: SiteConfig, sku: SkuProfile | None) -> dict[str, list[tuple[ConfigProblem, bool]]]:
    """Check -> the problems of the parts of ``recipe.gate`` it depends on: the overlay's,
    the node's profile's (see :func:`recipe_checks_of`), each with whether its file was
    left out whole."""
    name = sku.name if sku else None
    out: dict[str, list[tuple[ConfigProblem, bool]]] = {}
    for p in site.problems:
        if p.kind == "overlay":
            whole = site.overlay_broken
        elif p.kind == "sku_dir" and p.file and name is not None and _stem(p.file) == name:
            whole = name in site.broken_profiles
        else:
            continue
        for c in recipe_checks_of(p, whole):
            out.setdefault(c, []).append((p, whole))
    return out


def _stem(path: str) -> str:
    from pathlib import Path

    return Path(path).stem


def config_verdicts(site: SiteConfig, sku: SkuProfile | None, checks: Sequence[GateCheck]) -> list[GateCheck]:
    """``checks`` with those that depend on a broken part replaced by ``unknown`` (naming
    it), and the ``configuration`` check appended (see the module docstring)."""
    blocking = _blocking(site, sku)
    out: list[GateCheck] = []
    for c in checks:
        if c.check in blocking:
            res = GateCheck(c.check, duration_s=c.duration_s)
            for p, whole in blocking[c.check]:
                what = (
                    "its settings (recipe.gate) come from a file with a configuration error"
                    if whole
                    else "a setting it reads (recipe.gate) has a configuration error"
                )
                res.add("unknown", c.check, f"not judged: {what}: {p}", threshold=FIX, source=p.file, cause=CAUSE)
            out.append(res)
        else:
            out.append(c)
    conf = GateCheck(CONFIG_CHECK)
    for p in site.problems:
        conf.add(
            "unknown",
            p.key or p.kind,
            f"configuration error ({p.kind}): {p}",
            threshold=FIX,
            source=p.file or NO_FILE,
            cause=CAUSE,
        )
    for f in dict.fromkeys(p.file or NO_FILE for p in site.problems):
        conf.metrics.append(("config_error", 1.0, "count", {"file": f}))
    if not site.problems:
        conf.add(
            "pass",
            CONFIG_CHECK,
            "the profiles, the overlay and the options loaded",
            threshold="every profile, overlay and option valid",
            source=f"overlay:{site.overlay}" if site.overlay else "nvtest's shipped profiles",
        )
        conf.metrics.append(("config_error", 0.0, "count", {"file": ""}))
    return [*out, conf]


def gate_exit_code(
    checks: Sequence[GateCheck], *, strict: bool, mode: str, site: SiteConfig, sku: SkuProfile | None
) -> int:
    """1 on a proven failure (whatever the configuration); 1 with ``strict`` on an ``unknown``
    of a measurement (not one caused by the configuration); 2 for a configuration problem in
    ``--mode manual`` only; else 0."""
    blocked = {*_blocking(site, sku), CONFIG_CHECK}
    judged = [c.verdict for c in checks if c.check not in blocked or c.verdict == "fail"]
    code = exit_code(worst(judged), strict=strict)
    if code == 0 and site.problems and mode == "manual":
        return EXIT_CONFIG
    return code


def configuration_json(site: SiteConfig) -> dict[str, Any]:
    """The document's ``configuration`` object (docs/gate.schema.json)."""
    return {
        "ok": not site.problems,
        "overlay": site.overlay,
        "files": site.files(),
        "problems": [p.to_json() for p in site.problems],
    }
