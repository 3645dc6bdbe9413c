"""`pip install .` in a fresh venv outside the checkout, then `nvtest run` works:
the suites, SKU profiles, probes and report templates ship inside the wheel."""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(REPO)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    (whl,) = out.glob("nvtest-*.whl")
    return whl


def test_wheel_ships_suites_configs_probes_templates(wheel: Path):
    names = set(zipfile.ZipFile(wheel).namelist())
    for expected in (
        "nvtest/_bundled/suites/memory/test_stream.py",
        "nvtest/_bundled/configs/skus/cpu-generic.yaml",
        "nvtest/_bundled/configs/suites/delivery.yaml",
        "nvtest/probes/stream.c",
        "nvtest/probes/inventory_probe.py",
        "nvtest/report/templates/report.html.j2",
    ):
        assert expected in names, expected
    assert not any(n.startswith("tests/") for n in names)


def test_installed_wheel_runs_outside_checkout(wheel: Path, tmp_path: Path):
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    py = env_dir / "bin" / "python"
    # dependencies come from this interpreter's site-packages (no network needed);
    # nvtest itself only from the wheel
    site = Path(
        subprocess.check_output(
            [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], text=True
        ).strip()
    )
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    proc = subprocess.run(
        [str(py), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    where = subprocess.check_output(
        [str(py), "-c", "import nvtest.config.resources as r; print(r.suites_dir())"], text=True, cwd=tmp_path
    )
    assert "_bundled" in where and str(REPO) not in where
    work = tmp_path / "work"
    work.mkdir()
    run = subprocess.run(
        [str(env_dir / "bin" / "nvtest"), "run", "--suite", "quick", "--progress", "plain"],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    doc = json.loads((work / "reports" / "latest" / "results.json").read_text())
    stream = next(r for r in doc["results"] if r["check"] == "stream")
    assert stream["verdict"] == "pass" and stream["metrics"]
    assert (work / "reports" / "latest" / "report.html").is_file()
