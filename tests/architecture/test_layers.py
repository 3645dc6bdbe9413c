"""The layering of the package, read from its source (docs/architecture.md draws it).

A module imports its own layer and the layers below it, never one above (an import
inside a function counts; one under ``if TYPE_CHECKING:`` does not); on the shared
floor each part imports only what :data:`FLOOR_RULES` allows; probes import nothing
of nvtest; every module is in a layer; the top level holds only the facade, the
ground and the results records.
"""

from __future__ import annotations

import textwrap

import pytest

from tests.architecture.layers import (
    APART,
    FLOOR_RULES,
    LAYERS,
    PKG,
    TOP_LEVEL,
    Import,
    all_modules,
    imports_in,
    imports_of,
    layer_of,
    module_name,
    part_of,
)


def violations(imports: list[Import]) -> list[str]:
    """What breaks the rules among ``imports`` (empty: none)."""
    bad = []
    for imp in imports:
        if imp.target == "nvtest":  # the facade's __version__ and lazy names
            continue
        src_part, dst_part = part_of(imp.module), part_of(imp.target)
        where = f"{imp.module}:{imp.line} imports {imp.target}"
        if src_part in APART:
            bad.append(f"{where}: a probe imports nothing of nvtest")
            continue
        src, dst = layer_of(imp.module), layer_of(imp.target)
        if src is None or dst is None:
            bad.append(f"{where}: not in a layer")
        elif dst < src:
            bad.append(f"{where}: up from {LAYERS[src][0]} to {LAYERS[dst][0]}")
        elif LAYERS[src][0] == "floor" and dst == src and dst_part != src_part:
            assert src_part is not None and dst_part is not None
            if dst_part not in FLOOR_RULES[src_part]:
                allowed = ", ".join(sorted(FLOOR_RULES[src_part])) or "nothing"
                bad.append(f"{where}: {src_part} imports only the ground and {allowed}")
    return bad


def _everything() -> list[Import]:
    return [imp for p in all_modules() for imp in imports_of(p)]


def test_no_import_breaks_the_layers() -> None:
    bad = violations(_everything())
    assert not bad, "\n".join(bad)


def test_every_module_is_in_a_layer() -> None:
    lost = [module_name(p) for p in all_modules() if p.parent != PKG and part_of(module_name(p)) is None]
    assert not lost, f"modules in no layer: {lost}"


def test_the_top_level_keeps_only_the_facade_the_ground_and_results() -> None:
    top = {p.name for p in PKG.glob("*.py")}
    assert top <= TOP_LEVEL, f"move into a layer: {sorted(top - TOP_LEVEL)}"


def test_the_facade_imports_nothing_at_load() -> None:
    """``nvtest/__init__.py`` names its exports lazily; a real import there would pull every
    layer into ``import nvtest.errors`` (and make the ground depend on the top)."""
    assert [i for i in imports_of(PKG / "__init__.py") if i.target != "nvtest"] == []


@pytest.mark.parametrize(
    ("module", "source", "expected"),
    [
        ("nvtest/parsers/x.py", "from nvtest.config.skus import Catalog", "parsers imports only the ground"),
        (
            "nvtest/config/x.py",
            "def f():\n    from nvtest.session.context import RunContext",
            "up from floor to session",
        ),
        ("nvtest/jobs/x.py", "import nvtest.checks.api", "up from jobs to checks"),
        (
            "nvtest/report/x.py",
            "from nvtest.transports import base",
            "report imports only the ground and nvtest.results",
        ),
        ("nvtest/probes/x.py", "from nvtest.errors import ProbeError", "a probe imports nothing"),
        (
            "nvtest/jobs/x.py",
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from nvtest.checks.api import Judge",
            None,
        ),
        ("nvtest/checks/x.py", "from nvtest.jobs import base\nfrom nvtest.errors import NodeError", None),
    ],
)
def test_the_rule_catches_what_it_should(module: str, source: str, expected: str | None) -> None:
    """The checker itself: each kind of violation is found, allowed imports are not (read
    from a source text: nothing is written into the package)."""
    name = module.removesuffix(".py").replace("/", ".")
    bad = violations(imports_in(textwrap.dedent(source) + "\n", name))
    if expected is None:
        assert bad == []
    else:
        assert bad and expected in bad[0], bad
