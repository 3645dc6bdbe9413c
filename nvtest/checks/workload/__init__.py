"""Judging of the workload checks (training smoke runs)."""
