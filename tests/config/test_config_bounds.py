"""Loading a config file is bounded: size, alias expansion, nesting, node count; duplicate
keys are errors and merge keys merge. Each bad file is a ConfigError (exit 2) naming the
file and the line, raised before anything is expanded or connected to."""

from __future__ import annotations

from pathlib import Path

import pytest

from nvtest.config.inventory import expand_hostlist, hostlist_size, load_inventory
from nvtest.config.loader import load_yaml_with_lines
from nvtest.config.skus import load_catalog
from nvtest.errors import ConfigError
from tests.conftest import run_nvtest

MERGED = """\
common: &common {user: root, python: /usr/bin/python3, tags: {rack: r07}}
nodes:
  - names: gpu[001-004]
    <<: *common
    port: 2222
  - names: gpu005
    <<: [*common, {port: 22, user: admin}]
"""


def test_merge_keys_merge_and_the_own_keys_win(tmp_path: Path):
    p = tmp_path / "inv.yaml"
    p.write_text(MERGED.replace("common: &common", "defaults: &common"))
    inv = load_inventory(p)
    by = inv.by_name()
    assert by["gpu001"].port == 2222 and by["gpu001"].user == "root" and by["gpu001"].tags == {"rack": "r07"}
    assert by["gpu005"].port == 22 and by["gpu005"].user == "root"  # the first merged mapping wins
    data, lines = load_yaml_with_lines(p)
    assert lines[("nodes", 0, "port")] == 5 and lines[("nodes", 0, "user")] == 1  # where the value is written


def test_an_anchor_only_document_key_is_an_unknown_key_not_a_traceback(tmp_path: Path):
    p = tmp_path / "inv.yaml"
    p.write_text(MERGED)
    with pytest.raises(ConfigError) as ei:
        load_inventory(p)
    assert (ei.value.line, ei.value.field) == (1, "common") and "unknown key" in ei.value.reason


BAD_YAML = [
    ("merge-scalar", "nodes:\n  - names: n1\n    <<: 5\n", 3, "merges a mapping"),
    ("merge-as-value", "nodes:\n  - names: <<\n", 2, "merge key"),
    (
        "duplicate",
        "nodes:\n  - names: n1\n    port: 22\n    port: 2222\n",
        4,
        "duplicate key 'port' (first at line 3)",
    ),
    ("duplicate-top", "cluster: a\nnodes: []\ncluster: b\n", 3, "duplicate key 'cluster'"),
    ("recursive", "defaults: &d\n  tags: *d\nnodes: []\n", 1, "recursive alias"),
    ("deep", "nodes: " + "[" * 150 + "]" * 150 + "\n", 1, "nested deeper than 100"),
    ("key-mapping", "{a: 1}: 2\nnodes: []\n", 1, "a mapping key must be a plain value"),
]


@pytest.mark.parametrize(("text", "line", "words"), [c[1:] for c in BAD_YAML], ids=[c[0] for c in BAD_YAML])
def test_bad_yaml_is_a_config_error_with_its_line(tmp_path: Path, text: str, line: int, words: str):
    p = tmp_path / "inv.yaml"
    p.write_text(text)
    with pytest.raises(ConfigError) as ei:
        load_inventory(p)
    assert ei.value.path == str(p) and ei.value.line == line and words in ei.value.reason, str(ei.value)
    assert ei.value.exit_code == 2


def _bomb(levels: int = 9) -> str:
    out = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, levels):
        out.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]")
    return "\n".join(out) + "\nnodes: []\n"


def test_an_alias_bomb_stops_at_the_node_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    p = tmp_path / "bomb.yaml"
    p.write_text(_bomb())
    with pytest.raises(ConfigError) as ei:
        load_yaml_with_lines(p)
    assert "alias bomb" in ei.value.reason and ei.value.line is not None
    small = tmp_path / "small.yaml"
    small.write_text(_bomb(3))  # 10^3 strings: fine by default, over a limit of 500
    assert load_yaml_with_lines(small)[0]["a2"][9][9][9] == "lol"
    monkeypatch.setenv("NVTEST_MAX_YAML_NODES", "500")
    with pytest.raises(ConfigError):
        load_yaml_with_lines(small)


def test_the_size_of_a_file_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    p = tmp_path / "inv.yaml"
    p.write_text("nodes:\n" + "  - names: n1\n" * 200)
    monkeypatch.setenv("NVTEST_MAX_CONFIG_BYTES", "1000")
    with pytest.raises(ConfigError) as ei:
        load_inventory(p)
    assert "larger than 1000 bytes" in ei.value.reason and "NVTEST_MAX_CONFIG_BYTES" in ei.value.reason
    with pytest.raises(ConfigError) as ei:
        load_inventory(Path("/dev/zero"))  # endless: read stops at the limit
    assert "larger than" in ei.value.reason
    monkeypatch.setenv("NVTEST_MAX_CONFIG_BYTES", "lots")
    with pytest.raises(ConfigError) as ei:
        load_inventory(p)
    assert ei.value.field == "NVTEST_MAX_CONFIG_BYTES"


def test_hostlists_are_counted_before_they_are_expanded(monkeypatch: pytest.MonkeyPatch):
    assert hostlist_size("gpu[1-100000000]") == 100_000_000  # no name is built
    assert hostlist_size("gpu[001-004,010],login[1-2]-ib[0-1],a1") == 5 + 4 + 1
    assert hostlist_size("n[1-10/2]") == 5
    with pytest.raises(ConfigError) as ei:
        expand_hostlist("gpu[1-100000000]")
    assert "names 100000000 nodes, more than the limit of 65536" in ei.value.reason
    monkeypatch.setenv("NVTEST_MAX_NODES", "3")
    with pytest.raises(ConfigError):
        expand_hostlist("gpu[1-4]")
    assert expand_hostlist("gpu[1-3]") == ["gpu1", "gpu2", "gpu3"]


def test_an_inventory_sets_its_own_node_limit(tmp_path: Path):
    p = tmp_path / "inv.yaml"
    p.write_text("max_nodes: 3\nnodes:\n  - names: gpu[1-2]\n  - names: gpu[2-4]\n")
    with pytest.raises(ConfigError) as ei:
        load_inventory(p)
    assert (ei.value.line, ei.value.field) == (
        4,
        "nodes.1.names",
    ) and "names 4 nodes" in ei.value.reason
    p.write_text("max_nodes: 3\nnodes:\n  - names: gpu[1-2]\n  - names: gpu[2-3]\n    port: 22\n")
    assert load_inventory(p).names() == ["gpu1", "gpu2", "gpu3"]  # a repeated node counts once
    p.write_text("nodes:\n  - names: 'gpu[1-1000000]'\n")
    with pytest.raises(ConfigError) as ei:
        load_inventory(p)
    assert (ei.value.line, ei.value.field) == (2, "nodes.0.names")


def test_known_hosts_in_the_inventory_is_relative_to_it(tmp_path: Path):
    p = tmp_path / "inv.yaml"
    p.write_text("known_hosts: site/known_hosts\nnodes:\n  - names: n1\n")
    assert load_inventory(p).known_hosts == str(tmp_path / "site" / "known_hosts")


def test_profiles_and_overlays_are_read_the_same_way(tmp_path: Path):
    ov = tmp_path / "site.yaml"
    ov.write_text(
        "schema_version: 1\nname: site\nbase: &b {unit: GB/s, source: site contract}\n"
        "thresholds:\n  stream:\n    triad_gbps: {<<: *b, min: 5}\n    triad_gbps: {<<: *b, min: 6}\n"
    )
    with pytest.raises(ConfigError) as ei:
        load_catalog(overlay=ov)
    assert ei.value.line == 7 and "duplicate key 'triad_gbps'" in ei.value.reason


CLI_CASES = [
    ("bomb", _bomb(), "alias bomb"),
    ("million", "nodes:\n  - names: gpu[1-1000000]\n", "inv.yaml:2: nodes.0.names: hostlist"),
    (
        "duplicate",
        "nodes:\n  - names: n1\nnodes:\n  - names: n2\n",
        "inv.yaml:3: nodes: duplicate key",
    ),
]


@pytest.mark.parametrize(("text", "words"), [c[1:] for c in CLI_CASES], ids=[c[0] for c in CLI_CASES])
def test_run_with_a_hostile_inventory_exits_2_before_anything(tmp_path: Path, text: str, words: str):
    inv = tmp_path / "inv.yaml"
    inv.write_text(text)
    proc = run_nvtest("run", "--inventory", str(inv), "--out", str(tmp_path / "r"), timeout=60)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert words in proc.stderr and "Traceback" not in proc.stderr
    assert "writing" not in proc.stdout and not (tmp_path / "r").exists()
