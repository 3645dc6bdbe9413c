"""``nvtest export --prometheus DIR``: the latest verdicts and numbers per node from the
history, in node_exporter's textfile format (``DIR/nvtest.prom``), for the dashboards the
operators already have (docs/grafana-nvtest.json).

Series (all gauges):

- ``nvtest_check_verdict{check,node,sku}``: the latest verdict of a check on a node:
  ``-1`` skip, ``0`` pass, ``1`` warn, ``2`` unknown or error, ``3`` fail
  (alert on ``nvtest_check_verdict >= 3``);
- ``nvtest_check_timestamp_seconds{check,node}``: when that verdict was given (epoch s);
- ``nvtest_metric{check,metric,node,unit,labels}``: the latest value of each number, with
  its unit as a label and its own labels folded into ``labels`` (``dtype=bf16,gpu=0``):
  node_exporter wants one label set per metric family;
- ``nvtest_gate_duration_seconds{node}``: the wall time of the node's latest gate;
- ``nvtest_gate_config_error{node,file}``: ``1`` for each site file (or ``(command line)``)
  with a configuration error in the node's latest gate, ``0`` with ``file=""`` when it had
  none (alert on ``nvtest_gate_config_error == 1``: the gate judged what it could, and the
  checks that depend on the file were ``unknown``).

The file is written to a temporary name in ``DIR`` and renamed over ``nvtest.prom``, so
node_exporter never reads half a file. Built with prometheus_client's registry and
``generate_latest`` (the text exposition format 0.0.4).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from prometheus_client import CollectorRegistry, Gauge, generate_latest

from nvtest.history import HistoryStore
from nvtest.history.queries import NodeLatest, latest_per_node

__all__ = ["VERDICT_VALUE", "prometheus_text", "write_textfile"]

#: The number each verdict is exported as.
VERDICT_VALUE = {"skip": -1.0, "pass": 0.0, "warn": 1.0, "unknown": 2.0, "error": 2.0, "fail": 3.0}


def prometheus_text(latest: Iterable[NodeLatest]) -> bytes:
    """The textfile of the nodes' latest records (see the module docstring)."""
    reg = CollectorRegistry()
    verdict = Gauge(
        "nvtest_check_verdict",
        "Latest nvtest verdict: -1 skip, 0 pass, 1 warn, 2 unknown/error, 3 fail",
        ["check", "node", "sku"],
        registry=reg,
    )
    when = Gauge(
        "nvtest_check_timestamp_seconds",
        "When the latest verdict was given (epoch seconds)",
        ["check", "node"],
        registry=reg,
    )
    metric = Gauge(
        "nvtest_metric",
        "Latest value of an nvtest measurement, in the unit of its unit label",
        ["check", "metric", "node", "unit", "labels"],
        registry=reg,
    )
    gate = Gauge("nvtest_gate_duration_seconds", "Wall time of the node's latest nvtest gate", ["node"], registry=reg)
    config = Gauge(
        "nvtest_gate_config_error",
        '1 for each site file with a configuration error in the node\'s latest nvtest gate (0 with file="" when none)',
        ["node", "file"],
        registry=reg,
    )
    for nl in latest:
        for check, (v, t, _kind, values) in sorted(nl.checks.items()):
            verdict.labels(check=check, node=nl.node, sku=nl.sku or "").set(VERDICT_VALUE.get(v, 2.0))
            when.labels(check=check, node=nl.node).set(t)
            for name, labels, value, unit in values:
                if value is not None:
                    metric.labels(check=check, metric=name, node=nl.node, unit=unit or "", labels=labels).set(value)
        if nl.gate_duration_s is not None:
            gate.labels(node=nl.node).set(nl.gate_duration_s)
        for file, value in _config_errors(nl):
            config.labels(node=nl.node, file=file).set(value)
    return generate_latest(reg)


def _config_errors(nl: NodeLatest) -> list[tuple[str, float]]:
    """(file, 0 or 1) of the ``config_error`` metrics of the node's latest ``configuration``
    check (nvtest/ops/gate/config.py records them with the label ``file``)."""
    _v, _t, _kind, values = nl.checks.get("configuration", ("", 0.0, "", []))
    out = []
    for name, labels, value, _unit in values:
        if name == "config_error" and value is not None:
            file = labels.removeprefix("file=") if labels.startswith("file=") else ""  # its only label
            out.append((file, float(value)))
    return out


def write_textfile(
    store: HistoryStore, directory: Path, *, nodes: Sequence[str] = (), cluster: str | None = None
) -> Path:
    """Write ``directory/nvtest.prom`` atomically from ``store`` (only ``nodes`` if given;
    only ``cluster``'s records if given: a node is known by cluster and name).

    Raises:
        OSError: the directory cannot be written.
    """
    directory.mkdir(parents=True, exist_ok=True)
    latest = [nl for nl in latest_per_node(store, cluster=cluster) if not nodes or nl.node in nodes]
    target = directory / "nvtest.prom"
    tmp = directory / f".nvtest.prom.{os.getpid()}"
    try:
        tmp.write_bytes(prometheus_text(latest))
        tmp.chmod(0o644)
        tmp.replace(target)
    except OSError:
        tmp.unlink(missing_ok=True)
        raise
    return target
