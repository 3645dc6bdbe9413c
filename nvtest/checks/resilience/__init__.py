"""Controller side of the resilience checks: recipes, probe definitions, drill judging, recovery
timelines from the ranks' event logs, and the effective-training-time model (docs/resilience.md)."""
