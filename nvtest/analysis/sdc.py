"""Silent data corruption across the fleet: each GPU's output bits against its configuration group.

Every GPU of every node runs the same deterministic workloads (``sdc_probe.py``:
a GEMM chain per dtype, a few training steps of the smoke model) and reports a
sha256 digest of the output bits. Bits are only expected to agree between GPUs
whose computation is the same down to the kernels: the probe reports what
determines them (``config``: GPU model, driver, CUDA, cuDNN, torch; on a CPU the
CPU model, torch's CPU capability, BLAS and the thread count), and a group here
is one workload (name, dtype, shape, steps, seed) on one configuration.

Within a group of ``n`` digests (GPUs whose probe failed are ``error`` and not
counted):

- ``n == 1``: ``warn``, nothing could be compared;
  (on a CPU fleet each node's CPU is one device, and the messages say CPU)
- a digest held by a strict majority (``count * 2 > n``): its GPUs pass, every
  other GPU fails, "outputs differ from N other GPUs of the same configuration:
  silent data corruption suspected", with its node, index and serial;
- no strict majority (2 GPUs that differ, a 2-2 split): every GPU of the group
  fails, since none can prove it is right.

A GPU that is wrong the same way every time passes the burn-in's repetition
check on its own and is found only here, against its peers. Groups of the same
workload whose configurations differ may legitimately produce different bits:
that is a configuration difference, reported as such (:attr:`SdcReport.config_differences`),
never as corruption.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from nvtest.verdict import Verdict

__all__ = ["Digest", "Group", "SdcFinding", "SdcReport", "compare", "digests_from_docs", "run_warnings"]

#: Workload keys that are parameters of the computation (part of the group key).
WORKLOAD_PARAMS = ("name", "dtype", "size", "chain", "steps", "seed")


@dataclass(frozen=True)
class Digest:
    """One GPU's digest of one workload.

    Attributes:
        node: node name. device: ``cuda:N`` or ``cpu``. index: CUDA index (None on a CPU).
        serial: board serial (NVML), None where unknown.
        workload: ``{"name", "dtype", ...parameters}`` of the computation.
        config: what determines the bits on this device (from the probe).
        digest: sha256 hex of the output bits; None when the probe failed (``error``).
    """

    node: str
    device: str
    index: int | None
    serial: str | None
    workload: tuple[tuple[str, str], ...]
    config: tuple[tuple[str, str], ...]
    digest: str | None
    error: str | None = None

    @property
    def key(self) -> tuple[Any, ...]:
        """The group key: the workload and the configuration."""
        return (self.workload, self.config)

    @property
    def where(self) -> str:
        """``node017 cuda:3 (index 3, serial 1654922008321)``."""
        bits = []
        if self.index is not None:
            bits.append(f"index {self.index}")
        bits.append(f"serial {self.serial}" if self.serial else "serial unknown")
        return f"{self.node} {self.device} ({', '.join(bits)})"

    @property
    def kind(self) -> str:
        """``GPU``, or ``CPU`` for a host processor (the CPU fleet's device)."""
        return "CPU" if self.device == "cpu" else "GPU"

    @property
    def workload_label(self) -> str:
        """``gemm_chain fp32`` style name of the workload."""
        w = dict(self.workload)
        return f"{w.get('name', '?')} {w.get('dtype', '')}".strip()


@dataclass
class Group:
    """The digests of one workload on one configuration."""

    workload: tuple[tuple[str, str], ...]
    config: tuple[tuple[str, str], ...]
    members: list[Digest] = field(default_factory=list)

    @property
    def counts(self) -> Counter[str]:
        return Counter(d.digest for d in self.members if d.digest is not None)

    @property
    def majority(self) -> str | None:
        """The digest held by more than half of the compared GPUs, or None."""
        counts = self.counts
        n = sum(counts.values())
        if not counts:
            return None
        top, c = counts.most_common(1)[0]
        return top if c * 2 > n else None

    def to_json(self) -> dict[str, Any]:
        return {
            "workload": dict(self.workload),
            "config": dict(self.config),
            "gpus": len([d for d in self.members if d.digest is not None]),
            "distinct_digests": len(self.counts),
            "majority_digest": self.majority,
            "members": [
                {
                    "node": d.node,
                    "device": d.device,
                    "index": d.index,
                    "serial": d.serial,
                    "digest": d.digest,
                    "error": d.error,
                }
                for d in self.members
            ],
        }


@dataclass(frozen=True)
class SdcFinding:
    """The verdict of one GPU's digest of one workload, and why."""

    digest: Digest
    verdict: Verdict
    reason: str
    agreeing: int
    compared: int


@dataclass
class SdcReport:
    """Every finding, the groups, and the configuration differences between groups."""

    findings: list[SdcFinding]
    groups: list[Group]
    config_differences: list[str]

    def for_node(self, node: str) -> list[SdcFinding]:
        """The findings of ``node``'s devices (an index built on first use: one report
        serves every node's item without a pass over the fleet each)."""
        index = self.__dict__.get("_by_node")
        if index is None:
            index = {}
            for f in self.findings:
                index.setdefault(f.digest.node, []).append(f)
            self.__dict__["_by_node"] = index
        return list(index.get(node, ()))


def _items(mapping: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((str(k), str(v)) for k, v in mapping.items()))


def digests_from_docs(docs: Mapping[str, Mapping[str, Any]]) -> list[Digest]:
    """The :class:`Digest` records of ``sdc_probe.py`` documents, node -> document.

    A result entry without workloads (that GPU's process failed) gives one
    record with ``digest`` None and the entry's reason.
    """
    out: list[Digest] = []
    for node, doc in sorted(docs.items()):
        for r in doc.get("results") or []:
            base = {
                "node": node,
                "device": str(r.get("device") or "?"),
                "index": r.get("index"),
                "serial": r.get("serial"),
                "config": _items(r.get("config") or {}),
            }
            works = r.get("workloads") or []
            if r.get("status") not in (None, "ok") or not works:
                out.append(
                    Digest(
                        **base,
                        workload=(("name", "all"),),
                        digest=None,
                        error=str(r.get("reason") or f"status {r.get('status')}"),
                    )
                )
                continue
            for w in works:
                wl = _items({k: w[k] for k in WORKLOAD_PARAMS if k in w})
                out.append(Digest(**base, workload=wl, digest=w.get("digest")))
    return out


def _judge_group(g: Group) -> list[SdcFinding]:
    ok = [d for d in g.members if d.digest is not None]
    found = [
        SdcFinding(d, Verdict.ERROR, f"{d.where}: no digest: {d.error}", 0, 0) for d in g.members if d.digest is None
    ]
    n = len(ok)
    if n == 1:
        d = ok[0]
        found.append(
            SdcFinding(
                d,
                Verdict.WARN,
                (
                    f"{d.workload_label} on {d.where}: the only {d.kind} of its configuration in this run, "
                    "nothing could be compared"
                ),
                0,
                0,
            )
        )
        return found
    counts, major = g.counts, g.majority
    for d in ok:
        assert d.digest is not None
        same = counts[d.digest] - 1
        if major is None:
            split = "/".join(str(c) for _, c in counts.most_common())
            found.append(
                SdcFinding(
                    d,
                    Verdict.FAIL,
                    (
                        f"{d.workload_label} on {d.where}: no majority among the {n} {d.kind}s of the same "
                        f"configuration (outputs split {split}): silent data corruption suspected on at "
                        "least one; compare each with a known-good GPU"
                    ),
                    same,
                    n - 1,
                )
            )
        elif d.digest != major:
            found.append(
                SdcFinding(
                    d,
                    Verdict.FAIL,
                    (
                        f"{d.workload_label} on {d.where}: outputs differ from {counts[major]} other {d.kind}s "
                        f"of the same configuration: silent data corruption suspected "
                        f"(digest {d.digest[:12]}, majority {major[:12]})"
                    ),
                    same,
                    n - 1,
                )
            )
        else:
            found.append(
                SdcFinding(
                    d,
                    Verdict.PASS,
                    (
                        f"{d.workload_label} on {d.where}: bit-identical to {same} other {d.kind}s of the "
                        "same configuration"
                    ),
                    same,
                    n - 1,
                )
            )
    return found


def _config_differences(groups: Sequence[Group]) -> list[str]:
    """One line per pair of groups of the same workload whose configurations and outputs differ."""
    lines = []
    by_work: dict[Any, list[Group]] = {}
    for g in groups:
        if g.counts:
            by_work.setdefault(g.workload, []).append(g)
    for work, gs in by_work.items():
        w = dict(work)
        label = f"{w.get('name', '?')} {w.get('dtype', '')}".strip()
        for i, a in enumerate(gs):
            for b in gs[i + 1 :]:
                da, db = a.majority or a.counts.most_common(1)[0][0], b.majority or b.counts.most_common(1)[0][0]
                if da == db:
                    continue
                ca, cb = dict(a.config), dict(b.config)
                keys = sorted(k for k in set(ca) | set(cb) if ca.get(k) != cb.get(k))
                diff = ", ".join(f"{k} {ca.get(k)} vs {cb.get(k)}" for k in keys)
                kind = a.members[0].kind
                lines.append(
                    f"{label}: {sum(a.counts.values())} {kind}s ({_nodes(a)}) and "
                    f"{sum(b.counts.values())} {kind}s ({_nodes(b)}) give different outputs on "
                    f"different configurations ({diff}): a configuration difference, not corruption"
                )
    return lines


def _nodes(g: Group) -> str:
    names = sorted({d.node for d in g.members if d.digest is not None})
    return ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")


def compare(digests: Iterable[Digest]) -> SdcReport:
    """Group the digests by workload and configuration and judge each GPU (see the module doc)."""
    groups: dict[Any, Group] = {}
    for d in digests:
        groups.setdefault(d.key, Group(d.workload, d.config)).members.append(d)
    ordered = [groups[k] for k in sorted(groups, key=repr)]
    findings = [f for g in ordered for f in _judge_group(g)]
    return SdcReport(findings, ordered, _config_differences(ordered))


def run_warnings(results: Iterable[Mapping[str, Any]]) -> list[str]:
    """``sdc: ...`` run warnings: the configuration differences the ``sdc`` items recorded (deduplicated)."""
    seen: list[str] = []
    for r in results:
        if r.get("check") != "sdc":
            continue
        for line in ((r.get("details") or {}).get("sdc") or {}).get("config_differences") or []:
            text = f"sdc: {line}"
            if text not in seen:
                seen.append(text)
    return seen
