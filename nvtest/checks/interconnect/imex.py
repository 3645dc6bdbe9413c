"""Multi-node NVLink (GB200 NVL72): the IMEX channel and domain, and the bandwidth across nodes.

A GPU shares memory with GPUs of other trays over NVLink only through IMEX (NVIDIA's
Internode Memory Exchange, the ``nvidia-imex`` service): the process needs an IMEX channel
(``/dev/nvidia-caps-imex-channels/channelN``, created by the driver with
``NVreg_CreateImexChannel0=1`` or by the job's prolog), and the service must see every node of
its domain ``READY`` and connected. Without a channel CUDA's ``cuMemCreate`` of fabric memory
fails with ``CUDA_ERROR_NOT_PERMITTED``: what nvbandwidth's multi-node test then prints
(NVIDIA/nvbandwidth#39). Sources of the formats: the IMEX guide's ``nvidia-imex-ctl``
(docs.nvidia.com/multi-node-nvlink-systems/imex-guide/cmdservice.html) and the ``-N`` output
AWS PCS documents for a healthy p6e-gb200 UltraServer (tests/data/standin/INDEX.md).

- :data:`IMEX_SCRIPT` (run on the node) prints ``### channels``, ``### service`` and ``### ctl``
  sections; :func:`imex_health` judges them: no channel, the service not active, a node of the
  domain not ``READY``, a connection not ``C``, ``Domain State`` other than ``UP``, or
  ``nvidia-imex-ctl`` failing fail the item with the tool's own words.
- :func:`read_imex_ctl` reads ``nvidia-imex-ctl -N``'s text (:class:`ImexDomain`).
- :func:`multinode_bandwidth` judges one multi-node nvbandwidth run
  (``multinode_device_to_device_memcpy_read_ce``, one rank per GPU, ranks placed in node
  order): per GPU the slowest read from any other GPU, GB/s (metric ``mn_read_ce_gbps``); the
  tool's own failure (``[CUDA_ERROR_NOT_PERMITTED] ... on <host>, rank = N``) fails the node it
  names and leaves the others unmeasured with the words.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from nvtest.checks.health import Outcome
from nvtest.errors import ParseError
from nvtest.parsers import nvbandwidth
from nvtest.text import last_words

__all__ = [
    "IMEX_SCRIPT",
    "MN_READ_CASE",
    "ImexDomain",
    "ImexNode",
    "NodeBandwidth",
    "imex_health",
    "multinode_bandwidth",
    "read_imex_ctl",
]

#: Shell run on the node: the channel devices, the service's state, the domain's status
#: (``dev/`` under ``$NVTEST_SYSFS_ROOT``, default ``/``: the test seam of the sysfs readers).
IMEX_SCRIPT = r"""
root="${NVTEST_SYSFS_ROOT:-}"; root="${root%/}"
echo '### channels'; ls -1 "$root"/dev/nvidia-caps-imex-channels 2>&1
echo '### service'; systemctl is-active nvidia-imex 2>&1
echo '### ctl'; nvidia-imex-ctl -N 2>&1; echo "exit=$?"
true
"""

#: nvbandwidth's multi-node peer read (copy engine), one rank per GPU (nvbandwidth README).
MN_READ_CASE = "multinode_device_to_device_memcpy_read_ce"

_NODE = re.compile(
    r"^Node #(?P<index>\d+)\s+-\s+(?P<address>\S+)\s+-\s+(?P<state>[A-Z_]+)(?:\s+-\s+Version:\s*(?P<version>\S+))?"
)
_ROW = re.compile(r"^\s*(?P<src>\d+)\s+(?P<cells>(?:\S+\s*)+)$")
_DOMAIN = re.compile(r"^Domain State:\s*(?P<state>\S+)")
_EXIT = re.compile(r"^exit=(?P<code>\d+)\s*$", re.M)


@dataclass(frozen=True)
class ImexNode:
    """One ``Node #N - <address> - <STATE> [- Version: V]`` line."""

    index: int
    address: str
    state: str
    version: str | None = None


@dataclass(frozen=True)
class ImexDomain:
    """``nvidia-imex-ctl -N``: the nodes, the connectivity table (from -> to -> code) and the
    domain state (None: the tool printed none)."""

    nodes: tuple[ImexNode, ...] = ()
    links: Mapping[int, Mapping[int, str]] = field(default_factory=dict)
    state: str | None = None

    def problems(self) -> list[str]:
        """What is not healthy: nodes not READY, connections not ``C``, a domain not ``UP``."""
        out = [f"IMEX node #{n.index} ({n.address}) is {n.state}" for n in self.nodes if n.state != "READY"]
        bad = [
            f"{a}->{b} {code}"
            for a, row in sorted(self.links.items())
            for b, code in sorted(row.items())
            if code != "C"
        ]
        if bad:
            out.append(
                f"IMEX connections not connected (C): {', '.join(bad[:8])}"
                + (f" (+{len(bad) - 8} more)" if len(bad) > 8 else "")
            )
        if self.state != "UP":
            out.append(f"IMEX Domain State: {self.state or 'not reported'}")
        return out


def read_imex_ctl(text: str) -> ImexDomain:
    """Read ``nvidia-imex-ctl -N``'s formatted output (legend, timestamp, ``Nodes:``, the
    ``Nodes From\\To`` table, ``Domain State:``).

    Raises:
        ParseError: no ``Nodes:`` section and no ``Domain State:`` line (not its output).
    """
    nodes: list[ImexNode] = []
    links: dict[int, dict[int, str]] = {}
    state = None
    columns: list[int] | None = None
    seen = False
    for line in text.splitlines():
        s = line.strip()
        if s == "Nodes:":
            seen = True
        elif m := _NODE.match(s):
            nodes.append(ImexNode(int(m["index"]), m["address"], m["state"], m["version"]))
        elif s.startswith("Nodes From\\To"):
            columns = [int(x) for x in s.split()[2:] if x.isdigit()]
        elif (m := _DOMAIN.match(s)) is not None:
            state, seen = m["state"], True
        elif columns is not None and (m := _ROW.match(line)) is not None:
            codes = m["cells"].split()
            if len(codes) == len(columns):
                links[int(m["src"])] = dict(zip(columns, codes, strict=True))
    if not seen:
        raise ParseError(
            "nvidia-imex-ctl", "no 'Nodes:' section or 'Domain State:' line", expected="nvidia-imex-ctl -N output"
        )
    return ImexDomain(tuple(nodes), links, state)


def _words(text: str) -> str:
    return last_words(_EXIT.sub("", text))


def imex_health(sections: Mapping[str, str]) -> Outcome:
    """Judge :data:`IMEX_SCRIPT`'s sections (``channels``, ``service``, ``ctl``)."""
    out = Outcome()
    channels = [c for c in (sections.get("channels") or "").split() if re.fullmatch(r"channel\d+", c)]
    out.details["imex_channels"] = channels
    if not channels:
        out.fail(
            "no IMEX channel: /dev/nvidia-caps-imex-channels has no channelN "
            f"({_words(sections.get('channels') or '')}): CUDA's fabric memory calls fail with "
            "CUDA_ERROR_NOT_PERMITTED"
        )
    service = (sections.get("service") or "").strip().splitlines()
    state = service[-1].strip() if service else "no answer"
    out.details["imex_service"] = state
    if state != "active":
        out.fail(f"nvidia-imex service is {state} (systemctl is-active nvidia-imex)")
    ctl = sections.get("ctl") or ""
    code = _EXIT.search(ctl)
    out.details["imex_ctl_exit"] = int(code["code"]) if code else None
    try:
        domain = read_imex_ctl(ctl)
    except ParseError:
        out.fail(f"nvidia-imex-ctl -N exit {code['code'] if code else '?'}: {_words(ctl)}")
        return out
    out.details["imex_nodes"] = [
        {"index": n.index, "address": n.address, "state": n.state, "version": n.version} for n in domain.nodes
    ]
    out.details["imex_domain_state"] = domain.state
    for problem in domain.problems():
        out.fail(problem)
    return out


@dataclass(frozen=True)
class NodeBandwidth:
    """One node's share of a multi-node nvbandwidth run: per local GPU the slowest peer read
    (GB/s), or why the node has none (``failed``: the tool named this node; ``unmeasured``:
    it failed elsewhere or printed no matrix)."""

    values: tuple[tuple[int, float], ...] = ()
    failed: str | None = None
    unmeasured: str | None = None


_ON_HOST = re.compile(r"\bon (?P<host>[\w.\-]+), rank = (?P<rank>\d+)")


def multinode_bandwidth(
    text: str, layout: Sequence[tuple[str, int]], node_of_host: Mapping[str, str]
) -> dict[str, NodeBandwidth]:
    """Each node's :class:`NodeBandwidth` from one multi-node nvbandwidth run.

    ``layout``: (node, GPUs) in rank order (ranks 0.. on the first node, and so on);
    ``node_of_host``: the host name a failure line names -> the node (unknown hosts name none).
    """
    ranks: dict[int, tuple[str, int]] = {}
    for node, gpus in layout:
        for local in range(gpus):
            ranks[len(ranks)] = (node, local)
    nodes = [n for n, _ in layout]
    try:
        result = nvbandwidth.parse(text)
    except ParseError as exc:
        why = f"nvbandwidth printed no report: {_words(text)} ({exc})"
        return {n: NodeBandwidth(unmeasured=why) for n in nodes}
    out: dict[str, NodeBandwidth] = {}
    if result.failure is not None:
        m = _ON_HOST.search(result.failure.message)
        named = node_of_host.get(m["host"]) if m else None
        if named is None and m is not None:
            named = ranks.get(int(m["rank"]), (None, 0))[0]
        words = f"nvbandwidth: {result.failure.reason}"
        for n in nodes:
            out[n] = (
                NodeBandwidth(failed=words)
                if n == named or named is None
                else NodeBandwidth(unmeasured=f"not measured: the multi-node run failed on {named}: {words}")
            )
        return out
    case = result.testcase(MN_READ_CASE)
    if case is None or not case.matrices:
        return {n: NodeBandwidth(unmeasured=f"nvbandwidth ran no {MN_READ_CASE} ({_words(text)})") for n in nodes}
    m0 = case.matrices[0]
    per: dict[str, list[tuple[int, float]]] = {n: [] for n in nodes}
    for src, row in zip(m0.row_ids, m0.cells, strict=False):
        values = [v for dst, v in zip(m0.col_ids, row, strict=False) if v is not None and dst != src]
        if src in ranks and values:
            node, local = ranks[src]
            per[node].append((local, min(values)))
    for n in nodes:
        out[n] = (
            NodeBandwidth(tuple(per[n]))
            if per[n]
            else NodeBandwidth(unmeasured=f"no row of the {MN_READ_CASE} matrix for its GPUs")
        )
    return out
