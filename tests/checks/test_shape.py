"""The golden shape (issue 16 rule 4): from the profile where it says, else the fleet's majority,
shown as such; every difference of a node spelled out, for every component."""

from __future__ import annotations

import pytest

from nvtest.checks.shape import COMPONENTS, differences, facts_shape, golden, golden_for, hca_shape
from nvtest.config.skus import load_catalog
from nvtest.parsers import ibstat
from nvtest.session.facts import NodeFacts, PciFact
from tests.conftest import DATA

GOOD = tuple((f"mlx5_{i}", "InfiniBand", 400.0) for i in range(8))


def _fleet(*odd: tuple) -> dict[str, dict]:
    shapes = {f"n{i}": {"hcas": GOOD} for i in range(3)}
    for i, items in enumerate(odd):
        shapes[f"odd{i}"] = {"hcas": items}
    return shapes


def test_fleet_majority_is_golden_and_says_so():
    g = golden("hcas", _fleet(GOOD[:3] + GOOD[4:]), "h100-sxm-80gb")
    assert g is not None and g.items == GOOD
    assert g.origin == "fleet majority: 3 of 4 nodes of SKU h100-sxm-80gb"


def test_no_majority_no_golden():
    assert golden("hcas", {"a": {"hcas": GOOD}, "b": {"hcas": GOOD[:7]}}, "x") is None
    assert golden("hcas", {"a": {"hcas": GOOD}}, "x") is None  # one node is no fleet


def test_the_profile_wins_where_it_names_the_items():
    sku = load_catalog().get("h100-sxm-80gb").model_copy()
    sku.expect.hcas = [f"mlx5_{i}" for i in range(8)]
    g = golden_for("hcas", {"a": {"hcas": GOOD[:7]}}, sku)
    assert g is not None and g.origin == "SKU profile h100-sxm-80gb: expect.hcas"
    assert differences("hcas", GOOD[:7], g) == [f"HCA mlx5_7 missing: golden {g.describe()}"]


def test_profile_count_only_when_nothing_else():
    sku = load_catalog().get("h100-sxm-80gb")
    g = golden_for("nvswitches", {"a": {"nvswitches": (("0000:07:00.0",),)}}, sku)
    assert g is not None and g.items is None and g.count == 4
    assert "1 NVSwitch at PCI (0000:07:00.0), golden 4 (SKU profile h100-sxm-80gb: expect.nvswitches)" in differences(
        "nvswitches", (("0000:07:00.0",),), g
    )


@pytest.mark.parametrize("component", sorted(COMPONENTS))
def test_every_component_names_each_difference(component):
    what, attrs, owner = COMPONENTS[component]
    assert owner in {"gpus", "fabric_manager", "ib_ports"}
    items = tuple((f"k{i}", *(f"a{j}" for j in range(len(attrs)))) for i in range(3))
    gold = golden(component, {"a": {component: items}, "b": {component: items}, "c": {component: items[:2]}}, "s")
    assert gold is not None and differences(component, items, gold) == []
    assert differences(component, items[:2], gold) == [f"{what} k2 missing: golden {gold.describe()}"]
    renamed = items[:2] + (("kX", *items[2][1:]),)
    diffs = differences(component, renamed, gold)
    assert any("k2 missing" in d for d in diffs) and any("kX not in the golden shape" in d for d in diffs)
    if attrs:
        changed = items[:2] + ((items[2][0], "other", *items[2][2:]),)
        assert differences(component, changed, gold) == [f"{what} k2: {attrs[0]} other, golden a0 ({gold.origin})"]


def test_shapes_from_real_recordings():
    seven = hca_shape(ibstat.parse((DATA / "standin/ibstat-7x-ndr-mt4129-mlx5_3-absent-assembled.txt").read_text()))
    assert [i[0] for i in seven] == ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_7"]
    assert seven[0][1:] == ("InfiniBand", 400.0)
    facts = NodeFacts(
        "n",
        None,
        None,
        None,
        None,
        None,
        None,
        None,
        None,
        pci=(
            PciFact("0000:1b:00.0", "3D controller", "0302", "NVIDIA", "10de", "GH100", "2330", numa_node=0),
            PciFact("0000:07:00.0", "Bridge", "0680", "NVIDIA", "10de", "GH100 [H100 NVSwitch]", "22a3"),
        ),
        rdma_devices={"mlx5_0": {"pci": "0000:1a:00.0", "numa_node": 0}},
    )
    shape = facts_shape(facts)
    assert shape == {
        "gpu_pci": (("0000:1b:00.0",),),
        "nvswitches": (("0000:07:00.0",),),
        "gpu_numa": (("0000:1b:00.0", 0),),
        "hca_pci": (("mlx5_0", "0000:1a:00.0", 0),),
    }
