"""Fixtures of the report tests: a real delivery run, synthetic runs, a headless Chromium."""

from __future__ import annotations

import importlib.util
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from nvtest.report import render_all
from nvtest.report.chromium import Chromium, find_chromium
from nvtest.testing.synthetic import synthetic_doc
from tests.conftest import REPO, run_nvtest

ARTIFACTS = REPO / "test-artifacts"
SCHEMA = REPO / "docs" / "results.schema.json"


def write_run(run_dir: Path, doc: dict) -> Path:
    """Write ``doc`` as ``run_dir/results.json``, render every report, return run_dir."""
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "results.json").write_text(json.dumps(doc), encoding="utf-8")
    render_all(run_dir, doc)
    return run_dir


@pytest.fixture(scope="session")
def delivery_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The run directory of a real ``nvtest run --suite delivery`` on this machine.

    ``NVTEST_REPORT_RUN_DIR`` names an existing run directory to reuse instead.
    """
    given = os.environ.get("NVTEST_REPORT_RUN_DIR")
    if given:
        return Path(given).resolve()
    out = tmp_path_factory.mktemp("delivery")
    proc = run_nvtest("run", "--suite", "delivery", "--out", str(out), "--progress", "none")
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    return (out / "latest").resolve()


@pytest.fixture(scope="session")
def synthetic_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """64 synthetic H100 nodes with failures, warnings, an unreachable and drained nodes."""
    return write_run(tmp_path_factory.mktemp("syn64") / "run", synthetic_doc(64))


@pytest.fixture(scope="session")
def hostile_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """16 synthetic nodes whose node name, GPU name, cluster and reasons carry markup and script."""
    return write_run(tmp_path_factory.mktemp("hostile") / "run", synthetic_doc(16, hostile=True))


@pytest.fixture(scope="session")
def browser() -> Iterator[Chromium]:
    """One headless Chromium for the session (skipped, with the reason, when none is installed)."""
    if find_chromium() is None:
        print("SKIP: no chromium on PATH (apt-get install chromium; `make test` installs it)")
        pytest.skip("no chromium on PATH (apt-get install chromium; `make test` installs it)")
    if importlib.util.find_spec("websocket") is None:
        print("SKIP: websocket-client is not installed (pip install 'nvtest[test]')")
        pytest.skip("websocket-client is not installed (pip install 'nvtest[test]')")
    with Chromium(width=1400, height=1000, timeout_s=180) as br:
        yield br


@pytest.fixture
def page(browser: Chromium) -> Chromium:
    """The session browser with its error, dialog and request records cleared."""
    browser.errors.clear()
    browser.dialogs.clear()
    browser.requests.clear()
    return browser
