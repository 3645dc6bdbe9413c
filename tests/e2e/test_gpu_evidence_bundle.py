"""``make gpu-evidence-bundle``: one directory under 64 MiB with the wheels nvtest needs beyond
what a GPU machine has, for CPython 3.11 on manylinux x86_64, that installs with no network
(``pip install --no-index --find-links``) into a fresh virtualenv: the bundled wheel, and this
checkout editable (what ``make gpu-evidence`` does on the GPU machine)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.slow

MAX_BYTES = 64 * 1024 * 1024
#: What the GPU machine has and keeps its own build of; the bundle must not carry them.
MACHINE_HAS = ("torch", "cupy", "numpy", "pandas", "nvidia_ml_py", "mpi4py")
#: The GPU machine's own packages that nvtest's dependencies reach: put in the fresh venv from
#: this machine's index first, as that machine has them. Everything else must come from the bundle.
MACHINE_PACKAGES = ("numpy", "pandas")
WHEEL_RE = re.compile(
    r"^(?P<name>[^-]+)-(?P<ver>[^-]+)(?:-\d[^-]*)?-(?P<py>[^-]+)-(?P<abi>[^-]+)-(?P<plat>[^-]+)\.whl$"
)


def _runs_on_the_gpu_machine(name: str) -> str | None:
    """Why the wheel file ``name`` would not install on CPython 3.11 / manylinux x86_64 (glibc
    2.34), or None."""
    m = WHEEL_RE.match(name)
    if not m:
        return "not a wheel file name"
    pys, abi, plats = m["py"].split("."), m["abi"], m["plat"].split(".")
    if abi == "none" and any(p in ("py3", "py2", "py311") for p in pys) and plats == ["any"]:
        return None
    if abi == "cp311" and "cp311" not in pys:
        return f"abi {abi} with python tag {m['py']}"
    if abi == "abi3" and not any(re.fullmatch(r"cp3(\d+)", p) and int(p[3:]) <= 11 for p in pys):
        return f"abi3 for {m['py']}"
    if abi not in ("cp311", "abi3"):
        return f"abi {abi}"
    for plat in plats:
        g = re.fullmatch(r"manylinux_2_(\d+)_x86_64", plat)
        if (g and int(g.group(1)) <= 34) or plat in (
            "manylinux1_x86_64",
            "manylinux2010_x86_64",
            "manylinux2014_x86_64",
        ):
            return None
    return f"platform {m['plat']}"


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("bundle") / "gpu-evidence-bundle"
    proc = subprocess.run(
        ["bash", str(REPO / "scripts" / "gpu_evidence_bundle.sh"), str(out)],
        cwd=REPO,
        env={**os.environ, "PYTHON": sys.executable},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


def test_bundle_is_small_and_every_wheel_fits_the_gpu_machine(bundle: Path) -> None:
    size = sum(p.stat().st_size for p in bundle.rglob("*") if p.is_file())
    assert size < MAX_BYTES, f"{size / 2**20:.1f} MiB"
    wheels = sorted(p.name for p in (bundle / "wheels").glob("*.whl"))
    bad = {w: why for w in wheels if (why := _runs_on_the_gpu_machine(w))}
    assert bad == {}
    names = {WHEEL_RE.match(w)["name"].lower() for w in wheels}  # type: ignore[index]
    assert not names & set(MACHINE_HAS), names & set(MACHINE_HAS)
    assert {
        "nvtest",
        "pydantic",
        "pydantic_core",
        "fabric",
        "paramiko",
        "clustershell",
        "cryptography",
        "hatchling",
        "editables",
    } <= names
    assert (bundle / "install.sh").is_file() and (bundle / "PYTHON_VERSION").read_text().strip() == "3.11"
    sums = (bundle / "SHA256SUMS").read_text()
    assert all(w in sums for w in wheels)


def _offline_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    return {**env, "PIP_CONFIG_FILE": os.devnull, "GPU_EVIDENCE_SYSTEM_SITE": "0"}


def test_installs_offline_into_a_fresh_venv_wheel_then_checkout(bundle: Path, tmp_path: Path) -> None:
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)  # a plain venv: nothing of this machine's site
    py, nvtest = env_dir / "bin" / "python", env_dir / "bin" / "nvtest"
    machine = subprocess.run(
        [str(py), "-m", "pip", "install", "-q", "--only-binary=:all:", *MACHINE_PACKAGES],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert machine.returncode == 0, machine.stderr[-2000:]
    empty = tmp_path / "empty"
    empty.mkdir()
    control = subprocess.run(
        [str(py), "-m", "pip", "install", "--no-index", "--find-links", str(empty), "pydantic"],
        env=_offline_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert control.returncode != 0 and "No matching distribution" in control.stderr  # no index reachable this way

    wheel = subprocess.run(
        ["bash", str(bundle / "install.sh"), str(env_dir)],
        env=_offline_env(),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert wheel.returncode == 0, wheel.stderr[-3000:]
    assert "resolving failed" not in wheel.stderr
    assert not list(env_dir.rglob("_gpu_machine_site.pth"))  # nothing of this machine's site-packages
    where = subprocess.check_output([str(py), "-c", "import nvtest; print(nvtest.__file__)"], text=True, cwd=tmp_path)
    assert str(env_dir) in where
    version = subprocess.run([str(nvtest), "--version"], capture_output=True, text=True, cwd=tmp_path)
    assert version.returncode == 0 and version.stdout.strip() == "nvtest 0.1.0"
    listed = subprocess.run([str(nvtest), "parse", "--list"], capture_output=True, text=True, cwd=tmp_path)
    assert listed.returncode == 0 and {"nvidia-smi-xml", "nccl-tests", "nvbandwidth"} <= set(listed.stdout.split())
    kit = subprocess.run([str(nvtest), "evidence", "--help"], capture_output=True, text=True, cwd=tmp_path)
    assert kit.returncode == 0 and "Example: nvtest evidence" in kit.stdout

    editable = subprocess.run(
        ["bash", str(bundle / "install.sh"), str(env_dir), str(REPO)],
        env=_offline_env(),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert editable.returncode == 0, editable.stderr[-3000:]
    assert "resolving failed" not in editable.stderr
    where = subprocess.check_output([str(py), "-c", "import nvtest; print(nvtest.__file__)"], text=True, cwd=tmp_path)
    assert where.strip() == str(REPO / "nvtest" / "__init__.py")


def test_a_new_venv_sees_the_packages_of_the_python_that_made_it(bundle: Path, tmp_path: Path) -> None:
    """On the GPU machine torch and cupy come from the machine, even when its Python is itself a
    venv (this test's: it has torch) whose packages ``--system-site-packages`` alone would hide."""
    env_dir = tmp_path / "venv"
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("PIP_")},
        "PIP_CONFIG_FILE": os.devnull,
        "PYTHON": sys.executable,
    }
    proc = subprocess.run(
        ["bash", str(bundle / "install.sh"), str(env_dir), str(REPO)],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (pth,) = env_dir.rglob("_gpu_machine_site.pth")
    assert sys.prefix in pth.read_text()
    check = subprocess.run(
        [
            str(env_dir / "bin" / "python"),
            "-c",
            "import torch, nvtest, sys; print(torch.__file__); print(nvtest.__file__)",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert check.returncode == 0, check.stderr[-2000:]
    torch_file, nvtest_file = check.stdout.split()
    assert torch_file.startswith(sys.prefix) and nvtest_file == str(REPO / "nvtest" / "__init__.py")
