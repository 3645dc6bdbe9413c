"""The pair check judges every bandwidth row of perftest's output for plausibility, not only
the best one (issue 24, class 6): a row at -27 Gb/s beside good rows is ``error``, as
``nvtest parse`` says of the same output (nvtest.jobs.pair_jobs.implausible_rows, shared)."""

from __future__ import annotations

from pathlib import Path

import yaml

from nvtest.jobs.pair_jobs import PerftestPairJob
from nvtest.session.context import RunConfig, RunContext
from nvtest.transports.base import CommandResult
from tests.conftest import CORPUS

GOOD = (CORPUS / "perftest" / "ib_write_bw-roce-a-sweep-2B-8MB-mixed-tab-formatting.txt").read_text(encoding="utf-8")
BAD = GOOD.replace(
    " 8388608    5000             52.52              52.52 ", " 8388608    5000             -27.00             -27.00"
)


def test_a_negative_row_beside_good_ones_is_an_error_not_a_pass(tmp_path: Path) -> None:
    assert BAD != GOOD
    inv = tmp_path / "inventory.yaml"
    inv.write_text(yaml.safe_dump({"nodes": [{"names": "gpu01"}]}))
    ctx = RunContext.from_config(
        RunConfig(run_id="p", run_dir=str(tmp_path / "run"), backend="local", inventory=str(inv))
    )
    try:
        job = PerftestPairJob(ctx, hcas=lambda n: ["mlx5_0"], recipe=lambda n: {}, gpus=lambda n: 0)
        for text, verdict in ((GOOD, "pass"), (BAD, "error")):
            out = job.judge_complete(
                ("gpu01", "gpu01"),
                "mlx5_0",
                {"gpu01": CommandResult("gpu01", "ib_write_bw", stdout=text, exit_code=0)},
                "ib_write_bw",
            )
            assert out.status == verdict, out
        assert "implausible: -27 Gb/s" in out.reason and out.value == 52.51
    finally:
        ctx.close(interrupted=False)
