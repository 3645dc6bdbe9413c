"""The layers of the nvtest package as data, and the import graph read from its source.

docs/architecture.md draws the same picture; ``test_layers.py`` holds the code to it.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

PKG = Path(__file__).resolve().parents[2] / "nvtest"

#: Top to bottom. A module imports its own layer and the layers below it, never one above.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("cli", ("nvtest.cli",)),
    # gate, sweep, export: the checks and thresholds every day after acceptance; they reuse
    # the health logic (checks), the parsers, the playbook, the Slurm client and the history
    ("ops", ("nvtest.ops",)),
    ("run", ("nvtest.run",)),
    ("checks", ("nvtest.checks",)),
    ("jobs", ("nvtest.jobs",)),
    ("session", ("nvtest.session",)),
    ("analysis", ("nvtest.analysis",)),
    (
        "floor",
        (
            "nvtest.config",
            "nvtest.transports",
            "nvtest.parsers",
            "nvtest.report",
            "nvtest.results",
            "nvtest.playbook",
            "nvtest.history",
            "nvtest.testing",
        ),
    ),
    ("ground", ("nvtest.errors", "nvtest.verdict", "nvtest.text")),
)

#: On the shared floor: what each part may import besides the ground (and itself).
FLOOR_RULES: dict[str, frozenset[str]] = {
    "nvtest.parsers": frozenset(),
    "nvtest.results": frozenset(),
    "nvtest.report": frozenset({"nvtest.results"}),
    "nvtest.transports": frozenset({"nvtest.config"}),
    "nvtest.playbook": frozenset({"nvtest.parsers", "nvtest.config"}),
    "nvtest.config": frozenset(),
    "nvtest.testing": frozenset({"nvtest.config", "nvtest.transports"}),
    # the record of every run, gate and sweep: written by finish_run (analysis) and the
    # operating verbs (ops), so it sits on the floor below both and knows only the results
    "nvtest.history": frozenset({"nvtest.results", "nvtest.config"}),
}

#: Apart: shipped to nodes, they import nothing of nvtest.
APART = ("nvtest.probes",)

#: The package's top level: the facade (lazy names only), the ground and the results records.
TOP_LEVEL = frozenset({"__init__.py", "__main__.py", "errors.py", "verdict.py", "text.py", "results.py"})


@dataclass(frozen=True)
class Import:
    """One ``import``/``from ... import`` of an nvtest module, where it is."""

    module: str  # the importing module
    target: str  # the imported nvtest module
    line: int


def module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _type_checking_only(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.If):
            test = node.test
            name = test.id if isinstance(test, ast.Name) else getattr(test, "attr", None)
            if name == "TYPE_CHECKING":
                return True
    return False


def imports_of(path: Path) -> list[Import]:
    """Every nvtest import in ``path`` (inside functions too), but those under ``if TYPE_CHECKING:``."""
    return imports_in(path.read_text(encoding="utf-8"), module_name(path), package=path.name == "__init__.py")


def imports_in(source: str, me: str, *, package: bool = False) -> list[Import]:
    """Every nvtest import in ``source``, the text of module ``me`` (``package``: an
    ``__init__.py``), but those under ``if TYPE_CHECKING:``."""
    tree = ast.parse(source)
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    out: list[Import] = []
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = me.split(".") if package else me.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                mod = ".".join([*base, node.module] if node.module else base)
            else:
                mod = node.module or ""
            # ``from nvtest.x import y`` may name a submodule y
            targets = [mod]
            for a in node.names:
                sub = f"{mod}.{a.name}"
                if (PKG.parent / (sub.replace(".", "/") + ".py")).is_file() or (
                    PKG.parent / sub.replace(".", "/") / "__init__.py"
                ).is_file():
                    targets.append(sub)
        else:
            continue
        if _type_checking_only(node, parents):
            continue
        out += [Import(me, t, node.lineno) for t in targets if t == "nvtest" or t.startswith("nvtest.")]
    return out


def all_modules() -> list[Path]:
    return sorted(p for p in PKG.rglob("*.py") if "_bundled" not in p.parts)


def part_of(module: str) -> str | None:
    """The layer part (``nvtest.config``, ``nvtest.cli``...) a module belongs to, or None."""
    for part in (*[p for _, ps in LAYERS for p in ps], *APART):
        if module == part or module.startswith(part + "."):
            return part
    return None


def layer_of(module: str) -> int | None:
    """The index of the module's layer in :data:`LAYERS` (0 = top), or None."""
    part = part_of(module)
    for i, (_, parts) in enumerate(LAYERS):
        if part in parts:
            return i
    return None
