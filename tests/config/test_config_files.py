"""Config files: every bundled profile and suite loads; errors name file, line and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from nvtest.config.inventory import load_inventory
from nvtest.config.loader import load_model
from nvtest.config.skus import GpuSummary, load_catalog
from nvtest.config.suites import list_suites, load_suite
from nvtest.config.thresholds import SkuProfile
from nvtest.errors import ConfigError


def test_bundled_profiles_load():
    cat = load_catalog()
    assert {"cpu-generic", "h100-sxm-80gb"} <= set(cat.names())
    for prof in cat.profiles.values():
        for check, metrics in prof.thresholds.items():
            for metric, thr in metrics.items():
                assert thr.unit and thr.source, (prof.name, check, metric)


def test_bundled_suites_load():
    suites = list_suites()
    assert {"delivery", "quick"} <= set(suites)
    assert len(suites["delivery"].checks) >= len(suites["quick"].checks)


@pytest.mark.parametrize(
    ("checks", "field", "words"),
    [
        ("[]", "checks", "no check module listed"),
        ("[inventory/test_nope.py]", "checks.0", "not found"),
        ("[inventory]", "checks.0", "not found"),
        ("[inventory/test_inventory.py::test_nope]", "checks.0", "defines no function 'test_nope'"),
    ],
)
def test_a_suite_that_lists_nothing_runnable_is_refused(tmp_path: Path, checks: str, field: str, words: str):
    """An empty list (pytest would collect the working directory), a module that is not a
    file, a directory, a function the module does not define: exit 2 naming the field."""
    p = tmp_path / "s.yaml"
    p.write_text(f"name: s\ndescription: d\nchecks: {checks}\n")
    with pytest.raises(ConfigError) as err:
        load_suite(str(p))
    assert err.value.field == field and words in err.value.reason, err.value
    assert err.value.exit_code == 2


def test_a_site_module_that_imports_nvtest_internals_is_refused(tmp_path: Path):
    """The import rule of tests/architecture/test_suite_imports.py holds for a site's own module
    too (given by its absolute path, never walked by that test): exit 2 naming file, line, module."""
    module = tmp_path / "test_site.py"
    module.write_text("import pytest\nfrom nvtest.checks.api import Judge\nfrom nvtest.session.probe import Probe\n")
    p = tmp_path / "s.yaml"
    p.write_text(f"name: s\ndescription: d\nchecks: [{module}]\n")
    with pytest.raises(ConfigError) as err:
        load_suite(str(p))
    assert err.value.field == "checks.0" and f"{module}:3 imports nvtest.session.probe" in err.value.reason


BAD_PROFILE = """\
schema_version: 1
name: bad
description: a profile with a threshold missing its unit
thresholds:
  stream:
    triad_gbps:
      min: 5
      source: "x"
"""


def test_missing_unit_names_file_line_field(tmp_path: Path):
    p = tmp_path / "bad.yaml"
    p.write_text(BAD_PROFILE)
    with pytest.raises(ConfigError) as ei:
        load_model(SkuProfile, p)
    msg = str(ei.value)
    assert str(p) in msg
    assert "thresholds.stream.triad_gbps.unit" in msg
    assert ei.value.line == 6  # the triad_gbps key
    assert ei.value.exit_code == 2


def test_unknown_key_is_reported(tmp_path: Path):
    p = tmp_path / "bad.yaml"
    p.write_text("schema_version: 1\nname: bad\ndescription: d\nthresholdz: {}\n")
    with pytest.raises(ConfigError) as ei:
        load_model(SkuProfile, p)
    assert "thresholdz" in str(ei.value) and "unknown key" in str(ei.value)
    assert ei.value.line == 4


def test_invalid_yaml_has_line(tmp_path: Path):
    p = tmp_path / "bad.yaml"
    p.write_text("name: x\n  bad: [\n")
    with pytest.raises(ConfigError) as ei:
        load_model(SkuProfile, p)
    assert ei.value.line is not None and "invalid YAML" in str(ei.value)


def test_sku_matching():
    cat = load_catalog()
    assert cat.match(GpuSummary()).name == "cpu-generic"
    h100 = GpuSummary(tuple(["NVIDIA H100 80GB HBM3"] * 8), tuple([81559] * 8))
    m = cat.match(h100)
    assert m.name == "h100-sxm-80gb" and any("8 GPUs" in r for r in m.reasons)
    four = GpuSummary(tuple(["NVIDIA H100 80GB HBM3"] * 4), tuple([81559] * 4))
    assert cat.match(four).profile is None or cat.match(four).name != "h100-sxm-80gb"


def test_unknown_sku_lists_known():
    with pytest.raises(ConfigError) as ei:
        load_catalog().get("nope")
    assert "cpu-generic" in str(ei.value)


def test_overlay_replaces_threshold_and_says_so(tmp_path: Path):
    ov = tmp_path / "site.yaml"
    ov.write_text(
        "schema_version: 1\nname: site\napplies_to: [cpu-generic]\nthresholds:\n"
        "  stream:\n    triad_gbps: {min: 5.0, unit: GB/s, source: site contract}\n"
    )
    cat = load_catalog(overlay=ov)
    thr = cat.get("cpu-generic").threshold("stream", "triad_gbps")
    assert thr is not None and thr.min == 5.0
    assert cat.origin("cpu-generic", "stream", "triad_gbps") == f"overlay:{ov}"
    assert cat.origin("cpu-generic", "stream", "copy_gbps") == "profile:cpu-generic"


def test_inventory_expands_hostlists_and_overrides(tmp_path: Path):
    p = tmp_path / "inv.yaml"
    p.write_text(
        "cluster: rack07\ndefaults: {user: root, sku: cpu-generic}\nnodes:\n"
        "  - names: gpu[001-004]\n    tags: {rack: r07}\n"
        "  - names: gpu003\n    port: 2222\n"
    )
    inv = load_inventory(p)
    assert inv.names() == ["gpu001", "gpu002", "gpu003", "gpu004"]
    by = inv.by_name()
    assert by["gpu003"].port == 2222 and by["gpu003"].tags == {"rack": "r07"}
    assert by["gpu001"].port is None and by["gpu001"].user == "root"


def test_inventory_bad_field_and_hostlist(tmp_path: Path):
    p = tmp_path / "inv.yaml"
    p.write_text("nodes:\n  - names: gpu[001-004]\n    port: 99999\n")
    with pytest.raises(ConfigError) as ei:
        load_inventory(p)
    assert "nodes.0.port" in str(ei.value) and ei.value.line == 3
    p.write_text("nodes:\n  - names: 'gpu[001-'\n")
    with pytest.raises(ConfigError) as ei:
        load_inventory(p)
    assert "nodes.0.names" in str(ei.value) and ei.value.line == 2


def test_binary_file_is_a_config_error(tmp_path: Path):
    p = tmp_path / "inv.yaml"
    p.write_bytes(b"nodes:\n  - names: n1\n\xff\xfe\x00garbage\n")
    with pytest.raises(ConfigError) as ei:
        load_inventory(p)
    assert "not UTF-8" in str(ei.value) and ei.value.line == 3


def test_typo_in_top_level_key_is_named_first(tmp_path: Path):
    p = tmp_path / "inv.yaml"
    p.write_text("nodse:\n  - names: n1\n")
    with pytest.raises(ConfigError) as ei:
        load_inventory(p)
    assert "nodse" in str(ei.value) and "unknown key" in str(ei.value) and ei.value.line == 1


@pytest.mark.parametrize(
    ("text", "line", "field", "hint"),
    [
        ("nodse:\n  - names: n1\n", 1, "nodse", "did you mean 'nodes'?"),
        ("defaults: {usr: root}\nnodes:\n  - names: n1\n", 1, "defaults.usr", "did you mean 'user'?"),
        ("nodes:\n  - names: n1\n    prot: 22\n", 3, "nodes.0.prot", "did you mean 'port'?"),
        ("nodes:\n  - names: n1\n    zzzz: 1\n", 3, "nodes.0.zzzz", ""),
    ],
)
def test_an_unknown_key_names_the_nearest_known_one(tmp_path: Path, text: str, line: int, field: str, hint: str):
    p = tmp_path / "inv.yaml"
    p.write_text(text)
    with pytest.raises(ConfigError) as ei:
        load_inventory(p)
    err = ei.value
    assert (err.line, err.field) == (line, field) and err.reason.startswith("unknown key"), str(err)
    assert hint in err.reason and ("did you mean" in err.reason) == bool(hint), str(err)


def test_overlong_node_name_rejected():
    from nvtest.config.inventory import expand_hostlist

    with pytest.raises(ConfigError) as ei:
        expand_hostlist("n" * 300)
    assert "at most 253" in str(ei.value)
    with pytest.raises(ConfigError):
        expand_hostlist("  ")


def test_inventory_without_nodes_is_an_error(tmp_path: Path):
    inv = tmp_path / "empty.yaml"
    inv.write_text("cluster: c\nnodes: []\n")
    with pytest.raises(ConfigError) as exc:
        load_inventory(inv)
    assert exc.value.field == "nodes" and exc.value.line == 2 and "no nodes" in str(exc.value)


def test_nodes_select_from_the_inventory(tmp_path: Path):
    from nvtest.config.inventory import select_nodes

    inv = tmp_path / "inv.yaml"
    inv.write_text("nodes:\n  - names: gpu[001-004]\n    port: 2222\n")
    chosen = select_nodes(load_inventory(inv), "gpu[002,004]")
    assert [n.name for n in chosen.nodes] == ["gpu002", "gpu004"]
    assert all(n.port == 2222 for n in chosen.nodes)  # the inventory's settings are kept
    with pytest.raises(ConfigError) as exc:
        select_nodes(load_inventory(inv), "gpu[004-005]")
    assert "gpu005" in str(exc.value) and "not in the inventory" in str(exc.value)


def test_run_with_an_empty_inventory_exits_2(tmp_path: Path):
    from tests.conftest import run_nvtest

    inv = tmp_path / "empty.yaml"
    inv.write_text("nodes: []\n")
    proc = run_nvtest("run", "--backend", "ssh", "--inventory", str(inv), "--out", str(tmp_path / "r"))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "empty.yaml:1" in proc.stderr and "no nodes" in proc.stderr
    assert not (tmp_path / "r").exists() or not any((tmp_path / "r").iterdir())
