"""vLLM's offline throughput benchmark, run where vLLM and the named model are already on the node.

``vllm bench throughput`` (vLLM >= 0.9; ``benchmarks/benchmark_throughput.py``
before it) loads the model, serves ``--num-prompts`` random prompts of
``--input-len`` tokens with ``--output-len`` new tokens each, and prints
``Throughput: R requests/s, T total tokens/s, O output tokens/s`` (and, since
late 2024, ``Total num prompt tokens:`` / ``Total num output tokens:``).  The
probe returns that text verbatim; the controller's parser
(``nvtest.parsers.vllm_bench``) reads it.

Nothing is downloaded: the model must be a directory on the node's disk
holding ``config.json`` (a Hugging Face checkpoint), and the benchmark runs
with ``HF_HUB_OFFLINE=1`` and ``TRANSFORMERS_OFFLINE=1``.
"""

from __future__ import annotations

import importlib.util
import os
import shlex
import shutil
import subprocess
import sys
from typing import Any

import _libraries as libs

OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}


def find_vllm() -> tuple[list[str] | None, str | None]:
    """The argv prefix that runs ``vllm`` (``[path]`` of the CLI on PATH, else
    ``[python, -m, vllm.entrypoints.cli.main]`` when the module is installed),
    or ``(None, reason)``.  ``NVTEST_PROBE_DISABLE=vllm`` hides it."""
    if "vllm" in libs.disabled():
        return None, f"vllm disabled by {libs.DISABLE_ENV}"
    exe = shutil.which("vllm")
    if exe:
        return [exe], None
    try:
        found = importlib.util.find_spec("vllm") is not None
    except (ImportError, ValueError):
        found = False
    if found:
        return [sys.executable, "-m", "vllm.entrypoints.cli.main"], None
    return None, "vLLM not installed: no vllm on PATH and no vllm module for this Python"


def model_missing(path: str | None) -> str | None:
    """Why ``path`` is not a model already on this node's disk (None when it is)."""
    if not path:
        return "the recipe names no vLLM model (recipe.inference.vllm.model)"
    if not os.path.isabs(path):
        return f"vLLM model {path!r} is not an absolute path on the node (nothing is downloaded)"
    if not os.path.isfile(os.path.join(path, "config.json")):
        return f"vLLM model {path} not on this node's disk (no config.json there; nothing is downloaded)"
    return None


def bench_argv(prefix: list[str], opts: dict[str, Any]) -> list[str]:
    """``vllm bench throughput`` command line from the recipe's ``vllm`` options."""
    argv = [*prefix, "bench", "throughput", "--model", str(opts["model"]),
            "--input-len", str(opts["input_len"]), "--output-len", str(opts["output_len"]),
            "--num-prompts", str(opts["num_prompts"])]
    if opts.get("dtype"):
        argv += ["--dtype", str(opts["dtype"])]
    if opts.get("tensor_parallel_size"):
        argv += ["--tensor-parallel-size", str(opts["tensor_parallel_size"])]
    return argv + [str(a) for a in opts.get("extra_args") or []]


def run_bench(opts: dict[str, Any], timeout_s: float) -> dict[str, Any]:
    """Run vLLM's benchmark when it applies; the ``vllm`` entry of the probe document.

    ``{"status": "skip", "reason"}`` when vLLM or the model is absent;
    ``{"status": "ok" | "error", "command", "exit_code", "raw" (stdout),
    "stderr_tail", "reason"}`` when it ran (``error``: it timed out; a
    non-zero exit is left to the parser, which reads the tool's own words).
    """
    why = model_missing(opts.get("model"))
    if why:
        return {"status": "skip", "reason": why}
    prefix, why = find_vllm()
    if prefix is None:
        return {"status": "skip", "reason": why}
    argv = bench_argv(prefix, opts)
    base = {"command": shlex.join(argv)}
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s,
                              env={**os.environ, **OFFLINE_ENV}, check=False)
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else exc.stdout
        return {**base, "status": "error", "reason": f"vllm bench throughput: no result within {timeout_s:.0f} s",
                "exit_code": None, "raw": out or "", "stderr_tail": ""}
    except OSError as exc:
        return {**base, "status": "error", "reason": f"vllm could not start: {exc}",
                "exit_code": None, "raw": "", "stderr_tail": ""}
    tail = "\n".join(proc.stderr.splitlines()[-40:])
    return {**base, "status": "ok", "reason": None, "exit_code": proc.returncode,
            "raw": proc.stdout, "stderr_tail": tail}
