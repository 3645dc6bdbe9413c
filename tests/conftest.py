"""Shared fixtures of nvtest's own tests."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from nvtest.config.skus import Catalog
    from nvtest.testing.slurm_cluster import SlurmCluster

#: pytester drives the plugin's own tests (tests/run); it must be named in the root conftest
pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parent.parent
#: recorded real tool outputs and other test data
DATA = REPO / "tests" / "data"
CORPUS = DATA / "corpus"
#: the node-side probes as shipped
PROBES = REPO / "nvtest" / "probes"
NVTEST = [sys.executable, "-m", "nvtest.cli"]


def run_nvtest(
    *args: str, cwd: Path | None = None, timeout: float = 900, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the nvtest CLI in a subprocess (as a user would) and capture its output."""
    full_env = {**os.environ, "COLUMNS": "200", **(env or {})}
    return subprocess.run(
        [*NVTEST, *args],
        cwd=cwd or REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full_env,
    )


def run_nvtest_on_slurm(
    cluster: SlurmCluster,
    out: Path,
    *args: str,
    timeout: float = 900,
    env: dict[str, str] | None = None,
) -> tuple[subprocess.CompletedProcess[str], dict | None, str]:
    """``nvtest run --backend slurm`` on the test cluster (partition ``nvt``, 15 min steps,
    plain progress, ``OMP_NUM_THREADS=1``, plus ``env``) with ``args``, reports under ``out``.

    Returns the process, ``results.json`` (None when the run wrote none) and the tail of
    its output (for assertion messages).
    """
    proc = run_nvtest(
        "run",
        "--backend",
        "slurm",
        "--partition",
        "nvt",
        "--time",
        "15",
        *args,
        "--out",
        str(out),
        "--progress",
        "plain",
        env={**cluster.env, "OMP_NUM_THREADS": "1", **(env or {})},
        timeout=timeout,
    )
    results = out / "latest" / "results.json"
    doc = json.loads(results.read_text()) if results.exists() else None
    return proc, doc, proc.stdout[-4000:] + proc.stderr[-3000:]


@pytest.fixture(scope="session")
def catalog() -> Catalog:
    """The bundled SKU profiles (no overlay)."""
    from nvtest.config.skus import load_catalog

    return load_catalog()


@pytest.fixture
def nvtest_cli():
    return run_nvtest


@pytest.fixture(scope="session", autouse=True)
def _history_in_session_tmp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Runs the tests start record their history in a file of the session's temp directory
    (``NVTEST_HISTORY``, inherited by every nvtest they spawn), never in the user's data
    directory. A test that needs its own database passes ``--history`` or sets the variable."""
    saved = os.environ.get("NVTEST_HISTORY")
    os.environ["NVTEST_HISTORY"] = str(tmp_path_factory.mktemp("history") / "history.sqlite")
    yield
    if saved is None:
        os.environ.pop("NVTEST_HISTORY", None)
    else:
        os.environ["NVTEST_HISTORY"] = saved


@contextlib.contextmanager
def started_slurm_cluster(
    *, activate: bool = False, nodes: tuple[str, ...] = ("node1", "node2"), **options: Any
) -> Iterator[SlurmCluster]:
    """A real Slurm of ``nodes`` (default 2: ``node1``, ``node2``; partition ``nvt``) for a test module.

    Skips, printing the reason, where the Debian packages are missing or not root.
    ``activate``: also point this process's Slurm clients (SLURM_CONF, munge socket) at it.
    ``options``: more :class:`~nvtest.testing.slurm_cluster.SlurmCluster` options (``prolog``,
    ``health_check_program``, ``scheduler_parameters``...).
    """
    from nvtest.testing.slurm_cluster import SlurmCluster, missing_slurm_binaries

    missing = missing_slurm_binaries()
    reason = None
    if missing:
        reason = f"Slurm is not installed ({', '.join(missing)} missing): apt-get install munge slurm-wlm"
    elif os.geteuid() != 0:
        reason = "the Slurm test cluster runs its daemons as root (SlurmUser=root)"
    if reason:
        print(f"skipping: {reason}")
        pytest.skip(reason)
    with SlurmCluster(nodes=nodes, partition="nvt", **options) as cluster:
        if activate:
            with cluster.activated():
                yield cluster
        else:
            yield cluster


@contextlib.contextmanager
def tiny_tmpfs(path: Path, size: str = "2m") -> Iterator[Path]:
    """A real tmpfs of ``size`` mounted at ``path`` for one test (a disk that fills up; see
    :func:`read_only_view` for a read-only one), unmounted after. Skips, printing why, where this
    process may not mount (not root, or no CAP_SYS_ADMIN in the container)."""
    path.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        reason = f"cannot mount a tmpfs here ({proc.stderr.strip() or proc.returncode}): run as root"
        print(f"skipping: {reason}")
        pytest.skip(reason)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True, check=False)


@contextlib.contextmanager
def read_only_view(src: Path, dst: Path) -> Iterator[Path]:
    """``src`` seen read-only at ``dst`` (a read-only bind mount) for one test.

    Needs the mount privileges of :func:`tiny_tmpfs` (call it inside one).
    """
    dst.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "--bind", str(src), str(dst)], check=True, capture_output=True)
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(dst)], check=True, capture_output=True)
        yield dst
    finally:
        subprocess.run(["umount", "-l", str(dst)], capture_output=True, check=False)


def fill(path: Path) -> Path:
    """Fill the file system of ``path`` to the last byte with ``path/filler``; returns it."""
    filler = path / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        for size in (1 << 16, 1 << 10, 1):
            try:
                while True:
                    os.write(fd, b"\0" * size)
            except OSError:
                pass
    finally:
        os.close(fd)
    return filler
