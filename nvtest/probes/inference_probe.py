"""Inference probe: batched greedy decoding of a built-in transformer, per GPU, checked against fp32.

Usage::

    python3 inference_probe.py [--device auto|cpu|cuda] [--gpus 0,1] [--dtypes bf16,fp16]
                               [--width W] [--depth D] [--heads H] [--vocab V]
                               [--prompt-len P] [--batch-sizes 1,16,64] [--new-tokens T]
                               [--check-tokens 8] [--repeats 3] [--seed 1234] [--threads N]
                               [--vllm-model DIR --vllm-input-len 512 --vllm-output-len 128
                                --vllm-num-prompts 200 [--vllm-dtype bf16] [--vllm-tp 1]]
                               [--timeout-s 1800]

The model (``_decoder.py``: a decoder-only transformer, weights from
``--seed``, nothing downloaded; shape defaults in :data:`DEFAULTS`, the GPU
SKUs' recipe on a GPU and the cpu-generic one on the CPU) is served on every selected GPU at once (one
spawned process per GPU, as the GEMM probe does) in each of ``--dtypes``
(default: bf16 and fp16 where the GPU has them; fp32 on the CPU), at each
batch size: an untimed warm-up generation, then ``--repeats`` timed ones
(CUDA events on a GPU, ``time.perf_counter``, a monotonic clock, on the CPU).
Figures (``_inference_logic.serving_figures``): prefill tokens/s, decode
tokens/s, time to first token, per-token latency p50/p99.

Correctness (``_inference_logic.reference_check``): the same model in fp32 on
the same device generates ``--check-tokens`` tokens for the same prompts; the
served run's tokens must match at every decisive position and its prefill
logits must be within a rounding bound of the fp32 ones.  A wrong result is a
result (``check.ok`` false, the controller fails it), not a probe error.

vLLM: with ``--vllm-model`` naming a checkpoint directory on this node and
vLLM installed, ``vllm bench throughput`` runs after the built-in model (see
``_vllm_bench.py``; offline, nothing downloaded); its text is returned under
``"vllm"`` for the controller's parser.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from typing import Any  # noqa: E402

import _contract as contract  # noqa: E402
import _cuda_start as cs  # noqa: E402
import _decoder as decoder  # noqa: E402
import _device_pool as pool  # noqa: E402
import _devices as hw  # noqa: E402
import _inference_logic as logic  # noqa: E402
import _libraries as libs  # noqa: E402
import _timing as timing  # noqa: E402
import _vllm_bench as vllm  # noqa: E402

PROBE = "inference"
DTYPES = tuple(decoder.TORCH_DTYPES)
#: Defaults of the model and serving options per device kind: on a GPU the recipe of the
#: GPU SKU profiles (936.4M parameters), on the CPU cpu-generic's (seconds on one thread).
DEFAULTS = {
    "cuda": {"width": 4096, "depth": 4, "heads": 32, "vocab": 32000, "prompt_len": 512,
             "batch_sizes": [1, 16, 64], "new_tokens": 64, "threads": None},
    "cpu": {"width": 128, "depth": 2, "heads": 4, "vocab": 256, "prompt_len": 32,
            "batch_sizes": [1, 4], "new_tokens": 16, "threads": 1},
}


def unsupported(torch: Any, device: str, dtype: str) -> str | None:
    """Why ``dtype`` is not served on ``device`` (None when it is)."""
    if dtype not in DTYPES:
        return f"unknown dtype {dtype}; known: {list(DTYPES)}"
    if device.startswith("cuda") and dtype == "bf16" and not torch.cuda.is_bf16_supported():
        return "bf16 needs compute capability >= 8.0 on this GPU"
    if device == "cpu" and dtype == "fp16":
        return "fp16 is not served on the CPU (no fp16 matrix kernels worth timing)"
    return None


def prefill_logits(torch: Any, model: Any, cfg: dict[str, int], prompt: Any) -> list[list[float]]:
    """fp32 logits of the prefill's last position, ``[batch][vocab]`` (host lists)."""
    sess = decoder.Session(torch, model, cfg, prompt, 1)
    with torch.inference_mode():
        return model(sess.prompt, sess.caches, 0).float().cpu().tolist()


def serve_batch(torch: Any, models: dict[str, Any], ref: dict[str, Any], dtype: str,
                batch: int, payload: dict[str, Any], timer: Any) -> dict[str, Any]:
    """One (dtype, batch size) on one device: warm-up, timed repetitions, the reference check."""
    cfg, t_new = payload["cfg"], payload["new_tokens"]
    prompt = decoder.prompts(torch, cfg["vocab"], batch, payload["prompt_len"], payload["seed"] + batch)
    if batch not in ref:  # fp32 reference of this batch: tokens, margins, logits
        r = decoder.generate(torch, models["fp32-ref"], cfg, prompt,
                             min(payload["check_tokens"], t_new), keep_logits=True)
        ref[batch] = (r, prefill_logits(torch, models["fp32-ref"], cfg, prompt))
    model = models[dtype]
    decoder.generate(torch, model, cfg, prompt, t_new, timer=timer)  # warm-up
    runs = [decoder.generate(torch, model, cfg, prompt, t_new, timer=timer)
            for _ in range(payload["repeats"])]
    r_ref, l_ref = ref[batch]
    check = logic.reference_check(dtype, cfg["depth"], runs[0]["tokens"], r_ref["tokens"],
                                  r_ref["margins"], prefill_logits(torch, model, cfg, prompt),
                                  l_ref, payload["check_tokens"])
    figures = logic.serving_figures(batch, payload["prompt_len"], t_new,
                                    [r["ttft_s"] for r in runs], [r["step_s"] for r in runs])
    return {"dtype": dtype, "batch": batch, "prompt_len": payload["prompt_len"],
            "new_tokens": t_new, **figures, "check": check, "status": "ok", "reason": None}


def serve_device(device: str, payload: dict[str, Any]) -> dict[str, Any]:
    """Every dtype and batch size on one device (``"cpu"`` or ``"cuda:N"``): ``{"device", "results"}``."""
    torch = libs.require("torch")
    ident: dict[str, Any] = {"gpu_name": None, "pci_bus_id": None}
    if device.startswith("cuda"):
        torch.cuda.set_device(torch.device(device))
        torch.backends.cuda.matmul.allow_tf32 = False  # fp32 reference in true fp32
        ident = hw.gpu_identity("torch", torch, int(device.split(":")[1]))
        timer = timing.Timer("torch", torch)
    else:
        torch.set_num_threads(payload["threads"])
        timer = timing.Timer("cpu")
    cfg = payload["cfg"]
    weights = decoder.build_weights(torch, cfg, payload["seed"])
    base = {"device": device, **ident, "library": libs.library_label(torch),
            "timer": "cuda-events" if device.startswith("cuda") else "perf_counter"}
    models = {"fp32-ref": decoder.load_model(torch, cfg, weights, device, "fp32")}
    ref: dict[int, Any] = {}
    results = []
    for dtype in payload["dtypes"]:
        why = unsupported(torch, device, dtype)
        if why:
            results.append({**base, "dtype": dtype, "status": "skip", "reason": why})
            continue
        served = dict(weights)
        if payload.get("inject_error"):  # test hook: the served model loses its last attention output
            key = f"blocks.{cfg['depth'] - 1}.proj.weight"
            served[key] = served[key] * 0
        models[dtype] = decoder.load_model(torch, cfg, served, device, dtype)
        for batch in payload["batch_sizes"]:
            try:
                results.append({**base, **serve_batch(torch, models, ref, dtype, batch, payload, timer)})
            except Exception as exc:  # noqa: BLE001 - one batch size failing (OOM) must not hide the others
                results.append({**base, "dtype": dtype, "batch": batch, "status": "error",
                                "reason": f"{type(exc).__name__}: {exc}"})
        del models[dtype]
        if device.startswith("cuda"):
            torch.cuda.empty_cache()
    return {"device": device, "results": results}


def build_parser() -> contract.ProbeArgumentParser:
    parser = contract.base_parser("inference_probe", __doc__.splitlines()[0])
    add = parser.add_argument
    add("--dtypes", type=contract.parse_name_list, default=None,
        help="subset of fp32,bf16,fp16 (default: bf16,fp16 on GPU, fp32 on CPU)")
    add("--width", type=int, default=None, help="model width, a multiple of --heads (GPU 4096, CPU 128)")
    add("--depth", type=int, default=None, help="transformer blocks (GPU 4, CPU 2)")
    add("--heads", type=int, default=None, help="attention heads (GPU 32, CPU 4)")
    add("--vocab", type=int, default=None, help="vocabulary size (GPU 32000, CPU 256)")
    add("--prompt-len", type=int, default=None, help="prompt tokens per sequence (GPU 512, CPU 32)")
    add("--batch-sizes", type=contract.parse_index_list, default=None,
        help="comma list of batch sizes, sequences served at once (GPU 1,16,64, CPU 1,4)")
    add("--new-tokens", type=int, default=None, help="generated tokens per sequence, >= 2 (GPU 64, CPU 16)")
    add("--check-tokens", type=int, default=8, help="first tokens compared with the fp32 reference")
    add("--repeats", type=int, default=3, help="timed generations per batch size")
    add("--seed", type=int, default=1234, help="weights and prompts")
    add("--threads", type=int, default=None, help="CPU: torch threads (default 1)")
    add("--vllm-model", default=None, help="checkpoint directory on the node for vllm bench throughput")
    add("--vllm-input-len", type=int, default=512)
    add("--vllm-output-len", type=int, default=128)
    add("--vllm-num-prompts", type=int, default=200)
    add("--vllm-dtype", default=None)
    add("--vllm-tp", type=int, default=None, help="vLLM --tensor-parallel-size")
    add("--timeout-s", type=float, default=1800.0, help="per GPU process, and for vLLM")
    add("--inject-error", action="store_true", help=argparse.SUPPRESS)
    return parser


def with_defaults(args: Any, device: str) -> None:
    """Fill the options left unset with the :data:`DEFAULTS` of ``device`` (``cuda`` or ``cpu``)."""
    for key, value in DEFAULTS["cuda" if device == "cuda" else "cpu"].items():
        if getattr(args, key) is None:
            setattr(args, key, value)


def validate(args: Any) -> None:
    """Usage errors as ProbeError (a JSON document), before anything is loaded."""
    problems = []
    if args.width % args.heads:
        problems.append(f"--width {args.width} is not a multiple of --heads {args.heads}")
    if args.new_tokens < 2:
        problems.append("--new-tokens must be >= 2 (one prefill token, one decode step at least)")
    if not args.batch_sizes or min(args.batch_sizes) < 1:
        problems.append("--batch-sizes must list positive batch sizes")
    if min(args.depth, args.vocab, args.prompt_len, args.repeats, args.check_tokens) < 1:
        problems.append("--depth, --vocab, --prompt-len, --repeats and --check-tokens must be >= 1")
    bad = [d for d in args.dtypes or () if d not in DTYPES]
    if bad:
        problems.append(f"unknown dtypes {bad}; known: {list(DTYPES)}")
    if problems:
        raise contract.ProbeError("usage error: " + "; ".join(problems))


def body(args: Any, doc: dict[str, Any]) -> None:
    device = hw.resolve_device(args.device)
    with_defaults(args, device)
    validate(args)
    torch = libs.require("torch")
    cfg = {"width": args.width, "depth": args.depth, "heads": args.heads, "vocab": args.vocab,
           "max_len": args.prompt_len + args.new_tokens}
    payload = {"cfg": cfg, "prompt_len": args.prompt_len, "new_tokens": args.new_tokens,
               "batch_sizes": sorted(set(args.batch_sizes)), "check_tokens": args.check_tokens,
               "repeats": args.repeats, "seed": args.seed, "inject_error": args.inject_error,
               "threads": args.threads or hw.available_cpus()}  # GPU: unused
    doc.update(device=device, library=libs.library_label(torch),
               model={**cfg, "seed": args.seed, "prompt_len": args.prompt_len,
                      "new_tokens": args.new_tokens, "batch_sizes": payload["batch_sizes"]})
    if device == "cuda":
        try:
            _, _, count = hw.select_gpu_backend(("torch",))
        except contract.ProbeSkip as exc:  # asked for the GPUs: never a skip, never the CPU instead
            raise contract.ProbeError(cs.cuda_failure(exc), cs.CAUSE) from None
        devices = [f"cuda:{i}" for i in hw.gpu_indices(count, args.gpus)]
        payload["dtypes"] = args.dtypes or ["bf16", "fp16"]
        for answer in pool.run_per_device(serve_device, devices, payload, args.timeout_s):
            doc["results"].extend(answer.get("results") or [answer])
    else:
        payload["dtypes"] = args.dtypes or ["fp32"]
        doc["threads"] = payload["threads"]
        doc["results"].extend(serve_device("cpu", payload)["results"])
    opts = {"model": args.vllm_model, "input_len": args.vllm_input_len,
            "output_len": args.vllm_output_len, "num_prompts": args.vllm_num_prompts,
            "dtype": args.vllm_dtype, "tensor_parallel_size": args.vllm_tp}
    doc["vllm"] = {**vllm.run_bench(opts, args.timeout_s), "options": opts}


if __name__ == "__main__":
    sys.exit(contract.run(PROBE, build_parser(), body))
