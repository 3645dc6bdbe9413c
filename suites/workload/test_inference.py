"""Inference: serving throughput and latency of a built-in transformer on every GPU of the node.

A decoder-only transformer (weights from a fixed seed, nothing downloaded; width,
depth, heads, vocabulary per SKU recipe) served with batched greedy decoding: a
prefill of the prompt, then token-by-token decode with a KV cache, every GPU at
once (one process per GPU), in bf16 and fp16 where the GPU has them (fp32 on a
CPU). Measured per batch size: prefill and decode tokens/s, time to first token,
per-token latency p50/p99. The first generated tokens and the prefill logits are
checked against the same model in fp32 on the same device: a wrong result fails
whatever its speed. Where vLLM and the recipe's model are already on the node,
``vllm bench throughput`` runs beside it (offline). Judged against the fleet by
default; per-SKU floors where a profile has them.
"""

from __future__ import annotations

import pytest

from nvtest.checks.api import Judge, Node, Probe, SkuProfile
from nvtest.checks.workload.inference import judge_inference, judge_vllm

#: recipe.inference key -> probe option
OPTIONS = (
    ("width", "--width"),
    ("depth", "--depth"),
    ("heads", "--heads"),
    ("vocab", "--vocab"),
    ("prompt_len", "--prompt-len"),
    ("new_tokens", "--new-tokens"),
    ("check_tokens", "--check-tokens"),
    ("repeats", "--repeats"),
    ("seed", "--seed"),
    ("threads", "--threads"),
)
VLLM_OPTIONS = (
    ("model", "--vllm-model"),
    ("input_len", "--vllm-input-len"),
    ("output_len", "--vllm-output-len"),
    ("num_prompts", "--vllm-num-prompts"),
    ("dtype", "--vllm-dtype"),
    ("tensor_parallel_size", "--vllm-tp"),
)


def _recipe(sku: SkuProfile | None) -> dict:
    return (sku.recipe.get("inference") if sku else None) or {}


def _args(node: Node, sku: SkuProfile | None) -> list[str]:
    recipe = _recipe(sku)
    args: list[str] = []
    for key, opt in OPTIONS:
        if recipe.get(key) is not None:
            args += [opt, str(recipe[key])]
    if recipe.get("batch_sizes"):
        args += ["--batch-sizes", ",".join(str(b) for b in recipe["batch_sizes"])]
    if recipe.get("dtypes"):
        args += ["--dtypes", ",".join(recipe["dtypes"])]
    for key, opt in VLLM_OPTIONS:
        value = (recipe.get("vllm") or {}).get(key)
        if value is not None:
            args += [opt, str(value)]
    return args


INFERENCE = Probe("inference", script="inference_probe.py", args=_args, timeout_s=2400, needs=("gpu",), device="any")


@pytest.mark.check("inference", area="workload", title="Inference serving throughput and latency per GPU")
def test_inference(node, sku, measure, judge: Judge) -> None:
    doc = measure(INFERENCE)
    judged = judge_inference(judge, doc, _recipe(sku).get("batch_sizes"))
    ran_vllm = judge_vllm(judge, doc.get("vllm"))
    if judged == 0 and not ran_vllm and not judge.failures:
        pytest.skip("inference probe served no dtype on this node")
