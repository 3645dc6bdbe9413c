"""The evidence summary: each probe figure against the SKU profile the node matched (from the
recorded ``nvidia-smi -q -x``), with the ratio to the profile's number; no proof of the GPUs,
no profile."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from nvtest.analysis.evidence import _nvbandwidth, identify_node, probe_figures, render_summary
from nvtest.checks.api import Judge
from nvtest.checks.memory.h2d import judge_nvbandwidth
from nvtest.config.skus import load_catalog
from tests.conftest import CORPUS

XML = CORPUS / "nvidia-smi" / "q-x-a100-sxm4-80gb-mig-enabled-v12.xml.txt"
NVB = CORPUS / "nvbandwidth" / "v0.10-7gpu-cov-lines-na-diagonal-bidir-read1-read2-total-excerpt.txt"


def _probe(name: str, **doc: Any) -> dict[str, Any]:
    return {"probe": name, "probe_version": 1, "status": "ok", "reason": None, "library": "torch 2.13.0", **doc}


def _gemm(dtype: str, tflops: float, ok: bool = True, status: str = "ok", reason: str | None = None) -> dict[str, Any]:
    return {
        "device": "cuda:0",
        "dtype": dtype,
        "library": "torch 2.13.0",
        "tflops_median": tflops,
        "status": status,
        "reason": reason,
        "check": {"ok": ok, "max_rel_err": 1e-6 if ok else 0.5, "tolerance": 7.8e-3},
    }


def _evidence(tmp_path: Path, xml: str | None, lspci_status: str = "ok") -> tuple[Path, dict[str, Any]]:
    out = tmp_path / "ev"
    (out / "captures").mkdir(parents=True)
    (out / "probes").mkdir()
    steps: list[dict[str, Any]] = []
    if xml is not None:
        (out / "captures" / "nvidia-smi-q-x.xml").write_text(xml)
        steps.append(
            {"name": "nvidia-smi-q-x", "group": "capture", "status": "ok", "files": ["captures/nvidia-smi-q-x.xml"]}
        )
    else:
        steps.append(
            {
                "name": "nvidia-smi-q-x",
                "group": "capture",
                "status": "failed",
                "files": [],
                "reason": "exit 9: NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.",
            }
        )
    steps.append(
        {
            "name": "lspci-nvidia",
            "group": "capture",
            "status": lspci_status,
            "files": [],
            "reason": "lspci lists no NVIDIA (vendor 10de) PCI function" if lspci_status == "empty" else None,
        }
    )
    docs = {
        "gemm": _probe(
            "gemm",
            device="cuda",
            results=[
                _gemm("bf16", 280.0),
                _gemm("fp16", 250.0, ok=False),
                _gemm("fp8", 0.0, status="skip", reason="fp8 needs compute capability >= 8.9 (this GPU: 8.0)"),
            ],
        ),
        "devmem": _probe(
            "devmem",
            device="cuda",
            results=[{"device": "cuda:0", "kernel": "triad", "best_gbps": 1600.0, "check_ok": True, "status": "ok"}],
        ),
        "h2d": _probe(
            "h2d",
            implementation="torch-pinned-copies",
            results=[
                {"device": "cuda:0", "direction": "h2d", "best_gbps": 24.5},
                {"device": "cuda:0", "direction": "d2h", "best_gbps": 20.0},
            ],
        ),
        "h2d-nvbandwidth": _probe(
            "h2d", raw_tool="nvbandwidth", raw=NVB.read_text(), results=[], library="nvbandwidth"
        ),
        "collectives": _probe(
            "collectives",
            device="cuda",
            world_size=1,
            results=[
                {"op": "all_reduce", "size_bytes": 1 << 20, "busbw_gbps": 1.0, "wrong": 0},
                {"op": "all_reduce", "size_bytes": 1 << 26, "busbw_gbps": 2.0, "wrong": 0},
            ],
        ),
        "inference": _probe(
            "inference",
            results=[
                {
                    "device": "cuda:0",
                    "dtype": "bf16",
                    "batch": 1,
                    "decode_tokens_per_s": 1234.5,
                    "ttft_ms": 20.0,
                    "check": {"ok": True},
                },
                {
                    "device": "cuda:0",
                    "dtype": "bf16",
                    "batch": 16,
                    "decode_tokens_per_s": 9000.0,
                    "check": {"ok": False},
                },
            ],
        ),
        "devmem-skip": _probe(
            "devmem", status="skip", reason="no CUDA device: torch.cuda.is_available() is False", results=[]
        ),
    }
    for name, doc in docs.items():
        (out / "probes" / f"{name}.json").write_text(json.dumps(doc) + "\n")
        steps.append({"name": name, "group": "probe", "status": doc["status"], "files": [f"probes/{name}.json"]})
    return out, {"host": "node001", "mode": "full", "budget_s": 480, "duration_s": 300, "steps": steps}


def _row(summary: str, start: str) -> list[str]:
    (line,) = [ln for ln in summary.splitlines() if ln.startswith(start)]
    return [c.strip() for c in line.strip("|").split("|")]


def test_figures_against_the_matched_profile_with_ratios(tmp_path: Path) -> None:
    out, manifest = _evidence(tmp_path, XML.read_text())
    summary = render_summary(out, manifest, load_catalog())
    assert "SKU profile: **a100-sxm-80gb**" in summary
    bf16 = _row(summary, "| GEMM bf16_tflops")
    assert bf16[2:6] == ["280 TFLOP/s", "min 235 TFLOP/s (proposed)", "1.191", "pass"]
    assert "MAMF 271.2" in bf16[6] and bf16[7] == "probes/gemm.json"
    assert _row(summary, "| GEMM fp16_tflops")[5].startswith("fail: product wrong")
    assert "- GEMM fp8_tflops (cuda:0): fp8 needs compute capability >= 8.9" in summary
    assert _row(summary, "| HBM triad_gbps")[2:6] == ["1600 GB/s", "min 1450 GB/s (proposed)", "1.103", "pass"]
    assert _row(summary, "| host link d2h_gbps | cuda:0 (torch")[2:6] == ["20 GB/s", "min 21 GB/s", "0.952", "fail"]
    assert _row(summary, "| collectives all_reduce_busbw_gbps")[2] == "2 GB/s"  # the largest size
    # named as the inference check names its metrics, so the profile's floor applies
    bs1 = _row(summary, "| inference bf16_bs1_decode_tokens_per_s")
    assert bs1[2] == "1234 tokens/s" and bs1[3].startswith("min 154 tokens/s") and bs1[5] == "pass"
    assert _row(summary, "| inference bf16_bs16_decode_tokens_per_s")[5].startswith("fail: generated tokens differ")
    assert "- HBM - (-): skip: no CUDA device" in summary


def test_nvbandwidth_figures_per_gpu_as_the_h2d_check_reads_them(tmp_path: Path) -> None:
    out, manifest = _evidence(tmp_path, XML.read_text())
    nvb = [f for f in probe_figures(out, manifest) if f.source == "probes/h2d-nvbandwidth.json"]
    assert {f.metric for f in nvb} == {"h2d_gbps", "d2h_gbps", "bidir_gbps"}
    assert len([f for f in nvb if f.metric == "h2d_gbps"]) == 7
    assert next(f.value for f in nvb if f.metric == "h2d_gbps" and f.device == "cuda:0") == 55.59


def test_the_summary_maps_nvbandwidth_as_the_h2d_check_does() -> None:
    """Both read the testcases off the parsed result (NvbandwidthResult.host_copies): the
    summary's figures are the h2d check's host-copy metrics, value for value."""
    text = NVB.read_text()
    judge = Judge(None, "h2d", "node001", None)
    judge_nvbandwidth(judge, text)
    judged = {(m.name, m.labels["device"], m.value) for m in judge.metrics if m.name != "d2d_read_ce_gbps"}
    figures = {(f.metric, f.device, f.value) for f in _nvbandwidth(text, "probes/h2d.json")}
    assert len(judged) == 21 and figures == judged


def test_no_profile_matches_an_unknown_gpu(tmp_path: Path) -> None:
    xml = XML.read_text().replace("NVIDIA A100-SXM4-80GB", "NVIDIA Z9000 Prototype")
    out, manifest = _evidence(tmp_path, xml)
    summary = render_summary(out, manifest, load_catalog())
    assert "SKU profile: none matched" in summary and "Figures against the profile (none matched)" in summary
    assert _row(summary, "| GEMM bf16_tflops")[3:6] == ["no threshold", "-", "measured only"]


@pytest.mark.parametrize(("lspci", "profile"), [("ok", None), ("empty", "cpu-generic")])
def test_no_gpu_needs_proof(tmp_path: Path, lspci: str, profile: str | None) -> None:
    """nvidia-smi failing is no proof of no GPU: only lspci listing no NVIDIA function is."""
    out, manifest = _evidence(tmp_path, None, lspci_status=lspci)
    ident = identify_node(out, manifest, load_catalog())
    assert (ident.match.name if ident.match else None) == profile
    assert "couldn't communicate with the NVIDIA driver" in (ident.reason or "")
    if profile is None:
        assert "cannot tell the GPUs" in (ident.reason or "")
