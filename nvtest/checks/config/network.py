"""``nccl_interfaces``: the bootstrap and socket interfaces NCCL picks, predicted and seen.

NCCL picks its bootstrap interface (and, without IB, its socket transport's interfaces)
by NCCL's own rules (NCCL ``src/misc/socket.cc`` ``ncclFindInterfaces``, 2.x):

- ``NCCL_SOCKET_IFNAME`` set: the interfaces it names (``=a,b`` exact names, ``^a,b``
  every interface but those prefixes, ``^=a`` every interface but that name, ``a,b``
  prefixes); none: NCCL fails to start;
- unset: interfaces whose name starts with ``ib``; else any but ``docker*``, ``lo`` and
  (NCCL >= 2.28) ``virbr*``; else ``docker*``; else ``lo``; else ``virbr*``.

Only running interfaces (``LOWER_UP``) with an IPv4 or IPv6 address count; the
bootstrap uses the first (kernel order). :func:`predict` applies these rules to
``ip -d -j addr show`` (iproute2 >= 4.13) and the environment nvtest gives NCCL;
:func:`interfaces_from_log` reads what NCCL said it used (``NCCL INFO Bootstrap : Using
eth0:10.0.0.1<0>``, ``NET/Socket : Using [0]eth0:...``, ``NET/IB : Using [0]mlx5_0:1/IB
; OOB eth0:...``). :func:`judge_interfaces` judges either:

- a container or VM bridge, veth, tunnel or overlay (``linkinfo.info_kind`` bridge,
  veth, vxlan, tun, ip6tnl...; or the names docker*, virbr*, br-*, cni*, veth*,
  flannel*, cali*, vxlan*, podman*, ...): **fail**;
- an address outside the node's ``networks:`` (inventory): **fail**; no ``networks:``
  declared: **warn** (the interface cannot be judged against them);
- ``NCCL_SOCKET_IFNAME`` matching no usable interface: **fail**;
- an HCA in ``NCCL_IB_HCA`` that ``/sys/class/infiniband`` lacks: **fail**.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from nvtest.checks.config import ConfigFinding, record
from nvtest.checks.health import Outcome
from nvtest.jobs.base import node_recipe
from nvtest.jobs.nccl import NcclRecipe, nccl_env
from nvtest.playbook.config_audit import REMEDIATION

if TYPE_CHECKING:
    from nvtest.config.inventory import Node
    from nvtest.session.context import RunContext

__all__ = [
    "Interface",
    "NcclUse",
    "interfaces_from_ip_json",
    "nccl_env_on",
    "interfaces_from_log",
    "is_virtual",
    "judge_interfaces",
    "nccl_interfaces",
    "parse_ifname_spec",
    "predict",
    "seen_interfaces",
]

#: ``linkinfo.info_kind`` values of virtual links NCCL must not carry traffic over.
VIRTUAL_KINDS = frozenset(
    {
        "bridge",
        "veth",
        "vxlan",
        "tun",
        "tap",
        "ip6tnl",
        "ipip",
        "sit",
        "gre",
        "gretap",
        "ip6gre",
        "geneve",
        "wireguard",
        "macvtap",
        "dummy",
        "vrf",
        "nlmon",
    }
)
#: Name prefixes of container/VM bridges, veths and overlays (where ``-d`` details are absent).
VIRTUAL_PREFIXES = (
    "docker",
    "virbr",
    "br-",
    "cni",
    "veth",
    "flannel",
    "cali",
    "vxlan",
    "podman",
    "lxcbr",
    "lxdbr",
    "kube-",
    "weave",
    "tunl",
    "tun",
    "tap",
    "ip6tnl",
    "sit",
    "gre",
    "vnet",
    "wg",
    "tailscale",
    "cilium",
    "genev",
    "nerdctl",
)


@dataclass(frozen=True)
class Interface:
    """One network interface as ``ip -d -j addr show`` prints it.

    ``running``: ``LOWER_UP`` in its flags (NCCL's ``IFF_RUNNING``); ``addresses``: its
    IPv4 and IPv6 addresses (IPv6 loopback left out, as NCCL does); ``kind``: its
    ``linkinfo.info_kind`` (None: a plain device, or no ``-d``).
    """

    name: str
    running: bool
    addresses: tuple[str, ...]
    kind: str | None = None
    master: str | None = None


@dataclass(frozen=True)
class NcclUse:
    """An interface NCCL uses: its role (``bootstrap``, ``socket``, ``oob``) and address."""

    role: str
    name: str
    address: str | None


def is_virtual(name: str, kind: str | None = None) -> bool:
    """True for a container/VM bridge, veth, tunnel or overlay (by link kind, else by name)."""
    if kind:
        return kind in VIRTUAL_KINDS
    return name.startswith(VIRTUAL_PREFIXES)


def interfaces_from_ip_json(text: str) -> list[Interface]:
    """Read ``ip [-d] -j addr show`` (a JSON list of links with ``addr_info``).

    Raises:
        ValueError: the text is not that JSON.
    """
    data = json.loads(text)
    if not isinstance(data, list):
        raise ValueError("ip -j addr: not a JSON list")
    out = []
    for link in data:
        if not isinstance(link, dict) or "ifname" not in link:
            continue
        addrs = []
        for a in link.get("addr_info") or []:
            if a.get("family") not in ("inet", "inet6") or not a.get("local"):
                continue
            if a["family"] == "inet6" and a["local"] == "::1":
                continue
            addrs.append(str(a["local"]))
        info = link.get("linkinfo") or {}
        out.append(
            Interface(
                name=str(link["ifname"]),
                running="LOWER_UP" in (link.get("flags") or []),
                addresses=tuple(addrs),
                kind=info.get("info_kind"),
                master=link.get("master"),
            )
        )
    return out


def parse_ifname_spec(spec: str) -> tuple[bool, bool, list[str]]:
    """``NCCL_SOCKET_IFNAME`` -> (exclude, exact, names): ``^=eth0,eth1`` -> (True, True, [...])."""
    exclude = spec.startswith("^")
    s = spec[1:] if exclude else spec
    exact = s.startswith("=")
    s = s[1:] if exact else s
    names = [n.split(":")[0] for n in s.split(",") if n.split(":")[0]]
    return exclude, exact, names


def _select(ifaces: Sequence[Interface], spec: str) -> list[Interface]:
    exclude, exact, names = parse_ifname_spec(spec)

    def hit(name: str) -> bool:
        return any((name == n) if exact else name.startswith(n) for n in names) if names else True

    return [i for i in ifaces if i.running and i.addresses and (hit(i.name) != exclude)]


def predict(ifaces: Sequence[Interface], env: Mapping[str, str]) -> tuple[list[Interface], str]:
    """The interfaces NCCL would use with ``env`` (first = bootstrap), and the rule that chose them."""
    spec = env.get("NCCL_SOCKET_IFNAME") or ""
    if len(spec) > 1:
        return _select(ifaces, spec), f"NCCL_SOCKET_IFNAME={spec}"
    for rule in ("ib", "^docker,lo,virbr", "docker", "lo", "virbr"):
        found = _select(ifaces, rule)
        if found:
            return found, f"NCCL's default order (matched {rule!r})"
    return [], "NCCL's default order (nothing matched)"


_USING = re.compile(r"NCCL INFO (?P<what>Bootstrap|NET/Socket)\s*: Using (?P<rest>.*)$")
_IB = re.compile(r"NCCL INFO NET/IB : Using .*?; OOB (?P<rest>\S+)")
_ENTRY = re.compile(r"(?:\[\d+\])?(?P<name>[^\s:\[\]]+):(?P<addr>[^<\s]+)<\d+>")


def interfaces_from_log(text: str) -> list[NcclUse]:
    """The interfaces NCCL's INFO lines say it used (distinct (role, name, address))."""
    seen: list[NcclUse] = []
    for line in text.splitlines():
        m = _USING.search(line)
        ib = _IB.search(line) if m is None else None
        if m is None and ib is None:
            continue
        role = "oob" if ib else ("bootstrap" if m and m.group("what") == "Bootstrap" else "socket")
        rest = ib.group("rest") if ib else (m.group("rest") if m else "")
        for e in _ENTRY.finditer(rest):
            addr = e.group("addr").split("%")[0]
            use = NcclUse(role, e.group("name"), addr)
            if use not in seen:
                seen.append(use)
    return seen


def _in_networks(address: str, networks: Sequence[str]) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in ipaddress.ip_network(n, strict=False) for n in networks)


def judge_interfaces(
    out: Outcome,
    uses: Iterable[NcclUse],
    networks: Sequence[str],
    source: str,
    kinds: Mapping[str, str | None] | None = None,
) -> None:
    """Judge the interfaces NCCL uses (predicted or seen): bridges fail; addresses outside
    ``networks`` fail; no ``networks`` declared warns once. ``kinds``: name -> link kind."""
    undeclared = False
    for u in uses:
        what = f"NCCL {u.role} interface {u.name}" + (f" ({u.address})" if u.address else "")
        if is_virtual(u.name, (kinds or {}).get(u.name)):
            kind = (kinds or {}).get(u.name) or "bridge/veth/tunnel by its name"
            record(
                out,
                ConfigFinding(
                    "fail",
                    f"{what} is a container or VM link ({kind})",
                    source,
                    REMEDIATION["nccl_bridge"].format(name="<the node's data interface>"),
                ),
            )
            continue
        if not networks:
            undeclared = True
            continue
        link_local = u.address is not None and u.address.lower().startswith("fe80:")
        if u.address and not link_local and not _in_networks(u.address, networks):
            record(
                out,
                ConfigFinding(
                    "fail",
                    f"{what} is outside the node's networks {', '.join(networks)}",
                    source,
                    REMEDIATION["nccl_outside_networks"],
                ),
            )
    if undeclared:
        record(
            out,
            ConfigFinding(
                "warn",
                "the inventory declares no networks: for this node, so the address NCCL uses "
                "is judged for bridges only",
                "inventory (networks:)",
                REMEDIATION["nccl_networks_undeclared"],
            ),
        )


def _hca_findings(out: Outcome, env: Mapping[str, str], infiniband: Sequence[str] | None, source: str) -> None:
    spec = env.get("NCCL_IB_HCA") or ""
    if len(spec) <= 1:
        return
    exclude, _exact, names = parse_ifname_spec(spec)
    if exclude:
        return
    have = set(infiniband or ())
    for name in names:
        if name not in have:
            record(
                out,
                ConfigFinding(
                    "fail",
                    f"NCCL_IB_HCA={spec} names {name}, which this node does not have "
                    f"(it has: {', '.join(sorted(have)) or 'no HCA'})",
                    source,
                    REMEDIATION["nccl_hca_missing"].format(name=name),
                ),
            )


def nccl_interfaces(
    ip_text: str | None,
    ip_words: str,
    env: Mapping[str, str],
    networks: Sequence[str],
    infiniband: Sequence[str] | None,
    *,
    ip_source: str = "ip -d -j addr show",
    ib_source: str = "/sys/class/infiniband",
) -> Outcome:
    """Predict and judge the interfaces NCCL picks on one node with the environment ``env``.

    ``ip_text``: ``ip -d -j addr show`` output (None: the tool did not report, ``ip_words``
    says why: an ``error``); ``networks``: the node's inventory networks (CIDR);
    ``infiniband``: the HCA names of ``/sys/class/infiniband`` (None: none).
    """
    out = Outcome()
    try:
        ifaces = interfaces_from_ip_json(ip_text) if ip_text else None
    except ValueError as exc:
        ifaces, ip_words = None, f"unreadable ip -j output: {exc}"
    if ifaces is None:
        out.error = f"the node's interfaces could not be listed: {ip_words}"
        return out
    chosen, rule = predict(ifaces, env)
    source = f"{ip_source}; {rule}"
    nccl_env = {k: v for k, v in env.items() if k in ("NCCL_SOCKET_IFNAME", "NCCL_IB_HCA", "NCCL_SOCKET_FAMILY")}
    out.details["nccl_interfaces"] = {
        "effective_env": nccl_env,
        "rule": rule,
        "predicted": [{"name": i.name, "addresses": list(i.addresses), "kind": i.kind} for i in chosen],
        "networks": list(networks),
    }
    if not chosen:
        record(
            out,
            ConfigFinding(
                "fail",
                f"NCCL would find no usable interface ({rule}): running interfaces with an "
                f"address: {', '.join(i.name for i in ifaces if i.running and i.addresses) or 'none'}",
                source,
                REMEDIATION["nccl_no_interface"],
            ),
        )
    else:
        uses = [
            NcclUse("bootstrap" if n == 0 else "socket", i.name, i.addresses[0] if i.addresses else None)
            for n, i in enumerate(chosen)
        ]
        judge_interfaces(out, uses, networks, source, {i.name: i.kind for i in ifaces})
        if not out.failures:
            record(out, ConfigFinding("note", f"NCCL bootstrap on {chosen[0].name} ({rule})", source))
    _hca_findings(out, env, infiniband, ib_source)
    return out


def seen_interfaces(text: str, networks: Sequence[str], source: str = "NCCL INFO lines of the run") -> Outcome:
    """Judge the interfaces NCCL's own INFO lines in ``text`` say it used (none printed: nothing judged).

    For the NCCL checks: what ran, not what was asked. ``details["nccl_interfaces_seen"]``
    lists them.
    """
    out = Outcome()
    uses = interfaces_from_log(text)
    out.details["nccl_interfaces_seen"] = [{"role": u.role, "name": u.name, "address": u.address} for u in uses]
    if uses:
        judge_interfaces(out, uses, networks, source)
    return out


def nccl_env_on(ctx: RunContext, node: Node) -> dict[str, str]:
    """The environment nvtest gives NCCL on ``node`` (:func:`~nvtest.jobs.nccl.nccl_env` of the
    SKU recipe's ``nccl`` section, this process's NCCL variables and the node's inventory)."""
    recipe = NcclRecipe.from_recipe(node_recipe(ctx, node, "nccl"))
    return nccl_env(recipe, os.environ, nodes=[node])
