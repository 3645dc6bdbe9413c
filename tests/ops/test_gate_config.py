"""A mistake in the site's configuration never switches the gate's judging off (issue 23).

Each kind of broken configuration, on a node that lost a GPU: the GPU failure is judged as
without it (exit 1), the ``configuration`` check is ``unknown`` naming file, line and key,
the document is valid against docs/gate.schema.json, the gate is a row of the history, and
``nvtest_gate_config_error{node,file}`` is exported. On a healthy node the same mistakes
never exit 1, also not with ``--strict``."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from prometheus_client.parser import text_string_to_metric_families

from nvtest.config.recipes import GateRecipe
from nvtest.config.site import ConfigProblem, load_site
from nvtest.history import HistoryStore
from nvtest.history.queries import latest_per_node
from nvtest.ops.export import prometheus_text
from nvtest.ops.gate.config import RECIPE_CHECKS, RECIPE_FIELDS, recipe_checks_of
from nvtest.ops.gate.engine import GateOptions, run_gate
from nvtest.testing.standin_nodes import FAULTS, node_bin
from tests.conftest import REPO, run_nvtest

SCHEMA = json.loads((REPO / "docs" / "gate.schema.json").read_text())
HEAD = "schema_version: 1\nname: site\n"
GPU_CHECKS = ("gpus", "driver_stack", "ecc")  # what a lost GPU fails, from the shipped profile


def _overlay(text: str) -> Callable[[Path], dict[str, Any]]:
    def make(tmp: Path) -> dict[str, Any]:
        f = tmp / "site.yaml"
        f.write_text(text)
        return {"overlay": f}

    return make


def _missing_overlay(tmp: Path) -> dict[str, Any]:
    return {"overlay": tmp / "nfs" / "not-mounted" / "site.yaml"}


def _broken_sku_dir(tmp: Path) -> dict[str, Any]:
    d = tmp / "skus"
    d.mkdir()
    (d / "l4-site.yaml").write_text(
        "schema_version: 1\nname: l4-site\ndescription: another SKU\nrecipe:\n  gemm: {dtyeps: [bf16]}\n"
    )
    return {"sku_dirs": [d]}


#: kind -> (the gate's options it makes, the file's name or None, line, key, nearest name)
CASES: dict[str, tuple[Callable[[Path], dict[str, Any]], str | None, int | None, str | None, str | None]] = {
    "misspelt_key": (
        _overlay(HEAD + "recipe:\n  gate:\n    disk_fre_gib: {'/': 5}\n"),
        "site.yaml",
        5,
        "recipe.gate.disk_fre_gib",
        "disk_free_gib",
    ),
    "misspelt_section": (
        _overlay(HEAD + "recipe:\n  gaet: {mounts: [/home]}\n"),
        "site.yaml",
        4,
        "recipe.gaet",
        "gate",
    ),
    "misspelt_counter": (
        _overlay(HEAD + "recipe:\n  gate:\n    ib_counter_max_per_h: {symbol_eror: 0}\n"),
        "site.yaml",
        5,
        "recipe.gate.ib_counter_max_per_h.symbol_eror",
        "symbol_error",
    ),
    "yaml_syntax": (_overlay(HEAD + "recipe:\n  gate: {mounts: [/home\n"), "site.yaml", 5, None, None),
    "string_for_number": (
        _overlay(HEAD + "recipe:\n  gate:\n    memory_available_gib: lots\n"),
        "site.yaml",
        5,
        "recipe.gate.memory_available_gib",
        None,
    ),
    "unknown_applies_to": (_overlay(HEAD + "applies_to: [h100-sxm-80g]\n"), "site.yaml", 3, "applies_to.0", None),
    "missing_overlay": (_missing_overlay, "site.yaml", None, None, None),
    "broken_custom_profile": (_broken_sku_dir, "l4-site.yaml", 5, "recipe.gemm.dtyeps", "dtypes"),
    "sku_typo": (lambda tmp: {"sku": "h100-sxm-80g"}, None, None, "--sku", "h100-sxm-80gb"),
    "hook_option_typo": (
        lambda tmp: {
            "config_problems": [ConfigProblem("option", "unknown check 'gpuz'", key="--check", nearest="gpus")]
        },
        None,
        None,
        "--check",
        "gpus",
    ),
}
RECIPE = frozenset(RECIPE_CHECKS)
#: kind -> the checks reading recipe.gate left unknown: those reading the broken key where the
#: file reads (a misspelt section nearest to "gate" is all of it), all where it does not.
UNJUDGED: dict[str, frozenset[str]] = {
    "misspelt_key": frozenset({"disk"}),
    "misspelt_section": RECIPE,
    "misspelt_counter": frozenset({"ib_ports"}),
    "yaml_syntax": RECIPE,
    "string_for_number": frozenset({"memory"}),
    "unknown_applies_to": RECIPE,
    "missing_overlay": RECIPE,
}


def _gate(tmp: Path, monkeypatch: pytest.MonkeyPatch, fault: bool | str, kind: str, **kw: Any) -> dict[str, Any]:
    tools = node_bin(tmp, "n1")
    if fault:
        tools = FAULTS[fault if isinstance(fault, str) else "lost_gpu"][0](tools)
    monkeypatch.setenv("PATH", tools.path_prefix())
    opts = GateOptions(
        node="n1", mode="prolog", state_dir=tmp / "state", history=str(tmp / "h.sqlite"), **CASES[kind][0](tmp), **kw
    )
    doc = run_gate(opts)
    jsonschema.validate(doc, SCHEMA)
    return doc


def _exported(tmp: Path) -> dict[tuple[str, ...], float]:
    with HistoryStore(f"sqlite:///{tmp / 'h.sqlite'}") as store:
        text = prometheus_text(latest_per_node(store)).decode()
    return {
        (s.labels.get("node", ""), s.labels.get("file", "")): s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
        if s.name == "nvtest_gate_config_error"
    }


@pytest.mark.parametrize("kind", sorted(CASES))
def test_a_lost_gpu_fails_whatever_is_wrong_with_the_configuration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    _make, file, line, key, nearest = CASES[kind]
    doc = _gate(tmp_path, monkeypatch, True, kind)
    checks = {c["check"]: c for c in doc["checks"]}
    assert doc["exit_code"] == 1 and doc["verdict"] == "fail"
    assert doc["sku"]["name"] == "h100-sxm-80gb"  # the shipped profile judges
    for name in GPU_CHECKS:
        assert checks[name]["verdict"] == "fail", (name, checks[name]["reason"])
    assert "nvidia-smi cannot get a device handle" in checks["ecc"]["reason"]
    for name in ("xid_scan", "nvlink"):  # judged from the shipped profile alone
        assert checks[name]["verdict"] in ("pass", "fail"), (name, checks[name]["reason"])
    # the lost GPU leaves no fabric state to read: unknown for that (the tool's words), not the configuration
    fm = checks["fabric_manager"]
    assert fm["verdict"] in ("pass", "fail") or "fabric state is unknown" in fm["reason"], fm["reason"]
    conf = checks["configuration"]
    assert conf["verdict"] == "unknown" and not doc["configuration"]["ok"]
    assert {d["next_step"]["rule"] for d in conf["decisions"]} == {"site_config_error"}
    [problem] = doc["configuration"]["problems"]
    if file:
        assert Path(problem["file"]).name == file and file in conf["reason"]
    assert problem["line"] == line and problem["key"] == key and problem["nearest"] == nearest
    if key:
        assert key in conf["reason"]
    if line:
        assert f"{file}:{line}" in conf["reason"]
    unjudged = UNJUDGED.get(kind, frozenset())
    for name in RECIPE_CHECKS:
        assert (checks[name]["verdict"] == "unknown") is (name in unjudged), (name, checks[name]["reason"])
        if name in unjudged:
            assert "configuration error" in checks[name]["reason"] and file in checks[name]["reason"]
            assert not key or key in checks[name]["reason"]
    with HistoryStore(f"sqlite:///{tmp_path / 'h.sqlite'}") as store:
        [nl] = latest_per_node(store)
    assert nl.checks["configuration"][0] == "unknown" and nl.checks["gpus"][0] == "fail"
    labels = problem["file"] or "(command line)"
    assert _exported(tmp_path) == {("n1", labels): 1.0}


@pytest.mark.parametrize("kind", ["misspelt_key", "missing_overlay", "broken_custom_profile", "sku_typo"])
@pytest.mark.parametrize("strict", [False, True])
def test_a_configuration_error_alone_never_exits_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str, strict: bool
) -> None:
    doc = _gate(tmp_path, monkeypatch, False, kind, strict=strict)
    assert doc["exit_code"] == 0 and doc["verdict"] == "unknown"
    assert {c["check"]: c["verdict"] for c in doc["checks"]}["gpus"] == "pass"
    assert doc["slurm"] == {"drain": None, "resume": None}


def test_a_clean_configuration_is_exported_as_0(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", node_bin(tmp_path, "n1").path_prefix())
    doc = run_gate(GateOptions(node="n1", state_dir=tmp_path / "state", history=str(tmp_path / "h.sqlite")))
    assert doc["configuration"] == {"ok": True, "overlay": None, "files": [], "problems": []}
    assert _exported(tmp_path) == {("n1", ""): 0.0}


def test_the_cli_in_a_hook_records_option_and_file_typos_and_names_them(tmp_path: Path) -> None:
    """A typo on the command line of a hook is a configuration problem like a file's: the node is
    judged (a lost GPU exits 1), the summary line Slurm logs names the error; --mode manual exits 2."""
    tools = FAULTS["lost_gpu"][0](node_bin(tmp_path, "n1"))
    env = {"PATH": tools.path_prefix(), "PYTHONPATH": os.environ.get("PYTHONPATH", str(REPO))}
    ov = tmp_path / "site.yaml"
    ov.write_text(HEAD + "recipe:\n  gate:\n    disk_fre_gib: {'/': 5}\n")
    base = ("gate", "--node", "n1", "--state-dir", str(tmp_path / "s"), "--history", "off", "--overlay", str(ov))
    hook = run_nvtest(*base, "--mode", "prolgo", "--check", "gpus", "--check", "gpuz", "--strict", env=env, timeout=120)
    doc = json.loads(hook.stdout)
    jsonschema.validate(doc, SCHEMA)
    assert hook.returncode == 1 and doc["mode"] == "healthcheck", hook.stderr
    assert [c["check"] for c in doc["checks"]] == ["gpus", "configuration"]
    keys = {p["key"]: p for p in doc["configuration"]["problems"]}
    assert keys["--mode"]["nearest"] == "prolog" and keys["--check"]["nearest"] == "gpus"
    assert keys["recipe.gate.disk_fre_gib"]["line"] == 5
    summary = hook.stderr.splitlines()[0]
    assert summary.startswith("nvtest gate n1: FAIL") and f"configuration error: {ov}" in summary
    assert f"{ov}:5: recipe.gate.disk_fre_gib: unknown key (did you mean 'disk_free_gib'?)" in hook.stderr
    healthy = {"PATH": node_bin(tmp_path / "h", "n1").path_prefix(), "PYTHONPATH": env["PYTHONPATH"]}
    manual = run_nvtest(*base, env=healthy, timeout=120)
    assert manual.returncode == 2 and json.loads(manual.stdout)["exit_code"] == 2
    assert "recipe.gate.disk_fre_gib" in manual.stderr


def test_option_values_that_do_not_parse_are_recorded_in_a_hook_and_refused_by_hand(tmp_path: Path) -> None:
    """``--budget=10s``, ``--expect-gpus=abc`` and an unknown option in a Prolog: each is a
    configuration problem naming the option and the text, the default is used and the node is
    judged (healthy: exit 0; a lost GPU: exit 1); ``--mode manual`` exits 2 naming the first.
    An option the parser refuses (``--strict=yes``, a ``--mode`` without its value) is left out
    in a hook, the hook named by slurmd's environment where ``--mode`` has no value."""
    typos = ("--budget=10s", "--expect-gpus=abc", "--bogus-option")
    pythonpath = os.environ.get("PYTHONPATH", str(REPO))
    lost = FAULTS["lost_gpu"][0](node_bin(tmp_path / "l", "n1"))
    base = ("gate", "--node", "n1", "--state-dir", str(tmp_path / "s"), "--history", "off")
    for tools, code in ((node_bin(tmp_path / "h", "n1"), 0), (lost, 1)):
        env = {"PATH": tools.path_prefix(), "PYTHONPATH": pythonpath}
        hook = run_nvtest(*base, "--mode", "prolog", *typos, env=env, timeout=120)
        doc = json.loads(hook.stdout)
        jsonschema.validate(doc, SCHEMA)
        assert hook.returncode == code == doc["exit_code"] and doc["budget_s"] == 10.0, hook.stderr
        problems = {p["key"]: p["message"] for p in doc["configuration"]["problems"]}
        assert "'10s' is not a number of seconds" in problems["--budget"], problems
        assert "'abc' is not a whole number of GPUs" in problems["--expect-gpus"], problems
        assert "unknown option '--bogus-option'" in problems["--bogus-option"], problems
        assert "configuration error: --budget: '10s' is not a number of seconds" in hook.stderr
    env |= {"SLURM_SCRIPT_CONTEXT": "", "SLURMD_NODENAME": ""}
    for typo in (*typos, "--mode"):
        manual = run_nvtest(*base, typo, env=env, timeout=120)
        assert manual.returncode == 2 and not manual.stdout and typo.split("=")[0] in manual.stderr, manual.stderr
    # what the parser itself refuses: left out too; a --mode without its value is slurmd's hook
    hook = run_nvtest(
        *base, "--strict=yes", "--mode", env={**env, "SLURM_SCRIPT_CONTEXT": "prolog_slurmd"}, timeout=120
    )
    doc = json.loads(hook.stdout)
    assert hook.returncode == 1 and doc["mode"] == "prolog" and doc["strict"] is False, hook.stderr
    assert {p["key"] for p in doc["configuration"]["problems"]} == {"--strict", "--mode"}, hook.stderr


@pytest.mark.parametrize(
    ("text", "unjudged", "failed"),
    [
        ("recipe:\n  gate:\n    disk_fre_gib: {'/': 5}\n", {"disk"}, {"ib_ports"}),
        ("recipe:\n  gate:\n    hca: [mlx5_0, mlx5_1]\n    memory_available_gib: 0.5\n", {"ib_ports"}, set()),
    ],
    ids=["typo_beside_a_down_port", "typo_in_hcas"],
)
def test_only_the_checks_reading_a_broken_key_are_unknown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, unjudged: set[str], failed: set[str]
) -> None:
    """A misspelt key of a site overlay that still reads leaves unknown only the checks that read
    that key: a typo in disk_free_gib never hides two IB ports Down (exit 1, ib_ports fail); a
    typo in hcas leaves ib_ports unknown and the other checks judged with the overlay's valid keys."""
    ov = tmp_path / "typo.yaml"
    ov.write_text(HEAD + text)
    monkeypatch.setenv("PATH", FAULTS["ib_port_down"][0](node_bin(tmp_path, "n1")).path_prefix())
    doc = run_gate(GateOptions(node="n1", mode="prolog", state_dir=tmp_path / "state", history="off", overlay=ov))
    jsonschema.validate(doc, SCHEMA)
    checks = {c["check"]: c for c in doc["checks"]}
    assert doc["exit_code"] == (1 if failed else 0), doc["checks"]
    for name in RECIPE_CHECKS:
        verdict = checks[name]["verdict"]
        want = {"unknown"} if name in unjudged else {"fail"} if name in failed else {"pass", "skip"}
        assert verdict in want, (name, checks[name]["reason"])
    [problem] = doc["configuration"]["problems"]
    for name in unjudged:
        assert (
            f"a setting it reads (recipe.gate) has a configuration error: {ov}:5: {problem['key']}: unknown key"
            in checks[name]["reason"]
        )
    if failed:
        assert "6 of 8 ports Active" in checks["ib_ports"]["reason"]
    else:
        [mem] = checks["memory"]["decisions"]  # the overlay's valid key is used
        assert (
            mem["threshold"] == ">= 0.5 GiB available"
            and mem["source"] == f"overlay:{ov} recipe.gate memory_available_gib"
        )


def _site_problems(tmp: Path, text: str, sku_dir: bool = False) -> list[tuple[str | None, frozenset[str]]]:
    """(key, checks it leaves unknown) per problem of an overlay (or of the profile h100-sxm-80gb
    in --sku-dir) with ``text`` added to it (for the profile: ``recipe:`` and keys of its own)."""
    tmp.mkdir()
    if sku_dir:
        d = tmp / "skus"
        d.mkdir()
        shipped = (REPO / "configs/skus/h100-sxm-80gb.yaml").read_text()
        assert text.startswith("recipe:\n") and "\nrecipe:\n" in shipped
        (d / "h100-sxm-80gb.yaml").write_text(shipped.replace("\nrecipe:\n", f"\n{text}", 1))
        site = load_site([d])
        broken = "h100-sxm-80gb" in site.broken_profiles
    else:
        (tmp / "site.yaml").write_text(HEAD + text)
        site = load_site(overlay=tmp / "site.yaml")
        broken = site.overlay_broken
    return [(p.key, frozenset(recipe_checks_of(p, broken))) for p in site.problems]


def test_every_gate_recipe_key_broken_leaves_unknown_only_the_checks_that_read_it(tmp_path: Path) -> None:
    """Walks every field of GateRecipe, misspelt and with a wrong value, in an overlay and in a
    --sku-dir profile; an unknown key with no near name, a misspelt section near "gate", another
    section's key and a metric's threshold; a file that does not read is all of recipe.gate."""
    assert set(RECIPE_FIELDS) == set(GateRecipe.model_fields)
    assert {c for cs in RECIPE_FIELDS.values() for c in cs} == RECIPE
    for field, checks in RECIPE_FIELDS.items():
        for sku_dir in (False, True):
            gate = "recipe:\n  gate:\n"
            typo = _site_problems(tmp_path / f"{field}{sku_dir}t", f"{gate}    {field}x: 1\n", sku_dir)
            assert typo == [(f"recipe.gate.{field}x", frozenset(checks))], (field, sku_dir)
            bad = _site_problems(tmp_path / f"{field}{sku_dir}v", f"{gate}    {field}: {{'a': -1}}\n", sku_dir)
            assert bad and {k for k, _ in bad} <= {f"recipe.gate.{field}", f"recipe.gate.{field}.a"}, bad
            assert all(cs == frozenset(checks) for _, cs in bad), (field, bad)
    assert _site_problems(tmp_path / "far", "recipe:\n  gate:\n    zzz: 1\n") == [("recipe.gate.zzz", RECIPE)]
    assert _site_problems(tmp_path / "sec", "recipe:\n  gaet: {}\n") == [("recipe.gaet", RECIPE)]
    assert _site_problems(tmp_path / "gemm", "recipe:\n  gemm: {dtyeps: [bf16]}\n") == [
        ("recipe.gemm.dtyeps", frozenset())
    ]
    thr = _site_problems(tmp_path / "thr", "thresholds:\n  gemm:\n    tflopz: {min: 1, unit: TFLOP/s, source: x}\n")
    assert thr == [("thresholds.gemm.tflopz", frozenset())]
    for text in ("recipe: 3\n", "applies_to: 3\nrecipe:\n  gate: {hcas: 1}\n", "recipe:\n  gate: [1\n"):
        assert [cs for _, cs in _site_problems(tmp_path / str(len(text)), text)] == [RECIPE], text
