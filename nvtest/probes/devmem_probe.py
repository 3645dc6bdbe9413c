"""Device memory (HBM) bandwidth probe: copy and triad on every GPU at once, GB/s.

Usage::

    python3 devmem_probe.py [--device auto|cpu|cuda] [--gpus 0,1] [--array-mib 1024]
                            [--reps 20] [--timeout-s 600]

Kernels over fp32 arrays of ``--array-mib`` MiB each, on the device:

    copy   a = b            bytes = 2 * N * 4   (read b, write a)
    triad  a = b + s * c    bytes = 3 * N * 4   (read b and c, write a)

GB/s = bytes / seconds / 1e9 per repetition (CUDA events), reported best and
median.  torch (``copy_`` and ``torch.add(b, c, alpha=s, out=a)``, both single
kernels) or cupy.  ``--device cpu`` runs the same with torch on the host (for
tests); ``auto`` without a GPU is a skip.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from typing import Any  # noqa: E402

import _contract as contract  # noqa: E402
import _cuda_start as cs  # noqa: E402
import _device_pool as pool  # noqa: E402
import _devices as hw  # noqa: E402
import _libraries as libs  # noqa: E402
import _timing as timing  # noqa: E402

PROBE = "devmem"
ELEMENT_BYTES = 4  # fp32
#: Words read plus words written per element.
KERNEL_WORDS = {"copy": 2, "triad": 3}
SCALAR = 3.0


def kernel_bytes(kernel: str, elements: int, element_bytes: int = ELEMENT_BYTES) -> int:
    """Bytes read plus bytes written by one kernel over arrays of ``elements``."""
    return KERNEL_WORDS[kernel] * element_bytes * elements


def _kernels(backend: str, mod: Any, device: str, elements: int) -> tuple[dict[str, Any], Any]:
    """Build the arrays and ``{"copy": fn, "triad": fn}``; also a probe of a[0], a[-1]."""
    if backend == "torch":
        a = mod.empty(elements, device=device, dtype=mod.float32)
        b = mod.full((elements,), 1.0, device=device, dtype=mod.float32)
        c = mod.full((elements,), 2.0, device=device, dtype=mod.float32)
        fns = {"copy": lambda: a.copy_(b), "triad": lambda: mod.add(b, c, alpha=SCALAR, out=a)}
        return fns, lambda: (float(a[0]), float(a[-1]))
    cp = mod
    a = cp.empty(elements, dtype=cp.float32)
    b = cp.full(elements, 1.0, dtype=cp.float32)
    c = cp.full(elements, 2.0, dtype=cp.float32)
    triad = cp.ElementwiseKernel("float32 b, float32 c, float32 s", "float32 a",
                                 "a = b + s * c", "nvtest_triad")
    fns = {"copy": lambda: cp.copyto(a, b), "triad": lambda: triad(b, c, cp.float32(SCALAR), a)}
    return fns, lambda: (float(a[0]), float(a[-1]))


def measure_device(device: str, payload: dict[str, Any]) -> dict[str, Any]:
    """All kernels on one device (``"cpu"`` or ``"cuda:N"``): ``{"device", "results"}``."""
    backend = payload["backend"]
    mod = libs.require(backend)
    ident: dict[str, Any] = {"gpu_name": None}
    if device.startswith("cuda"):
        index = int(device.split(":")[1])
        if backend == "torch":
            mod.cuda.set_device(index)
        else:
            mod.cuda.Device(index).use()
        ident = hw.gpu_identity(backend, mod, index)
        timer = timing.Timer(backend, mod)
    else:
        timer = timing.Timer("cpu")
    elements = int(payload["array_mib"] * 2**20) // ELEMENT_BYTES
    fns, ends = _kernels(backend, mod, device, elements)
    results = []
    for kernel, fn in fns.items():
        timer.repeat(fn, 3)
        times = timer.repeat(fn, payload["reps"])
        nbytes = kernel_bytes(kernel, elements)
        st = timing.stats(times)
        expect = 1.0 if kernel == "copy" else 1.0 + SCALAR * 2.0
        got = ends()
        ok = all(v == expect for v in got)
        results.append({
            "device": device,
            "gpu_name": ident.get("gpu_name"),
            "kernel": kernel,
            "dtype": "fp32",
            "array_mib": payload["array_mib"],
            "bytes_per_iter": nbytes,
            "best_gbps": timing.gbps(nbytes, st["min"]),
            "median_gbps": timing.gbps(nbytes, st["median"]),
            "min_time_s": st["min"],
            "median_time_s": st["median"],
            "reps": payload["reps"],
            "check_ok": ok,  # wrong data is a result (verdict fail), not a probe error
            "check": None if ok else f"{kernel} wrote {got} at the ends, expected {expect}",
            "status": "ok",
        })
    return {"device": device, "results": results}


def build_parser() -> contract.ProbeArgumentParser:
    parser = contract.base_parser("devmem_probe", __doc__.splitlines()[0])
    parser.add_argument("--array-mib", type=float, default=None,
                        help="MiB per array (default 1024 on GPU, 256 on CPU)")
    parser.add_argument("--reps", type=int, default=20, help="timed repetitions per kernel")
    parser.add_argument("--timeout-s", type=float, default=600.0, help="per GPU process")
    return parser


def body(args: Any, doc: dict[str, Any]) -> None:
    if args.reps < 1:
        raise contract.ProbeError("usage error: --reps must be >= 1")
    device = args.device
    if device == "cpu":
        torch = libs.require("torch")
        payload = {"backend": "torch", "array_mib": args.array_mib or 256, "reps": args.reps}
        doc.update(library=libs.library_label(torch), device="cpu")
        doc["results"] = measure_device("cpu", payload)["results"]
        return
    try:
        name, mod, count = hw.select_gpu_backend()  # auto: skip when no GPU
    except contract.ProbeSkip as exc:
        if device != "cuda":
            raise
        raise contract.ProbeError(cs.cuda_failure(exc), cs.CAUSE) from None  # asked for the GPUs: an error
    payload = {"backend": name, "array_mib": args.array_mib or 1024, "reps": args.reps}
    doc.update(library=libs.library_label(mod), device="cuda")
    devices = [f"cuda:{i}" for i in hw.gpu_indices(count, args.gpus)]
    for answer in pool.run_per_device(measure_device, devices, payload, args.timeout_s):
        doc["results"].extend(answer.get("results") or [answer])


if __name__ == "__main__":
    sys.exit(contract.run(PROBE, build_parser(), body))
