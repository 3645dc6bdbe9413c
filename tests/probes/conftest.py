"""Fixtures for the node-side probe tests.

Probes are run the way a node runs them: copied into a directory of their
own, started with ``python DIR/probe.py`` from an unrelated working
directory and without PYTHONPATH, so an accidental ``import nvtest`` fails.
The pure functions are imported straight from ``nvtest/probes`` (put first
on ``sys.path`` here, as the probes do themselves).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import PROBES

PROBES_SRC = PROBES
if str(PROBES_SRC) not in sys.path:
    sys.path.insert(0, str(PROBES_SRC))

COMMON_KEYS = {"probe", "probe_version", "status", "reason", "host", "library", "results"}


@dataclass(frozen=True)
class ProbeRun:
    """One probe subprocess: exit code, the parsed JSON document, raw streams."""

    returncode: int
    doc: dict[str, Any]
    stdout: str
    stderr: str


@pytest.fixture(scope="session")
def probe_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A flat copy of the probes directory, as shipped to a node."""
    dest = tmp_path_factory.mktemp("node") / "probes"
    dest.mkdir()
    for src in PROBES_SRC.iterdir():
        if src.suffix in (".py", ".c"):
            shutil.copy2(src, dest / src.name)
    return dest


def run_probe(
    probe_dir: Path,
    script: str,
    *args: str,
    env: dict[str, str] | None = None,
    timeout: float = 120,
) -> ProbeRun:
    """Run ``script`` from ``probe_dir`` and check the common JSON contract on its stdout."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("NVTEST_PROBE")}
    full_env.pop("PYTHONPATH", None)
    full_env.update(env or {})
    proc = subprocess.run(
        [sys.executable, str(probe_dir / script), *args],
        cwd=probe_dir.parent,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.stdout.count("\n") == 1 and proc.stdout.endswith("\n"), (
        f"stdout must be exactly one JSON line:\n{proc.stdout}\n--- stderr:\n{proc.stderr}"
    )
    doc = json.loads(proc.stdout)
    assert COMMON_KEYS <= doc.keys(), doc.keys()
    assert doc["probe_version"] == 1
    assert doc["status"] in ("ok", "skip", "error")
    assert (doc["reason"] is None) == (doc["status"] == "ok"), doc
    assert proc.returncode == (1 if doc["status"] == "error" else 0), (proc.returncode, doc)
    assert "Traceback" not in proc.stdout
    return ProbeRun(proc.returncode, doc, proc.stdout, proc.stderr)


@pytest.fixture(scope="session")
def probe(probe_dir: Path):
    """``probe(script, *args, env=..., timeout=...)`` -> :class:`ProbeRun`."""

    def _run(script: str, *args: str, **kw: Any) -> ProbeRun:
        return run_probe(probe_dir, script, *args, **kw)

    return _run
