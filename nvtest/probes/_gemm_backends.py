"""GEMM backends of the GEMM and burn-in probes (numpy, torch, cupy), and flop counting.

One small class per array library with the same methods (``unsupported``,
``operands``, ``matmul``, ``rows_error``, ``digest``, ``corrupt``, and a
:class:`_timing.Timer` as ``timer``), used by the GEMM probe (throughput +
accuracy check) and the burn-in probe (sustained load + bit-identical output
hash).  Inputs are uniform in [-1, 1) (never zeros), generated directly in the
storage dtype, so the float64 reference sees exactly the values the GEMM
consumed (tf32 is the exception: stored as fp32, rounded by the tensor cores).

Shapes: A is (m x k), B is (k x n), C = A @ B is (m x n).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

import _contract as contract
import _libraries as libs
import _timing as timing

#: The dtype names the probes know; which one a backend runs is its ``unsupported()``.
GEMM_DTYPES = ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8")


def gemm_flops(m: int, n: int, k: int) -> int:
    """Floating point operations of C(m x n) = A(m x k) @ B(k x n): 2*m*n*k (one mul + one add)."""
    return 2 * m * n * k


def tflops(m: int, n: int, k: int, seconds: float) -> float:
    """TFLOP/s of one m x n x k product that took ``seconds``: 2*m*n*k / s / 1e12."""
    return gemm_flops(m, n, k) / seconds / 1e12


class NumpyGemm:
    """GEMM on the host CPU with numpy (BLAS): dtypes fp64, fp32."""

    name = "numpy"
    dtypes = ("fp64", "fp32")

    def __init__(self, np: ModuleType) -> None:
        self.np = np
        self.timer = timing.Timer("cpu")

    def unsupported(self, dtype: str) -> str | None:
        """Why ``dtype`` cannot run here, or None."""
        return None if dtype in self.dtypes else f"{dtype} not available with numpy"

    def operands(self, dtype: str, m: int, n: int, k: int, seed: int) -> tuple[Any, Any]:
        """Random A (m x k) and B (k x n) in [-1, 1)."""
        dt = self.np.float64 if dtype == "fp64" else self.np.float32
        rng = self.np.random.default_rng(seed)
        a = rng.random((m, k), dtype=dt) * 2 - 1
        b = rng.random((k, n), dtype=dt) * 2 - 1
        return a, b

    def matmul(self, dtype: str) -> Callable[[Any, Any], Any]:
        """The product function for ``dtype``: ``f(A, B) -> C``."""
        return self.np.matmul

    def rows_error(self, a: Any, b: Any, c: Any, rows: Sequence[int]) -> float:
        """max over C[rows, :] of |C - R| / (|A||B|), R the float64 product."""
        np = self.np
        a64, b64 = a[list(rows)].astype(np.float64), b.astype(np.float64)
        ref, scale = a64 @ b64, np.abs(a64) @ np.abs(b64)
        err = np.abs(c[list(rows)].astype(np.float64) - ref) / scale
        return float(err.max()) if np.isfinite(err).all() else float("nan")

    def digest(self, c: Any) -> str:
        """blake2b-128 hex digest of C's bytes (bit-identity check)."""
        import hashlib

        return hashlib.blake2b(self.np.ascontiguousarray(c).tobytes(), digest_size=16).hexdigest()

    def corrupt(self, c: Any, row: int, col: int, rel: float) -> None:
        """Add ``rel`` times the row's largest magnitude to C[row, col] (tests only)."""
        c[row, col] += rel * float(abs(c[row]).max())


class TorchGemm:
    """GEMM with torch on ``device`` (``"cpu"`` or ``"cuda:N"``).

    dtypes on CUDA: fp64, fp32 (tf32 off), tf32, fp16, bf16, fp8 (e4m3 via
    ``torch._scaled_mm``, bf16 output, needs compute capability >= 8.9); on
    CPU: fp64, fp32, bf16 where a tiny bf16 product works.
    """

    name = "torch"

    def __init__(self, torch: ModuleType, device: str) -> None:
        self.torch = torch
        self.device = device
        self.cuda = device.startswith("cuda")
        self.timer = timing.Timer("torch" if self.cuda else "cpu", torch)
        if self.cuda:
            torch.cuda.set_device(torch.device(device))

    def unsupported(self, dtype: str) -> str | None:
        """Why ``dtype`` cannot run on this device, or None."""
        torch = self.torch
        if dtype not in GEMM_DTYPES:
            return f"unknown dtype {dtype}"
        if not self.cuda:
            if dtype in ("tf32", "fp16", "fp8"):
                return f"{dtype} GEMM is not measured on CPU"
            if dtype == "bf16":
                try:
                    x = torch.ones(4, 4, dtype=torch.bfloat16)
                    torch.matmul(x, x)
                except Exception as exc:  # noqa: BLE001
                    return f"bf16 matmul unsupported by torch on this CPU: {exc}"
            return None
        if dtype == "fp8":
            cap = torch.cuda.get_device_capability(torch.device(self.device))
            if tuple(cap) < (8, 9):
                return f"fp8 needs compute capability >= 8.9 (this GPU: {cap[0]}.{cap[1]})"
            if not (hasattr(torch, "float8_e4m3fn") and hasattr(torch, "_scaled_mm")):
                return f"fp8 needs torch.float8_e4m3fn and torch._scaled_mm (torch {torch.__version__})"
        return None

    def _storage(self, dtype: str) -> Any:
        t = self.torch
        return {"fp64": t.float64, "fp32": t.float32, "tf32": t.float32, "fp16": t.float16,
                "bf16": t.bfloat16}.get(dtype, t.float32)

    def operands(self, dtype: str, m: int, n: int, k: int, seed: int) -> tuple[Any, Any]:
        """Random A (m x k) and B (k x n) in [-1, 1); fp8 B is column-major for _scaled_mm."""
        torch = self.torch
        gen = torch.Generator(device=self.device).manual_seed(seed)
        gen_dt = torch.float64 if dtype == "fp64" else torch.float32

        def uniform(*shape: int) -> Any:
            return torch.rand(*shape, generator=gen, device=self.device, dtype=gen_dt) * 2 - 1

        if dtype == "fp8":
            a = uniform(m, k).to(torch.float8_e4m3fn)
            b = uniform(n, k).to(torch.float8_e4m3fn).t()  # (k x n), column-major
            return a, b
        st = self._storage(dtype)
        return uniform(m, k).to(st), uniform(k, n).to(st)

    def matmul(self, dtype: str) -> Callable[[Any, Any], Any]:
        """The product function for ``dtype``; sets the tf32 switch as the dtype needs."""
        torch = self.torch
        if self.cuda:
            torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
        if dtype == "fp8":
            one = torch.ones((), device=self.device, dtype=torch.float32)

            def fp8_mm(a: Any, b: Any) -> Any:
                out = torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
                return out[0] if isinstance(out, tuple) else out  # older torch: (out, amax)

            return fp8_mm
        return torch.matmul

    def rows_error(self, a: Any, b: Any, c: Any, rows: Sequence[int]) -> float:
        """max over C[rows, :] of |C - R| / (|A||B|), R the float64 product (on the device)."""
        torch = self.torch

        def to64(t: Any) -> Any:  # exact: fp8/fp16/bf16 -> fp32 -> fp64 (fp8 has no direct path)
            return t if t.dtype == torch.float64 else t.float().double()

        # row views work for every dtype, fp8 included (index_select may not)
        a64 = torch.stack([to64(a[r]) for r in rows])
        b64 = to64(b)
        ref, scale = a64 @ b64, a64.abs() @ b64.abs()
        err = (torch.stack([to64(c[r]) for r in rows]) - ref).abs() / scale
        if not bool(torch.isfinite(err).all()):
            return float("nan")
        return float(err.max())

    def digest(self, c: Any) -> str:
        """blake2b-128 hex digest of C's bytes, copied to the host (no numpy needed)."""
        import ctypes
        import hashlib

        host = c.detach().contiguous().cpu()
        raw = ctypes.string_at(host.data_ptr(), host.numel() * host.element_size())
        return hashlib.blake2b(raw, digest_size=16).hexdigest()

    def corrupt(self, c: Any, row: int, col: int, rel: float) -> None:
        """Add ``rel`` times the row's largest magnitude to C[row, col] (tests only)."""
        c[row, col] += rel * float(c[row].abs().max())


class CupyGemm(NumpyGemm):
    """GEMM with cupy on the current CUDA device: fp64, fp32, fp16."""

    name = "cupy"
    dtypes = ("fp64", "fp32", "fp16")

    def __init__(self, cp: ModuleType, device: str) -> None:
        self.np = cp
        cp.cuda.Device(int(device.split(":")[1])).use()
        self.timer = timing.Timer("cupy", cp)

    def unsupported(self, dtype: str) -> str | None:
        """Why ``dtype`` cannot run here, or None (cupy lacks bf16/fp8; tf32 is an import flag)."""
        return None if dtype in self.dtypes else f"{dtype} not measured with the cupy backend"

    def operands(self, dtype: str, m: int, n: int, k: int, seed: int) -> tuple[Any, Any]:
        """Random A (m x k) and B (k x n) in [-1, 1)."""
        cp = self.np
        rng = cp.random.default_rng(seed)
        dt = {"fp64": cp.float64, "fp32": cp.float32, "fp16": cp.float16}[dtype]
        gen = cp.float64 if dtype == "fp64" else cp.float32
        a = (rng.random((m, k), dtype=gen) * 2 - 1).astype(dt)
        b = (rng.random((k, n), dtype=gen) * 2 - 1).astype(dt)
        return a, b

    def digest(self, c: Any) -> str:
        """blake2b-128 hex digest of C's bytes (copied to the host)."""
        import hashlib

        return hashlib.blake2b(self.np.asnumpy(c).tobytes(), digest_size=16).hexdigest()


def gemm_backend(device: str, prefer: Sequence[str] = ("torch", "cupy")) -> Any:
    """First backend of ``prefer`` that imports, for ``device`` (``"cpu"`` or ``"cuda:N"``).

    torch serves both; numpy only ``"cpu"``, cupy only ``"cuda:N"``.  Returns a
    :class:`TorchGemm`, :class:`NumpyGemm` or :class:`CupyGemm`; constructing
    one for ``"cuda:N"`` makes device N current.

    Raises:
        ProbeSkip: no library of ``prefer`` imports (the reasons, joined).
    """
    reasons = []
    for name in prefer:
        mod, why = libs.optional_import(name)
        if mod is None:
            reasons.append(why)
        elif name == "torch":
            return TorchGemm(mod, device)
        elif name == "numpy" and device == "cpu":
            return NumpyGemm(mod)
        elif name == "cupy" and device.startswith("cuda"):
            return CupyGemm(mod, device)
    raise contract.ProbeSkip("; ".join(str(r) for r in reasons))
