"""No function of the package (probes included) is longer than 120 lines."""

from __future__ import annotations

import ast

from tests.architecture.layers import all_modules, module_name

LIMIT = 120


def test_no_function_over_the_limit() -> None:
    long = []
    for path in all_modules():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = (node.end_lineno or node.lineno) - node.lineno + 1
                if n > LIMIT:
                    long.append(f"{module_name(path)}.{node.name}: {n} lines")
    assert not long, "\n".join(long)
