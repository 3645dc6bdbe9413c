"""Bad recipe values and threshold bounds in a SKU profile or overlay are configuration
errors (exit 2) that name the file, the line and the field, before anything runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from nvtest.config.skus import load_catalog
from nvtest.errors import ConfigError
from tests.conftest import run_nvtest

HEAD = "schema_version: 1\nname: site\n"
BAD_BOUND = "thresholds:\n  stream:\n    triad_gbps: {{{}, unit: GB/s, source: s}}\n"
BOUND_FIELD = "thresholds.stream.triad_gbps"

# one case a line: "KEY: VALUE; ... | words of the reason"; keys are dotted paths under
# recipe:, written as block YAML; the last key is the one the error must name
RECIPE_CASES = """
resilience.launcher: ftlauncher | 'auto', 'ft_launcher' or 'torchrun'
resilience.stesp: 10 | unknown key
resilience.steps: ten | valid integer
resilience.steps: 4 | ckpt_every 5 must be less than steps 4
resilience.steps: 10; resilience.ckpt_every: 10 | less than steps
resilience.nproc: 2; resilience.kill_rank: 2 | not a rank of nproc 2
resilience.nproc: 0 | greater than 0
resilience.straggler_min_score: 0 | greater than 0
resilience.straggler_min_score: 1.5 | less than or equal to 1
resilience.requeue_release_hold: maybe | valid boolean
resilience.targets.injob_recovery_s: -1 | greater than or equal to 0
resilience.estimate.tier: tape | 'mem'
ckpt.size_mib: 0 | greater than 0
ckpt.chunk_mib: -16 | greater than 0
ckpt.sizemib: 16 | unknown key
ckpt.local_path: 7 | valid string
inference.batch_sizes: 8 | valid list
inference.new_tokens: 1 | greater than or equal to 2
inference.widht: 128 | unknown key
inference.vllm.model: meta-llama/Llama-3.1-8B | should match pattern
inference.vllm.num_prompts: 0 | greater than 0
sdc.steps: -1 | greater than or equal to 0
sdc.threads: 0 | greater than 0
"""


def _recipe_case(case: str) -> tuple[str, int, str, str]:
    """(overlay text, line of the last key, its field, reason words) of one case line."""
    pairs, words = case.split(" | ")
    recipe: dict[str, Any] = {}
    for pair in pairs.split("; "):
        path, value = pair.split(": ")
        *parents, leaf = path.split(".")
        node = recipe
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = yaml.safe_load(value)
    text = HEAD + yaml.safe_dump({"recipe": recipe}, sort_keys=False, default_flow_style=False)
    line = max(i for i, t in enumerate(text.splitlines(), 1) if t.strip().startswith(f"{leaf}:"))
    return text, line, f"recipe.{path}", words


BAD_OVERLAYS = [_recipe_case(c) for c in RECIPE_CASES.strip().splitlines()] + [
    (HEAD + "recipe: {resilience: {steps: -5}}\n", 3, "recipe.resilience.steps", "than 0"),
    (HEAD + "recipe:\n  ckpt: 5\n", 4, "recipe.ckpt", "valid dictionary"),
    (HEAD + "recipe:\n  inference:\n    batch_sizes: [1, 0]\n", 5, "recipe.inference.batch_sizes.1", "greater than 0"),
    (HEAD + "recipe:\n  inference:\n    dtypes: [fp8]\n", 5, "recipe.inference.dtypes.0", "'fp32', 'bf16' or 'fp16'"),
    (HEAD + "recipe:\n  inference: {width: 100, heads: 8}\n", 4, "recipe.inference", "not a multiple of heads 8"),
    (HEAD + "recipe:\n  sdc:\n    dtypes: [int8]\n", 5, "recipe.sdc.dtypes.0", "'fp32', 'bf16', 'fp16' or 'fp64'"),
    (HEAD + BAD_BOUND.format("max: -1"), 5, BOUND_FIELD, "max -1 is negative"),
    (HEAD + BAD_BOUND.format("min: 20, max: 10"), 5, BOUND_FIELD, "min 20 > max 10"),
    (HEAD + BAD_BOUND.format("min: 20, warn_min: 10"), 5, BOUND_FIELD, "min 20 > warn_min 10"),
    (HEAD + BAD_BOUND.format("warn_max: 30, max: 20"), 5, BOUND_FIELD, "warn_max 30 > max 20"),
]


@pytest.mark.parametrize(("text", "line", "field", "words"), BAD_OVERLAYS)
def test_bad_overlay_value_names_file_line_field(tmp_path: Path, text: str, line: int, field: str, words: str):
    ov = tmp_path / "bad.yaml"
    ov.write_text(text)
    with pytest.raises(ConfigError) as ei:
        load_catalog(overlay=ov)
    err = ei.value
    assert (err.path, err.line, err.field) == (str(ov), line, field), str(err)
    assert words in err.reason
    assert str(err).startswith(f"{ov}:{line}: {field}: ")
    assert err.exit_code == 2


def test_bad_profile_recipe_is_rejected_too(tmp_path: Path):
    d = tmp_path / "skus"
    d.mkdir()
    (d / "mine.yaml").write_text(
        "schema_version: 1\nname: mine\ndescription: d\nrecipe:\n  resilience: {launcher: srun}\n"
    )
    with pytest.raises(ConfigError) as ei:
        load_catalog(extra_dirs=[d])
    assert (ei.value.line, ei.value.field) == (5, "recipe.resilience.launcher")


GOOD_OVERLAY = """\
schema_version: 1
name: site
recipe:
  resilience:
    steps: 12
    ckpt_every: 3
    nproc: 1
    kill_rank: 0
    launcher: torchrun
    kill_seed: 7
    slow_s: 0
    targets: {requeue_training_again_s: 300, injob_recovery_s: null}
  ckpt: {size_mib: 0.5, shared_path: /shared/ckpt}
  gemm: {dtypes: [bf16], size: 4096}
thresholds:
  thermal:
    gpu_temp_max_c: {max: 85, warn_min: -5, unit: C, source: site}
"""


def test_good_values_of_every_kind_of_section_are_accepted(tmp_path: Path):
    ov = tmp_path / "good.yaml"
    ov.write_text(GOOD_OVERLAY)
    cat = load_catalog(overlay=ov)
    rec = cat.get("cpu-generic").recipe
    assert rec["resilience"]["launcher"] == "torchrun"
    assert rec["gemm"] == {"dtypes": ["bf16"], "size": 4096}  # the recipe stays a mapping


def test_a_section_no_check_reads_is_refused_with_the_nearest_name(tmp_path: Path):
    ov = tmp_path / "typo.yaml"
    ov.write_text(HEAD + "recipe:\n  stream: {anything: [goes, here]}\n  gaet: {mounts: [/home]}\n")
    with pytest.raises(ConfigError) as exc:
        load_catalog(overlay=ov)
    assert exc.value.path == str(ov) and exc.value.field in ("recipe.stream", "recipe.gaet")


def test_run_with_bad_overlay_exits_2_before_running(tmp_path: Path):
    ov = tmp_path / "neg.yaml"
    ov.write_text(HEAD + "recipe: {resilience: {steps: -5}}\n")
    proc = run_nvtest("run", "--suite", "quick", "--overlay", str(ov), "--out", str(tmp_path / "out"), timeout=120)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert f"{ov}:3: recipe.resilience.steps: Input should be greater than 0" in proc.stderr + proc.stdout
    assert not (tmp_path / "out" / "latest").exists()


def test_probe_error_reason_is_not_prefixed_twice(tmp_path: Path):
    proc = run_nvtest(
        "run",
        "--suite",
        "quick",
        "-k",
        "stream",
        "--out",
        str(tmp_path),
        "--progress",
        "plain",
        env={"NVTEST_PROBE_FORCE_ERROR": "stream"},
        timeout=300,
    )
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "ProbeError: forced failure" in proc.stdout
    assert "ProbeError: ProbeError" not in proc.stdout + proc.stderr
