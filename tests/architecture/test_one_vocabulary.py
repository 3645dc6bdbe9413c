"""One record name and one severity order in the package, read from its source.

- ``CheckResult`` means one thing: :class:`nvtest.results.CheckResult` (the gate's record is
  ``GateCheck``); a second class of that name would make every import of it a question.
- The severity of verdicts is spelled once, in :mod:`nvtest.verdict` (:attr:`Verdict.rank`,
  :func:`~nvtest.verdict.rank_of`, :func:`~nvtest.verdict.worst_of`). Any other module that
  writes verdict words as an order (a dict of verdict words to numbers, or a tuple/list of at
  least three of them that is not a membership test or a ``Literal``) must be named in
  :data:`ALLOWED` with its reason; those that order nvtest's own verdicts are held to
  nvtest.verdict's order here, so they cannot drift.
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass

import pytest

from nvtest.verdict import UNKNOWN, Verdict, rank_of, verdict_of, worst, worst_of
from tests.architecture.layers import all_modules, module_name

#: The verdict words of nvtest and of the gate.
WORDS = frozenset({"pass", "warn", "fail", "error", "skip", UNKNOWN})


@dataclass(frozen=True)
class Allowed:
    """A literal that may spell verdict words in order, and why.

    ``agrees``: it orders nvtest's verdicts (its numbers or its positions must rise with
    :func:`rank_of`); False for another order (a display order, a tool's own vocabulary).
    """

    reason: str
    agrees: bool


#: (module, the literal as ast.unparse writes it) -> why it may stay.
ALLOWED: dict[tuple[str, str], Allowed] = {
    ("nvtest.ops.gate.document", "('skip', 'pass', 'warn', 'unknown', 'fail')"): Allowed(
        "the gate's public VERDICTS (docs/gate.schema.json's words); its worst() ranks by nvtest.verdict",
        agrees=True,
    ),
    (
        "nvtest.ops.export",
        "{'skip': -1.0, 'pass': 0.0, 'warn': 1.0, 'unknown': 2.0, 'error': 2.0, 'fail': 3.0}",
    ): Allowed("the public Prometheus values of nvtest_check_verdict (its help text says them)", agrees=True),
    ("nvtest.parsers.dcgmi", "{'fail': 4, 'warn': 3, 'skip': 2, 'pass': 1}"): Allowed(
        "dcgmi diag's own status words (its parser's record): fail > warn > skip > pass, a skipped "
        "diag test is not a pass (health/dcgm.py judges it), so skip ranks above pass there",
        agrees=False,
    ),
    ("nvtest.cli.run", "{'error': 0, 'fail': 1, 'warn': 2, 'skip': 3}"): Allowed(
        "the console summary's listing order (what could not be measured first), not a severity",
        agrees=False,
    ),
}


@dataclass(frozen=True)
class Spelled:
    """A literal in ``module`` at ``line`` spelling verdict words as an order."""

    module: str
    line: int
    text: str
    order: tuple[tuple[str, float], ...]  # (word, its number or position), as written


def _membership_or_type(tree: ast.AST) -> set[int]:
    """ids of literals that are the right side of ``in``/``not in`` or inside ``Literal[...]``."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            out.update(
                id(c) for op, c in zip(node.ops, node.comparators, strict=True) if isinstance(op, ast.In | ast.NotIn)
            )
        elif (
            isinstance(node, ast.Subscript)
            and getattr(node.value, "id", getattr(node.value, "attr", None)) == "Literal"
        ):
            out.update(id(n) for n in ast.walk(node.slice))
    return out


def _number(node: ast.expr) -> float | None:
    """The value of a number literal (``3``, ``-1.0``), None for anything else."""
    sign = 1.0
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        sign, node = -1.0, node.operand
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool):
        return sign * node.value
    return None


def spelled_orders(source: str, module: str) -> list[Spelled]:
    """Every literal of ``source`` that spells at least three verdict words as an order."""
    tree = ast.parse(source)
    skip = _membership_or_type(tree)
    out: list[Spelled] = []
    for node in ast.walk(tree):
        pairs: list[tuple[str, float]] = []
        if isinstance(node, ast.Dict):
            for k, v in zip(node.keys, node.values, strict=True):
                if isinstance(k, ast.Constant) and k.value in WORDS:
                    number = _number(v)
                    if number is None:
                        pairs = []  # words to colours, letters...: a table, not an order
                        break
                    pairs.append((k.value, number))
        elif isinstance(node, ast.Tuple | ast.List) and id(node) not in skip:
            pairs = [
                (e.value, float(i)) for i, e in enumerate(node.elts) if isinstance(e, ast.Constant) and e.value in WORDS
            ]
        if len({w for w, _ in pairs}) >= 3:
            out.append(Spelled(module, getattr(node, "lineno", 0), ast.unparse(node), tuple(pairs)))
    return out


@functools.cache
def _sources() -> tuple[tuple[str, str], ...]:
    """(module, source) of every module of the package."""
    return tuple((module_name(p), p.read_text(encoding="utf-8")) for p in all_modules())


@functools.cache
def _package_orders() -> tuple[Spelled, ...]:
    return tuple(o for me, src in _sources() if me != "nvtest.verdict" for o in spelled_orders(src, me))


@functools.cache
def _classes() -> tuple[tuple[str, str], ...]:
    """(module, class name) of every class the package defines."""
    return tuple(
        (me, node.name) for me, src in _sources() for node in ast.walk(ast.parse(src)) if isinstance(node, ast.ClassDef)
    )


def test_exactly_one_class_is_called_check_result() -> None:
    assert [me for me, name in _classes() if name == "CheckResult"] == ["nvtest.results"]


@pytest.mark.parametrize("name", ["Finding", "Node"])
def test_record_names_say_which(name: str) -> None:
    """One class per name where two floors had one each (config.inventory keeps Node)."""
    where = [me for me, cls in _classes() if cls == name]
    assert len(where) <= 1, f"{name} is defined in {where}"


def test_no_module_but_verdict_spells_a_severity_order() -> None:
    stray = [s for s in _package_orders() if (s.module, s.text) not in ALLOWED]
    assert not stray, "verdict words ordered outside nvtest.verdict (use rank_of/worst_of): " + "; ".join(
        f"{s.module}:{s.line} {s.text}" for s in stray
    )


def test_every_allowed_order_is_still_there_and_agrees() -> None:
    found = {(s.module, s.text): s for s in _package_orders()}
    for key, allowed in ALLOWED.items():
        assert key in found, f"{key} is gone: drop it from ALLOWED"
        if allowed.agrees:
            order = found[key].order
            for a, na in order:
                for b, nb in order:
                    assert _sign(na - nb) == _sign(rank_of(a) - rank_of(b)), (
                        f"{key}: {a} ({na:g}) against {b} ({nb:g}) disagrees with nvtest.verdict's order"
                    )


def _sign(x: float) -> int:
    return (x > 0) - (x < 0)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ('R = {"skip": 0, "pass": 1, "fail": 4}', 1),
        ('O = ("pass", "warn", "fail")', 1),
        ('if v in ("fail", "error", "warn"): pass', 0),
        ('S = Literal["pass", "fail", "error"]', 0),
        ('C = {"pass": "green", "warn": "yellow", "fail": "red"}', 0),
        ('T = ("pass", "fail")', 0),
        ('V = {"skip": -1.0, "pass": 0.0, "fail": 3.0}', 1),
    ],
)
def test_the_walker_sees_what_it_should(source: str, expected: int) -> None:
    assert len(spelled_orders(source, "m")) == expected


def test_the_order_of_json_words() -> None:
    assert [rank_of(w) for w in ("skip", "pass", "warn", "error", "fail")] == [0, 1, 2, 3, 4]
    assert rank_of(UNKNOWN) == Verdict.ERROR.rank == rank_of("no such word")
    assert verdict_of(UNKNOWN) is Verdict.ERROR and verdict_of("warn") is Verdict.WARN
    with pytest.raises(ValueError):
        verdict_of("bad")
    assert worst_of(["pass", "unknown", "warn", "error"]) == "unknown"  # the first of equals
    assert worst_of(["error", "fail", "skip"]) == "fail"
    assert worst_of([]) == "skip" and worst_of([], default="unknown") == "unknown"
    for a in Verdict:
        for b in Verdict:
            assert worst_of([a.value, b.value]) == worst([a, b]).value
