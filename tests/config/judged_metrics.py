"""A static read of which metric names every check judges, for the metric-catalog tests.

Reads the source of ``suites/``, ``nvtest/checks/`` and ``nvtest/jobs/`` (not the Judge
itself) and follows each ``@pytest.mark.check(NAME)`` function through the calls it
makes into those modules (functions, methods of the classes it instantiates), collecting
the first argument of every judgement it reaches:

- ``judge(NAME, value, unit, ...)`` (the Judge fixture, or a helper's ``judge`` parameter),
- ``outcome.measure(NAME, value, unit, ...)`` (a health function's :class:`Outcome`),
- ``assess(check, NAME, ...)`` (a pair job's per-pair judgement through ``judge_value``).

A name is a string, an f-string (each ``{...}`` becomes ``{}``), a call of a scanned
function that returns an f-string (``metric_name(dtype, batch, suffix)``), a parameter
bound at the call site, a class attribute (``self.metric``, ``job.metric`` with ``job =
Class(...)``) or a loop over a module-level literal (``for case, metric in
CASES.items()``). Anything else is reported as unresolved, so a new judge call that this
read cannot follow fails the test instead of passing unseen.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

from nvtest.config.suites import check_mark_name

REPO = Path(__file__).resolve().parents[2]
ROOTS = ("suites", "nvtest/checks", "nvtest/jobs")
#: the Judge itself forwards its callers' names; they are read at the callers
SKIP_FILES = {"nvtest/checks/api.py"}
#: judge calls whose names come from Outcome.measure calls (collected where they are made)
FORWARDERS = {("nvtest.checks.health", "apply"), ("nvtest.checks.interconnect.nccl", "_record")}


@dataclass
class Fn:
    module: str
    name: str
    node: ast.FunctionDef
    cls: str | None = None
    params: list[str] = field(default_factory=list)


@dataclass
class Module:
    name: str
    tree: ast.Module
    imports: dict[str, tuple[str, str | None]] = field(default_factory=dict)
    literals: dict[str, ast.expr] = field(default_factory=dict)
    classes: dict[str, ast.ClassDef] = field(default_factory=dict)


def _module_name(path: Path) -> str:
    rel = path.relative_to(REPO).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


class Program:
    """The scanned modules, their functions and classes."""

    def __init__(self) -> None:
        self.modules: dict[str, Module] = {}
        self.fns: dict[tuple[str, str], Fn] = {}
        for root in ROOTS:
            for path in sorted((REPO / root).rglob("*.py")):
                if str(path.relative_to(REPO)) in SKIP_FILES:
                    continue
                self._load(path)

    def _load(self, path: Path) -> None:
        mod = Module(_module_name(path), ast.parse(path.read_text(encoding="utf-8")))
        self.modules[mod.name] = mod
        for stmt in mod.tree.body:
            if isinstance(stmt, ast.ImportFrom) and stmt.module:
                for a in stmt.names:
                    mod.imports[a.asname or a.name] = (stmt.module, a.name)
            elif isinstance(stmt, ast.Import):
                for a in stmt.names:
                    mod.imports[a.asname or a.name] = (a.name, None)
            elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                mod.literals[stmt.targets[0].id] = stmt.value
            elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
                mod.literals[stmt.target.id] = stmt.value
            elif isinstance(stmt, ast.FunctionDef):
                self._fn(mod, stmt, None)
            elif isinstance(stmt, ast.ClassDef):
                mod.classes[stmt.name] = stmt
                for item in stmt.body:
                    if isinstance(item, ast.FunctionDef):
                        self._fn(mod, item, stmt.name)

    def _fn(self, mod: Module, node: ast.FunctionDef, cls: str | None) -> None:
        args = node.args
        params = [a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]]
        key = f"{cls}.{node.name}" if cls else node.name
        self.fns[(mod.name, key)] = Fn(mod.name, key, node, cls, params)

    def resolve(self, module: str, name: str) -> tuple[str, str] | None:
        """(module, name) of a module-level name as defined in the scanned modules."""
        mod = self.modules.get(module)
        if mod is None:
            return None
        if (module, name) in self.fns or name in mod.classes:
            return module, name
        if name in mod.imports:
            src, attr = mod.imports[name]
            if attr is not None and src in self.modules:
                return self.resolve(src, attr)
        return None

    def class_attr(self, module: str, cls: str, attr: str) -> list[str] | None:
        """String value(s) of a class attribute (assigned in the class body)."""
        node = self.modules[module].classes.get(cls)
        if node is None:
            return None
        for stmt in node.body:
            if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == attr for t in stmt.targets):
                if isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str):
                    return [stmt.value.value]
        return None

    def check_functions(self) -> list[tuple[str, Fn]]:
        """(check name, function) of every ``@pytest.mark.check(NAME, ...)`` in suites/."""
        out = []
        for fn in self.fns.values():
            for dec in fn.node.decorator_list:
                if (name := check_mark_name(dec)) is not None:
                    out.append((name, fn))
        return sorted(out, key=lambda cf: cf[0])


Bindings = dict[str, tuple[str, ...]]


@dataclass
class Walk:
    """Metric names (templates) a check reaches, and the judge calls it could not read."""

    templates: set[str] = field(default_factory=set)
    unresolved: list[str] = field(default_factory=list)


def _site_arg(call: ast.Call) -> ast.expr | None:
    """The metric-name argument of a judgement call, or None when ``call`` is not one."""
    f = call.func
    if isinstance(f, ast.Name) and f.id == "judge" and call.args:
        return call.args[0]
    if isinstance(f, ast.Attribute) and f.attr == "measure" and len(call.args) >= 3:
        return call.args[0]
    if isinstance(f, ast.Name) and f.id == "assess" and len(call.args) >= 2:
        return call.args[1]
    return None


class Reader:
    """Follows a check function through its calls (see the module doc)."""

    def __init__(self, prog: Program) -> None:
        self.prog = prog
        self.seen: set[tuple[tuple[str, str], tuple[tuple[str, tuple[str, ...]], ...]]] = set()

    def walk(self, fn: Fn) -> Walk:
        self.seen.clear()
        out = Walk()
        self._visit(fn, {}, out, 0)
        return out

    def _visit(self, fn: Fn, bindings: Bindings, out: Walk, depth: int) -> None:
        key = ((fn.module, fn.name), tuple(sorted(bindings.items())))
        if key in self.seen or depth > 12:
            return
        self.seen.add(key)
        new_objects = self._instances(fn)
        for call in (n for n in ast.walk(fn.node) if isinstance(n, ast.Call)):
            arg = _site_arg(call)
            if arg is not None and (fn.module, fn.name) not in FORWARDERS:
                names = self.names(fn, arg, bindings, new_objects)
                if names is None:
                    out.unresolved.append(f"{fn.module}.{fn.name}:{call.lineno}: {ast.unparse(arg)}")
                else:
                    out.templates.update(names)
            for target, callee_fn_params in self._targets(fn, call, new_objects):
                self._visit(
                    target,
                    self._bind(fn, call, callee_fn_params, bindings, new_objects),
                    out,
                    depth + 1,
                )

    def _instances(self, fn: Fn) -> dict[str, tuple[str, str]]:
        """Local names assigned an instance of a scanned class: name -> (module, class)."""
        out = {}
        for node in ast.walk(fn.node):
            if (
                isinstance(node, ast.Assign)
                and isinstance(node.value, ast.Call)
                and isinstance(node.value.func, ast.Name)
            ):
                where = self.prog.resolve(fn.module, node.value.func.id)
                if where and where[1] in self.prog.modules[where[0]].classes:
                    for t in node.targets:
                        if isinstance(t, ast.Name):
                            out[t.id] = where
        return out

    def _targets(self, fn: Fn, call: ast.Call, objects: dict[str, tuple[str, str]]) -> list[tuple[Fn, list[str]]]:
        f = call.func
        found: list[Fn] = []
        if isinstance(f, ast.Name):
            where = self.prog.resolve(fn.module, f.id)
            if where:
                mod, name = where
                if name in self.prog.modules[mod].classes:
                    found += [g for (m, k), g in self.prog.fns.items() if m == mod and g.cls == name]
                elif (mod, name) in self.prog.fns:
                    found.append(self.prog.fns[(mod, name)])
        elif isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
            base = f.value.id
            if base == "self" and fn.cls:
                g = self.prog.fns.get((fn.module, f"{fn.cls}.{f.attr}"))
                found += [g] if g else []
            elif base in objects:
                mod, cls = objects[base]
                g = self.prog.fns.get((mod, f"{cls}.{f.attr}"))
                found += [g] if g else []
            elif base in self.prog.modules[fn.module].imports:
                src, attr = self.prog.modules[fn.module].imports[base]
                modname = f"{src}.{attr}" if attr else src
                g = self.prog.fns.get((modname, f.attr))
                found += [g] if g else []
        return [(g, g.params) for g in found]

    def _bind(
        self,
        fn: Fn,
        call: ast.Call,
        params: list[str],
        bindings: Bindings,
        objects: dict[str, tuple[str, str]],
    ) -> Bindings:
        out: Bindings = {}
        args = list(call.args)
        offset = 1 if params and params[0] == "self" and isinstance(call.func, ast.Attribute) else 0
        for i, a in enumerate(args):
            if i + offset < len(params) and not isinstance(a, ast.Starred):
                names = self.names(fn, a, bindings, objects)
                if names is not None:
                    out[params[i + offset]] = tuple(sorted(names))
        for kw in call.keywords:
            if kw.arg:
                names = self.names(fn, kw.value, bindings, objects)
                if names is not None:
                    out[kw.arg] = tuple(sorted(names))
        return out

    def names(self, fn: Fn, expr: ast.expr, bindings: Bindings, objects: dict[str, tuple[str, str]]) -> set[str] | None:
        """The metric name(s) ``expr`` can be in ``fn``, or None when it cannot be read."""
        if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
            return {expr.value}
        if isinstance(expr, ast.JoinedStr):
            return self._fstring(fn, expr, bindings)
        if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name):
            where = self.prog.resolve(fn.module, expr.func.id)
            target = self.prog.fns.get(where) if where else None
            returned = (
                [n.value for n in ast.walk(target.node) if isinstance(n, ast.Return) and n.value is not None]
                if target
                else []
            )
            if target and returned and all(isinstance(r, (ast.Constant, ast.JoinedStr)) for r in returned):
                inner = self._bind(fn, expr, target.params, bindings, objects)
                found: set[str] = set()
                for r in returned:
                    found |= self.names(target, r, inner, {}) or set()
                return found or None
        if isinstance(expr, ast.Name):
            if expr.id in bindings:
                return set(bindings[expr.id])
            return self._loop_values(fn, expr.id)
        if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name):
            base = expr.value.id
            if base == "self" and fn.cls:
                got = self.prog.class_attr(fn.module, fn.cls, expr.attr)
                return set(got) if got else None
            if base in objects:
                got = self.prog.class_attr(*objects[base], expr.attr)
                return set(got) if got else None
        return None

    def _fstring(self, fn: Fn, expr: ast.JoinedStr, bindings: Bindings) -> set[str]:
        """An f-string's names: a part that is a bound name takes its values, any other ``{}``."""
        out = {""}
        for v in expr.values:
            if isinstance(v, ast.Constant):
                parts = {str(v.value)}
            elif isinstance(v, ast.FormattedValue) and isinstance(v.value, ast.Name) and v.value.id in bindings:
                parts = set(bindings[v.value.id])
            elif isinstance(v, ast.FormattedValue) and isinstance(v.value, ast.Name):
                parts = self._loop_values(fn, v.value.id) or {"{}"}
            else:
                parts = {"{}"}
            out = {o + p for o in out for p in parts}
        return out

    def _loop_values(self, fn: Fn, name: str) -> set[str] | None:
        """Values of ``name`` bound by ``for ... in LITERAL[.items()|.values()]`` in ``fn``."""
        mod = self.prog.modules[fn.module]
        for node in ast.walk(fn.node):
            if not isinstance(node, ast.For):
                continue
            targets = node.target.elts if isinstance(node.target, ast.Tuple) else [node.target]
            idx = next((i for i, t in enumerate(targets) if isinstance(t, ast.Name) and t.id == name), None)
            if idx is None:
                continue
            it = node.iter
            method = None
            if isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute):
                method, it = it.func.attr, it.func.value
            if not isinstance(it, ast.Name) or it.id not in mod.literals:
                return None
            lit = mod.literals[it.id]
            if isinstance(lit, ast.Dict):
                items = lit.values if method == "values" or (method == "items" and idx == 1) else lit.keys
            elif isinstance(lit, (ast.Tuple, ast.List)):
                items = lit.elts
                if len(targets) > 1:  # for key, suffix, unit in ((..., ..., ...), ...)
                    items = [e.elts[idx] for e in items if isinstance(e, (ast.Tuple, ast.List)) and len(e.elts) > idx]
            else:
                return None
            vals = {i.value for i in items if isinstance(i, ast.Constant) and isinstance(i.value, str)}
            return vals or None
        return None


def judged_by_check() -> dict[str, Walk]:
    """check name -> the metric-name templates it reaches and the judge calls not read."""
    prog = Program()
    reader = Reader(prog)
    out: dict[str, Walk] = {}
    for check, fn in prog.check_functions():
        w = reader.walk(fn)
        acc = out.setdefault(check, Walk())
        acc.templates |= w.templates
        acc.unresolved += w.unresolved
    return out
