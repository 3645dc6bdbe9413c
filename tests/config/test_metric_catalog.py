"""The metric catalog against the code and the profiles: every metric a check judges is
declared, every declaration is judged by its check, every shipped threshold names a declared
metric; every declared metric has physical bounds, and the Judge holds them before any
threshold (rule 2 of the design: plausibility before thresholds)."""

from __future__ import annotations

import ast
import math
import re
from pathlib import Path

import pytest

from nvtest.checks.api import Judge
from nvtest.config.loader import load_model
from nvtest.config.metrics import (
    CATALOG,
    PLACEHOLDERS,
    Hardware,
    declared,
    lower_is_better,
    plausible_bounds,
)
from nvtest.config.resources import configs_dir
from nvtest.config.skus import Catalog
from nvtest.config.thresholds import SkuProfile, assess
from nvtest.verdict import Verdict
from tests.config.judged_metrics import judged_by_check
from tests.conftest import CORPUS, PROBES, REPO

JUDGED = judged_by_check()
PROFILES = sorted((configs_dir() / "skus").glob("*.yaml"))


def _normal(pattern: str) -> str:
    return re.sub(r"\{\w*\}", "{}", pattern)


def _declared_patterns(check: str) -> set[str]:
    return {_normal(s.pattern) for s in CATALOG if check in s.checks}


@pytest.mark.parametrize("check", sorted(JUDGED))
def test_every_judged_metric_is_declared(check: str):
    walk = JUDGED[check]
    assert not walk.unresolved, (
        f"judge calls this test cannot read (give the name as a literal or f-string): {walk.unresolved}"
    )
    patterns = _declared_patterns(check)
    undeclared = sorted(
        t for t in walk.templates if _normal(t) not in patterns and ("{" in t or declared(check, t) is None)
    )
    assert not undeclared, f"{check} judges {undeclared}: declare them in nvtest/config/metrics.py"


def test_every_declared_metric_is_judged_by_its_check():
    dead = []
    for spec in CATALOG:
        for check in spec.checks:
            templates = JUDGED.get(check)
            if templates is None:
                dead.append(f"{check}: no such check in suites/")
                continue
            want = _normal(spec.pattern)
            if not any(_normal(t) == want or (t in spec.names()) for t in templates.templates):
                dead.append(f"{check}.{spec.pattern}")
    assert not dead, f"declared but judged by no check: {dead}"


def test_the_walk_finds_every_check_and_the_judgements_behind_helpers():
    assert {
        "stream",
        "gemm",
        "h2d",
        "nccl",
        "ib_write_bw",
        "gpus",
        "thermal",
        "ckpt_shared",
    } <= set(JUDGED)
    assert "bw_avg_gbit_s" in JUDGED["ib_write_bw"].templates  # through the pair job's class attribute
    # an f-string over the parsed result's testcase table (NvbandwidthResult.HOST_COPY_CE)
    assert {"{}_gbps", "d2d_read_ce_gbps"} <= JUDGED["h2d"].templates
    assert "gpu_count" in JUDGED["gpus"].templates  # Outcome.measure behind apply()


def _literal(path: Path, name: str) -> object:
    for stmt in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                if isinstance(stmt.value, ast.Dict):  # the keys (values may be expressions)
                    return [ast.literal_eval(k) for k in stmt.value.keys if k is not None]
                return ast.literal_eval(stmt.value)
    raise AssertionError(f"{name} not in {path}")


def test_placeholders_are_what_the_probes_and_tools_produce():
    assert set(_literal(PROBES / "gemm_probe.py", "UNIT_ROUNDOFF")) == set(PLACEHOLDERS["dtype"])
    assert set(_literal(PROBES / "devmem_probe.py", "KERNEL_WORDS")) <= set(PLACEHOLDERS["kernel"])
    assert set(_literal(PROBES / "h2d_probe.py", "DIRECTIONS")) == set(PLACEHOLDERS["direction"])
    assert set(_literal(PROBES / "collective_probe.py", "OPS")) <= set(PLACEHOLDERS["op"])
    assert set(_literal(REPO / "nvtest" / "jobs" / "nccl.py", "NCCL_OPS")) == set(PLACEHOLDERS["op"])


@pytest.mark.parametrize("path", PROFILES, ids=lambda p: p.stem)
def test_shipped_profile_thresholds_are_declared_and_reachable(path: Path):
    prof = load_model(SkuProfile, path)  # an undeclared (check, metric) or unit is a ConfigError
    hw = Hardware(profile=prof)
    for check, metrics in prof.thresholds.items():
        for name, thr in metrics.items():
            spec = declared(check, name)
            assert spec is not None and spec.unit == thr.unit, (check, name)
            bound = plausible_bounds(spec, name, hw, {"device": "cuda:0"})
            for floor in (thr.min, thr.warn_min):
                if floor is not None and bound.hi is not None:
                    assert floor <= bound.hi, f"{check}.{name}: a floor of {floor} can never be met ({bound.basis})"
            if thr.max is not None and bound.lo is not None:
                assert thr.max >= bound.lo, (check, name)


H100_FACTS = Hardware(gpu_pcie=((5, 16),) * 8, pci_gpus=8, pci_hcas=8, gpus=8, threads=224, nodes=4)


@pytest.fixture(scope="module")
def h100(catalog: Catalog) -> Hardware:
    prof = catalog.get("h100-sxm-80gb")
    return Hardware(prof, H100_FACTS.gpu_pcie, H100_FACTS.pci_gpus, H100_FACTS.pci_hcas, 8, 224, 4)


def _cases():
    for spec in CATALOG:
        for check in spec.checks:
            yield pytest.param(check, spec.names()[0], id=f"{check}.{spec.names()[0]}")


@pytest.mark.parametrize(("check", "name"), list(_cases()))
def test_every_metric_is_bounded_and_outside_is_implausible_not_judged(check: str, name: str, h100: Hardware):
    spec = declared(check, name)
    assert spec is not None
    labels = {"device": "cuda:0"}
    bound = plausible_bounds(spec, name, h100, labels)
    assert bound.lo is not None, f"{check}.{name} has no lower bound"
    assert bound.basis
    below = bound.lo - 1.0
    a = assess(check, name, below, spec.unit, h100.profile, h100, labels, raw="the tool's line")
    assert a.verdict == Verdict.ERROR and a.implausible and a.reason.startswith("implausible: ")
    assert "the tool's line" in a.reason and "rerun" in a.reason and a.threshold is None
    if bound.hi is not None:
        a = assess(check, name, bound.hi * 1.01 + 1, spec.unit, h100.profile, h100, labels)
        assert a.verdict == Verdict.ERROR and a.implausible, a.reason
    inside = bound.lo + (1.0 if bound.lo_open or bound.hi is None else min(1.0, (bound.hi - bound.lo) / 2))
    a = assess(check, name, inside, spec.unit, h100.profile, h100, labels)
    assert not a.implausible and a.verdict != Verdict.ERROR, a.reason


def test_bounds_come_from_the_profile_and_the_node(catalog: Catalog, h100: Hardware):
    def hi(check: str, name: str, hw: Hardware, device: str = "cuda:0") -> float:
        spec = declared(check, name)
        assert spec is not None
        b = plausible_bounds(spec, name, hw, {"device": device})
        assert b.hi is not None
        return b.hi

    assert hi("ib_write_bw", "bw_avg_gbit_s", h100) == pytest.approx(400 * 1.1)  # expect.ib_rate_gbps
    assert hi("ib_write_bw", "bw_avg_gbit_s", Hardware(catalog.get("a100-sxm-80gb"))) == pytest.approx(220)
    assert hi("h2d", "h2d_gbps", h100) == pytest.approx(3.938 * 16 * 1.1)  # Gen5 x16 from the facts
    assert hi("h2d", "bidir_gbps", h100) == pytest.approx(2 * 3.938 * 16 * 1.1)
    gen4 = Hardware(catalog.get("h100-sxm-80gb"), gpu_pcie=((4, 16),))
    assert hi("h2d", "h2d_gbps", gen4) == pytest.approx(1.969 * 16 * 1.1)  # the node's link, not the SKU's
    assert hi("h2d", "h2d_gbps", Hardware(catalog.get("gb200-nvl72-tray"))) == pytest.approx(450 * 1.1)
    assert hi("devmem", "triad_gbps", h100) == pytest.approx(3350 * 1.1)
    assert hi("devmem", "triad_gbps", h100, device="cpu") == 4000.0  # the host's ceiling on a CPU run
    assert hi("h2d", "d2d_read_ce_gbps", h100) == pytest.approx(18 * 25 * 1.1)
    assert hi("nccl", "all_reduce_busbw_gbps", h100) == pytest.approx(2 * 18 * 25 * 1.1)
    assert hi("gemm", "bf16_tflops", h100) == pytest.approx(989.4 * 1.1)
    assert hi("gemm", "fp64_tflops", Hardware(threads=2), device="cpu") == pytest.approx(2 * 6e9 * 32 / 1e12)
    assert hi("gpus", "gpu_count", h100) == 8.0
    assert hi("ckpt_shared", "aggregate_write_gbps", h100) == 4 * 4000.0


def test_judge_refuses_an_undeclared_metric_and_records_the_bound(catalog: Catalog, h100: Hardware):
    j = Judge(
        None,
        "stream",
        "n1",
        catalog.get("cpu-generic"),
        hardware=Hardware(catalog.get("cpu-generic")),
    )
    m = j("triad_gpbs", 10.0, "GB/s")
    assert m.verdict == Verdict.ERROR and "metric not declared" in m.reason and "triad_gbps" in m.reason
    m = j("triad_gbps", 10.0, "Gb/s")
    assert m.verdict == Verdict.ERROR and "declared in GB/s" in m.reason
    m = j("triad_gbps", 10.0, "GB/s")
    assert m.verdict == Verdict.PASS and m.bound is not None and m.bound["max"] == 4000.0
    assert m.bound["implausible"] is False and "host DRAM" in m.bound["basis"]
    j = Judge(None, "ib_write_bw", "n1", h100.profile, hardware=h100)
    above = j("bw_avg_gbit_s", 812.5, "Gb/s", raw="8388608    5000    812.50    812.40    0.012")
    neg = j("bw_avg_gbit_s", -3.2, "Gb/s")
    for m in (above, neg):
        assert m.verdict == Verdict.ERROR and m.reason.startswith("implausible: ") and m.threshold is None
        assert m.bound is not None and m.bound["implausible"] is True
    assert "812.50" in above.reason and "440 Gb/s" in above.reason
    assert j("bw_avg_gbit_s", 350.0, "Gb/s").verdict == Verdict.FAIL  # plausible, under the floor


def test_recorded_real_outputs_are_plausible_on_their_hardware(catalog: Catalog):
    from nvtest.jobs.nccl import judge_output
    from nvtest.parsers import stream

    text = (CORPUS / "nccl-tests" / "all_reduce_perf-2node-16xh100-a3mega-normal-8B-8G.txt").read_text()
    v = judge_output(text, op="all_reduce", max_bytes=8 << 30, plateau_bytes=1 << 30, expected_ranks=16)
    hw = Hardware(catalog.get("h100-sxm-80gb"), gpus=8)
    assert v.details["busbw_gbps"] is not None
    a = assess("nccl_multinode", "all_reduce_busbw_gbps", v.details["busbw_gbps"], "GB/s", hw.profile, hw)
    assert not a.implausible and a.bound is not None and a.verdict != Verdict.ERROR, a.reason
    for path in sorted((CORPUS / "stream").glob("*.txt")):
        rec = stream.parse(path.read_text(encoding="utf-8", errors="replace"))
        assert rec.kernels, path.name
        for k in rec.kernels:
            assert math.isfinite(k.best_rate_gbps)
            a = assess(
                "stream",
                f"{k.name.lower()}_gbps",
                k.best_rate_gbps,
                "GB/s",
                catalog.get("cpu-generic"),
            )
            assert not a.implausible and a.verdict != Verdict.ERROR, (path.name, a.reason)


def test_a_sites_own_check_declares_its_metrics():
    import nvtest
    from nvtest.errors import ConfigError

    j = Judge(None, "site_nvme", "n1", None)
    assert j("read_gbps", 6.5, "GB/s").verdict == Verdict.ERROR  # not declared yet: fail closed
    nvtest.declare_metric("site_nvme", "read_gbps", "GB/s", kind="bandwidth", bound="host_memory", what="fio")
    nvtest.declare_metric("site_nvme", "read_gbps", "GB/s", kind="bandwidth", bound="host_memory")  # again: no-op
    m = j("read_gbps", 6.5, "GB/s")
    assert m.verdict == Verdict.PASS and m.bound is not None and m.bound["rule"] == "host_memory"
    assert j("read_gbps", -1.0, "GB/s").verdict == Verdict.ERROR
    for args, words in (
        (("site_nvme", "read_gbps", "Gb/s"), "already declared in GB/s"),
        (("stream", "triad_gbps", "GB/s"), "already declared"),
        (("site_nvme", "x_furlongs", "furlong/s"), "unknown unit"),
        (("site_nvme", "{speed}_gbps", "GB/s"), "unknown placeholder"),
    ):
        with pytest.raises(ConfigError) as ei:
            nvtest.declare_metric(
                *args, kind="bandwidth", bound="host_link_bidir" if "stream" in args else "host_memory"
            )
        assert words in ei.value.reason
    with pytest.raises(ConfigError):
        nvtest.declare_metric("site_nvme", "write_gbps", "GB/s", kind="bandwidth", bound="warp_speed")


def test_open_ended_patterns_match_any_whole_number():
    import nvtest
    from nvtest.config.metrics import declared as find

    spec = nvtest.declare_metric(
        "site_serve", "{dtype}_bs{batch}_decode_tokens_per_s", "tokens/s", kind="throughput", bound="non_negative"
    )
    assert find("site_serve", "bf16_bs64_decode_tokens_per_s") is spec
    assert spec.values("fp8_bs1_decode_tokens_per_s") == {"dtype": "fp8", "batch": "1"}
    for name in ("bf16_bsx_decode_tokens_per_s", "int3_bs4_decode_tokens_per_s", "bf16_bs4_decode"):
        assert find("site_serve", name) is None, name
    j = Judge(None, "site_serve", "n1", None)
    assert j("bf16_bs16_decode_tokens_per_s", 1200.0, "tokens/s").verdict == Verdict.PASS
    assert j("bf16_bs16_decode_tokens_per_s", -1.0, "tokens/s").verdict == Verdict.ERROR


def test_which_way_is_better_is_the_catalogs_and_the_judge_writes_it(catalog: Catalog, h100: Hardware):
    """One decision of "lower is better" (config.metrics.lower_is_better, from the unit), in
    step with each declared metric's kind; the Judge writes it on the MetricResult, and
    results.json does not carry it (readers derive it from the unit)."""
    direction = {"latency": True, "duration": True, "bandwidth": False, "throughput": False}
    for spec in CATALOG:
        assert spec.lower_is_better is direction.get(spec.kind), (spec.pattern, spec.unit, spec.kind)
    assert lower_is_better("ms") is True and lower_is_better("TFLOP/s") is False
    assert lower_is_better("count") is None and lower_is_better(None) is None
    j = Judge(None, "train_smoke", "n1", None, hardware=h100)
    step, tokens = j("step_time_s", 0.2, "s"), j("tokens_per_s", 5000.0, "tokens/s")
    assert step.lower_is_better is True and tokens.lower_is_better is False
    assert j("final_loss_ratio", 0.3, "ratio").lower_is_better is None
    assert "lower_is_better" not in step.to_json()
