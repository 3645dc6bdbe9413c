"""Which nodes a run targets, and how to reach each: the inventory file and ``--nodes``.

An inventory file (YAML) names nodes with hostlist expressions (``gpu[001-128]``,
expanded by ClusterShell's NodeSet) and gives per-group or per-node settings::

    cluster: rack07
    defaults: {user: root, python: python3, sku: h100-sxm-80gb}
    nodes:
      - names: gpu[001-064]
        tags: {rack: r07a}
      - names: gpu[065-128]
        tags: {rack: r07b}
      - names: gpu017
        address: 10.0.0.17
        port: 2222
      - names: gpu[001-128]
        socket_ifname: ens1f0            # NCCL_SOCKET_IFNAME==ens1f0 for this node
        ib_hca: [mlx5_0, mlx5_1]         # NCCL_IB_HCA==mlx5_0,mlx5_1
        networks: [10.10.0.0/16]         # where its bootstrap/socket interface must be

Later entries override earlier ones for the same node; ``defaults`` comes first.
Top-level ``known_hosts`` is the SSH known_hosts file of the run (relative to the
inventory file; ``--known-hosts`` overrides it); ``max_nodes`` raises the limit on
how many nodes the file may name (:data:`DEFAULT_MAX_NODES`, or ``NVTEST_MAX_NODES``).
A hostlist is counted before it is expanded, so ``gpu[1-100000000]`` is an error at
once, not gigabytes of names.
``socket_ifname``, ``ib_hca`` and ``networks`` are what the node's NCCL traffic
should use: nvtest sets ``NCCL_SOCKET_IFNAME``/``NCCL_IB_HCA`` from them in the exact-match
form (``=name``), and the ``nccl_interfaces`` check judges the interfaces against them.
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ClusterShell.NodeSet import NodeSet, NodeSetParseError
from pydantic import BaseModel, ConfigDict, Field, field_validator

from nvtest.config.loader import limit_from_env, load_yaml_with_lines, validate_model
from nvtest.errors import ConfigError

__all__ = [
    "DEFAULT_MAX_NODES",
    "Inventory",
    "InventoryFile",
    "Node",
    "NodeSettings",
    "expand_hostlist",
    "fold_hostlist",
    "hostlist_size",
    "load_inventory",
    "select_nodes",
]

#: Most nodes an inventory or ``--nodes`` may name (``NVTEST_MAX_NODES``, or the
#: inventory's ``max_nodes:``, sets another limit).
DEFAULT_MAX_NODES = 65536


@dataclass(frozen=True)
class Node:
    """One node of the cluster under test.

    Attributes:
        name: the node's name in reports (``gpu017``).
        address: host or IP to connect to; None means ``name`` (or ~/.ssh/config).
        port: SSH port; None means the SSH config's or 22.
        user: SSH user; None means the SSH config's or the current user.
        key_file: path of a private key file; never logged.
        python: the node-side Python interpreter used to run probes.
        sku: a forced SKU profile name; None means detect from the node's inventory.
        tags: free labels (``rack``, ``rail``) shown and filterable in the report.
        probe_dir: a shared path where the probes already are; None means ship them.
        socket_ifname: the interface names NCCL's bootstrap and socket traffic must use on
            this node (``NCCL_SOCKET_IFNAME==<names>``); () means NCCL picks.
        ib_hca: the HCAs (``mlx5_0`` or ``mlx5_0:1``) NCCL's IB transport must use
            (``NCCL_IB_HCA==<names>``); () means NCCL picks.
        networks: the IP networks (CIDR) the node's NCCL interfaces must be in; () means
            not declared (the interface is then judged for bridges only).
    """

    name: str
    address: str | None = None
    port: int | None = None
    user: str | None = None
    key_file: str | None = None
    python: str = "python3"
    sku: str | None = None
    tags: Mapping[str, str] = field(default_factory=dict)
    probe_dir: str | None = None
    socket_ifname: tuple[str, ...] = ()
    ib_hca: tuple[str, ...] = ()
    networks: tuple[str, ...] = ()

    def public_dict(self) -> dict[str, Any]:
        """The node's settings for reports: everything but the key file path."""
        return {
            "name": self.name,
            "address": self.address,
            "port": self.port,
            "user": self.user,
            "python": self.python,
            "sku": self.sku,
            "tags": dict(self.tags),
            "socket_ifname": list(self.socket_ifname),
            "ib_hca": list(self.ib_hca),
            "networks": list(self.networks),
        }


class NodeSettings(BaseModel):
    """Settings that a group entry or ``defaults`` gives its nodes."""

    model_config = ConfigDict(extra="forbid")

    address: str | None = None
    port: int | None = Field(default=None, ge=1, le=65535)
    user: str | None = None
    key_file: str | None = None
    python: str | None = None
    sku: str | None = None
    tags: dict[str, str] | None = None
    probe_dir: str | None = None
    socket_ifname: tuple[str, ...] | None = None
    ib_hca: tuple[str, ...] | None = None
    networks: tuple[str, ...] | None = None

    @field_validator("socket_ifname", "ib_hca", mode="before")
    @classmethod
    def _names(cls, value: Any) -> Any:
        """``eth0`` or ``eth0,eth1`` or a list; a leading ``=`` (NCCL's exact form) is dropped."""
        if value is None:
            return None
        items = value.split(",") if isinstance(value, str) else list(value)
        names = [str(v).strip().lstrip("=") for v in items if str(v).strip().lstrip("=")]
        for name in names:
            if any(c.isspace() or c in "^=," for c in name):
                raise ValueError(f"not an interface or HCA name: {name!r}")
        return tuple(names)

    @field_validator("networks", mode="before")
    @classmethod
    def _networks(cls, value: Any) -> Any:
        """CIDR networks (``10.10.0.0/16``, ``fd00::/64``), normalised."""
        if value is None:
            return None
        items = [value] if isinstance(value, str) else list(value)
        out = []
        for item in items:
            try:
                out.append(str(ipaddress.ip_network(str(item).strip(), strict=False)))
            except ValueError as exc:
                raise ValueError(f"not an IP network: {item!r} ({exc})") from None
        return tuple(out)


class NodeEntry(NodeSettings):
    """One ``nodes:`` entry: a hostlist expression and its settings."""

    names: str


class InventoryFile(BaseModel):
    """The schema of an inventory YAML file."""

    model_config = ConfigDict(extra="forbid")

    cluster: str | None = None
    known_hosts: str | None = Field(default=None, description="SSH known_hosts file, relative to this file")
    max_nodes: int | None = Field(default=None, gt=0, description="most nodes this file may name")
    defaults: NodeSettings = NodeSettings()
    nodes: list[NodeEntry]


@dataclass(frozen=True)
class Inventory:
    """The nodes of a run, in a stable sorted order, and the cluster name.

    ``sku_lines``: each SKU name the file gives -> the line of its first ``sku:``;
    ``known_hosts``: the file's ``known_hosts`` (absolute), or None.
    """

    nodes: tuple[Node, ...]
    cluster: str | None = None
    source: str | None = None
    sku_lines: Mapping[str, int] = field(default_factory=dict)
    known_hosts: str | None = None

    def names(self) -> list[str]:
        return [n.name for n in self.nodes]

    def by_name(self) -> dict[str, Node]:
        return {n.name: n for n in self.nodes}


#: Longest node name accepted: a DNS name is at most 253 characters.
MAX_NODE_NAME = 253


def max_nodes_limit() -> int:
    """The node limit: ``NVTEST_MAX_NODES``, else :data:`DEFAULT_MAX_NODES`.

    Raises:
        ConfigError: ``NVTEST_MAX_NODES`` is not a positive integer.
    """
    return limit_from_env("NVTEST_MAX_NODES", DEFAULT_MAX_NODES)


#: A single node name: no brackets, commas or set operators (NodeSet would return it as is).
_PLAIN_NAME = re.compile(r"[A-Za-z0-9._-]+")
_RANGE = re.compile(r"^\s*(\d+)\s*(?:-\s*(\d+)\s*)?(?:/\s*(\d+)\s*)?$")


def hostlist_size(expr: str) -> int:
    """How many names the hostlist ``expr`` can expand to, read from its syntax alone.

    An upper bound (set operators ``!``, ``&``, ``^`` and duplicates are counted as
    additions), computed without expanding anything: ``gpu[1-100000000]`` is 10^8 in
    microseconds, where ClusterShell's NodeSet would build every name first.
    """
    total = 0
    for pattern in re.split(r"[,!&^](?![^\[]*\])", expr):
        n = 1
        for group in re.findall(r"\[([^\]]*)\]", pattern):
            count = 0
            for item in group.split(","):
                m = _RANGE.match(item)
                if m is None:
                    count += 1
                    continue
                lo, hi, step = int(m.group(1)), int(m.group(2) or m.group(1)), int(m.group(3) or 1)
                count += (hi - lo) // max(step, 1) + 1 if hi >= lo else 1
            n *= max(count, 1)
        total += n
    return total


def expand_hostlist(expr: str, max_nodes: int | None = None) -> list[str]:
    """Expand ``gpu[001-004],login1`` into names, sorted as NodeSet sorts them.

    ``max_nodes``: the most names accepted (default :func:`max_nodes_limit`); the
    expression is counted (:func:`hostlist_size`) before it is expanded.

    Raises:
        ConfigError: the expression is not a valid hostlist, or names more than ``max_nodes``.
    """
    if not expr.strip():
        raise ConfigError("empty hostlist", field="nodes")
    limit = max_nodes if max_nodes is not None else max_nodes_limit()
    size = hostlist_size(expr)
    if size > limit:
        raise ConfigError(
            f"hostlist {expr[:60]!r} names {size} nodes, more than the limit of {limit} "
            "(max_nodes: in the inventory, or NVTEST_MAX_NODES, sets another)",
            field="nodes",
        )
    try:
        names = [expr.strip()] if _PLAIN_NAME.fullmatch(expr.strip()) else list(NodeSet(expr))
    except (NodeSetParseError, ValueError) as exc:
        raise ConfigError(f"invalid hostlist {expr!r}: {exc}", field="nodes") from exc
    if not names:
        raise ConfigError(f"hostlist {expr!r} names no node", field="nodes")
    for name in names:
        if len(name) > MAX_NODE_NAME:
            raise ConfigError(
                f"node name of {len(name)} characters (at most {MAX_NODE_NAME}): {name[:40]}...", field="nodes"
            )
    return names


def fold_hostlist(names: list[str]) -> str:
    """Fold node names back into a hostlist expression (``gpu[001-004]``)."""
    return str(NodeSet.fromlist(names)) if names else ""


def _merge(base: dict[str, Any], settings: NodeSettings) -> dict[str, Any]:
    out = dict(base)
    for key, value in settings.model_dump(exclude_none=True).items():
        if key == "names":
            continue
        if key == "tags":
            out["tags"] = {**out.get("tags", {}), **value}
        else:
            out[key] = value
    return out


def build_inventory(spec: InventoryFile, *, source: str | None = None, lines: dict | None = None) -> Inventory:
    """Expand an :class:`InventoryFile` into nodes (later entries override earlier).

    Raises:
        ConfigError: a bad hostlist, or more nodes than the limit (file, line, field).
    """
    lines = lines or {}
    limit = spec.max_nodes or max_nodes_limit()
    merged: dict[str, dict[str, Any]] = {}
    sku_lines: dict[str, int] = {}
    if spec.defaults.sku and ("defaults", "sku") in lines:
        sku_lines[spec.defaults.sku] = lines[("defaults", "sku")]
    for i, entry in enumerate(spec.nodes):
        line, fld = lines.get(("nodes", i, "names")), f"nodes.{i}.names"
        try:
            names = expand_hostlist(entry.names, max_nodes=limit)
        except ConfigError as exc:
            raise ConfigError(exc.reason, path=source, line=line, field=fld) from exc
        if entry.sku and ("nodes", i, "sku") in lines:
            sku_lines.setdefault(entry.sku, lines[("nodes", i, "sku")])
        for name in names:
            base = merged.get(name) or _merge({}, spec.defaults)
            merged[name] = _merge(base, entry)
        if len(merged) > limit:
            raise ConfigError(
                f"the inventory names {len(merged)} nodes up to here, more than the limit of {limit} "
                "(max_nodes: in the file, or NVTEST_MAX_NODES, sets another)",
                path=source,
                line=line,
                field=fld,
            )
    nodes = tuple(
        Node(name=name, **{k: v for k, v in merged[name].items()}) for name in sorted(merged, key=_natural_key)
    )
    known_hosts = None
    if spec.known_hosts:
        kh = Path(os.path.expanduser(spec.known_hosts))
        known_hosts = str(kh if kh.is_absolute() or source is None else Path(source).parent / kh)
    return Inventory(nodes=nodes, cluster=spec.cluster, source=source, sku_lines=sku_lines, known_hosts=known_hosts)


def _natural_key(name: str) -> tuple[Any, ...]:
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name))


def load_inventory(path: Path) -> Inventory:
    """Read and validate an inventory file.

    Raises:
        ConfigError: naming the file, the line and the field of the first problem.
    """
    data, lines = load_yaml_with_lines(path)
    if data is None:
        raise ConfigError("inventory file is empty", path=str(path))
    spec = validate_model(InventoryFile, data, path=str(path), lines=lines)
    if not spec.nodes:
        raise ConfigError("no nodes: `nodes:` is empty", path=str(path), line=lines.get(("nodes",)), field="nodes")
    return build_inventory(spec, source=str(path), lines=lines)


def select_nodes(inventory: Inventory, expr: str) -> Inventory:
    """The nodes of ``inventory`` named by the hostlist ``expr`` (``--inventory`` with ``--nodes``).

    Raises:
        ConfigError: ``expr`` is not a valid hostlist, or names a node the inventory lacks.
    """
    wanted = expand_hostlist(expr)
    known = inventory.by_name()
    missing = [n for n in wanted if n not in known]
    if missing:
        raise ConfigError(
            f"--nodes names {fold_hostlist(missing)}, not in the inventory", path=inventory.source, field="nodes"
        )
    chosen = set(wanted)
    return Inventory(
        nodes=tuple(n for n in inventory.nodes if n.name in chosen), cluster=inventory.cluster, source=inventory.source
    )


def inventory_from_hostlist(expr: str, **settings: Any) -> Inventory:
    """An inventory of the nodes of a hostlist expression, all with ``settings``."""
    names = expand_hostlist(expr)
    return Inventory(nodes=tuple(Node(name=n, **settings) for n in sorted(names, key=_natural_key)))
