"""Burn-in probe: sustained GEMM on every GPU at once, with NVML telemetry and an SDC check.

Usage::

    python3 burnin_probe.py --seconds 600 [--device auto|cpu|cuda] [--gpus 0,1]
                            [--dtype bf16] [--size 8192] [--window-s 10] [--sample-s 1]
                            [--raw-telemetry]

Each device (one spawned process per GPU; ``--device cpu`` runs one on the
host with torch, else numpy) multiplies the same A @ B (fixed seed, so the
same inputs on every device) for ``--seconds``.  Per window of ``--window-s``
it records the products done, the sustained TFLOP/s (2*n**3 * products /
window seconds / 1e12) and a digest of the output, which must equal the
digest of the first product (bit-identical repeats; a mismatch is silent
data corruption).  Meanwhile a thread samples every GPU through pynvml every
``--sample-s``: SM and memory clocks, temperature, power and the throttle
reason mask, decoded to names (see _burnin_logic.py for the classification).
Without GPUs or pynvml, ``"telemetry": null`` with ``"telemetry_reason"``.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import threading  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

import _burnin_logic as logic  # noqa: E402
import _contract as contract  # noqa: E402
import _cuda_start as cs  # noqa: E402
import _device_pool as pool  # noqa: E402
import _devices as hw  # noqa: E402
import _gemm_backends as gemm  # noqa: E402
import _libraries as libs  # noqa: E402

PROBE = "burnin"
SEED = 20240601
SYNC_EVERY = 4  # products queued between synchronisations on a GPU


def burn(device: str, payload: dict[str, Any]) -> dict[str, Any]:
    """Spawned per device: sustained products for ``payload["seconds"]``, window by window."""
    backend = gemm.gemm_backend(device, payload["prefer"])
    ident: dict[str, Any] = {"gpu_name": None, "pci_bus_id": None}
    if device.startswith("cuda"):
        ident = hw.gpu_identity(backend.name, libs.require(backend.name), int(device.split(":")[1]))
    dtype, n = payload["dtype"], payload["size"]
    why = backend.unsupported(dtype)
    if why:
        return {"device": device, **ident, "status": "skip", "reason": why}
    a, b = backend.operands(dtype, n, n, n, SEED)
    mm = backend.matmul(dtype)
    timer = backend.timer
    c = mm(a, b)
    timer.sync()
    reference = backend.digest(c)
    flops = gemm.gemm_flops(n, n, n)
    windows = []
    start = time.monotonic()
    end = start + payload["seconds"]
    while time.monotonic() < end or not windows:
        w0 = time.monotonic()
        products = 0
        while products == 0 or (time.monotonic() - w0 < payload["window_s"] and time.monotonic() < end):
            c = mm(a, b)
            products += 1
            if products % SYNC_EVERY == 0:
                timer.sync()
        timer.sync()
        seconds = time.monotonic() - w0
        windows.append({
            "index": len(windows),
            "t_start_s": round(w0 - start, 3),
            "seconds": round(seconds, 6),
            "products": products,
            "tflops": flops * products / seconds / 1e12,
            "digest": backend.digest(c),
        })
    if payload.get("inject_sdc") and len(windows) > 1:
        windows[-1]["digest"] = "0" * 32
    return {
        "device": device,
        **ident,
        "library": libs.library_label(backend.torch if backend.name == "torch" else backend.np),
        "dtype": dtype,
        "m": n,
        "n": n,
        "k": n,
        "reference_digest": reference,
        "windows": windows,
    }


class NvmlSampler(threading.Thread):
    """Background thread: one telemetry sample per NVML GPU every ``period_s``."""

    def __init__(self, nvml: Any, period_s: float) -> None:
        super().__init__(daemon=True)
        self.nvml = nvml
        self.period_s = period_s
        self.samples: list[dict[str, Any]] = []
        self.errors: list[str] = []
        self._stop_event = threading.Event()

    def _handles(self) -> list[tuple[str, Any]]:
        out = []
        for i in range(self.nvml.nvmlDeviceGetCount()):
            h = self.nvml.nvmlDeviceGetHandleByIndex(i)
            bus = self.nvml.nvmlDeviceGetPciInfo(h).busId
            out.append(((bus.decode() if isinstance(bus, bytes) else bus).lower(), h))
        return out

    def _sample(self, t: float, bus: str, h: Any) -> dict[str, Any]:
        nv = self.nvml
        s: dict[str, Any] = {"t": round(t, 3), "gpu": bus}
        reasons = (getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None)
                   or nv.nvmlDeviceGetCurrentClocksThrottleReasons)  # older pynvml
        probes = {
            "sm_clock_mhz": lambda: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM),
            "mem_clock_mhz": lambda: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM),
            "temp_c": lambda: nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU),
            "power_w": lambda: nv.nvmlDeviceGetPowerUsage(h) / 1000.0,
            "throttle_mask": lambda: int(reasons(h)),
        }
        for key, fn in probes.items():
            try:
                s[key] = fn()
            except Exception as exc:  # noqa: BLE001 - NVML_ERROR_NOT_SUPPORTED etc.
                s[key] = None
                if len(self.errors) < 20:
                    self.errors.append(f"{bus} {key}: {exc}")
        return s

    def run(self) -> None:
        try:
            handles = self._handles()
        except Exception as exc:  # noqa: BLE001
            self.errors.append(f"NVML device enumeration failed: {exc}")
            return
        t0 = time.monotonic()
        while not self._stop_event.is_set():
            now = time.monotonic() - t0
            for bus, h in handles:
                self.samples.append(self._sample(now, bus, h))
            self._stop_event.wait(self.period_s)

    def stop(self) -> None:
        self._stop_event.set()
        self.join(timeout=5 * self.period_s + 5)


def start_telemetry(device: str, period_s: float) -> tuple[NvmlSampler | None, str | None]:
    """Start NVML sampling for GPU runs: ``(sampler, None)`` or ``(None, reason)``."""
    if device != "cuda":
        return None, "no GPU telemetry for --device cpu"
    nvml, why = libs.optional_import("pynvml")
    if nvml is None:
        return None, why
    try:
        nvml.nvmlInit()
    except Exception as exc:  # noqa: BLE001
        return None, f"nvmlInit failed: {exc}"
    sampler = NvmlSampler(nvml, period_s)
    sampler.start()
    return sampler, None


def build_parser() -> contract.ProbeArgumentParser:
    parser = contract.base_parser("burnin_probe", __doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="burn duration per device")
    parser.add_argument("--dtype", default=None, help="GEMM dtype (default bf16 GPU, fp32 CPU)")
    parser.add_argument("--size", type=int, default=None, help="m=n=k (default 8192 GPU, 512 CPU)")
    parser.add_argument("--window-s", type=float, default=None,
                        help="statistics window (default seconds/10 within 1..10 s)")
    parser.add_argument("--sample-s", type=float, default=1.0, help="telemetry period")
    parser.add_argument("--raw-telemetry", action="store_true", help="keep every sample")
    parser.add_argument("--inject-sdc", action="store_true", help=argparse.SUPPRESS)
    return parser


def body(args: Any, doc: dict[str, Any]) -> None:
    device = hw.resolve_device(args.device)
    dtype = (args.dtype or ("bf16" if device == "cuda" else "fp32")).lower()
    if dtype not in gemm.GEMM_DTYPES:
        raise contract.ProbeError(f"usage error: unknown dtype {dtype}; known: {list(gemm.GEMM_DTYPES)}")
    window_s = args.window_s or max(1.0, min(10.0, args.seconds / 10))
    payload = {"dtype": dtype, "seconds": args.seconds, "window_s": window_s,
               "inject_sdc": args.inject_sdc}
    if device == "cuda":
        try:
            name, mod, count = hw.select_gpu_backend()
        except contract.ProbeSkip as exc:  # asked for the GPUs: never a skip, never the CPU instead
            raise contract.ProbeError(cs.cuda_failure(exc), cs.CAUSE) from None
        devices = [f"cuda:{i}" for i in hw.gpu_indices(count, args.gpus)]
        payload.update(prefer=[name], size=args.size or 8192)
    else:
        why = [libs.optional_import(m)[1] for m in ("numpy", "torch")]  # numpy first: cheap
        if all(why):
            raise contract.ProbeSkip("; ".join(str(w) for w in why))
        devices = ["cpu"]
        payload.update(prefer=["torch", "numpy"], size=args.size or 512)
    doc.update(device=device, dtype=dtype, seconds=args.seconds, window_s=window_s,
               sample_s=args.sample_s, size=payload["size"])
    sampler, no_telemetry = start_telemetry(device, args.sample_s)
    try:
        answers = pool.run_per_device(burn, devices, payload, args.seconds + 600)
    finally:
        if sampler:
            sampler.stop()
    summary = logic.telemetry_summary(sampler.samples, args.sample_s) if sampler else None
    doc["telemetry"] = summary
    doc["telemetry_reason"] = no_telemetry
    if sampler:
        doc["telemetry_errors"] = sampler.errors
        if args.raw_telemetry:
            doc["telemetry_samples"] = sampler.samples
    references = {}
    for ans in answers:
        doc["library"] = doc["library"] or ans.get("library")
        if "windows" not in ans:
            doc["results"].append(ans)
            continue
        references[ans["device"]] = ans["reference_digest"]
        windows = ans["windows"]
        tele = (summary or {}).get(ans.get("pci_bus_id") or "")
        ans.update(
            window_stats=logic.window_stats(windows),
            sdc=logic.sdc_check(ans["reference_digest"], [w["digest"] for w in windows]),
            telemetry=tele,
            max_temp_c=tele["max_temp_c"] if tele else None,
            worst_throttle=tele["worst_throttle"] if tele else None,
            status="ok",
        )
        doc["results"].append(ans)
    doc["cross_device"] = logic.cross_device(references)


if __name__ == "__main__":
    sys.exit(contract.run(PROBE, build_parser(), body))
