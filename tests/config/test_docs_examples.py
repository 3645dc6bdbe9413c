"""The YAML examples of docs/inventory.md and docs/skus.md load as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from nvtest.config.inventory import load_inventory
from nvtest.config.skus import load_catalog
from tests.conftest import REPO


def _blocks(doc: str) -> list[str]:
    return re.findall(r"```yaml\n(.*?)```", (REPO / "docs" / doc).read_text(encoding="utf-8"), re.S)


@pytest.mark.parametrize("i", range(len(_blocks("inventory.md"))))
def test_inventory_examples_load(tmp_path: Path, i: int):
    p = tmp_path / "rack07.yaml"
    p.write_text(_blocks("inventory.md")[i])
    assert len(load_inventory(p).nodes) == 128


def test_the_overlay_example_loads(tmp_path: Path):
    (text,) = [b for b in _blocks("skus.md") if "applies_to:" in b]
    p = tmp_path / "site.yaml"
    p.write_text(text)
    thr = load_catalog(overlay=p).get("h100-sxm-80gb").threshold("nccl", "all_reduce_busbw_gbps")
    assert thr is not None and thr.min == 470


def test_the_profile_example_loads(tmp_path: Path):
    (text,) = [b for b in _blocks("skus.md") if "name: my-sku" in b]
    d = tmp_path / "skus"
    d.mkdir()
    (d / "my-sku.yaml").write_text(text)
    prof = load_catalog([d]).get("my-sku")
    assert prof.peaks["hbm_gbps"].value == 3350 and prof.threshold("nccl", "all_reduce_busbw_gbps")
