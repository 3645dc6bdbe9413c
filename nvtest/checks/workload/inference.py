"""Judging the inference probe's document: serving figures per (device, dtype, batch), vLLM's run.

The document is ``inference_probe.py``'s (docs/probes.md#inference). Metrics, one
set per (dtype, batch size) and device (labels ``device``, ``library``):

- ``<dtype>_bs<B>_prefill_tokens_per_s`` (tokens/s): prompt tokens / time to first token;
- ``<dtype>_bs<B>_decode_tokens_per_s`` (tokens/s): decoded tokens / summed decode-step time;
- ``<dtype>_bs<B>_ttft_ms`` (ms): time to first token, median of the repeats;
- ``<dtype>_bs<B>_token_p50_ms``, ``<dtype>_bs<B>_token_p99_ms`` (ms): per-token
  (one decode step) latency;
- ``vllm_output_tokens_per_s``, ``vllm_total_tokens_per_s`` (tokens/s): vLLM's
  benchmark, where it ran (total: prompt plus output tokens).

A run whose tokens or logits disagree with the fp32 reference fails whatever its
speed; a run whose reference check compared no token is an ``error`` (the
correctness gate did not hold); a batch size the recipe asked for that did not
run fails with the probe's reason.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from nvtest.checks.api import Judge, ProbeError
from nvtest.errors import ParseError
from nvtest.parsers import vllm_bench

__all__ = ["judge_inference", "judge_vllm", "metric_name"]

#: (figure key or path, metric suffix, unit)
FIGURES = (
    ("prefill_tokens_per_s", "prefill_tokens_per_s", "tokens/s"),
    ("decode_tokens_per_s", "decode_tokens_per_s", "tokens/s"),
    ("ttft_ms", "ttft_ms", "ms"),
    ("token_latency_ms.p50", "token_p50_ms", "ms"),
    ("token_latency_ms.p99", "token_p99_ms", "ms"),
)


def metric_name(dtype: str, batch: int, suffix: str) -> str:
    """``bf16_bs16_decode_tokens_per_s``: the dtype, the batch size and the figure with its unit."""
    return f"{dtype}_bs{batch}_{suffix}"


def _figure(r: Mapping[str, Any], path: str) -> float | None:
    value: Any = r
    for part in path.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    return None if value is None else float(value)


def _check_reason(r: Mapping[str, Any], where: str) -> str | None:
    """Why the run's output is wrong (None when the fp32 reference check passed)."""
    c = r.get("check") or {}
    if c.get("ok"):
        return None
    parts = []
    err, tol = c.get("logits_max_rel_err"), c.get("tolerance")
    if err is None or tol is None or err > tol:
        parts.append(f"prefill logits off the fp32 reference by {err} (relative; bound {tol})")
    if c.get("mismatch_count"):
        first = (c.get("mismatches") or [{}])[0]
        parts.append(
            f"{c['mismatch_count']} generated token(s) differ from the fp32 reference at "
            f"decisive positions (first: sequence {first.get('seq')} step {first.get('step')}, "
            f"expected {first.get('expected')}, got {first.get('got')})"
        )
    if not parts and not c.get("tokens_compared"):
        return None  # nothing compared: an error, not a wrong result (see judge_inference)
    return f"{where}: wrong result: " + "; ".join(parts or ["reference check failed"])


def judge_inference(judge: Judge, doc: Mapping[str, Any], requested: Sequence[int] | None = None) -> int:
    """Record the serving metrics and the correctness verdicts of every entry; return the count judged.

    ``requested``: the batch sizes the recipe asked for (default: the probe's own
    list); one that no entry ran is a failure ("what ran, not what was asked").

    Raises:
        ProbeError: a served run compared no token with the reference (the gate did not hold).
    """
    judged, unchecked = 0, []
    ran: dict[str, set[int]] = {}
    for r in doc.get("results") or []:
        where = f"{r.get('dtype')} batch {r.get('batch', '?')} on {r.get('device', '?')}"
        if r.get("status") == "skip":
            judge.detail(f"skipped {r.get('dtype')} on {r.get('device')}", r.get("reason"))
            continue
        if r.get("status") != "ok":
            judge.fail(f"{where}: {r.get('reason')}")
            continue
        judged += 1
        ran.setdefault(f"{r['dtype']} on {r['device']}", set()).add(int(r["batch"]))
        labels = {"device": r.get("device", "?"), "library": r.get("library") or doc.get("library") or "?"}
        for key, suffix, unit in FIGURES:
            judge(metric_name(r["dtype"], int(r["batch"]), suffix), _figure(r, key), unit, **labels)
        wrong = _check_reason(r, where)
        if wrong:
            judge.fail(wrong)
        elif not (r.get("check") or {}).get("tokens_compared"):
            unchecked.append(where)
    asked = set(requested or (doc.get("model") or {}).get("batch_sizes") or [])
    for what, sizes in sorted(ran.items()):
        if asked - sizes:
            judge.fail(f"{what}: batch sizes {sorted(asked - sizes)} asked by the recipe did not run")
    judge.detail("model", doc.get("model"))
    if unchecked and not judge.failures:
        raise ProbeError("no token compared with the fp32 reference for " + ", ".join(unchecked))
    return judged


def judge_vllm(judge: Judge, entry: Mapping[str, Any] | None) -> bool:
    """Judge vLLM's benchmark where it ran; return whether it did.

    Skipped (vLLM or the model absent) is a detail. A run that printed no
    summary fails with the tool's words; text that is not vLLM's output is a
    failure naming the parse error.
    """
    if not entry or entry.get("status") == "skip":
        judge.detail("vllm", {"ran": False, "reason": (entry or {}).get("reason")})
        return False
    if entry.get("status") != "ok":
        judge.fail(f"vLLM: {entry.get('reason')}")
        return True
    text = f"{entry.get('raw') or ''}\n{entry.get('stderr_tail') or ''}"
    try:
        rec = vllm_bench.parse(text)  # the tool's own output: not a paste (nvtest parse reads those)
    except ParseError as exc:
        judge.fail(f"vLLM (exit {entry.get('exit_code')}): output not understood: {exc}")
        return True
    labels = {"model": (entry.get("options") or {}).get("model") or "?"}
    if rec.failure_reason:
        judge.fail(f"vLLM (exit {entry.get('exit_code')}): {rec.failure_reason}")
    else:
        if rec.output_tokens_per_s is not None:  # vLLM before 0.6.3 printed the total rate only
            judge("vllm_output_tokens_per_s", rec.output_tokens_per_s, "tokens/s", **labels)
        judge("vllm_total_tokens_per_s", rec.total_tokens_per_s, "tokens/s", **labels)
    judge.detail(
        "vllm",
        {
            "ran": True,
            "command": entry.get("command"),
            "exit_code": entry.get("exit_code"),
            "requests_per_s": rec.requests_per_s,
            "prompt_tokens": rec.prompt_tokens,
            "output_tokens": rec.output_tokens,
            "elapsed_s": rec.elapsed_s,
            "warnings": list(rec.warnings),
        },
    )
    return True
