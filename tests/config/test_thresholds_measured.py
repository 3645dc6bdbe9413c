"""Every threshold of every shipped SKU profile is measured by some check on a node that has
the tools (issue 24, class 7): a threshold nobody measures is an ``error`` on every node of
that SKU ("threshold ... not measured"), as ``h2d``'s ``d2d_read_ce_gbps`` was on every node
with nvbandwidth, whose probe never asked the tool for ``device_to_device_memcpy_read_ce``.

The walker takes each (profile, check, metric) threshold and asks the check's witness which
metric names the check judges on that profile's node when its tools are there:

- ``h2d``: the real probe runs with a stand-in ``nvbandwidth`` that prints, of a recorded
  real v0.10 run, only the testcases it is asked for (``-t``), as the tool does; the
  suite's own judge reads the probe's document;
- ``gemm``, ``thermal``, ``inference``: the points the check asks of its probe for the
  profile (its recipe through the suite's argument builder, parsed by the probe's own parser,
  the probe's defaults where the recipe names none);
- ``stream``, ``devmem``: the kernels the probes run; ``nccl*``: the recipe's operations;
  ``ib_write_bw``: the recorded real perftest output through the check's parser;
  ``nvlink_multinode``: a recorded real multi-node nvbandwidth run (2 x 4 GB200) through the
  check's reader, on a profile whose GPUs share memory across nodes (``expect.imex``);
- metrics without a point (temperatures, a training's loss ratio) are named by the catalog.

A check with a threshold and no witness fails the walker, so a new check must say how.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import stat
import subprocess
import sys
from collections.abc import Callable
from functools import cache
from pathlib import Path
from types import ModuleType

import pytest

from nvtest.checks.api import Judge
from nvtest.config.inventory import Node
from nvtest.config.metrics import Hardware, declared
from nvtest.config.resources import configs_dir, suites_dir
from nvtest.config.skus import load_catalog
from nvtest.config.thresholds import SkuProfile
from nvtest.jobs.nccl import NcclRecipe
from tests.conftest import CORPUS, PROBES

if str(PROBES) not in sys.path:
    sys.path.insert(0, str(PROBES))

NVB_RECORDING = CORPUS / "nvbandwidth/v0.10-7gpu-cov-lines-na-diagonal-bidir-read1-read2-total-excerpt.txt"
PERFTEST_RECORDING = CORPUS / "perftest"

#: A stand-in nvbandwidth: the recording's header, then only the ``Running <case>.`` sections
#: of the testcases asked with ``-t`` (all when none is asked), as nvbandwidth(1) runs them.
NVB_STANDIN = """#!{python}
import sys
text = open({recording!r}).read()
head, *cases = text.split("Running ")
asked = [a for i, a in enumerate(sys.argv) if i and sys.argv[i - 1] == "-t"]
out = [head] + ["Running " + c for c in cases if not asked or c.split(".", 1)[0] in asked]
sys.stdout.write("".join(out))
"""


def _suite(rel: str) -> ModuleType:
    path = suites_dir() / rel
    spec = importlib.util.spec_from_file_location(f"walker_{path.stem}", path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _probe_args(probe: str, argv: list[str]) -> argparse.Namespace:
    """``argv`` as the probe's own argument parser reads it."""
    mod = importlib.import_module(probe)
    return mod.build_parser().parse_args(argv)


def _on_gpu(profile: SkuProfile) -> bool:
    return bool(profile.expect.gpus)


NODE = Node(name="node001")


@cache
def _h2d_document(tmp: str) -> dict:
    """The h2d probe's document on a node whose nvbandwidth answers from the recording."""
    import json

    bin_dir = Path(tmp)
    tool = bin_dir / "nvbandwidth"
    tool.write_text(NVB_STANDIN.format(python=sys.executable, recording=str(NVB_RECORDING)))
    tool.chmod(tool.stat().st_mode | stat.S_IEXEC)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}", NVTEST_PROBE_DISABLE="torch,cupy")
    proc = subprocess.run(
        [sys.executable, str(PROBES / "h2d_probe.py")], env=env, capture_output=True, text=True, timeout=60
    )
    doc = json.loads(proc.stdout)
    assert doc.get("raw_tool") == "nvbandwidth", doc
    return doc


def _h2d(profile: SkuProfile, tmp: Path) -> set[str]:
    doc = _h2d_document(str(tmp))
    judge = Judge(None, "h2d", NODE.name, profile, hardware=Hardware(profile=profile))
    _suite("memory/test_h2d.py").judge_nvbandwidth(
        judge, doc["raw"], int(doc.get("raw_exit_code") or 0), doc.get("raw_stderr") or ""
    )
    return {m.name for m in judge.metrics}


def _gemm(profile: SkuProfile, tmp: Path) -> set[str]:
    args = _probe_args("gemm_probe", _suite("compute/test_gemm.py")._gemm_args(NODE, profile))
    from _gemm_backends import GEMM_DTYPES

    # the probe's defaults: every dtype on a GPU; on the CPU numpy's fp64 and fp32 (gemm_probe.body)
    dtypes = args.dtypes or (GEMM_DTYPES if _on_gpu(profile) else ("fp64", "fp32"))
    return {f"{d}_tflops" for d in dtypes}


def _thermal(profile: SkuProfile, tmp: Path) -> set[str]:
    args = _probe_args("burnin_probe", _suite("health/test_thermal.py")._args(NODE, profile))
    dtype = args.dtype or ("bf16" if _on_gpu(profile) else "fp32")  # burnin_probe.body's default
    return {f"{dtype}_tflops", "gpu_temp_max_c", "sm_clock_drop_pct"}


def _inference(profile: SkuProfile, tmp: Path) -> set[str]:
    import inference_probe

    args = _probe_args("inference_probe", _suite("workload/test_inference.py")._args(NODE, profile))
    device = "cuda" if _on_gpu(profile) else "cpu"
    inference_probe.with_defaults(args, device)
    dtypes = args.dtypes or (["bf16", "fp16"] if device == "cuda" else ["fp32"])  # inference_probe.body
    kinds = ("prefill_tokens_per_s", "decode_tokens_per_s", "ttft_ms", "token_p50_ms", "token_p99_ms")
    return {f"{d}_bs{b}_{k}" for d in dtypes for b in args.batch_sizes for k in kinds}


def _kernels(probe: str) -> Callable[[SkuProfile, Path], set[str]]:
    def witness(profile: SkuProfile, tmp: Path) -> set[str]:
        return {f"{k}_gbps" for k in importlib.import_module(probe).KERNEL_WORDS}

    return witness


def _nccl(check: str) -> Callable[[SkuProfile, Path], set[str]]:
    def witness(profile: SkuProfile, tmp: Path) -> set[str]:
        recipe = NcclRecipe.from_recipe(profile.recipe.get(check) or profile.recipe.get("nccl"))
        ops = ("all_reduce",) if check == "nccl_nics_only" else recipe.ops  # test_nccl._nccl
        if check == "nccl_multinode":
            ops = recipe.ops[:1]  # test_nccl_multinode: the recipe's first operation
        return {f"{op}_busbw_gbps" for op in ops} | {"wrong"}

    return witness


def _ib_write_bw(profile: SkuProfile, tmp: Path) -> set[str]:
    from nvtest.parsers import perftest

    healthy = [
        p
        for p in sorted(PERFTEST_RECORDING.glob("*write_bw*"))
        if getattr(perftest.parse(p.read_text(encoding="utf-8")), "best_bw_avg_gbit_s", None)
    ]
    return {"bw_avg_gbit_s"} if healthy else set()


def _nvlink_multinode(profile: SkuProfile, tmp: Path) -> set[str]:
    from nvtest.checks.interconnect.imex import multinode_bandwidth

    text = (CORPUS / "nvbandwidth/v0.7-multinode-2x4-gb200-read-ce-dra-example.txt").read_text(encoding="utf-8")
    gpus = profile.expect.gpus or 1
    shares = multinode_bandwidth(text, [("node001", gpus), ("node002", 8 // gpus)], {})
    return {"mn_read_ce_gbps"} if profile.expect.imex and any(s.values for s in shares.values()) else set()


def _named(*names: str) -> Callable[[SkuProfile, Path], set[str]]:
    return lambda profile, tmp: set(names)


#: check -> (profile, a scratch directory) -> the metric names it judges on that profile's node.
WITNESSES: dict[str, Callable[[SkuProfile, Path], set[str]]] = {
    "h2d": _h2d,
    "gemm": _gemm,
    "thermal": _thermal,
    "inference": _inference,
    "stream": _kernels("stream_probe"),
    "devmem": _kernels("devmem_probe"),
    "nccl": _nccl("nccl"),
    "nccl_nics_only": _nccl("nccl_nics_only"),
    "nccl_multinode": _nccl("nccl_multinode"),
    "ib_write_bw": _ib_write_bw,
    "nvlink_multinode": _nvlink_multinode,
    "train_smoke": _named("final_loss_ratio", "step_time_s", "tokens_per_s"),
    "train_multinode": _named("final_loss_ratio", "step_time_s", "tokens_per_s"),
}


def _thresholds() -> list[tuple[str, str, str]]:
    catalog = load_catalog()
    shipped = {p.stem for p in (configs_dir() / "skus").glob("*.yaml")}
    return sorted(
        (name, check, metric)
        for name, profile in catalog.profiles.items()
        if name in shipped
        for check in profile.thresholds
        for metric in profile.threshold_map(check)
    )


THRESHOLDS = _thresholds()


def test_the_walker_sees_every_shipped_profile():
    profiles = {p for p, _, _ in THRESHOLDS}
    assert len(profiles) >= 9 and {"h100-sxm-80gb", "gb200-nvl72-tray", "cpu-generic"} <= profiles, profiles


@pytest.mark.parametrize(("profile", "check", "metric"), THRESHOLDS, ids=["/".join(t) for t in THRESHOLDS])
def test_every_threshold_is_measured(profile: str, check: str, metric: str, tmp_path_factory) -> None:
    sku = load_catalog().profiles[profile]
    assert declared(check, metric) is not None, f"{profile}: {check}.{metric} is not in the metric catalog"
    witness = WITNESSES.get(check)
    assert witness is not None, f"{profile}: no witness says how check {check!r} measures {metric!r}"
    measured = witness(sku, tmp_path_factory.getbasetemp())
    assert metric in measured, (
        f"{profile}: threshold {check}.{metric} is measured by nobody on a node with the tools; "
        f"{check} judges {sorted(measured)}"
    )
