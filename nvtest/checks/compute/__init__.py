"""The compute checks' orchestration (``suites/compute``): sdc.py, the fleet-wide comparison of
the same computation's digests on every GPU."""
