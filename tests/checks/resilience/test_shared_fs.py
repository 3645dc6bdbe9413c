"""The delivery suite's shared-filesystem check (issue 24, class 4), run for real (local backend).

The site's checkpoint path from a site overlay (``recipe.ckpt.shared_path``): declared none ->
skip saying so; a path whose write blocks (a FIFO where the probe's marker file goes: ``open``
waits for a reader, as a write on a hung NFS mount waits for the server) -> fail naming the step,
within the recipe's deadline; a path that answers -> measured and judged against the overlay's
floor; a path that does not exist -> fail, never created.
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

import yaml

from tests.conftest import run_nvtest

SUITE = {"name": "shared", "description": "the shared-filesystem check", "checks": ["resilience/test_shared_fs.py"]}


def _run(tmp: Path, recipe: dict | None, thresholds: dict | None = None) -> tuple[dict, float, str]:
    suite = tmp / "suite.yaml"
    suite.write_text(yaml.safe_dump(SUITE))
    args = ["run", "--suite", str(suite), "--out", str(tmp / "r"), "--progress", "none"]
    if recipe is not None or thresholds is not None:
        ov = tmp / "site.yaml"
        ov.write_text(
            yaml.safe_dump(
                {"schema_version": 1, "name": "site", "recipe": recipe or {}, "thresholds": thresholds or {}}
            )
        )
        args += ["--overlay", str(ov)]
    t0 = time.monotonic()
    proc = run_nvtest(*args, env={"NVTEST_CKPT_SIZE_MIB": "8", "OMP_NUM_THREADS": "1"}, timeout=300)
    wall = time.monotonic() - t0
    doc = json.loads((tmp / "r" / "latest" / "results.json").read_text())
    (res,) = [r for r in doc["results"] if r["check"] == "shared_fs"]
    return res, wall, proc.stdout[-2000:] + proc.stderr[-2000:]


def test_no_shared_path_declared_is_a_skip_saying_so(tmp_path: Path) -> None:
    res, _, text = _run(tmp_path, None)
    assert res["verdict"] == "skip" and "declares no shared filesystem (recipe ckpt.shared_path)" in res["reason"], text


def test_a_hung_shared_path_fails_at_its_step_within_the_deadline(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    os.mkfifo(shared / f".nvtest-writable-{socket.gethostname()}")
    res, wall, text = _run(tmp_path, {"ckpt": {"shared_path": str(shared), "shared_deadline_s": 2}})
    assert res["verdict"] == "fail", (res, text)
    assert "no answer within 2 s at step 'writable'" in res["reason"] and str(shared) in res["reason"], res
    assert res["details"]["reach"]["reachable"] is False
    assert wall < 40, wall  # the run's own start-up and teardown, plus the 2 s deadline


def test_a_shared_path_is_measured_against_the_sites_floor_and_never_created(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    floor = {"shared_fs": {"write_gbps": {"min": 1000000, "unit": "GB/s", "source": "impossible floor for the test"}}}
    res, _, text = _run(tmp_path, {"ckpt": {"shared_path": str(shared)}}, floor)
    assert res["verdict"] == "fail" and "write_gbps" in res["reason"] and "< min" in res["reason"], (res, text)
    assert res["details"]["reach"] == {
        "reachable": True,
        "writable": True,
        "step": None,
        "seconds": res["details"]["reach"]["seconds"],
        "reason": None,
    }
    assert not list(shared.iterdir())  # the probe's files are removed
    missing = tmp_path / "not-mounted"
    (tmp_path / "m").mkdir()
    res, _, text = _run(tmp_path / "m", {"ckpt": {"shared_path": str(missing)}})
    assert res["verdict"] == "fail" and "not reachable: No such file or directory (not mounted?)" in res["reason"], (
        res,
        text,
    )
    assert not missing.exists()
