"""Start a simulated cluster of N sshd nodes on loopback and keep it up until Ctrl-C.

Usage: ``python scripts/demo_cluster.py [N]`` (``make demo-cluster`` starts 4).
Prints the inventory, ssh config and known_hosts it wrote, and the commands
that use them.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time

from nvtest.testing.sshd_cluster import SSHDCluster, sshd_unavailable_reason


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Simulated cluster: one real sshd per node on loopback.")
    parser.add_argument("n", nargs="?", type=int, default=4, help="number of nodes (default 4)")
    parser.add_argument("--prefix", default="node", help="node name prefix (default node)")
    args = parser.parse_args(argv)
    reason = sshd_unavailable_reason()
    if reason:
        print(f"demo-cluster: {reason}", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    t0 = time.monotonic()
    # the nodes run probes with this interpreter (the one with nvtest's node-side
    # packages: numpy, torch, nvidia-resiliency-ext), as an inventory's `python:` would
    with SSHDCluster(args.n, prefix=args.prefix, python=sys.executable) as cluster:
        home = cluster.client_home()
        first = cluster.nodes[0]
        print(f"{args.n} nodes up in {time.monotonic() - t0:.1f} s: {cluster.hostlist}")
        print(f"  {first.name} is sshd on {first.address}:{first.port}; logs in {cluster.dir}/<node>/sshd.log\n")
        print(f"inventory    {cluster.inventory_path}   (node-side python: {sys.executable})")
        print(f"ssh config   {cluster.ssh_config_path}")
        print(f"known_hosts  {cluster.known_hosts_path}")
        print(f"HOME         {home}   (.ssh/config includes the ssh config; .ssh/known_hosts trusts the nodes)\n")
        print("Try:")
        print(f"  HOME={home} nvtest run --backend ssh --inventory {cluster.inventory_path} --suite delivery")
        print(f"  HOME={home} nvtest run --backend ssh --nodes '{cluster.hostlist}' --suite quick")
        print(f"  ssh -F {cluster.ssh_config_path} {first.name} uname -a")
        print(f"  clush -w '{cluster.hostlist}' -o '-F {cluster.ssh_config_path}' uname -r")
        print("\nCtrl-C stops every node and removes the directory.", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            print("\nstopping", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
