"""What the interconnect checks read of a node of the run: its GPUs and RDMA NICs as its PCI
bus and SKU profile say (never as a possibly failing tool says)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from nvtest.checks.hardware import expected_gpus
from nvtest.config.inventory import Node
from nvtest.config.thresholds import SkuProfile

if TYPE_CHECKING:
    from nvtest.session.context import RunContext

__all__ = ["expects", "gpus", "profile", "rdma_nics"]


def profile(ctx: RunContext, node: Node) -> SkuProfile | None:
    """The node's SKU profile (None: none matched)."""
    st = ctx.states[node.name]
    return st.match.profile if st.match else None


def gpus(ctx: RunContext, node: Node) -> int:
    """The GPUs the node must have (PCI bus, SKU, nvidia-smi): one rank each; 0 without facts."""
    st = ctx.states[node.name]
    if st.facts is None:
        return 0
    return expected_gpus(st.facts, profile(ctx, node)).count


def rdma_nics(ctx: RunContext, node: Node) -> int | None:
    """The RDMA NICs the node's SKU profile expects (``expect.ib_hcas``); None without a
    profile or without RDMA NICs. Where set, traffic that must cross the network is judged on
    the path NCCL took (:func:`nvtest.jobs.nccl.judge_run`, rule 4)."""
    prof = profile(ctx, node)
    return prof.expect.ib_hcas if prof is not None and prof.expect else None


def expects(ctx: RunContext, node: Node, key: str) -> bool:
    """The node's SKU profile ``expect.<key>`` (``nvls``, ``collnet``): NCCL's NVLS/CollNet
    lines are judged where True (:func:`nvtest.jobs.nccl.nvls_collnet_fails`); False without a
    profile."""
    prof = profile(ctx, node)
    return bool(prof is not None and prof.expect and getattr(prof.expect, key))
