"""A check reads in one file: the suites import only the check API.

The rule, for every ``import`` / ``from ... import`` of an nvtest module in a file under
``suites/`` (type-checking-only imports included; the standard library and pytest are free):

- ``nvtest.checks.api``: what a check's signature names and the fixtures' helpers;
- ``nvtest.checks.<area>`` (any module under ``nvtest.checks`` but those in
  :data:`INTERNAL`): the logic that judges an area (health, config, memory, interconnect...);
- ``nvtest.parsers`` (and its modules): how a tool's output is read, for a probe's ``parse=``;
- ``nvtest.errors``: the exceptions.

Everything else (``nvtest.session``, ``nvtest.jobs``, ``nvtest.config``, ``nvtest.transports``,
``nvtest.text``, the package itself...) is a module ``nvtest/__init__.py`` says may move: a
site that copies a check as a template must not depend on it. :data:`INTERNAL` are the
modules of ``nvtest.checks`` that are not a check's to call: the fail-closed machinery the
``read`` and ``measure`` fixtures apply (``hardware``), and the re-judging of recorded
output for ``nvtest evaluate`` / ``nvtest parse`` (``offline``, ``standalone``).

One test per suite file, so a failure names the file.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from nvtest.config.resources import suites_dir
from nvtest.config.suites import allowed_import as allowed
from nvtest.config.suites import nvtest_imports

SUITES = suites_dir()
FILES = sorted(SUITES.rglob("*.py"))


def _rel(path: Path) -> str:
    return str(path.relative_to(SUITES))


def test_the_rule() -> None:
    for ok in (
        "nvtest.checks.api",
        "nvtest.checks.health.ecc",
        "nvtest.checks.config.probe",
        "nvtest.parsers",
        "nvtest.parsers.dcgmi",
        "nvtest.errors",
    ):
        assert allowed(ok), ok
    for bad in (
        "nvtest",
        "nvtest.checks.hardware",
        "nvtest.checks.offline",
        "nvtest.session.facts",
        "nvtest.jobs.base",
        "nvtest.config.thresholds",
        "nvtest.text",
        "nvtest.errorsx",
    ):
        assert not allowed(bad), bad
    src = "import os\nimport nvtest.jobs.base\nfrom nvtest import text\nfrom nvtest.checks.api import Judge\n"
    assert nvtest_imports(src) == [(2, "nvtest.jobs.base"), (3, "nvtest.text"), (4, "nvtest.checks.api")]


def test_the_walk_finds_the_suites() -> None:
    assert len(FILES) >= 25, [_rel(p) for p in FILES]


@pytest.mark.parametrize("path", FILES, ids=_rel)
def test_a_suite_imports_only_the_check_api(path: Path) -> None:
    bad = [
        f"line {line}: {module}"
        for line, module in nvtest_imports(path.read_text(encoding="utf-8"))
        if not allowed(module)
    ]
    assert not bad, (
        f"suites/{_rel(path)} imports outside nvtest.checks.api, nvtest.checks.<area>, nvtest.parsers "
        f"and nvtest.errors: {bad}"
    )
