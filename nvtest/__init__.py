"""nvtest: a GPU cluster acceptance-test harness.

Run a suite of checks on every node of a cluster (local, SSH or Slurm), judge
each measurement against the thresholds of the node's SKU and against the rest
of the fleet, and write results.json, junit.xml and an HTML report.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
