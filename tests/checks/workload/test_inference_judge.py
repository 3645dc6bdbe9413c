"""Judging the inference probe's document: figures as metrics, wrong results fail, the gate holds,
what ran against what was asked, and vLLM's output through its parser (recorded real outputs)."""

from __future__ import annotations

import pytest

from nvtest.checks.api import Judge, ProbeError
from nvtest.checks.workload.inference import judge_inference, judge_vllm, metric_name
from nvtest.config.skus import load_catalog
from nvtest.verdict import Verdict
from tests.conftest import CORPUS

OK_CHECK = {
    "ok": True,
    "tokens_compared": 32,
    "mismatch_count": 0,
    "mismatches": [],
    "logits_max_rel_err": 0.002,
    "tolerance": 0.017,
}


def entry(batch: int = 1, dtype: str = "bf16", device: str = "cuda:0", **over) -> dict:
    r = {
        "device": device,
        "dtype": dtype,
        "batch": batch,
        "library": "torch 2.13.0",
        "status": "ok",
        "prefill_tokens_per_s": 50000.0,
        "decode_tokens_per_s": 900.0 * batch,
        "ttft_ms": 12.0,
        "token_latency_ms": {"p50": 1.1, "p99": 1.4},
        "check": dict(OK_CHECK),
    }
    r.update(over)
    return r


def doc(*entries: dict, batch_sizes=(1, 16)) -> dict:
    return {"library": "torch 2.13.0", "model": {"batch_sizes": list(batch_sizes)}, "results": list(entries)}


def judged(d: dict, sku=None, requested=None) -> Judge:
    j = Judge(None, "inference", "n1", sku)
    judge_inference(j, d, requested)
    return j


def test_every_figure_is_a_metric_named_with_dtype_batch_and_unit():
    j = judged(doc(entry(1), entry(16)))
    assert j.verdict is Verdict.PASS, j.summary()
    names = {(m.name, m.unit) for m in j.metrics}
    assert ("bf16_bs16_decode_tokens_per_s", "tokens/s") in names
    assert {
        ("bf16_bs1_ttft_ms", "ms"),
        ("bf16_bs1_token_p50_ms", "ms"),
        ("bf16_bs1_token_p99_ms", "ms"),
        ("bf16_bs1_prefill_tokens_per_s", "tokens/s"),
    } <= names
    assert len(j.metrics) == 10 and all(m.labels["device"] == "cuda:0" for m in j.metrics)
    assert metric_name("fp16", 64, "ttft_ms") == "fp16_bs64_ttft_ms"


def test_a_wrong_result_fails_whatever_its_speed():
    bad = {
        **OK_CHECK,
        "ok": False,
        "mismatch_count": 2,
        "logits_max_rel_err": 0.09,
        "mismatches": [{"seq": 0, "step": 3, "expected": 17, "got": 4, "margin": 6.1}],
    }
    j = judged(doc(entry(1), entry(16, decode_tokens_per_s=1e6, check=bad)))
    assert j.verdict is Verdict.FAIL
    (why,) = j.failures
    assert why.startswith("bf16 batch 16 on cuda:0: wrong result")
    assert "prefill logits off the fp32 reference by 0.09" in why and "expected 17, got 4" in why


def test_a_reference_check_that_compared_nothing_is_an_error():
    nothing = {**OK_CHECK, "ok": False, "tokens_compared": 0}
    with pytest.raises(ProbeError, match="no token compared with the fp32 reference for bf16 batch 16"):
        judged(doc(entry(1), entry(16, check=nothing)))


def test_a_batch_size_that_did_not_run_fails_and_an_errored_one_says_why():
    j = judged(doc(entry(1), entry(16, status="error", reason="OutOfMemoryError: CUDA out of memory")))
    assert j.verdict is Verdict.FAIL
    assert "bf16 batch 16 on cuda:0: OutOfMemoryError: CUDA out of memory" in j.failures
    assert "bf16 on cuda:0: batch sizes [16] asked by the recipe did not run" in j.failures
    j = judged(doc(entry(1), batch_sizes=(1,)), requested=[1, 64])
    assert j.failures == ["bf16 on cuda:0: batch sizes [64] asked by the recipe did not run"]


def test_a_dtype_the_gpu_lacks_is_a_detail_not_a_failure():
    j = judged(
        doc(
            entry(1),
            entry(16),
            {"device": "cuda:0", "dtype": "bf16", "status": "skip", "reason": "bf16 needs compute capability >= 8.0"},
        )
    )
    assert j.verdict is Verdict.PASS and "skipped bf16 on cuda:0" in j.details


def test_sku_floors_apply_and_are_marked_proposed():
    prof = load_catalog([]).profiles["h100-sxm-80gb"]
    thr = prof.threshold("inference", "bf16_bs1_decode_tokens_per_s")
    assert thr is not None and thr.proposed and thr.unit == "tokens/s" and thr.min == 277
    j = judged(doc(entry(1, decode_tokens_per_s=100.0), entry(16)), sku=prof)
    bad = [m for m in j.metrics if m.verdict is Verdict.FAIL]
    assert [m.name for m in bad] == ["bf16_bs1_decode_tokens_per_s"]


# ------------------------------------------------------------------ vLLM


def vllm_entry(name: str, exit_code: int = 0) -> dict:
    return {
        "status": "ok",
        "exit_code": exit_code,
        "command": "vllm bench throughput ...",
        "raw": (CORPUS / "vllm" / name).read_text(),
        "stderr_tail": "",
        "options": {"model": "/models/llama"},
    }


def test_vllm_figures_from_a_recorded_run():
    j = Judge(None, "inference", "n1", None)
    assert judge_vllm(j, vllm_entry("bench-throughput-llama70b-tp4-async-engine-random-2000in-1000out.txt"))
    values = {m.name: m.value for m in j.metrics}
    assert values == {"vllm_output_tokens_per_s": 2234.0, "vllm_total_tokens_per_s": 6699.75}
    assert j.details["vllm"]["requests_per_s"] == 2.23 and j.details["vllm"]["output_tokens"] == 1000000
    assert j.verdict is Verdict.PASS


def test_vllm_that_died_fails_with_its_own_words():
    j = Judge(None, "inference", "n1", None)
    judge_vllm(j, vllm_entry("bench-throughput-enginecore-traceback-no-throughput-excerpt.txt", exit_code=1))
    assert j.verdict is Verdict.FAIL and "vLLM (exit 1): vllm bench throughput failed" in j.failures[0]


def test_vllm_skipped_or_garbled():
    j = Judge(None, "inference", "n1", None)
    assert not judge_vllm(j, {"status": "skip", "reason": "vLLM not installed"})
    assert j.verdict is Verdict.PASS and j.details["vllm"] == {"ran": False, "reason": "vLLM not installed"}
    garbled = {
        **vllm_entry("benchmark_throughput-2024-legacy-two-figures-no-output-tokens.txt"),
        "raw": "Segmentation fault",
    }
    judge_vllm(j, garbled)
    assert j.verdict is Verdict.FAIL and "output not understood" in j.failures[0]
