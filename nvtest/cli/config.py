"""``nvtest config check``: prove a site's files before they are deployed.

Loads every SKU profile (the shipped ones and ``--sku-dir``), the overlay, the suites and
the inventory as ``run``, ``gate``, ``sweep``, ``skus show`` and ``evaluate`` load them, and
prints every error found (not only the first) with its file, line, key and the nearest valid
name. Exit status: 0 when everything loads, 2 on any error. Run it in the CI that ships the
overlay (docs/operations.md): the gate judges the node whatever is wrong with the site's
files, but the checks that depend on a broken file are ``unknown`` until it is fixed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from nvtest.cli.app import app, console, err_console
from nvtest.errors import EXIT_CONFIG, EXIT_OK, ConfigError

__all__ = ["check"]

config_app = typer.Typer(help="Check the site's configuration files.", no_args_is_help=True)
app.add_typer(config_app, name="config")


@config_app.command(
    "check",
    epilog="Example (in the CI that ships the overlay): nvtest config check --overlay site.yaml --sku-dir skus/",
)
def check(
    overlay: Annotated[Path | None, typer.Option(help="The site overlay to check.")] = None,
    sku_dir: Annotated[list[Path] | None, typer.Option(help="Extra directory of SKU profiles (repeatable).")] = None,
    sku: Annotated[str | None, typer.Option(help="A SKU name the site passes with --sku (must be a profile).")] = None,
    suite: Annotated[
        list[str] | None, typer.Option(help="A suite name or file (repeatable; default: every bundled suite).")
    ] = None,
    inventory: Annotated[Path | None, typer.Option(help="An inventory file (its SKUs must be profiles).")] = None,
) -> None:
    """Load every profile, the overlay, the suites and the inventory; print each error; exit 2 on any."""
    from nvtest.config.site import ConfigProblem, load_site
    from nvtest.ops.gate.config import forced_sku

    site = load_site(list(sku_dir or []), overlay)
    forced_sku(sku, site)
    problems = list(site.problems)
    problems += _suite_problems(suite)
    if inventory is not None:
        from nvtest.config.inventory import load_inventory
        from nvtest.config.skus import check_inventory_skus

        try:
            check_inventory_skus(load_inventory(inventory), site.catalog)
        except ConfigError as exc:
            problems.append(ConfigProblem.from_error("inventory", exc))
    for p in problems:
        near = f" [nearest: {p.nearest}]" if p.nearest and p.nearest not in p.message else ""
        err_console.print(f"nvtest: error: {p}{near}", markup=False, highlight=False)
    what = f"{len(site.catalog.profiles)} SKU profiles" + (f", overlay {overlay}" if overlay else "")
    if problems:
        err_console.print(f"nvtest config check: {len(problems)} error(s) ({what})", markup=False, highlight=False)
        raise typer.Exit(EXIT_CONFIG)
    suites = f"{len(suite)} suite(s)" if suite else "every suite"
    console.print(
        f"nvtest config check: OK ({what}, {suites}" + (f", inventory {inventory}" if inventory else "") + ")",
        markup=False,
        highlight=False,
    )
    raise typer.Exit(EXIT_OK)


def _suite_problems(names: list[str] | None) -> list:
    """The problems of the suites ``names`` (default: every bundled one), each loaded as ``run`` does."""
    from nvtest.config.resources import configs_dir
    from nvtest.config.site import ConfigProblem
    from nvtest.config.suites import load_suite

    out = []
    for name in names or [p.stem for p in sorted((configs_dir() / "suites").glob("*.yaml"))]:
        try:
            load_suite(name)
        except ConfigError as exc:
            out.append(ConfigProblem.from_error("suite", exc))
    return out
