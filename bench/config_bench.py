"""Loading hostile and ordinary config files: nvtest's bounded loader beside the libraries.

Each case runs in its own process (so its peak memory is its own) with a wall-clock cap;
the table gives the outcome, the seconds of the load itself (imports excluded) and the
peak RSS of nvtest's loader (``load_inventory``: the bounded YAML reader, the hostlist
counted before expansion) and, beside it in the same run, of an unbounded reference:
the line-mapping walk over ``yaml.compose``'s node graph without bounds (the loader
before this one: every alias expanded, duplicate keys kept silently) and, for a
hostlist, ClusterShell ``NodeSet`` expansion of every name. A second table gives the cost
of judging one metric: ``evaluate()`` (threshold only) against ``assess()`` (declared,
plausible, then the threshold). Usage::

    python bench/config_bench.py [--cap 20] [--check]

``--check`` exits 1 when nvtest's loader needs more than 1 s for any hostile case.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _bomb(levels: int) -> str:
    out = ["a0: &a0 [" + ", ".join(['"lol"'] * 10) + "]"]
    out += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, levels)]
    return "\n".join(out) + "\nnodes:\n  - names: n1\n"


def _ordinary(n: int) -> str:
    lines = ["cluster: big", "defaults: {user: root, sku: h100-sxm-80gb}", "nodes:"]
    lines += [f"  - names: gpu{i:05d}\n    address: 10.{i // 65536}.{i // 256 % 256}.{i % 256}" for i in range(n)]
    return "\n".join(lines) + "\n"


CASES: list[tuple[str, str, str, bool]] = [
    # (name, file content or a path, the library baseline, hostile)
    ("alias bomb, 10^6 strings", _bomb(6), "walk", True),
    ("alias bomb, 10^9 strings", _bomb(9), "walk", True),
    ("hostlist gpu[1-1000000]", "nodes:\n  - names: gpu[1-1000000]\n", "nodeset", True),
    ("hostlist gpu[1-100000000]", "nodes:\n  - names: gpu[1-100000000]\n", "nodeset", True),
    ("duplicate key", "nodes:\n  - names: n1\n    port: 22\n    port: 2222\n", "walk", True),
    ("/dev/zero", "/dev/zero", "walk", True),
    ("ordinary: 20,000 nodes, one entry each", _ordinary(20000), "walk", False),
]

CHILD = r"""
import json, resource, sys, time
sys.path.insert(0, {root!r})
from pathlib import Path
import yaml
from ClusterShell.NodeSet import NodeSet
from nvtest.config.inventory import load_inventory
from nvtest.errors import ConfigError

def walk(node):  # the unbounded reference: expand everything, keep the last duplicate
    if isinstance(node, yaml.MappingNode):
        return {{walk(k): walk(v) for k, v in node.value}}
    if isinstance(node, yaml.SequenceNode):
        return [walk(v) for v in node.value]
    return yaml.SafeLoader(yaml.serialize(node)).get_single_data()

kind, path = sys.argv[1], sys.argv[2]
t = time.perf_counter()
try:
    if kind == "nvtest":
        try:
            outcome = f"{{len(load_inventory(Path(path)).nodes)}} nodes"
        except ConfigError as exc:
            outcome = "ConfigError line " + str(exc.line)
    elif kind == "walk":
        walk(yaml.compose(Path(path).read_text(), Loader=yaml.SafeLoader))
        outcome = "walked (no error)"
    else:
        expr = yaml.safe_load(Path(path).read_text())["nodes"][0]["names"]
        outcome = f"{{len(list(NodeSet(expr)))}} names built"
except MemoryError:
    outcome = "MemoryError"
except RecursionError:
    outcome = "RecursionError"
print(json.dumps({{"outcome": outcome, "s": time.perf_counter() - t,
                  "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}}))
"""


def run_case(kind: str, path: str, cap_s: float) -> dict:
    """One loader on one file in a child process, capped at ``cap_s`` seconds and 4 GiB."""
    code = CHILD.format(root=str(ROOT))

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))

    start = time.perf_counter()
    try:
        proc = subprocess.run(
            [sys.executable, "-c", code, kind, path],
            capture_output=True,
            text=True,
            timeout=cap_s,
            preexec_fn=limit,
        )
    except subprocess.TimeoutExpired:
        return {"outcome": f"killed after {cap_s:g} s", "s": cap_s, "rss_mib": float("nan")}
    if proc.returncode != 0 or not proc.stdout.strip():
        tail = (proc.stderr.strip().splitlines() or ["?"])[-1][:40]
        return {
            "outcome": f"crashed: {tail}",
            "s": time.perf_counter() - start,
            "rss_mib": float("nan"),
        }
    return json.loads(proc.stdout.strip().splitlines()[-1])


def judge_cost(n: int = 20000) -> tuple[float, float]:
    """Microseconds per metric: evaluate() and assess() on an h100 GEMM value."""
    from nvtest.config.metrics import Hardware
    from nvtest.config.skus import load_catalog
    from nvtest.config.thresholds import assess, evaluate

    prof = load_catalog().get("h100-sxm-80gb")
    hw = Hardware(profile=prof, gpu_pcie=((5, 16),) * 8, gpus=8)
    thr = prof.threshold("gemm", "bf16_tflops")
    t = time.perf_counter()
    for i in range(n):
        evaluate(700.0 + i % 7, "TFLOP/s", thr)
    old = (time.perf_counter() - t) / n * 1e6
    t = time.perf_counter()
    for i in range(n):
        assess("gemm", "bf16_tflops", 700.0 + i % 7, "TFLOP/s", prof, hw, {"device": "cuda:0"})
    return old, (time.perf_counter() - t) / n * 1e6


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cap", type=float, default=20.0, help="seconds a case may run")
    ap.add_argument("--check", action="store_true", help="exit 1 if a hostile case takes nvtest over 1 s")
    args = ap.parse_args(argv)
    print(f"load average {os.getloadavg()[0]:.2f}; cap {args.cap:g} s and 4 GiB per case")
    head = (
        f"{'case':40} {'nvtest load_inventory':34} {'s':>6} {'MiB':>6}   {'unbounded reference':30} {'s':>6} {'MiB':>6}"
    )
    print(head)
    print("-" * len(head))
    slow = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, content, base, hostile in CASES:
            path = content if content.startswith("/dev/") else str(Path(tmp) / "inv.yaml")
            if not content.startswith("/dev/"):
                Path(path).write_text(content)
            ours = run_case("nvtest", path, args.cap)
            lib = run_case(base, path, args.cap)
            if hostile and ours["s"] > 1.0:
                slow.append(name)
            print(
                f"{name:40} {ours['outcome'][:34]:34} {ours['s']:6.2f} {ours['rss_mib']:6.0f}   "
                f"{(base + ': ' + lib['outcome'])[:30]:30} {lib['s']:6.2f} {lib['rss_mib']:6.0f}"
            )
    old, new = judge_cost()
    print(f"\n{'judging one metric':40} {'us':>8}")
    print(f"{'evaluate() (threshold only)':40} {old:8.2f}")
    print(f"{'assess() (declared, plausible, threshold)':40} {new:8.2f}   ratio {new / old:.1f}x")
    if args.check and slow:
        print(f"over 1 s: {', '.join(slow)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
