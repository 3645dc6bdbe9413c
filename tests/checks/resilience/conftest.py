"""Helpers of the resilience tests: run a probe here as a node would, and a CPU SKU with tiny recipes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import PROBES


def run_probe(script: str, *args: str, timeout: float = 600, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run ``nvtest/probes/<script> ARGS`` with this interpreter; its JSON document."""
    proc = subprocess.run(
        [sys.executable, str(PROBES / script), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )
    assert proc.stdout.strip(), proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def tiny_sku(tmp: Path, name: str = "resil-cpu", **recipe: Any) -> dict[str, Any]:
    """A CPU SKU whose resilience recipes take seconds: MiB checkpoints, 16 steps."""
    return {
        "schema_version": 1,
        "name": name,
        "description": "CPU node of the resilience tests",
        "match": {"gpu_count": 0},
        "expect": {"gpus": 0},
        "recipe": {
            "ckpt": {
                "size_mib": 8,
                "quick_size_mib": 4,
                "chunk_mib": 1,
                "mem_path": str(tmp / "shm"),
                "local_path": str(tmp / "local"),
                "shared_path": None,
            },
            "resilience": {
                "steps": 16,
                "ckpt_every": 4,
                "launcher": "auto",
                "estimate": {"mtbf_h": 24, "interval_min": 30, "save_gib": 8, "tier": "local"},
            },
            **recipe,
        },
    }


@pytest.fixture
def sku_dir(tmp_path: Path):
    """``make(**recipe) -> dir`` holding ``resil-cpu.yaml``."""

    def make(**recipe: Any) -> Path:
        d = tmp_path / "skus"
        d.mkdir(exist_ok=True)
        (d / "resil-cpu.yaml").write_text(yaml.safe_dump(tiny_sku(tmp_path, **recipe)), encoding="utf-8")
        return d

    return make


def by_check(doc: dict[str, Any], check: str) -> dict[str, dict[str, Any]]:
    """node -> result of ``check`` in a results.json document."""
    return {r["node"]: r for r in doc.get("results", []) if r["check"] == check}


def metrics(result: dict[str, Any]) -> dict[str, float | None]:
    return {m["name"]: m["value"] for m in result["metrics"]}
