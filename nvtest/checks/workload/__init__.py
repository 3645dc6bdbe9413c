"""Judging of the workload checks: training smoke runs (training.py), inference serving (inference.py)."""
