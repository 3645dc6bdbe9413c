"""What the suites call to judge: the check API (:mod:`nvtest.checks.api`, where a check
author starts) and one package per area: health, config, memory, interconnect, workload, resilience."""
