"""Multi-node launches: torchrun, mpirun/srun MPMD, pair schedules and the pair runner, and
the per-run job cache that turns one launch into one share per node."""
