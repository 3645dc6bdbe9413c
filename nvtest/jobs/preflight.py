"""Before a multi-node job: can its nodes reach each other the way its launcher will?

A job whose nodes cannot reach its rendezvous, or whose launcher cannot ssh to a node, does
not fail: it hangs (a torchrun rendezvous waits out its join timeout, 10+ minutes; mpirun's
daemons never call back). These checks take seconds, with ``reach_probe.py`` on the nodes,
and name the node and what it could not reach:

- :func:`rendezvous_preflight` (torchrun, ft_launcher; any transport): the first node listens
  on the rendezvous port, every other node resolves the rendezvous address and connects;
- :func:`ssh_preflight` (mpirun over the ssh transport): the node that starts mpirun runs
  ``ssh -F <the run's ssh config> <node> true`` to every node, as mpirun's ``plm_rsh`` will.

Each returns node -> why that node cannot take part (empty: all can). When no node reached
the rendezvous (or the launcher reached no node), the host (or launcher) is named as well:
its address, firewall or ssh client is the one thing they share.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from nvtest.config.inventory import Node
from nvtest.errors import ProbeError
from nvtest.jobs.base import probe_argv, run_commands
from nvtest.session.probe import parse_probe_json
from nvtest.transports.base import CommandResult

if TYPE_CHECKING:
    from nvtest.session.context import RunContext

__all__ = ["rendezvous_preflight", "ssh_preflight"]

#: Seconds the rendezvous host listens; peers give up connecting a little earlier.
LISTEN_S = 10.0
CONNECT_S = 8.0
#: Seconds each ssh of the launcher's preflight may take to connect.
SSH_S = 10.0


def _why(res: CommandResult) -> str:
    """The probe's reason, or why it printed none."""
    if not res.completed:
        return f"the preflight did not finish: {res.error}"
    try:
        doc = parse_probe_json(res)
    except ProbeError as exc:
        return str(exc)
    return str(doc.get("reason") or "unknown").removeprefix("ProbeError: ")


def rendezvous_preflight(
    ctx: RunContext, key: str, nodes: Sequence[Node], host: Node, addr: str, port: int
) -> dict[str, str]:
    """node -> what it could not reach, for a rendezvous on ``addr:port`` hosted by ``host``
    (phase ``<key>.reach``; see the module text). Empty for one node."""
    peers = [n for n in nodes if n.name != host.name]
    if not peers:
        return {}
    commands = {
        host.name: probe_argv(
            ctx,
            host,
            "reach_probe.py",
            "listen",
            "--port",
            str(port),
            "--peers",
            str(len(peers)),
            "--timeout-s",
            f"{LISTEN_S:g}",
        ),
        **{
            n.name: probe_argv(
                ctx,
                n,
                "reach_probe.py",
                "connect",
                "--host",
                addr,
                "--port",
                str(port),
                "--name",
                n.name,
                "--timeout-s",
                f"{CONNECT_S:g}",
            )
            for n in peers
        },
    }
    results = run_commands(ctx, f"{key}.reach", [host, *peers], commands, timeout_s=LISTEN_S + 20)
    where = f"the rendezvous {addr}:{port} on {host.name}"
    failed: dict[str, str] = {}
    listener = results[host.name]
    if not listener.completed or listener.exit_code != 0:
        failed[host.name] = f"rendezvous preflight: {host.name} could not host {where}: {_why(listener)}"
    for n in peers:
        res = results[n.name]
        if not res.completed or res.exit_code != 0:
            failed[n.name] = f"rendezvous preflight: {n.name} could not reach {where}: {_why(res)}"
    if host.name not in failed and all(n.name in failed for n in peers):
        failed[host.name] = (
            f"rendezvous preflight: no other node could reach {where}: check {host.name}'s "
            f"address ({addr}) and its firewall"
        )
    return failed


def ssh_preflight(ctx: RunContext, key: str, launcher: Node, nodes: Sequence[Node], config: str) -> dict[str, str]:
    """node -> why ``launcher`` could not ssh to it with ``config`` (phase
    ``<key>.ssh``; see the module text). Every node of ``nodes`` is tried, the
    launcher itself included (mpirun starts its daemon there by ssh too)."""
    names = [n.name for n in nodes]
    command = probe_argv(
        ctx,
        launcher,
        "reach_probe.py",
        "ssh",
        "--config",
        config,
        "--hosts",
        ",".join(names),
        "--timeout-s",
        f"{SSH_S:g}",
    )
    res = run_commands(ctx, f"{key}.ssh", [launcher], {launcher.name: command}, timeout_s=SSH_S + 60)[launcher.name]
    try:
        doc = parse_probe_json(res) if res.completed else None
    except ProbeError:
        doc = None
    if doc is None:
        return {launcher.name: f"node-to-node ssh preflight on {launcher.name} printed no result: {_why(res)}"}
    failed = {
        str(r["host"]): f"node-to-node ssh from {launcher.name} to {r['host']} failed: {r.get('reason')}"
        for r in doc.get("results") or []
        if r.get("status") == "error"
    }
    others = [n for n in names if n != launcher.name]
    if others and all(n in failed for n in others) and launcher.name not in failed:
        failed[launcher.name] = (
            f"node-to-node ssh from {launcher.name} reached no other node: check its ssh client and keys"
        )
    return failed
