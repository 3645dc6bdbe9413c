"""An overlay (or profile) threshold names a check and a metric that exist, in the unit the
metric is measured in, with finite numeric bounds; otherwise it is a configuration error
(exit 2) with the file, the line and the nearest name."""

from __future__ import annotations

from pathlib import Path

import pytest

from nvtest.config.skus import load_catalog
from nvtest.errors import ConfigError
from tests.conftest import run_nvtest

HEAD = "schema_version: 1\nname: site\napplies_to: [cpu-generic]\nthresholds:\n"
CASES = [
    (
        "check",
        "  straem:\n    triad_gbps: {min: 5, unit: GB/s, source: s}\n",
        5,
        "thresholds.straem",
        "did you mean 'stream'?",
    ),
    (
        "metric",
        "  stream:\n    triad_gpbs: {min: 5, unit: GB/s, source: s}\n",
        6,
        "thresholds.stream.triad_gpbs",
        "did you mean 'triad_gbps'?",
    ),
    (
        "far-off",
        "  stream:\n    zz: {min: 5, unit: GB/s, source: s}\n",
        6,
        "thresholds.stream.zz",
        "stream measures: add_gbps, copy_gbps",
    ),
    (
        "nan",
        "  stream:\n    triad_gbps: {min: .nan, unit: GB/s, source: s}\n",
        6,
        "thresholds.stream.triad_gbps.min",
        "finite number",
    ),
    (
        "inf",
        "  stream:\n    triad_gbps: {max: .inf, unit: GB/s, source: s}\n",
        6,
        "thresholds.stream.triad_gbps.max",
        "finite number",
    ),
    (
        "bool",
        "  stream:\n    triad_gbps: {min: true, unit: GB/s, source: s}\n",
        6,
        "thresholds.stream.triad_gbps.min",
        "not true",
    ),
    (
        "text",
        "  stream:\n    triad_gbps: {min: fast, unit: GB/s, source: s}\n",
        6,
        "thresholds.stream.triad_gbps.min",
        "not 'fast'",
    ),
    (
        "key",
        "  stream:\n    triad_gbps: {mni: 5, unit: GB/s, source: s}\n",
        6,
        "thresholds.stream.triad_gbps.mni",
        "did you mean 'min'?",
    ),
    (
        "unit",
        "  ib_write_bw:\n    bw_avg_gbit_s: {min: 45, unit: GB/s, source: s}\n",
        6,
        "thresholds.ib_write_bw.bw_avg_gbit_s.unit",
        "measured in, 'Gb/s'",
    ),
]


@pytest.mark.parametrize(("body", "line", "field", "words"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_threshold_of_no_declared_metric_is_a_config_error(
    tmp_path: Path, body: str, line: int, field: str, words: str
):
    ov = tmp_path / "site.yaml"
    ov.write_text(HEAD + body)
    with pytest.raises(ConfigError) as ei:
        load_catalog(overlay=ov)
    err = ei.value
    assert (err.path, err.line, err.field) == (str(ov), line, field), str(err)
    assert words in err.reason and err.exit_code == 2


def test_numbers_yaml_reads_as_strings_are_numbers(tmp_path: Path):
    ov = tmp_path / "site.yaml"
    ov.write_text(HEAD + "  stream:\n    triad_gbps: {min: 1e3, unit: GB/s, source: s}\n")  # YAML 1.1: a string
    assert load_catalog(overlay=ov).get("cpu-generic").threshold("stream", "triad_gbps").min == 1000.0


def test_applies_to_an_unknown_sku_names_its_line(tmp_path: Path):
    ov = tmp_path / "site.yaml"
    ov.write_text("schema_version: 1\nname: site\napplies_to:\n  - cpu-generic\n  - h100-sxm\n")
    with pytest.raises(ConfigError) as ei:
        load_catalog(overlay=ov)
    assert (ei.value.line, ei.value.field) == (5, "applies_to.1") and "unknown SKU 'h100-sxm'" in ei.value.reason


def test_run_with_a_misspelt_overlay_exits_2_before_anything(tmp_path: Path):
    ov = tmp_path / "site.yaml"
    ov.write_text(HEAD + CASES[1][1])
    proc = run_nvtest("run", "--suite", "quick", "--overlay", str(ov), "--out", str(tmp_path / "r"), timeout=60)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert (
        f"{ov}:6: thresholds.stream.triad_gpbs: stream has no metric 'triad_gpbs' (did you mean 'triad_gbps'?)"
        in proc.stderr
    )
    assert not (tmp_path / "r").exists()
