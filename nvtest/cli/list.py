"""``nvtest list suites|checks|skus``: what can be run, and against which profiles."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from nvtest.cli.app import console, fail, list_app
from nvtest.errors import NvtestError
from nvtest.report.console import print_table

__all__ = ["list_checks_cmd", "list_skus_cmd", "list_suites_cmd"]


@list_app.command("suites", epilog="Example: nvtest list suites")
def list_suites_cmd() -> None:
    """List the suites and what they run."""
    from nvtest.config.suites import list_suites

    try:
        suites = list_suites()
    except NvtestError as exc:
        raise fail(exc) from exc
    from nvtest.config.suites import check_names

    rows = [
        (name, str(sum(len(check_names(m)) for m in spec.checks)), spec.description) for name, spec in suites.items()
    ]
    print_table(console, ("suite", "checks", "description"), rows)


@list_app.command("checks", epilog="Example: nvtest list checks --suite quick")
def list_checks_cmd(
    suite: Annotated[str | None, typer.Option(help="Only this suite's checks.")] = None,
) -> None:
    """List the checks (names for -k), their modules and the suites that run them."""
    from nvtest.config.suites import check_names, list_suites, load_suite

    try:
        suites = {suite: load_suite(suite)} if suite else list_suites()
    except NvtestError as exc:
        raise fail(exc) from exc
    seen: dict[str, list[str]] = {}
    for name, spec in suites.items():
        for c in spec.checks:
            seen.setdefault(c, []).append(name)
    rows = [(check, module, ", ".join(names)) for module, names in seen.items() for check in check_names(module)]
    print_table(console, ("check", "module", "suites"), rows)


@list_app.command("skus", epilog="Example: nvtest list skus")
def list_skus_cmd(
    sku_dir: Annotated[list[Path] | None, typer.Option(help="Extra directory of SKU profiles.")] = None,
) -> None:
    """List the SKU profiles and how each is matched."""
    from nvtest.cli.skus import fields_text
    from nvtest.config.skus import load_catalog

    try:
        cat = load_catalog(list(sku_dir or []))
    except NvtestError as exc:
        raise fail(exc) from exc
    rows = []
    for name in cat.names():
        p = cat.profiles[name]
        m = fields_text(p.match.model_dump(exclude_none=True))
        n = sum(len(v) for v in p.thresholds.values())
        rows.append((name, m, str(n), p.description))
    print_table(console, ("sku", "match", "thresholds", "description"), rows)
