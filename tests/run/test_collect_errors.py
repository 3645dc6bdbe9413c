"""A check module that cannot be imported (a site's check with a typo in an import, a syntax
error) stops the run before its first item: ``nvtest run`` says so, naming the file and
Python's words, as a harness error (exit 3); it is never reported as an interrupt (SIGINT,
exit 130) that no one sent, and no item of the run is a pass."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nvtest.errors import EXIT_HARNESS
from tests.conftest import run_nvtest

BROKEN = {  # the source, Python's words, the module's line they name (after a 4-line preamble)
    "import": (
        "from nvtest.parsers import no_such_parser  # noqa: F401\n",
        "ImportError: cannot import name 'no_such_parser'",
        5,
    ),
    "syntax": ("def test_site(node judge):\n    pass\n", "SyntaxError", 5),
}


@pytest.mark.parametrize("kind", sorted(BROKEN))
def test_a_check_module_that_does_not_import_is_a_harness_error_naming_it(tmp_path: Path, kind: str) -> None:
    source, words, line = BROKEN[kind]
    module = tmp_path / "test_site_check.py"
    module.write_text('"""A site check."""\n\nfrom __future__ import annotations\n\n' + source)
    suite = tmp_path / "site.yaml"  # a listed module's absolute path is taken as it is
    suite.write_text(
        f"name: site\ndescription: a broken site check\nchecks:\n  - {module}\n  - inventory/test_inventory.py\n"
    )
    proc = run_nvtest(
        "run", "--suite", str(suite), "--out", str(tmp_path / "reports"), "--progress", "plain", timeout=120
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == EXIT_HARNESS, out[-2000:]
    assert "SIGINT" not in out and "interrupted" not in out, out[-2000:]
    assert f"{module}:{line}" in proc.stderr and words in proc.stderr, proc.stderr[-2000:]
    doc = json.loads((tmp_path / "reports" / "latest" / "results.json").read_text())
    assert not doc["run"].get("interrupted") and words in (doc["run"].get("harness_error") or "")
    assert doc["results"] and all(r["verdict"] == "error" for r in doc["results"])
