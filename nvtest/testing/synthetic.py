"""Synthetic results.json documents for report tests and the report benchmark.

:func:`synthetic_doc` builds a schema-version-1 document of ``nodes`` H100-like
nodes with 40 metrics each (host 2, gpus 1, stream 4, devmem 8, gemm 16, h2d 8,
nccl 1), racks, fleet statistics, a few failures with diagnoses, warnings,
unreachable and drained nodes. ``hostile=True`` puts markup and script
payloads in a node name, a GPU name, the cluster name and reasons, and a tool's
terminal escapes and a 400-character word (:data:`HOSTILE_TOOL`) in a reason and a
warning, to check that every renderer shows them as text. Deterministic for a given seed.
"""

from __future__ import annotations

import random
import statistics
from typing import Any

from nvtest.config.thresholds import OUTSIDE_THRESHOLD
from nvtest.verdict import Verdict, rank_of, worst_of

__all__ = ["HOSTILE_GPU", "HOSTILE_NODE", "HOSTILE_TOOL", "synthetic_doc"]

HOSTILE_NODE = "<script>alert(1)</script>"
HOSTILE_GPU = "<img src=x onerror=alert(2)>"
#: A tool's words that would clear a terminal, retitle it and overwrite the line, then one
#: unbroken 400-character word (a hex dump) that must wrap in the report.
HOSTILE_TOOL = "\x1b[2J\x1b]0;x\x07\rFAULTY " + "0123456789abcdef" * 25

_CHECKS = [
    ("host", "inventory", "Host: CPU, memory, OS"),
    ("gpus", "inventory", "GPUs: count, model, driver, ECC, MIG, PCIe link"),
    ("stream", "memory", "Host memory bandwidth (STREAM)"),
    ("devmem", "memory", "GPU memory bandwidth (copy, triad)"),
    ("gemm", "compute", "GEMM throughput per device and dtype"),
    ("h2d", "memory", "Host <-> GPU bandwidth"),
    ("nccl", "interconnect", "NCCL all_reduce inside the node (busbw)"),
    ("ib_ports", "interconnect", "IB/RoCE ports: state, physical state, rate"),
]

_THRESHOLDS: dict[str, dict[str, dict[str, Any]]] = {
    "stream": {
        "triad_gbps": {
            "min": 300.0,
            "warn_min": 340.0,
            "unit": "GB/s",
            "source": "STREAM on 2x Xeon 8480+: 85% of the 2-socket DDR5-4800 peak",
        }
    },
    "devmem": {
        "copy_gbps": {
            "min": 2600.0,
            "unit": "GB/s",
            "source": "H100 SXM datasheet 3.35 TB/s HBM3, 80% achievable copy",
        }
    },
    "gemm": {
        "bf16_tflops": {
            "min": 600.0,
            "unit": "TFLOP/s",
            "source": "H100 SXM dense BF16 989 TFLOP/s, 60% in a sustained cuBLAS GEMM",
        },
        "fp8_tflops": {
            "min": 1200.0,
            "unit": "TFLOP/s",
            "source": "H100 SXM dense FP8 1979 TFLOP/s, 60% sustained",
        },
    },
    "h2d": {
        "h2d_gbps": {
            "min": 40.0,
            "unit": "GB/s",
            "source": "PCIe Gen5 x16 64 GB/s, 62% pinned copies",
        }
    },
    "nccl": {
        "busbw_gbps": {
            "min": 360.0,
            "unit": "GB/s",
            "source": "NVLink 4 all_reduce busbw, nccl-tests on DGX H100",
        }
    },
    "gpus": {
        "gpu_count": {
            "min": 8,
            "max": 8,
            "unit": "count",
            "source": "SKU: 8 GPUs per HGX H100 board",
        }
    },
}


_SKU = "h100-sxm-80gb"
_STARTED = 1_790_000_000.0
_DOWN_REASON = "ssh: connect timed out after 10 s (no route to host)"
#: The verdict words in results.json's order of counts (nvtest.verdict.Verdict's).
_VERDICTS = tuple(v.value for v in Verdict)
_UNREACHABLE = {
    "cause": "node unreachable over SSH",
    "action": "check the BMC console, power and the management network",
    "class": "node",
}
#: The diagnosis of a failed result, per check.
_FAIL_DIAGNOSES: dict[str, dict[str, str]] = {
    "gemm": {
        "cause": "one GPU far below the fleet: thermal or power throttling, or a degraded HBM stack",
        "action": "check nvidia-smi -q -d PERFORMANCE for clock-throttle reasons; reseat or RMA the GPU",
        "class": "gpu",
    },
    "h2d": {
        "cause": "PCIe link trained below x16",
        "action": "reseat the GPU or riser; check lspci -vv LnkSta",
        "class": "pcie",
    },
    "stream": {
        "cause": "a DIMM missing or in the wrong slot",
        "action": "compare dmidecode -t memory with the vendor's population guide",
        "class": "memory",
    },
}

Thresholds = dict[str, dict[str, dict[str, Any]]]
#: (node, check) -> that result's metrics, in node then check order.
RawMetrics = dict[tuple[str, str], list[dict[str, Any]]]


def _fleet(values: list[float]) -> tuple[float, float]:
    med = statistics.median(values)
    mad = statistics.median(abs(v - med) for v in values) or 1e-9
    return med, mad


def _thresholds(sku: str) -> Thresholds:
    """The SKU thresholds as a document carries them: profile origin, one from a site overlay."""
    thresholds = {
        c: {m: {**t, "proposed": False, "origin": f"profile:{sku}"} for m, t in ms.items()}
        for c, ms in _THRESHOLDS.items()
    }
    thresholds["stream"]["triad_gbps"]["origin"] = "overlay:/etc/nvtest/site.yaml"
    return thresholds


def _gpus(rnd: random.Random, idx: int, hostile: bool) -> list[dict[str, Any]]:
    """The 8 GPUs of node number ``idx`` (1% of them trained at x8)."""
    gpus = []
    for g in range(8):
        gen = 5
        width = 16 if rnd.random() > 0.01 else 8
        gpus.append(
            {
                "index": g,
                "name": HOSTILE_GPU if hostile and g == 0 and idx == 0 else "NVIDIA H100 80GB HBM3",
                "uuid": f"GPU-{rnd.getrandbits(64):016x}",
                "serial": f"{1650923000000 + idx * 8 + g}",
                "pci_bus_id": f"00000000:{0x18 + g * 0x10:02X}:00.0",
                "memory_mib": 81559,
                "vbios": "96.00.99.00.01" if idx % 50 else "96.00.74.00.0B",
                "ecc_mode": "Enabled",
                "persistence_mode": "Enabled",
                "mig_mode": "Disabled",
                "pcie_gen_current": gen,
                "pcie_gen_max": 5,
                "pcie_width_current": width,
                "pcie_width_max": 16,
            }
        )
    return gpus


def _inventory(n: str, gpus: list[dict[str, Any]]) -> dict[str, Any]:
    """The inventory of a reachable node ``n``: host facts, GPUs and 8 ConnectX-7 functions."""
    pci = [
        {
            "slot": f"0000:{0x1A + k * 0x10:02x}:00.0",
            "class_name": "Infiniband controller",
            "class_id": "0207",
            "vendor": "Mellanox Technologies",
            "vendor_id": "15b3",
            "device": "MT2910 Family [ConnectX-7]",
            "device_id": "1021",
            "driver": "mlx5_core",
        }
        for k in range(8)
    ]
    return {
        "host": n,
        "cpu_model": "Intel(R) Xeon(R) Platinum 8480+",
        "sockets": 2,
        "cores": 112,
        "threads": 224,
        "memory_total_kib": 2113322448,
        "os": "Ubuntu 22.04.4 LTS",
        "kernel": "5.15.0-105-generic",
        "python": "3.10.12",
        "libraries": {
            "numpy": "1.26.4",
            "torch": "2.3.0",
            "cupy": None,
            "pynvml": "12.535.133",
            "mpi4py": None,
        },
        "tools": {"nvidia-smi": "/usr/bin/nvidia-smi"},
        "driver_version": "550.54.15",
        "cuda_version": "12.4",
        "gpus": gpus,
        "pci": pci,
        "gpu_absent_reason": None,
        "notes": [],
        "gpu_count": 8,
        "bmc_firmware": "1.2.3",
    }


def _node_doc(n: str, idx: int, gpus: list[dict[str, Any]], down: bool) -> dict[str, Any]:
    """The ``nodes`` entry of node number ``idx`` (no verdict yet); ``down``: unreachable."""
    return {
        "name": n,
        "settings": {
            "name": n,
            "address": None,
            "port": None,
            "user": None,
            "python": None,
            "sku": None,
            "tags": {"rack": f"r{idx // 16 + 1:02d}", "rail": str(idx % 8)},
        },
        "inventory": None if down else _inventory(n, gpus),
        "down_reason": _DOWN_REASON if down else None,
        "sku": _SKU,
        "sku_match": ["8x NVIDIA H100 80GB HBM3 -> h100-sxm-80gb"],
        "sku_forced": False,
        "inventory_log": f"logs/{n}/inventory.log",
    }


def _metric(
    thresholds: Thresholds,
    name: str,
    value: float | None,
    unit: str,
    check: str,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    """An unjudged metric (verdict pass, no fleet statistics yet) with its threshold."""
    return {
        "name": name,
        "value": value,
        "unit": unit,
        "verdict": "pass",
        "reason": "",
        "threshold": thresholds.get(check, {}).get(name),
        "labels": labels or {},
        "fleet": None,
    }


def _node_metrics(
    rnd: random.Random, thresholds: Thresholds, gpus: list[dict[str, Any]], fail_rate: float
) -> dict[str, list[dict[str, Any]]]:
    """One node's metrics per check: 2% of nodes slow in STREAM, ``fail_rate`` of them with
    one slow GEMM GPU, and H2D halved on a GPU trained below x16."""

    def metric(
        name: str, value: float | None, unit: str, check: str, labels: dict[str, str] | None = None
    ) -> dict[str, Any]:
        return _metric(thresholds, name, value, unit, check, labels)

    raw: dict[str, list[dict[str, Any]]] = {}
    slow = rnd.random()
    raw["host"] = [
        metric("cpu_cores", 112.0, "count", "host"),
        metric("memory_gib", 2015.4, "GiB", "host"),
    ]
    raw["gpus"] = [metric("gpu_count", 8.0, "count", "gpus")]
    base = rnd.gauss(380, 6)
    raw["stream"] = [
        metric(k, round(base * f * (0.9 if slow < 0.02 else 1.0), 2), "GB/s", "stream")
        for k, f in (
            ("copy_gbps", 1.05),
            ("scale_gbps", 1.0),
            ("add_gbps", 1.02),
            ("triad_gbps", 1.0),
        )
    ]
    raw["devmem"] = [
        metric("copy_gbps", round(rnd.gauss(2950, 25), 1), "GB/s", "devmem", {"gpu": str(g)}) for g in range(8)
    ]
    gemm = []
    bad_gpu = rnd.randrange(8) if rnd.random() < fail_rate else None
    for dtype, mean, sd in (("bf16", 720, 8), ("fp8", 1420, 15)):
        for g in range(8):
            scale = 0.55 if g == bad_gpu else 1.0
            value = round(rnd.gauss(mean, sd) * scale, 1)
            gemm.append(metric(f"{dtype}_tflops", value, "TFLOP/s", "gemm", {"gpu": str(g), "dtype": dtype}))
    raw["gemm"] = gemm
    raw["h2d"] = [
        metric(
            "h2d_gbps",
            round(
                rnd.gauss(52, 0.6) * (0.5 if int(str(gpus[g]["pcie_width_current"])) < 16 else 1.0),
                2,
            ),
            "GB/s",
            "h2d",
            {"gpu": str(g)},
        )
        for g in range(8)
    ]
    raw["nccl"] = [
        metric(
            "busbw_gbps",
            round(rnd.gauss(470, 4), 1),
            "GB/s",
            "nccl",
            {"op": "all_reduce", "size": "8G"},
        )
    ]
    raw["ib_ports"] = []
    return raw


def _fleet_stats(raw: RawMetrics, down: set[str]) -> dict[tuple[str, str], tuple[float, float]]:
    """(check, metric) -> (median, MAD) over the reachable nodes."""
    series: dict[tuple[str, str], list[float]] = {}
    for (n, c), ms in raw.items():
        if n in down:
            continue
        for m in ms:
            series.setdefault((c, m["name"]), []).append(float(m["value"]))
    return {k: _fleet(v) for k, v in series.items()}


def _judge_metric(m: dict[str, Any], med: float, mad: float) -> None:
    """Set the fleet statistics, verdict and reason of metric ``m``: thresholds first, then
    an outlier (robust z beyond 3.5) or a value under ``warn_min`` is a warn."""
    z = 0.6745 * (m["value"] - med) / mad
    outlier = abs(z) > 3.5
    m["fleet"] = {
        "median": med,
        "mad": round(mad, 4),
        "delta_pct": round(100 * (m["value"] - med) / med, 2),
        "robust_z": round(z, 2),
        "outlier": outlier,
    }
    th = m["threshold"]
    if th and th.get("min") is not None and m["value"] < th["min"]:
        m["verdict"] = "fail"
        m["reason"] = f"{m['value']:.4g} {m['unit']} < min {th['min']:.4g} {m['unit']}"
    elif th and th.get("max") is not None and m["value"] > th["max"]:
        m["verdict"] = "fail"
        m["reason"] = f"{m['value']:.4g} {m['unit']} > max {th['max']:.4g}"
    elif outlier or (th and th.get("warn_min") is not None and m["value"] < th["warn_min"]):
        m["verdict"] = "warn"
        m["reason"] = f"{m['fleet']['delta_pct']:+.1f}% from the fleet median {med:.4g} {m['unit']} (robust z {z:.1f})"
    else:
        m["reason"] = (
            f"{m['value']:.4g} {m['unit']} >= {th['min']:.4g}"
            if th and th.get("min") is not None
            else "measured only, no threshold"
        )


def _judge(
    r: dict[str, Any],
    metrics: list[dict[str, Any]],
    stats: dict[tuple[str, str], tuple[float, float]],
) -> None:
    """Judge ``metrics`` and set result ``r``'s metrics, verdict (the worst), reason and the
    diagnosis of a failed check."""
    c = r["check"]
    worst = "pass"
    bad: list[str] = []
    for m in metrics:
        _judge_metric(m, *stats[(c, m["name"])])
        if rank_of(m["verdict"]) > rank_of(worst):
            worst = m["verdict"]
        if m["verdict"] != "pass":
            bad.append(f"{m['name']}[{' '.join(f'{k}={v}' for k, v in m['labels'].items())}]: {m['reason']}")
    r["metrics"] = metrics
    r["verdict"] = worst
    r["reason"] = "; ".join(bad[:3])
    if any(m["verdict"] == "fail" for m in metrics):  # outside its min or max, as the Judge keys it
        r["cause"] = OUTSIDE_THRESHOLD
    if worst == "fail" and c in _FAIL_DIAGNOSES:
        r["diagnosis"] = dict(_FAIL_DIAGNOSES[c])


def _results(
    rnd: random.Random,
    names: list[str],
    down: set[str],
    hostile: bool,
    raw: RawMetrics,
    drained: dict[str, str],
) -> tuple[list[dict[str, Any]], float]:
    """Every (check, node) result, check by check, 50 ms apart, and the last start time.
    Unreachable nodes give errors; the first two failing nodes are added to ``drained``."""
    stats = _fleet_stats(raw, down)
    results = []
    t = _STARTED
    for c, _area, _title in _CHECKS:
        for n in names:
            t += 0.05
            log = f"logs/{n}/{c}.log" if c not in ("host", "gpus") else f"logs/{n}/inventory.log"
            r: dict[str, Any] = {
                "check": c,
                "node": n,
                "verdict": "pass",
                "reason": "",
                "metrics": [],
                "log": log,
                "duration_s": round(rnd.uniform(1, 30), 3),
                "started_at": t,
                "details": None,
                "diagnosis": None,
                "nodeid": f"suites/test_{c}.py::test_{c}[{n}]",
            }
            if n in down:
                r.update(verdict="error", reason=f"unreachable: {_DOWN_REASON}", metrics=[])
                r["diagnosis"] = dict(_UNREACHABLE)
            elif c == "ib_ports" and hostile and n == names[0]:
                r.update(
                    verdict="skip",
                    reason=f"no RDMA tools: </script><b>ibstat</b> not found \u2028 on the node: {HOSTILE_TOOL}",
                )
            else:
                _judge(r, raw[(n, c)], stats)
                if r["verdict"] == "fail" and len(drained) < 2:
                    drained[n] = f"nvtest {c} fail"
            results.append(r)
    return results, t


def _summary(results: list[dict[str, Any]], names: list[str], node_docs: dict[str, Any]) -> dict[str, Any]:
    """The run's summary (worst verdict, counts per node and per item); sets each node's verdict."""
    verdict_of: dict[str, str] = {}
    for r in results:
        cur = verdict_of.get(r["node"], "skip")
        if rank_of(r["verdict"]) > rank_of(cur):
            verdict_of[r["node"]] = r["verdict"]
    for n in names:
        node_docs[n]["verdict"] = verdict_of.get(n, "skip")
    node_counts = dict.fromkeys(_VERDICTS, 0)
    for v in verdict_of.values():
        node_counts[v] += 1
    item_counts = dict.fromkeys(_VERDICTS, 0)
    for r in results:
        item_counts[r["verdict"]] += 1
    overall = worst_of(verdict_of.values())
    return {"verdict": overall, "nodes": node_counts, "items": item_counts}


def _run(nodes: int, seed: int, hostile: bool, last: float, verdict: str, drained: dict[str, str]) -> dict[str, Any]:
    """The ``run`` block: ended a minute after the ``last`` result started."""
    return {
        "run_id": f"20260101-120000-{seed:04x}",
        "nvtest_version": "0.1.0",
        "command_line": f"nvtest run --suite delivery --inventory rack-{nodes}.yaml --backend ssh",
        "started_at": _STARTED,
        "host": "login01",
        "user": "field",
        "backend": "ssh",
        "suite": "delivery",
        "cluster": ("<b>acme</b> " + HOSTILE_NODE) if hostile else "acme-h100-phase2",
        "inventory_file": f"/home/field/rack-{nodes}.yaml",
        "forced_sku": None,
        "overlay": "/etc/nvtest/site.yaml",
        "rerun_of": None,
        "python": "3.11.7",
        "ended_at": last + 60,
        "interrupted": False,
        "interrupt_signal": None,
        "exit_code": 1 if verdict in ("fail", "error") else 0,
        "duration_s": round(last + 60 - _STARTED, 3),
        "warnings": ["host keys not checked (--insecure-host-keys)"]
        + ([f"node name {HOSTILE_NODE}", f"a tool said {HOSTILE_TOOL}"] if hostile else []),
        "drained": drained,
    }


def synthetic_doc(
    nodes: int = 64,
    *,
    seed: int = 7,
    hostile: bool = False,
    fail_rate: float = 0.03,
    unreachable: int | None = None,
) -> dict[str, Any]:
    """A results.json document (schema version 1) for ``nodes`` synthetic nodes.

    Nodes are named ``gpu0001``..., 16 to a rack; the last ``unreachable`` nodes are
    unreachable, all for one reason (None: the last one with 8 nodes or more).
    ``fail_rate`` is the share of nodes (0..1) given one GPU at 55% of the GEMM
    fleet; ``hostile`` puts :data:`HOSTILE_NODE`/:data:`HOSTILE_GPU` markup in names and reasons.
    The same arguments give the same document (``seed`` drives every random value).
    """
    rnd = random.Random(seed)
    names = [f"gpu{i:04d}" for i in range(1, nodes + 1)]
    if hostile and names:
        names[0] = HOSTILE_NODE
    thresholds = _thresholds(_SKU)
    if unreachable is None:
        unreachable = 1 if nodes >= 8 else 0
    down = set(names[len(names) - unreachable :]) if unreachable > 0 else set()
    node_docs: dict[str, Any] = {}
    raw: RawMetrics = {}
    for idx, n in enumerate(names):
        gpus = _gpus(rnd, idx, hostile)
        node_docs[n] = _node_doc(n, idx, gpus, n in down)
        for c, ms in _node_metrics(rnd, thresholds, gpus, fail_rate).items():
            raw[(n, c)] = ms
    drained: dict[str, str] = {}
    results, last = _results(rnd, names, down, hostile, raw, drained)
    summary = _summary(results, names, node_docs)
    return {
        "schema_version": 1,
        "run": _run(nodes, seed, hostile, last, summary["verdict"], drained),
        "summary": summary,
        "nodes": dict(sorted(node_docs.items())),
        "skus": {
            _SKU: {
                "name": _SKU,
                "description": "NVIDIA HGX H100 SXM5 80GB, 8 GPUs",
                "file": "configs/skus/h100-sxm-80gb.yaml",
                "thresholds": thresholds,
                "sources": {"datasheet": "NVIDIA H100 Tensor Core GPU datasheet"},
                "expect": {"gpus": 8},
            }
        },
        "checks": {
            c: {"name": c, "area": a, "title": title, "description": "", "module": f"test_{c}.py"}
            for c, a, title in _CHECKS
        },
        "results": results,
    }
