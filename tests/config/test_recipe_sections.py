"""Every recipe section has one schema, and a typo in any of them is refused by every verb.

Walks the readers: every section name nvtest/ and suites/ read from a profile's recipe
(``sku.recipe.get("gemm")``, ``node_recipe(ctx, node, "mpi")``, ...) is a field of
:class:`nvtest.config.thresholds.RecipeSections`; then a misspelt key in each section, and a
misspelt section, is a configuration error naming file, line, key and the nearest name, and
each verb that loads profiles (run, gate, sweep, skus show, evaluate, config check) exits 2
on it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from nvtest.config.skus import load_catalog
from nvtest.config.thresholds import RecipeSections
from nvtest.errors import ConfigError
from nvtest.testing.standin_nodes import node_bin
from tests.conftest import REPO, run_nvtest

HEAD = "schema_version: 1\nname: site\n"
#: The ways a section is read from a recipe (a profile's mapping, node_recipe, a suite's helper).
READERS = (
    re.compile(r"\.recipe\.get\(\s*\"(\w+)\""),
    re.compile(r"recipe\([^()\"]*?,\s*\"(\w+)\"\s*\)"),
    re.compile(r"\bpair_report\(\s*\w+\s*,\s*\"(\w+)\""),
)


def _sections_read() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for root in ("nvtest", "suites"):
        for path in sorted((REPO / root).rglob("*.py")):
            text = path.read_text()
            for rx in READERS:
                for m in rx.finditer(text):
                    found.setdefault(m.group(1), set()).add(str(path.relative_to(REPO)))
    return found


def test_every_section_a_check_reads_has_a_schema() -> None:
    read = _sections_read()
    assert {"gemm", "gate", "fleet", "mpi", "nccl", "ib_write_bw", "ckpt", "resilience"} <= set(read), read
    missing = {name: sorted(files) for name, files in read.items() if name not in RecipeSections.model_fields}
    assert not missing, f"recipe sections read without a schema (add one in nvtest/config/recipes.py): {missing}"
    for name in {
        m.group(1)
        for m in READERS[2].finditer("\n".join(p.read_text() for p in sorted((REPO / "suites").rglob("*.py"))))
    }:
        assert "pairs" in _fields(name), f"{name}: a pair check reads recipe.{name}.pairs"


def _fields(section: str) -> list[str]:
    ann = RecipeSections.model_fields[section].annotation
    model = next(a for a in ann.__args__ if a is not type(None))  # type: ignore[union-attr]
    return list(model.model_fields)


@pytest.mark.parametrize("section", sorted(RecipeSections.model_fields))
def test_a_misspelt_key_in_each_section_is_refused_with_file_line_and_nearest(tmp_path: Path, section: str) -> None:
    key = _fields(section)[0]
    typo = key[:-1] + "x" + key[-1]
    ov = tmp_path / "site.yaml"
    ov.write_text(HEAD + f"recipe:\n  {section}:\n    {typo}: 1\n")
    with pytest.raises(ConfigError) as ei:
        load_catalog(overlay=ov)
    err = ei.value
    assert (err.path, err.line, err.field) == (str(ov), 5, f"recipe.{section}.{typo}"), str(err)
    assert f"did you mean {key!r}" in err.reason, str(err)


def test_a_misspelt_section_is_refused_with_the_nearest_name(tmp_path: Path) -> None:
    ov = tmp_path / "site.yaml"
    ov.write_text(HEAD + "recipe:\n  gaet: {mounts: [/home]}\n")
    with pytest.raises(ConfigError) as ei:
        load_catalog(overlay=ov)
    assert (ei.value.line, ei.value.field) == (4, "recipe.gaet") and "did you mean 'gate'" in ei.value.reason


def test_every_verb_that_loads_profiles_refuses_a_typo(tmp_path: Path) -> None:
    ov = tmp_path / "site.yaml"
    ov.write_text(HEAD + "recipe:\n  gemm:\n    dtyeps: [bf16]\n")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "results.json").write_text(
        json.dumps({"schema_version": 1, "run": {"run_id": "r"}, "results": [], "nodes": {}})
    )
    env = {"PATH": node_bin(tmp_path, "n1").path_prefix()}  # the gate judges a stand-in node
    verbs = {
        "run": ("run", "--suite", "quick", "--out", str(tmp_path / "out")),
        "gate": ("gate", "--node", "n1", "--history", "off", "--state-dir", str(tmp_path / "s")),
        "sweep": ("sweep", "--partition", "none", "--"),
        "skus show": ("skus", "show", "cpu-generic"),
        "evaluate": ("evaluate", str(run_dir)),
        "config check": ("config", "check"),
    }
    for verb, args in verbs.items():
        proc = run_nvtest(*args, "--overlay", str(ov), env=env, timeout=120)
        said = proc.stdout + proc.stderr
        assert proc.returncode == 2, (verb, said[-2000:])
        assert f"{ov}:5: recipe.gemm.dtyeps: unknown key (did you mean 'dtypes'?)" in said, (verb, said[-2000:])
    assert not (tmp_path / "out").exists()


def test_config_check_exit_codes(tmp_path: Path) -> None:
    good = tmp_path / "good.yaml"
    good.write_text(HEAD + "applies_to: [h100-sxm-80gb]\nrecipe:\n  gate: {mounts: [/home], services: [munge]}\n")
    skus = tmp_path / "skus"
    skus.mkdir()
    (skus / "l4-site.yaml").write_text("schema_version: 1\nname: l4-site\ndescription: a site SKU\n")
    inventory = tmp_path / "rack.yaml"
    inventory.write_text("defaults: {sku: l4-site}\nnodes:\n  - {names: gpu01}\n")
    ok = run_nvtest(
        "config",
        "check",
        "--overlay",
        str(good),
        "--sku-dir",
        str(skus),
        "--sku",
        "l4-site",
        "--inventory",
        str(inventory),
        timeout=120,
    )
    assert ok.returncode == 0 and "nvtest config check: OK (11 SKU profiles" in ok.stdout, ok.stdout + ok.stderr
    (skus / "broken.yaml").write_text("schema_version: 1\nname: broken\ndescription: x\nrecipe: {gemm: {size: big}}\n")
    bad = run_nvtest(
        "config",
        "check",
        "--overlay",
        str(tmp_path / "nfs" / "site.yaml"),
        "--sku-dir",
        str(skus),
        "--sku",
        "h100-sxm-80g",
        "--suite",
        "quik",
        timeout=120,
    )
    assert bad.returncode == 2, bad.stdout + bad.stderr
    lines = [ln for ln in bad.stderr.splitlines() if ln.startswith("nvtest: error: ")]
    assert len(lines) == 4 and "nvtest config check: 4 error(s)" in bad.stderr, bad.stderr  # every error, not the first
    assert any(f"{skus / 'broken.yaml'}:4: recipe.gemm.size" in ln for ln in lines)
    assert any(f"{tmp_path / 'nfs' / 'site.yaml'}: cannot read" in ln for ln in lines)
    assert any("--sku: unknown SKU 'h100-sxm-80g' (did you mean 'h100-sxm-80gb'?)" in ln for ln in lines)
    assert any("unknown suite 'quik'" in ln for ln in lines)
