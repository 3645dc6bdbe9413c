"""Every rank of a Slurm launch proves it ran inside the run's container image.

Under ``--backend slurm`` with ``--container-image`` (pyxis) or ``--image-id``, one srun
step launches the way the run's NCCL and MPI jobs do (one rank per GPU, block layout,
the same container options) and every rank prints the identity its image carries
(``/etc/nvtest-image-id``, else ``$NVTEST_IMAGE_ID``). A rank without one ran on the
host and fails its node; a rank in another image fails too. Runs that launch no
container skip with the reason.
The check is :func:`nvtest.checks.config.container.identity`.
"""

from __future__ import annotations

import pytest

from nvtest.checks.api import Fleet, Judge, Node
from nvtest.checks.config import container


@pytest.mark.check("container_identity", area="config", title="Every rank ran inside the container image")
def test_container_identity(node: Node, judge: Judge, fleet: Fleet) -> None:
    """A rank that reports no image identity (it ran on the host) or another image's fails its node."""
    container.identity(fleet, node, judge)
