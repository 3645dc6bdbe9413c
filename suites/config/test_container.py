"""Every rank of a Slurm launch proves it ran inside the run's container image.

Under ``--backend slurm`` with ``--container-image`` (pyxis) or ``--image-id``, one srun
step launches the way the run's NCCL and MPI jobs do (one rank per GPU, block layout,
the same container options) and every rank prints the identity its image carries
(``/etc/nvtest-image-id``, else ``$NVTEST_IMAGE_ID``). A rank without one ran on the
host and fails its node; a rank in another image fails too. Runs that launch no
container skip with the reason.
"""

from __future__ import annotations

import dataclasses
import os

import pytest

from nvtest.checks.api import Judge, NodeError
from nvtest.checks.config.container import IDENTITY_SCRIPT, judge_identities, parse_identities
from nvtest.checks.health import Outcome, apply
from nvtest.jobs.base import fleet_cache, launch_nodes, require_launched
from nvtest.session.context import RunContext
from nvtest.session.phase import write_evidence
from nvtest.transports.options import SlurmOptions

EVIDENCE = "container-identity"


def _gpus(ctx: RunContext, name: str) -> int:
    facts = ctx.states[name].facts
    return len(facts.gpus) if facts else 0


def _launch(ctx: RunContext, opts: SlurmOptions) -> tuple[dict[str, Outcome], dict[str, str]]:
    nodes = launch_nodes(ctx, "container_identity")
    k = max(1, _gpus(ctx, nodes[0].name))
    layout = {i * k + j: n.name for i, n in enumerate(nodes) for j in range(k)}
    env = {"NVTEST_IMAGE_MARKER": os.environ["NVTEST_IMAGE_MARKER"]} if os.environ.get("NVTEST_IMAGE_MARKER") else None
    res = ctx.transport.launch_multi(  # type: ignore[attr-defined]
        nodes, ["sh", "-c", IDENTITY_SCRIPT], k, None, env, timeout_s=300 * ctx.config.timeout_scale
    )
    logs = {n.name: write_evidence(ctx.phases.run_dir, EVIDENCE, dataclasses.replace(res, node=n.name)) for n in nodes}
    ranks = parse_identities(res.stdout)
    if not ranks:  # no rank started at all: the launch itself failed (srun's words)
        words = res.error or " | ".join(ln.strip() for ln in res.stderr.strip().splitlines()[-3:]) or f"exit {res.exit_code}"
        raise NodeError(f"the identity step started no rank: {words}")
    source = f"{res.command or 'srun'} (one rank per GPU: {IDENTITY_SCRIPT[:40]}...)"
    return judge_identities(ranks, layout, opts.image_id, source), logs


@pytest.mark.check("container_identity", area="config", title="Every rank ran inside the container image")
def test_container_identity(node, judge: Judge, nvtest_context: RunContext) -> None:
    """A rank that reports no image identity (it ran on the host) or another image's fails its node."""
    ctx = nvtest_context
    opts = getattr(ctx.transport, "options", None)
    if getattr(ctx.transport, "name", "") != "slurm" or not isinstance(opts, SlurmOptions):
        pytest.skip(f"container identity is checked under Slurm with a container plugin; this run uses "
                    f"the {getattr(ctx.transport, 'name', '?')} transport")  # fmt: skip
    if not (opts.container_image or opts.image_id):
        pytest.skip("this run launches no container (neither --container-image nor --image-id): ranks run on the host by design")
    if ctx.states[node.name].down_reason:
        raise NodeError(f"node unreachable: {ctx.states[node.name].down_reason}")
    # each rank's identity is its own node's: one node left is still judged
    require_launched(ctx, "container_identity", node, judge.detail, minimum=1)
    outs, logs = fleet_cache(ctx).get("container_identity", lambda: _launch(ctx, opts))
    judge.log = logs.get(node.name)
    if node.name not in outs:
        raise NodeError("not part of the identity launch")
    apply(outs[node.name], judge)
