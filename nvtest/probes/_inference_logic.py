"""Pure parts of the inference probe: token counting, serving figures, the fp32 reference check.

No I/O and no optional imports: plain lists and numbers, so every rule here is
tested on synthetic inputs (tests/probes/test_inference.py).

Counting (one generation of ``new_tokens`` per sequence for a batch of
``batch`` prompts of ``prompt_len`` tokens):

- the prefill reads ``batch * prompt_len`` prompt tokens and yields the first
  generated token of every sequence; its time is the time to first token (TTFT);
- each of the ``new_tokens - 1`` decode steps yields one token per sequence:
  ``batch * (new_tokens - 1)`` decoded tokens per generation.

``prefill_tokens_per_s`` = prompt tokens / TTFT (median over the timed
repetitions); ``decode_tokens_per_s`` = decoded tokens / the summed step
times of all repetitions; the per-token latency is the time of one decode step
(every sequence of the batch gets its next token), reported as p50 and p99
over every step of every repetition (milliseconds).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import _timing as timing

#: Unit roundoff u = 2**-p of the formats the model is served in.
UNIT_ROUNDOFF = {"fp32": 2.0**-24, "bf16": 2.0**-8, "fp16": 2.0**-11}


def serving_figures(batch: int, prompt_len: int, new_tokens: int, ttft_s: Sequence[float],
                    step_s: Sequence[Sequence[float]]) -> dict[str, Any]:
    """Throughput and latency of ``len(ttft_s)`` timed generations (one list of step times each).

    Returns ``{"repeats", "tokens_prefilled", "tokens_decoded",
    "prefill_tokens_per_s", "decode_tokens_per_s", "ttft_ms", "ttft_ms_max",
    "token_latency_ms": {"n", "p50", "p99", "mean", "max"}}`` (None for the
    decode figures when ``new_tokens`` is 1: nothing is decoded).

    Raises:
        ValueError: no repetition, or a repetition without ``new_tokens - 1`` step times.
    """
    if not ttft_s or len(ttft_s) != len(step_s):
        raise ValueError("serving figures need one TTFT and one list of step times per repetition")
    for steps in step_s:
        if len(steps) != new_tokens - 1:
            raise ValueError(f"{len(steps)} step times for {new_tokens - 1} decode steps")
    ttft = timing.stats(ttft_s)
    steps_all = [s for rep in step_s for s in rep]
    decoded = batch * (new_tokens - 1) * len(step_s)
    out: dict[str, Any] = {
        "repeats": len(ttft_s),
        "tokens_prefilled": batch * prompt_len * len(ttft_s),
        "tokens_decoded": decoded,
        "prefill_tokens_per_s": batch * prompt_len / ttft["median"],
        "decode_tokens_per_s": None,
        "ttft_ms": 1e3 * ttft["median"],
        "ttft_ms_max": 1e3 * ttft["max"],
        "token_latency_ms": None,
    }
    if steps_all:
        out["decode_tokens_per_s"] = decoded / sum(steps_all)
        out["token_latency_ms"] = {
            "n": len(steps_all),
            "p50": 1e3 * timing.percentile(steps_all, 50),
            "p99": 1e3 * timing.percentile(steps_all, 99),
            "mean": 1e3 * sum(steps_all) / len(steps_all),
            "max": 1e3 * max(steps_all),
        }
    return out


def logits_tolerance(dtype: str, depth: int) -> float:
    """Bound on ``max |logits - logits_fp32| / max |logits_fp32|`` for the prefill's last position.

    ``2 u sqrt(2 depth + 1)``: each of the ``2 depth + 1`` matrix-product
    stages (attention and MLP of every block, the head) rounds its inputs to
    the serving format (unit roundoff u) with fp32 accumulation; independent
    roundings grow like the square root of their number.  Measured on the CPU
    (torch 2.13, width 128-512, depth 2-4): bf16 0.5-0.8 u, fp16 about 0.5 u,
    so the bound leaves 5x headroom, while removing attention's output (a
    broken attention kernel) moves the logits by 4-6 % (9-15 u in bf16).
    """
    return 2.0 * UNIT_ROUNDOFF[dtype] * math.sqrt(2 * depth + 1)


def logits_error(logits: Sequence[Sequence[float]], reference: Sequence[Sequence[float]]) -> float:
    """``max |logits - reference| / max |reference|`` over every sequence and token (inf if NaN)."""
    scale = max((abs(x) for row in reference for x in row), default=0.0)
    worst = 0.0
    for row, ref in zip(logits, reference):
        for x, r in zip(row, ref):
            d = abs(x - r)
            if not math.isfinite(d):
                return math.inf
            worst = max(worst, d)
    return worst / scale if scale else math.inf


def check_tokens(tokens: Sequence[Sequence[int]], reference: Sequence[Sequence[int]],
                 margins: Sequence[Sequence[float]], tie_margin: float, count: int) -> dict[str, Any]:
    """Compare the first ``count`` generated tokens of every sequence with the fp32 reference's.

    ``margins[i][j]``: the reference's top-1 minus top-2 logit at sequence i,
    step j.  A different token where that margin is at most ``tie_margin``
    is a near tie (rounding may pick either): that sequence is not compared
    further (what follows depends on the choice).  A different token at a
    decisive position is a mismatch.  Returns ``{"tokens_compared",
    "near_ties", "mismatches": [{"seq", "step", "expected", "got",
    "margin"}]}`` (at most 8 mismatches listed, ``mismatch_count`` all).
    """
    compared, ties, bad = 0, 0, []
    for i, (got, ref) in enumerate(zip(tokens, reference)):
        for j in range(min(count, len(got), len(ref))):
            if got[j] == ref[j]:
                compared += 1
                continue
            margin = margins[i][j] if i < len(margins) and j < len(margins[i]) else 0.0
            if margin <= tie_margin:
                ties += 1
            else:
                compared += 1
                bad.append({"seq": i, "step": j, "expected": ref[j], "got": got[j],
                            "margin": margin})
            break
    return {"tokens_compared": compared, "near_ties": ties, "mismatch_count": len(bad),
            "mismatches": bad[:8]}


def reference_check(dtype: str, depth: int, tokens: Sequence[Sequence[int]],
                    ref_tokens: Sequence[Sequence[int]], margins: Sequence[Sequence[float]],
                    logits: Sequence[Sequence[float]], ref_logits: Sequence[Sequence[float]],
                    count: int) -> dict[str, Any]:
    """The correctness verdict of one (dtype, batch) run against the fp32 reference.

    ``ok`` only when the prefill logits are within :func:`logits_tolerance`,
    no decisive token differs (:func:`check_tokens`, near-tie margin = twice
    the tolerance times the largest reference logit: each of the two top
    logits may move by the tolerance) and at least one token was compared.
    """
    tol = logits_tolerance(dtype, depth)
    err = logits_error(logits, ref_logits)
    scale = max((abs(x) for row in ref_logits for x in row), default=0.0)
    toks = check_tokens(tokens, ref_tokens, margins, 2.0 * tol * scale, count)
    ok = math.isfinite(err) and err <= tol and not toks["mismatch_count"] and toks["tokens_compared"] > 0
    return {"reference": "fp32", "logits_max_rel_err": err, "tolerance": tol,
            "tie_margin": 2.0 * tol * scale, "tokens_checked_per_seq": count, **toks, "ok": ok}
