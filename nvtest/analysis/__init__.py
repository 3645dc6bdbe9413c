"""After the measurements: fleet outliers, systemic failures, diagnoses, re-evaluation,
comparison of runs, and :func:`~nvtest.analysis.finish.finish_run` (the one place a run ends)."""
