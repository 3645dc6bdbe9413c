"""SKU profiles: every file valid with sources; matching on the corpus's nvidia-smi outputs."""

from __future__ import annotations

import pytest

from nvtest.checks.api import Judge
from nvtest.cli.skus import gpus_from_text, unknown_sku_help
from nvtest.config.skus import Catalog, GpuSummary, load_catalog
from nvtest.verdict import Verdict
from tests.checks.health.conftest import corpus

REQUIRED = {
    "h100-sxm-80gb",
    "h200-sxm-141gb",
    "a100-sxm-80gb",
    "a100-pcie-80gb",
    "h100-pcie-80gb",
    "h100-nvl-94gb",
    "b200-hgx-180gb",
    "gb200-nvl72-tray",
    "l40s",
    "cpu-generic",
}


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    """The bundled SKU profiles."""
    return load_catalog()


def test_catalog_has_every_sku_and_every_threshold_has_unit_and_source(catalog):
    assert REQUIRED <= set(catalog.names())
    for prof in catalog.profiles.values():
        for check, metrics in prof.thresholds.items():
            for name, thr in metrics.items():
                assert thr.unit and len(thr.source) > 10, (prof.name, check, name)
        if prof.name != "cpu-generic":
            assert prof.match.gpu_name and prof.match.gpu_memory_mib_min, prof.name
            assert prof.expect.min_driver and prof.expect.ecc is True, prof.name


def test_reference_numbers_and_proposals(catalog):
    h200 = catalog.get("h200-sxm-141gb").threshold("nccl", "all_reduce_busbw_gbps")
    assert h200 is not None and h200.min == 431 and h200.warn_min == 456 and not h200.proposed
    b200 = catalog.get("b200-hgx-180gb").threshold("nccl", "all_reduce_busbw_gbps")
    assert b200 is not None and b200.min == 760 and b200.proposed
    ib = catalog.get("a100-sxm-80gb").threshold("ib_write_bw", "bw_avg_gbit_s")
    assert ib is not None and ib.unit == "Gb/s" and ib.min == 180
    assert catalog.get("h100-nvl-94gb").expect.nvlinks_per_gpu == 12
    assert catalog.get("l40s").expect.nvlinks_per_gpu == 0


@pytest.mark.parametrize(
    ("rel", "sku"),
    [
        ("nvidia-smi/plain-h100-sxm-x8-driver565.txt", "h100-sxm-80gb"),
        ("nvidia-smi/q-x-a100-sxm4-80gb-mig-enabled-v12.xml.txt", "a100-sxm-80gb"),
        ("nvidia-smi/plain-a100-pcie-x2-driver535-mig-on-gpu0-only-4-mig-devices.txt", None),
    ],
)
def test_matching_on_corpus(catalog, rel, sku):
    gpus = gpus_from_text(corpus(rel))
    assert gpus.count >= 1
    assert catalog.match(gpus).name == sku


@pytest.mark.parametrize(
    ("name", "mem", "sku"),
    [
        ("NVIDIA H100 PCIe", 81559, "h100-pcie-80gb"),
        ("NVIDIA H100 NVL", 95830, "h100-nvl-94gb"),
        ("NVIDIA H200", 143771, "h200-sxm-141gb"),
        ("NVIDIA B200", 183359, "b200-hgx-180gb"),
        ("NVIDIA GB200", 189471, "gb200-nvl72-tray"),
        ("NVIDIA L40S", 46068, "l40s"),
        ("NVIDIA A100 80GB PCIe", 81920, "a100-pcie-80gb"),
    ],
)
def test_matching_by_name_and_memory(catalog, name, mem, sku):
    n = 4 if sku == "gb200-nvl72-tray" else 8
    assert catalog.match(GpuSummary((name,) * n, (mem,) * n)).name == sku


def test_unknown_hardware_message_and_measuring_without_thresholds(catalog):
    gpus = gpus_from_text(corpus("nvidia-smi/plain-a100-pcie-x2-driver535-mig-on-gpu0-only-4-mig-devices.txt"))
    res = catalog.match(gpus)
    msg = unknown_sku_help(catalog, gpus, res)
    assert "A100-PCIE-40GB" in msg and "a100-pcie-80gb: GPU memory" in msg
    assert "h100-sxm-80gb" in msg and "docs/skus.md" in msg and "--sku" in msg
    j = Judge(None, "gemm", "n1", res.profile)
    m = j("bf16_tflops", 100.0, "TFLOP/s")
    assert m.verdict == Verdict.PASS and "no threshold" in m.reason and m.threshold is None
