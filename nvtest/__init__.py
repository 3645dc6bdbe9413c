"""nvtest: a GPU cluster acceptance-test harness.

Run a suite of checks on every node of a cluster (local, SSH or Slurm), judge
each measurement against the thresholds of the node's SKU and against the rest
of the fleet, and write results.json, junit.xml and an HTML report.

The names in :data:`__all__` are what a site's own checks and scripts may import
from ``nvtest`` (a test guards the list); everything else is internal and may move.
They load on first use, so ``import nvtest`` costs nothing:

- the check API: :class:`Probe`, :class:`Judge`, :class:`NodeFacts`, ``measure_probe``,
  ``raw_output``, ``parse_probe_json``, ``declare_metric`` (see ``docs/writing-checks.md``);
- the result records: :class:`CheckResult`, :class:`MetricResult`, :class:`Verdict`,
  ``load_results``;
- the parsers' entry point: ``parse``, ``detect``, ``tool_names``;
- the errors: :class:`NvtestError` and its tree (``nvtest.errors``).
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

#: public name -> the module that defines it
_EXPORTS: dict[str, str] = {
    # the check API
    "Judge": "nvtest.checks.api",
    "NodeFacts": "nvtest.checks.api",
    "Probe": "nvtest.checks.api",
    "declare_metric": "nvtest.checks.api",
    "measure_probe": "nvtest.checks.api",
    "parse_probe_json": "nvtest.checks.api",
    "raw_output": "nvtest.checks.api",
    # the result records
    "CheckResult": "nvtest.results",
    "MetricResult": "nvtest.results",
    "Verdict": "nvtest.verdict",
    "load_results": "nvtest.results",
    # the parsers' entry point
    "detect": "nvtest.parsers",
    "parse": "nvtest.parsers",
    "tool_names": "nvtest.parsers",
    # the errors
    "CheckFailed": "nvtest.errors",
    "ConfigError": "nvtest.errors",
    "NodeError": "nvtest.errors",
    "NvtestError": "nvtest.errors",
    "ParseError": "nvtest.errors",
    "ProbeError": "nvtest.errors",
    "ProbeSkip": "nvtest.errors",
    "TransportError": "nvtest.errors",
}

__all__ = ["__version__", *sorted(_EXPORTS)]


def __getattr__(name: str) -> Any:
    """Load a public name from its module on first use (PEP 562)."""
    try:
        module = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module 'nvtest' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
