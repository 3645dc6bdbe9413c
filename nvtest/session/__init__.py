"""The state of one run, below the checks and jobs that use it: the run configuration and
context, the phase runner, node facts, and running a probe through the phase runner."""
