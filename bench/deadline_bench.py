"""How far past a command's deadline each transport returns, by what the command's children do.

For each transport (``local``; ``ssh`` on a simulated node: a real sshd on loopback; ``slurm``
on the throw-away test Slurm when it can start here, ``--slurm``) and each case, runs the
command with a deadline of ``--timeout`` seconds and records how long the call took past it:

- ``sleep``: a plain ``sleep 600`` (dies at SIGTERM);
- ``escaped``: two children that ignore SIGTERM and hold the output open, one that called
  ``setsid()`` and one double-forked into a daemon (so only the task token finds it);
- ``unkillable``: a child frozen by the cgroup-v1 freezer (real state D; needs root and
  ``/sys/fs/cgroup/freezer``), reported as ``unkillable``.

The kill grace is the transports' default (3 s): ``sleep`` costs the kill's round trip,
``escaped`` one grace (SIGTERM ignored), ``unkillable`` two (SIGTERM, then SIGKILL and the
wait that finds the survivor). Prints one table row per (transport, case): the median and
the worst time past the deadline over ``--repeat`` runs, and the result's ``failure``.

Usage::

    python bench/deadline_bench.py [--timeout 2] [--repeat 3] [--slurm]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from nvtest.config.inventory import Node
from nvtest.testing.sshd_cluster import SSHDCluster, sshd_unavailable_reason
from nvtest.testing.wedged import Freezer, freezer_unavailable_reason
from nvtest.transports.base import Transport
from nvtest.transports.local import LocalTransport
from nvtest.transports.ssh import SSHTransport

_ESCAPE = """
import os, signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
os.setsid()
if sys.argv[1] == "daemon" and os.fork():
    os._exit(0)
time.sleep(600)
"""


def _cases(tmp: Path) -> dict[str, Callable[[], contextlib.AbstractContextManager[str]]]:
    script = tmp / "escape.py"
    script.write_text(_ESCAPE)
    py = sys.executable

    @contextlib.contextmanager
    def plain() -> Iterator[str]:
        yield "sleep 600"

    @contextlib.contextmanager
    def escaped() -> Iterator[str]:
        yield f"{py} {script} setsid & {py} {script} daemon & wait"

    @contextlib.contextmanager
    def unkillable() -> Iterator[str]:
        with Freezer() as freezer:
            yield f"{freezer.wedge_command()}; sleep 600"

    cases: dict[str, Callable[[], contextlib.AbstractContextManager[str]]] = {
        "sleep": plain,
        "escaped": escaped,
    }
    if freezer_unavailable_reason() is None:
        cases["unkillable"] = unkillable
    else:
        print(f"# no unkillable case: {freezer_unavailable_reason()}")
    return cases


def _measure(transport: Transport, node: Node, command: str, timeout_s: float) -> tuple[float, str]:
    t0 = time.monotonic()
    res = transport.run([node], command, timeout_s=timeout_s)[node.name]
    return time.monotonic() - t0 - timeout_s, str(res.failure)


def _targets(stack: contextlib.ExitStack, slurm: bool) -> list[tuple[str, Transport, Node]]:
    out: list[tuple[str, Transport, Node]] = [("local", LocalTransport(), Node("local"))]
    if sshd_unavailable_reason() is None:
        cluster = stack.enter_context(SSHDCluster(1, prefix="bench"))
        ssh = SSHTransport(known_hosts=str(cluster.known_hosts_path))
        stack.callback(ssh.close)
        out.append(("ssh", ssh, cluster.inventory().nodes[0]))
    else:
        print(f"# no ssh: {sshd_unavailable_reason()}")
    if slurm:
        from nvtest.testing.slurm_cluster import SlurmCluster
        from nvtest.transports.slurm import SlurmTransport

        sim = stack.enter_context(SlurmCluster(nodes=("node1", "node2"), partition="nvt"))
        stack.enter_context(sim.activated())
        transport = SlurmTransport(run_id="deadline-bench")
        stack.callback(transport.close)
        out.append(("slurm", transport, Node("node1")))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--timeout", type=float, default=2.0, help="each command's deadline, seconds")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--slurm", action="store_true", help="also under the test Slurm (root)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        cases = _cases(Path(tmp))
        targets = _targets(stack, args.slurm)
        print(f"deadline {args.timeout:g} s, kill grace 3 s, {args.repeat} runs each")
        print(f"{'transport':<10} {'case':<11} {'past deadline median s':>23} {'worst s':>8}  failure")
        for name, transport, node in targets:
            for case, make in cases.items():
                overs, kinds = [], set()
                for _ in range(args.repeat):
                    with make() as command:
                        over, kind = _measure(transport, node, command, args.timeout)
                    overs.append(over)
                    kinds.add(kind)
                print(
                    f"{name:<10} {case:<11} {statistics.median(overs):>23.2f} {max(overs):>8.2f}"
                    f"  {','.join(sorted(kinds))}"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
