"""The operating verbs: the same checks every day, after acceptance.

- :mod:`nvtest.ops.gate`: ``nvtest gate``, a node-local passive verdict in seconds for
  Slurm's Prolog/Epilog/HealthCheckProgram (drain and resume with ``nvtest:`` reasons);
- :mod:`nvtest.ops.sweep`: ``nvtest sweep``, active suites as low-priority Slurm jobs on
  idle nodes, at most N out of service, with a circuit breaker;
- :mod:`nvtest.ops.export`: ``nvtest export --prometheus``, node_exporter textfile metrics.
- :mod:`nvtest.ops.evidence`: ``nvtest evidence``, every GPU capture and probe and the
  delivery and burn-in suites on this node, brought back sanitised (docs/gpu-evidence.md).

A layer below the CLI and above the checks: it reuses the pure health logic of
:mod:`nvtest.checks.health`, the parsers, the SKU catalog, the playbook, the Slurm client
and the history store; nothing below imports it.
"""
