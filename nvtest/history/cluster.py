"""Which cluster a record of the history belongs to: a node is known by (cluster, node).

Two clusters whose nodes are both called ``node1``, or a test run on a controller, must
never share a record, and "since the last run" must compare a node with its own past. The
cluster of a run is chosen once, at its start, and stated in results.json
(``run.history_cluster``, with ``run.history_cluster_source`` saying where it came from),
in this order:

1. the inventory's ``cluster:`` name (``source: inventory``);
2. Slurm's cluster name: ``$SLURM_CLUSTER_NAME`` (set in a job, a Prolog, a
   HealthCheckProgram), or, under ``--backend slurm``, ``ClusterName`` of
   ``scontrol show config`` (``source: slurm``);
3. a stable id of the run's own: ``local:<this host>`` under ``--backend local`` (this
   machine as a one-node cluster), ``inventory:<file name without .yaml>`` for an inventory
   file, else ``controller:<this host>`` (``source: stated``).

The gate (on the node) takes ``--cluster``, else ``$SLURM_CLUSTER_NAME``, else the
``ClusterName`` of the node's ``slurm.conf`` (``$SLURM_CONF`` or ``/etc/slurm/slurm.conf``,
a file read, no RPC), else ``local:<node>``: name the inventory's ``cluster:`` after the
Slurm cluster and a run's records and the gates' meet.

Records written before schema v3 carry the cluster ``''`` (not known).
"""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["SLURM_CONF_DEFAULT", "cluster_of_run", "run_cluster", "slurm_conf_cluster_name"]

#: Where slurm.conf is when ``$SLURM_CONF`` does not say.
SLURM_CONF_DEFAULT = "/etc/slurm/slurm.conf"
_CLUSTER_NAME = re.compile(r"^\s*ClusterName\s*=\s*(\S+)", re.I | re.M)


def _short_host() -> str:
    return socket.gethostname().split(".")[0] or "localhost"


def run_cluster(
    *,
    inventory_cluster: str | None,
    slurm_cluster: str | None,
    backend: str,
    inventory_file: str | None,
    host: str | None = None,
) -> tuple[str, str]:
    """(cluster, source) of a run, in the module's order; ``source`` is ``inventory``,
    ``slurm`` or ``stated``. ``host``: the controller's name (default: this host's)."""
    if inventory_cluster:
        return inventory_cluster, "inventory"
    if slurm_cluster:
        return slurm_cluster, "slurm"
    me = host or _short_host()
    if backend == "local":
        return f"local:{me}", "stated"
    if inventory_file:
        name = Path(inventory_file).name
        for ext in (".yaml", ".yml"):
            name = name.removesuffix(ext)
        return f"inventory:{name}", "stated"
    return f"controller:{me}", "stated"


def cluster_of_run(run: Mapping[str, Any]) -> str:
    """The cluster of a results.json ``run`` section: the one it states
    (``history_cluster``), else (a document from before clusters were stated) the one
    :func:`run_cluster` gives from its ``cluster``, ``backend``, ``inventory_file`` and
    ``host``."""
    stated = run.get("history_cluster")
    if isinstance(stated, str):
        return stated
    host = str(run.get("host") or "").split(".")[0] or None
    return run_cluster(
        inventory_cluster=run.get("cluster"),
        slurm_cluster=None,
        backend=str(run.get("backend") or ""),
        inventory_file=run.get("inventory_file"),
        host=host,
    )[0]


def slurm_conf_cluster_name(path: str | os.PathLike[str] | None = None) -> str | None:
    """``ClusterName`` of slurm.conf (``path``, else ``$SLURM_CONF``, else
    :data:`SLURM_CONF_DEFAULT`); None when the file is absent or does not name one. Reads at
    most the first 1 MiB (the name is near the top)."""
    where = Path(path or os.environ.get("SLURM_CONF") or SLURM_CONF_DEFAULT)
    try:
        with where.open("rb") as fh:
            text = fh.read(1 << 20).decode("utf-8", "replace")
    except OSError:
        return None
    m = _CLUSTER_NAME.search(text)
    return m.group(1) if m else None
