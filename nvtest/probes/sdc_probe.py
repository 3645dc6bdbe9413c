"""SDC probe: the same deterministic computation on every GPU; a digest of the output bits per GPU.

Usage::

    python3 sdc_probe.py [--device auto|cpu|cuda] [--gpus 0,1] [--dtypes fp32,bf16]
                         [--size 2048] [--chain 16] [--steps 5] [--seed 20240611]
                         [--threads 1] [--timeout-s 900]

Per device (one spawned process per GPU, all at once; one on the host for
``--device cpu``), with ``torch.use_deterministic_algorithms(True)``
(``CUBLAS_WORKSPACE_CONFIG=:4096:8`` on a GPU, TF32 off, attention by the
math backend of scaled_dot_product_attention), a fixed seed and
fixed shapes, and on the CPU a fixed thread count (``--threads``):

- ``gemm_chain`` per dtype: X0 (size x size, uniform [-1, 1), drawn on the
  host) multiplied by ``--chain`` matrices W_i (uniform, scaled by
  sqrt(3/size) so the values neither grow nor vanish); the digest is the
  sha256 of the bytes of every X_i in turn;
- ``train_smoke``: ``--steps`` AdamW steps of the training smoke model
  (``train_smoke.build_model``, fp32, fixed batches); the digest is the sha256
  of the losses (fp32 bytes) and of every parameter after the last step.

Nothing is judged here: the controller groups the GPUs of the whole fleet by
what determines the bits (``config``: GPU model, driver, CUDA, cuDNN, torch;
on a CPU the CPU model, torch's CPU capability, BLAS and the thread count)
and compares each GPU with its group's majority.

Test hook: ``NVTEST_SDC_INJECT=1`` (or a comma list of devices, ``cpu``,
``cuda:1``) flips the lowest bit of one element of the chain's last product
on those devices before it is digested: a GPU that computes wrong, for tests
of the fleet comparison.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import ctypes  # noqa: E402
import hashlib  # noqa: E402
import math  # noqa: E402
import platform  # noqa: E402
import re  # noqa: E402
from typing import Any  # noqa: E402

import _contract as contract  # noqa: E402
import _cuda_start as cs  # noqa: E402
import _device_pool as pool  # noqa: E402
import _devices as hw  # noqa: E402
import _libraries as libs  # noqa: E402
import _nvml as nvml  # noqa: E402
import train_smoke as smoke  # noqa: E402

PROBE = "sdc"
INJECT_ENV = "NVTEST_SDC_INJECT"
CUBLAS_WORKSPACE = ":4096:8"  # cuBLAS needs a fixed workspace for reproducible results (CUDA >= 10.2)
DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16", "fp64": "float64"}
TRAIN_LR = 3e-3


def tensor_bytes(t: Any) -> bytes:
    """The raw bytes of a tensor, copied to the host (any dtype, no numpy needed)."""
    host = t.detach().contiguous().cpu()
    return ctypes.string_at(host.data_ptr(), host.numel() * host.element_size())


def injected(device: str) -> bool:
    """Whether ``$NVTEST_SDC_INJECT`` names this device (or is ``1``/``all``)."""
    raw = os.environ.get(INJECT_ENV, "")
    names = {x.strip() for x in raw.split(",") if x.strip()}
    return bool(names & {"1", "all", device})


def gemm_chain(torch: Any, device: str, dtype: str, size: int, chain: int, seed: int) -> dict[str, Any]:
    """The chain of products in ``dtype``; ``{"name", "dtype", "size", "chain", "seed", "digest"}``."""
    gen = torch.Generator().manual_seed(seed)
    dt = getattr(torch, DTYPES[dtype])

    def uniform(scale: float) -> Any:
        host = (torch.rand(size, size, generator=gen, dtype=torch.float64) * 2 - 1) * scale
        return host.to(dtype=dt).to(device)

    x = uniform(1.0)
    ws = [uniform(math.sqrt(3.0 / size)) for _ in range(chain)]
    h = hashlib.sha256()
    for i, w in enumerate(ws):
        x = x @ w
        if i == chain - 1 and injected(device):
            flat = x.view(-1)
            bits = flat[:1].view(torch.int16 if x.element_size() == 2 else
                                 torch.int32 if x.element_size() == 4 else torch.int64)
            bits ^= 1
        h.update(tensor_bytes(x))
    return {"name": "gemm_chain", "dtype": dtype, "size": size, "chain": chain, "seed": seed,
            "digest": h.hexdigest(), "finite": bool(torch.isfinite(x).all())}


def train_steps(torch: Any, device: str, steps: int, seed: int) -> dict[str, Any]:
    """``steps`` AdamW steps of the smoke model in fp32; digest of the losses and final weights.

    The loss is written as ``-(log_softmax * one_hot).sum`` (no ``nll_loss``
    kernel) so that every op has a deterministic CUDA implementation.
    """
    torch.manual_seed(seed)
    model = smoke.build_model(torch).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=TRAIN_LR)
    gen = torch.Generator().manual_seed(seed + 1)
    perm = torch.randperm(smoke.VOCAB, generator=torch.Generator().manual_seed(seed))
    losses = []
    for _ in range(steps):
        batch = smoke.make_batch(torch, gen, perm, smoke.BATCH, smoke.SEQ).to(device)
        logits = model(batch[:, :-1])
        target = torch.nn.functional.one_hot(batch[:, 1:], smoke.VOCAB).to(logits.dtype)
        loss = -(torch.log_softmax(logits, dim=-1) * target).sum(dim=-1).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    h = hashlib.sha256(tensor_bytes(torch.stack(losses)))
    for name, p in model.state_dict().items():
        h.update(name.encode())
        h.update(tensor_bytes(p))
    return {"name": "train_smoke", "dtype": "fp32", "steps": steps, "seed": seed,
            "digest": h.hexdigest(), "final_loss": float(losses[-1]) if losses else None}


def cpu_model() -> str | None:
    """``model name`` of the first CPU in /proc/cpuinfo (``platform.processor()`` elsewhere)."""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def torch_build_value(torch: Any, key: str) -> str | None:
    """A ``KEY=value`` of torch's build configuration (``torch.__config__.show()``), e.g. BLAS_INFO."""
    try:
        text = torch.__config__.show()
    except Exception:  # noqa: BLE001
        return None
    m = re.search(rf"\b{re.escape(key)}=([^,\s]+)", text)
    return m.group(1) if m else None


def config_of(torch: Any, device: str, threads: int, ident: dict[str, Any]) -> dict[str, Any]:
    """What determines the output bits on this device (the controller's grouping key)."""
    common = {"torch": torch.__version__, "deterministic": torch.are_deterministic_algorithms_enabled()}
    if device == "cpu":
        cap = None
        if hasattr(torch.backends, "cpu") and hasattr(torch.backends.cpu, "get_cpu_capability"):
            cap = torch.backends.cpu.get_cpu_capability()
        return {"device_kind": "cpu", "cpu_model": cpu_model(), "cpu_capability": cap,
                "blas": torch_build_value(torch, "BLAS_INFO"), "threads": threads, **common}
    cc = torch.cuda.get_device_capability(torch.device(device))
    return {"device_kind": "cuda", "gpu_name": ident.get("gpu_name"),
            "compute_capability": f"{cc[0]}.{cc[1]}", "driver": ident.get("driver"),
            "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
            "cublas_workspace_config": os.environ.get("CUBLAS_WORKSPACE_CONFIG"), **common}


def sdc_device(device: str, payload: dict[str, Any]) -> dict[str, Any]:
    """Every workload on one device (``"cpu"`` or ``"cuda:N"``): one result entry."""
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", CUBLAS_WORKSPACE)  # before CUDA initialises
    torch = libs.require("torch")
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True
    ident: dict[str, Any] = {"gpu_name": None, "pci_bus_id": None, "index": None}
    if device.startswith("cuda"):
        index = int(device.split(":")[1])
        torch.cuda.set_device(index)
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        for fused in ("enable_flash_sdp", "enable_mem_efficient_sdp", "enable_cudnn_sdp"):
            if hasattr(torch.backends.cuda, fused):  # attention by plain matmul + softmax:
                getattr(torch.backends.cuda, fused)(False)  # deterministic by construction
        ident = {**hw.gpu_identity("torch", torch, index), "index": index}
        ident.update(nvml.nvml_board_identity(ident.get("pci_bus_id")))
    else:
        torch.set_num_threads(payload["threads"])
    workloads = []
    for dtype in payload["dtypes"]:
        workloads.append(gemm_chain(torch, device, dtype, payload["size"], payload["chain"],
                                    payload["seed"]))
    if payload["steps"]:
        workloads.append(train_steps(torch, device, payload["steps"], payload["seed"]))
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return {"device": device, **ident, "library": libs.library_label(torch),
            "config": config_of(torch, device, payload["threads"], ident),
            "workloads": workloads, "status": "ok", "reason": None}


def build_parser() -> contract.ProbeArgumentParser:
    parser = contract.base_parser("sdc_probe", __doc__.splitlines()[0])
    parser.add_argument("--dtypes", type=contract.parse_name_list, default=None,
                        help="GEMM chain dtypes (default: fp32,bf16 on GPU, fp32 on CPU)")
    parser.add_argument("--size", type=int, default=None, help="square size (default 2048 GPU, 256 CPU)")
    parser.add_argument("--chain", type=int, default=16, help="products in the chain")
    parser.add_argument("--steps", type=int, default=5, help="training steps of the smoke model (0: none)")
    parser.add_argument("--seed", type=int, default=20240611)
    parser.add_argument("--threads", type=int, default=1, help="CPU: torch threads (part of the grouping key)")
    parser.add_argument("--timeout-s", type=float, default=900.0, help="per GPU process")
    return parser


def body(args: Any, doc: dict[str, Any]) -> None:
    bad = [d for d in args.dtypes or () if d not in DTYPES]
    if bad or args.chain < 1 or args.steps < 0 or args.threads < 1 or (args.size or 1) < 1:
        raise contract.ProbeError(
            f"usage error: dtypes {args.dtypes} (known {list(DTYPES)}), --chain >= 1, "
            "--steps >= 0, --threads >= 1 and --size >= 1 expected")
    libs.require("torch")
    device = hw.resolve_device(args.device)
    payload = {"chain": args.chain, "steps": args.steps, "seed": args.seed, "threads": args.threads}
    doc["device"] = device
    if device == "cuda":
        try:
            _, mod, count = hw.select_gpu_backend(("torch",))
        except contract.ProbeSkip as exc:  # asked for the GPUs: never a skip, never the CPU instead
            raise contract.ProbeError(cs.cuda_failure(exc), cs.CAUSE) from None
        doc["library"] = libs.library_label(mod)
        devices = [f"cuda:{i}" for i in hw.gpu_indices(count, args.gpus)]
        payload.update(dtypes=args.dtypes or ["fp32", "bf16"], size=args.size or 2048)
        doc["results"].extend(pool.run_per_device(sdc_device, devices, payload, args.timeout_s))
    else:
        payload.update(dtypes=args.dtypes or ["fp32"], size=args.size or 256)
        entry = sdc_device("cpu", payload)
        doc["library"] = entry["library"]
        doc["results"].append(entry)
    doc["recipe"] = {k: payload[k] for k in ("dtypes", "size", "chain", "steps", "seed", "threads")}


if __name__ == "__main__":
    sys.exit(contract.run(PROBE, build_parser(), body))
