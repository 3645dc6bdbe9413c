"""Inference probe figures on this machine's CPU, and their fidelity against a whole-loop timing.

Runs ``inference_probe.py`` as a node would (a subprocess, the cpu-generic SKU
recipe read from ``configs/skus/cpu-generic.yaml``, or ``--width/--depth``
overrides) for ``--rounds`` rounds and prints, per dtype and batch size, the
median over rounds of prefill tokens/s, decode tokens/s, TTFT and per-token
p50/p99.

Fidelity: in the same rounds, interleaved with the probe, the same model
(``_decoder.py``, same weights and prompts) is served in this process and its
decode is timed as one block (one ``perf_counter`` around all the decode
steps) instead of step by step, aggregated as the probe does (decoded tokens of
the timed repeats / their decode time); the best round of each side is compared
(on a shared host the median of either side is set by other jobs' preemption),
and ``probe/ref`` near 1 says the per-step timing adds nothing to what it measures. The last rows give the probes' wall time
(inference and SDC with the cpu-generic recipe), what ``make run`` pays for them.

Usage: ``python bench/inference_bench.py [--rounds 3] [--json]``
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
PROBES = ROOT / "nvtest" / "probes"
sys.path.insert(0, str(PROBES))

import _decoder as decoder  # noqa: E402


def recipe(section: str) -> dict[str, Any]:
    """The cpu-generic profile's recipe section."""
    doc = yaml.safe_load((ROOT / "configs" / "skus" / "cpu-generic.yaml").read_text())
    return dict(doc["recipe"][section])


def probe_args(r: dict[str, Any]) -> list[str]:
    args = ["--device", "cpu"]
    for key in ("width", "depth", "heads", "vocab", "prompt_len", "new_tokens", "check_tokens", "repeats", "threads"):
        if key in r:
            args += [f"--{key.replace('_', '-')}", str(r[key])]
    return args + ["--batch-sizes", ",".join(str(b) for b in r["batch_sizes"])]


def run_probe(script: str, args: list[str]) -> tuple[dict[str, Any], float]:
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, str(PROBES / script), *args], capture_output=True, text=True, timeout=900)
    wall = time.perf_counter() - t0
    doc = json.loads(proc.stdout)
    if doc["status"] != "ok":
        raise SystemExit(f"{script}: {doc['status']}: {doc['reason']}")
    return doc, wall


def whole_loop_decode(r: dict[str, Any], batch: int) -> float:
    """Decode tokens/s of the same model timed as one block (the reference side)."""
    import torch

    torch.set_num_threads(int(r.get("threads") or 1))
    cfg = {k: r[k] for k in ("width", "depth", "heads", "vocab")}
    cfg["max_len"] = r["prompt_len"] + r["new_tokens"]
    model = decoder.load_model(torch, cfg, decoder.build_weights(torch, cfg, 1234), "cpu", "fp32")
    prompt = decoder.prompts(torch, cfg["vocab"], batch, r["prompt_len"], 1234 + batch)
    elapsed = 0.0
    repeats = int(r.get("repeats", 3))
    for rep in range(1 + repeats):
        sess = decoder.Session(torch, model, cfg, prompt, r["new_tokens"])
        sess.prefill()
        t0 = time.perf_counter()
        for _ in range(r["new_tokens"] - 1):
            sess.step()
        if rep:  # the first generation is the warm-up, as in the probe
            elapsed += time.perf_counter() - t0
    return batch * (r["new_tokens"] - 1) * repeats / elapsed  # the probe's aggregation


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    r = recipe("inference")
    s = recipe("sdc")
    sdc_args = [
        "--device",
        "cpu",
        "--dtypes",
        ",".join(s["dtypes"]),
        "--size",
        str(s["size"]),
        "--chain",
        str(s["chain"]),
        "--steps",
        str(s["steps"]),
        "--threads",
        str(s["threads"]),
    ]
    figures: dict[tuple[str, int], dict[str, list[float]]] = {}
    walls: dict[str, list[float]] = {"inference": [], "sdc": []}
    for _ in range(args.rounds):
        doc, wall = run_probe("inference_probe.py", probe_args(r))
        walls["inference"].append(wall)
        for e in doc["results"]:
            f = figures.setdefault(
                (e["dtype"], e["batch"]), {k: [] for k in ("prefill", "decode", "ttft", "p50", "p99", "ref_decode")}
            )
            f["prefill"].append(e["prefill_tokens_per_s"])
            f["decode"].append(e["decode_tokens_per_s"])
            f["ttft"].append(e["ttft_ms"])
            f["p50"].append(e["token_latency_ms"]["p50"])
            f["p99"].append(e["token_latency_ms"]["p99"])
            f["ref_decode"].append(whole_loop_decode(r, e["batch"]))
        walls["sdc"].append(run_probe("sdc_probe.py", sdc_args)[1])
    med = {k: {m: statistics.median(v) for m, v in f.items()} for k, f in figures.items()}
    best = {k: (max(f["decode"]), max(f["ref_decode"])) for k, f in figures.items()}
    if args.json:
        print(
            json.dumps(
                {
                    "recipe": r,
                    "figures": {f"{d}_bs{b}": v for (d, b), v in med.items()},
                    "wall_s": {k: statistics.median(v) for k, v in walls.items()},
                },
                indent=1,
            )
        )
        return
    print(f"inference recipe (cpu-generic): {r}; median of {args.rounds} rounds\n")
    print(
        "| dtype | batch | prefill tokens/s | decode tokens/s | TTFT ms | p50 ms | p99 ms "
        "| decode best of rounds: probe | whole-loop ref | probe/ref |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for (dtype, batch), m in sorted(med.items()):
        bp, br = best[(dtype, batch)]
        print(
            f"| {dtype} | {batch} | {m['prefill']:.0f} | {m['decode']:.0f} | {m['ttft']:.2f} | "
            f"{m['p50']:.3f} | {m['p99']:.3f} | {bp:.0f} | {br:.0f} | {bp / br:.3f} |"
        )
    print("\n| probe (cpu-generic recipe) | wall s, median |")
    print("| --- | ---: |")
    for name, v in walls.items():
        print(f"| {name} | {statistics.median(v):.2f} |")


if __name__ == "__main__":
    main()
