"""Memory checks' logic: what the ``suites/memory/`` checks judge from a tool's report.

=================  ===================================================================
module             checks
=================  ===================================================================
``h2d``            nvbandwidth's host <-> GPU copies and peer reads (the h2d check)
=================  ===================================================================
"""
