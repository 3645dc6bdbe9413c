"""Inference probe: token counting, latency percentiles, the fp32 reference check, CPU runs, vLLM path."""

from __future__ import annotations

import math
import os
from pathlib import Path

import _inference_logic as logic
import _timing as timing
import _vllm_bench as vb
import pytest

from tests.conftest import CORPUS

SMALL = (
    "--device",
    "cpu",
    "--width",
    "64",
    "--depth",
    "2",
    "--heads",
    "4",
    "--vocab",
    "128",
    "--prompt-len",
    "16",
    "--batch-sizes",
    "1,3",
    "--new-tokens",
    "6",
    "--check-tokens",
    "4",
    "--repeats",
    "2",
    "--threads",
    "1",
)


# ------------------------------------------------------------------ arithmetic


def test_percentile_interpolates_between_closest_ranks():
    xs = [5.0, 1.0, 4.0, 2.0, 3.0]
    assert timing.percentile(xs, 0) == 1.0 and timing.percentile(xs, 100) == 5.0
    assert timing.percentile(xs, 50) == 3.0
    assert timing.percentile(xs, 25) == 2.0
    assert timing.percentile([1.0, 2.0], 99) == pytest.approx(1.99)  # rank 0.99 between 1 and 2
    assert timing.percentile(list(range(1, 101)), 99) == pytest.approx(99.01)  # numpy's linear
    assert timing.percentile([7.0], 99) == 7.0
    with pytest.raises(ValueError):
        timing.percentile([], 50)
    with pytest.raises(ValueError):
        timing.percentile([1.0], 101)


def test_serving_figures_count_prefill_and_decode_tokens():
    # batch 4, prompt 10, 5 new tokens: prefill yields token 1, four decode steps yield 2..5
    ttft = [0.010, 0.020, 0.030]
    steps = [[0.001, 0.002, 0.003, 0.004]] * 3
    f = logic.serving_figures(4, 10, 5, ttft, steps)
    assert f["repeats"] == 3
    assert f["tokens_prefilled"] == 4 * 10 * 3
    assert f["tokens_decoded"] == 4 * 4 * 3
    assert f["prefill_tokens_per_s"] == pytest.approx(40 / 0.020)  # median TTFT
    assert f["decode_tokens_per_s"] == pytest.approx(48 / (3 * 0.010))
    assert f["ttft_ms"] == pytest.approx(20.0) and f["ttft_ms_max"] == pytest.approx(30.0)
    lat = f["token_latency_ms"]
    assert lat["n"] == 12 and lat["p50"] == pytest.approx(2.5) and lat["max"] == pytest.approx(4.0)
    assert lat["p99"] == pytest.approx(1e3 * timing.percentile([0.001, 0.002, 0.003, 0.004] * 3, 99))


def test_serving_figures_reject_inconsistent_samples():
    with pytest.raises(ValueError):
        logic.serving_figures(1, 8, 4, [0.1], [[0.01, 0.01]])  # 2 steps for 3 decode steps
    with pytest.raises(ValueError):
        logic.serving_figures(1, 8, 4, [], [])


def test_tolerance_orders_dtypes_and_grows_with_depth():
    assert logic.logits_tolerance("fp32", 4) < logic.logits_tolerance("fp16", 4) < logic.logits_tolerance("bf16", 4)
    assert logic.logits_tolerance("bf16", 8) > logic.logits_tolerance("bf16", 2)
    # below the 4-6 % a missing attention output moves the logits by (module doc)
    assert logic.logits_tolerance("bf16", 4) < 0.03


def test_check_tokens_tells_a_near_tie_from_a_wrong_token():
    ref = [[1, 2, 3, 4], [5, 6, 7, 8]]
    margins = [[5.0, 0.01, 5.0, 5.0], [5.0, 5.0, 5.0, 5.0]]
    same = logic.check_tokens(ref, ref, margins, tie_margin=0.1, count=4)
    assert same == {"tokens_compared": 8, "near_ties": 0, "mismatch_count": 0, "mismatches": []}
    # sequence 0 flips at a near tie (margin 0.01): not compared further; sequence 1 is wrong
    got = [[1, 9, 9, 9], [5, 6, 0, 8]]
    r = logic.check_tokens(got, ref, margins, tie_margin=0.1, count=4)
    assert r["near_ties"] == 1 and r["mismatch_count"] == 1
    assert r["mismatches"] == [{"seq": 1, "step": 2, "expected": 7, "got": 0, "margin": 5.0}]
    assert r["tokens_compared"] == 1 + 3  # seq 0: token 0; seq 1: tokens 0, 1 and the wrong 2
    assert logic.check_tokens(got, ref, margins, 0.1, count=1)["tokens_compared"] == 2


def test_reference_check_fails_on_logits_nan_or_nothing_compared():
    ref_logits = [[10.0, 1.0, -2.0]]
    ok = logic.reference_check("bf16", 2, [[0]], [[0]], [[9.0]], [[10.01, 1.0, -2.0]], ref_logits, 1)
    assert ok["ok"] and ok["logits_max_rel_err"] == pytest.approx(0.001)
    off = logic.reference_check("bf16", 2, [[0]], [[0]], [[9.0]], [[9.0, 1.0, -2.0]], ref_logits, 1)
    assert not off["ok"] and off["logits_max_rel_err"] > off["tolerance"]
    nan = logic.reference_check("fp16", 2, [[0]], [[0]], [[9.0]], [[math.nan, 1.0, -2.0]], ref_logits, 1)
    assert not nan["ok"] and nan["logits_max_rel_err"] == math.inf
    empty = logic.reference_check("fp16", 2, [[]], [[]], [[]], ref_logits, ref_logits, 1)
    assert not empty["ok"] and empty["tokens_compared"] == 0


# ------------------------------------------------------------------ the probe on this machine


@pytest.fixture(scope="module")
def cpu_run(probe):
    return probe("inference_probe.py", *SMALL, timeout=300)


def test_cpu_run_serves_every_batch_size_and_passes_the_reference_check(cpu_run):
    doc = cpu_run.doc
    assert doc["status"] == "ok" and doc["device"] == "cpu"
    assert doc["model"]["batch_sizes"] == [1, 3] and doc["model"]["width"] == 64
    assert [(r["dtype"], r["batch"]) for r in doc["results"]] == [("fp32", 1), ("fp32", 3)]
    for r in doc["results"]:
        b = r["batch"]
        assert r["timer"] == "perf_counter"
        assert r["tokens_prefilled"] == b * 16 * 2 and r["tokens_decoded"] == b * 5 * 2
        assert r["prefill_tokens_per_s"] > 0 and r["decode_tokens_per_s"] > 0
        assert r["token_latency_ms"]["n"] == 5 * 2
        assert 0 < r["token_latency_ms"]["p50"] <= r["token_latency_ms"]["p99"] <= r["token_latency_ms"]["max"]
        assert r["prefill_tokens_per_s"] == pytest.approx(b * 16 / (r["ttft_ms"] / 1e3))
        c = r["check"]
        assert c["ok"] and c["tokens_compared"] == b * 4 and c["mismatch_count"] == 0
        assert c["logits_max_rel_err"] == 0.0  # fp32 against fp32 on the same device: same bits
    assert doc["vllm"]["status"] == "skip" and "names no vLLM model" in doc["vllm"]["reason"]


def test_bf16_on_cpu_is_within_the_bound_and_a_broken_model_is_caught(probe):
    args = [a for a in SMALL]
    args[args.index("--batch-sizes") + 1] = "2"
    good = probe("inference_probe.py", *args, "--dtypes", "bf16", timeout=300).doc
    (r,) = good["results"]
    assert r["check"]["ok"], r["check"]
    assert 0 < r["check"]["logits_max_rel_err"] <= r["check"]["tolerance"]
    bad = probe("inference_probe.py", *args, "--dtypes", "bf16", "--inject-error", timeout=300).doc
    assert bad["status"] == "ok"  # a wrong answer is a result, not a probe error
    (r,) = bad["results"]
    assert not r["check"]["ok"] and r["check"]["logits_max_rel_err"] > r["check"]["tolerance"]


def test_usage_errors_are_error_documents(probe):
    run = probe("inference_probe.py", "--device", "cpu", "--width", "65", "--heads", "4", "--new-tokens", "1")
    assert run.doc["status"] == "error" and "usage error" in run.doc["reason"]
    assert "multiple of --heads" in run.doc["reason"] and "--new-tokens" in run.doc["reason"]


def test_no_torch_is_a_skip_with_the_reason(probe):
    run = probe("inference_probe.py", *SMALL, env={"NVTEST_PROBE_DISABLE": "torch"})
    assert run.doc["status"] == "skip" and "torch" in run.doc["reason"]


# ------------------------------------------------------------------ vLLM beside it


def test_vllm_runs_offline_on_a_model_on_disk(probe, tmp_path: Path):
    model = tmp_path / "models" / "tiny"
    model.mkdir(parents=True)
    (model / "config.json").write_text("{}")
    recorded = CORPUS / "vllm" / "bench-throughput-llama70b-tp4-async-engine-random-2000in-1000out.txt"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stand_in = bin_dir / "vllm"  # replays the recorded output, and says what it was given
    stand_in.write_text(
        "#!/bin/sh\n"
        f'echo "$*" > {bin_dir}/args\n'
        f'echo "HF_HUB_OFFLINE=$HF_HUB_OFFLINE TRANSFORMERS_OFFLINE=$TRANSFORMERS_OFFLINE" > {bin_dir}/env\n'
        f"cat {recorded}\necho 'INFO engine up' >&2\n"
    )
    stand_in.chmod(0o755)
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}"}
    args = [
        *SMALL,
        "--batch-sizes",
        "1",
        "--vllm-model",
        str(model),
        "--vllm-input-len",
        "2000",
        "--vllm-output-len",
        "1000",
        "--vllm-num-prompts",
        "1000",
        "--vllm-tp",
        "4",
    ]
    doc = probe("inference_probe.py", *args, env=env, timeout=300).doc
    v = doc["vllm"]
    assert v["status"] == "ok" and v["exit_code"] == 0, v
    assert v["raw"] == recorded.read_text() and "INFO engine up" in v["stderr_tail"]
    assert (bin_dir / "args").read_text().strip() == (
        f"bench throughput --model {model} --input-len 2000 --output-len 1000 "
        "--num-prompts 1000 --tensor-parallel-size 4"
    )
    assert (bin_dir / "env").read_text().strip() == "HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1"
    assert v["command"].startswith(str(stand_in)) and v["options"]["model"] == str(model)


def test_vllm_applies_only_to_a_model_already_on_disk(tmp_path: Path, monkeypatch):
    assert "names no vLLM model" in vb.model_missing(None)
    assert "absolute path" in vb.model_missing("meta-llama/Llama-3.1-8B")  # a hub name: never fetched
    assert "not on this node's disk" in vb.model_missing(str(tmp_path))
    (tmp_path / "config.json").write_text("{}")
    assert vb.model_missing(str(tmp_path)) is None
    monkeypatch.setenv("NVTEST_PROBE_DISABLE", "vllm")
    assert vb.find_vllm() == (None, "vllm disabled by NVTEST_PROBE_DISABLE")
    entry = vb.run_bench({"model": str(tmp_path)}, 10)
    assert entry == {"status": "skip", "reason": "vllm disabled by NVTEST_PROBE_DISABLE"}


def test_shape_defaults_follow_the_device():
    import inference_probe as ip

    args = ip.build_parser().parse_args([])
    ip.with_defaults(args, "cpu")
    assert (args.width, args.depth, args.batch_sizes, args.threads) == (128, 2, [1, 4], 1)
    args = ip.build_parser().parse_args(["--width", "1024", "--heads", "8"])
    ip.with_defaults(args, "cuda")
    assert (args.width, args.heads, args.depth, args.vocab, args.batch_sizes) == (1024, 8, 4, 32000, [1, 16, 64])
    ip.validate(args)  # the GPU SKUs' recipe shape is valid
