"""``container_identity``: every rank of a Slurm launch proves which image it ran in.

With a container plugin (pyxis/enroot: ``srun --container-image``) a rank runs inside the
image only where the plugin is configured on that node; a node whose slurmd lacks it runs
the same command on the bare host, silently. So every rank prints the identity the image
carries:

- the marker file (``/etc/nvtest-image-id``, or ``$NVTEST_IMAGE_MARKER``): its first
  line, written when the image is built (``RUN echo "$TAG" > /etc/nvtest-image-id``);
- else the environment variable ``NVTEST_IMAGE_ID`` the image sets (``ENV``);

one line per rank, from :data:`IDENTITY_SCRIPT`::

    nvtest-rank rank=3 node=gpu002 image=pytorch-24.05-nvtest source=/etc/nvtest-image-id

Verdicts per rank (:func:`judge_identities`): no marker (``image=-``): **fail** "ran on
the host"; a marker other than the expected identity (``--image-id``), or, without one,
than the other ranks' majority: **fail**; a rank that printed nothing: **fail**. A node's
item fails when any of its ranks does.

:func:`identity` is the check itself (suites/config/test_container.py): one launch with the
transport's own multi-node launcher (:meth:`~nvtest.transports.base.Transport.multi_launcher`,
srun under Slurm) in its container image, once per run, each node judged on its ranks.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from nvtest.checks.api import Fleet, Judge, Node, NodeError, ProbeSkip
from nvtest.checks.config import ConfigFinding, record
from nvtest.checks.health import Outcome, apply
from nvtest.jobs.base import launch_nodes, require_launched
from nvtest.playbook.config_audit import REMEDIATION
from nvtest.session.phase import write_evidence
from nvtest.transports.base import MultiLauncher

__all__ = ["DEFAULT_MARKER", "IDENTITY_SCRIPT", "RankIdentity", "identity", "judge_identities", "parse_identities"]

#: Where the image carries its identity.
DEFAULT_MARKER = "/etc/nvtest-image-id"
#: What each rank runs (POSIX sh): one ``nvtest-rank`` line.
IDENTITY_SCRIPT = (
    'm="${NVTEST_IMAGE_MARKER:-/etc/nvtest-image-id}"; '
    'if [ -r "$m" ] && id=$(head -n 1 "$m") && [ -n "$id" ]; then src="$m"; '
    'elif [ -n "$NVTEST_IMAGE_ID" ]; then id="$NVTEST_IMAGE_ID"; src=env:NVTEST_IMAGE_ID; '
    "else id=-; src=none; fi; "
    'printf "nvtest-rank rank=%s node=%s image=%s source=%s\\n" '
    '"${SLURM_PROCID:-?}" "${SLURMD_NODENAME:-$(hostname)}" "$(printf %s "$id" | tr -s " \\t" "__")" "$src"'
)

_LINE = re.compile(r"nvtest-rank rank=(?P<rank>\S+) node=(?P<node>\S+) image=(?P<image>\S+) source=(?P<source>\S+)")


@dataclass(frozen=True)
class RankIdentity:
    """One rank's line: its rank, node, image identity (None: none) and where it was read."""

    rank: int
    node: str
    image: str | None
    source: str


def parse_identities(text: str) -> list[RankIdentity]:
    """Every ``nvtest-rank`` line of a launch's output (srun's labels and other lines ignored)."""
    out = []
    for line in text.splitlines():
        m = _LINE.search(line)
        if not m or not m.group("rank").isdigit():
            continue
        image = m.group("image")
        out.append(
            RankIdentity(int(m.group("rank")), m.group("node"), None if image == "-" else image, m.group("source"))
        )
    return out


def judge_identities(
    ranks: Sequence[RankIdentity],
    layout: Mapping[int, str],
    expected: str | None,
    source: str,
) -> dict[str, Outcome]:
    """Judge each node's ranks: node name -> :class:`Outcome`.

    ``layout``: rank -> the node it was launched on; ``expected``: the identity the run
    asks for (None: the majority of the ranks' identities is taken).
    """
    got = {r.rank: r for r in ranks}
    images = Counter(r.image for r in ranks if r.image)
    want = expected or (images.most_common(1)[0][0] if images else None)
    outs: dict[str, Outcome] = {n: Outcome() for n in dict.fromkeys(layout.values())}
    for rank, node in sorted(layout.items()):
        out = outs[node]
        r = got.get(rank)
        if r is None:
            record(
                out,
                ConfigFinding(
                    "fail",
                    f"rank {rank} (launched on {node}) printed no identity line",
                    source,
                    REMEDIATION["rank_missing"],
                ),
            )
            continue
        where = f"rank {rank} on {r.node}"
        if r.node != node:
            record(out, ConfigFinding("fail", f"{where}: launched on {node}", source, REMEDIATION["rank_missing"]))
        if r.image is None:
            record(
                out,
                ConfigFinding(
                    "fail",
                    f"{where} ran on the host: no {DEFAULT_MARKER} and no NVTEST_IMAGE_ID",
                    source,
                    REMEDIATION["rank_on_host"],
                ),
            )
        elif want is not None and r.image != want:
            whose = "the run asks for" if expected else "the other ranks report"
            record(
                out,
                ConfigFinding(
                    "fail",
                    f"{where} ran in image {r.image!r}; {whose} {want!r}",
                    source,
                    REMEDIATION["rank_wrong_image"],
                ),
            )
    for node, out in outs.items():
        mine = [got[k] for k, n in sorted(layout.items()) if n == node and k in got]
        out.details["ranks"] = [{"rank": r.rank, "node": r.node, "image": r.image, "source": r.source} for r in mine]
        out.details["expected_image"] = want
        if not out.failures:
            record(out, ConfigFinding("note", f"{len(mine)} rank(s) ran in image {want!r}", source))
    return outs


#: The evidence file of the identity launch (``logs/<node>/container-identity.log``).
EVIDENCE = "container-identity"


def _launch(fleet: Fleet, multi: MultiLauncher) -> tuple[dict[str, Outcome], dict[str, str]]:
    """One identity launch over the check's nodes: (node -> its outcome, node -> its log)."""
    ctx = fleet.ctx
    nodes = launch_nodes(ctx, "container_identity")
    facts = ctx.states[nodes[0].name].facts
    k = max(1, len(facts.gpus) if facts else 0)
    layout = {i * k + j: n.name for i, n in enumerate(nodes) for j in range(k)}
    env = {"NVTEST_IMAGE_MARKER": os.environ["NVTEST_IMAGE_MARKER"]} if os.environ.get("NVTEST_IMAGE_MARKER") else None
    res = multi.launch(nodes, ["sh", "-c", IDENTITY_SCRIPT], k, None, env, timeout_s=300 * ctx.config.timeout_scale)
    logs = {n.name: write_evidence(ctx.phases.run_dir, EVIDENCE, dataclasses.replace(res, node=n.name)) for n in nodes}
    ranks = parse_identities(res.stdout)
    if not ranks:  # no rank started at all: the launch itself failed (srun's words)
        words = (
            res.error
            or " | ".join(ln.strip() for ln in res.stderr.strip().splitlines()[-3:])
            or f"exit {res.exit_code}"
        )
        raise NodeError(f"the identity step started no rank: {words}")
    source = f"{res.command or 'srun'} (one rank per GPU: {IDENTITY_SCRIPT[:40]}...)"
    return judge_identities(ranks, layout, multi.image_id, source), logs


def identity(fleet: Fleet, node: Node, judge: Judge) -> None:
    """Check ``container_identity`` on ``node``: every rank it ran of the identity launch
    reported the run's image.

    Raises:
        ProbeSkip: the transport has no multi-node launcher of its own with a container
            plugin, or the run launches no container (ranks run on the host by design).
        NodeError: the node was down, left out of the launch, not part of it, or the launch
            started no rank (the launcher's words).
    """
    ctx = fleet.ctx
    multi = ctx.transport.multi_launcher()
    if multi is None:
        raise ProbeSkip(
            f"container identity is checked under Slurm with a container plugin; this run uses "
            f"the {ctx.transport.name} transport"
        )
    if not (multi.container_image or multi.image_id):
        raise ProbeSkip(
            "this run launches no container (neither --container-image nor --image-id): ranks run on the host by design"
        )
    if ctx.states[node.name].down_reason:
        raise NodeError(f"node unreachable: {ctx.states[node.name].down_reason}")
    # each rank's identity is its own node's: one node left is still judged
    require_launched(ctx, "container_identity", node, judge.detail, minimum=1)
    outs, logs = fleet.once("container_identity", lambda: _launch(fleet, multi))
    judge.log = logs.get(node.name)
    if node.name not in outs:
        raise NodeError("not part of the identity launch")
    apply(outs[node.name], judge)
