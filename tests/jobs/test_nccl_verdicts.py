"""nccl-tests verdicts on the corpus: normal, wrong results, truncated, failed init, too few ranks."""

from __future__ import annotations

import re

import pytest

from nvtest.jobs.nccl import NICS_ONLY_ENV, NcclRecipe, judge_output, nccl_env, perf_argv
from nvtest.parsers import nccl_tests
from tests.conftest import CORPUS as CORPUS_ROOT

CORPUS = CORPUS_ROOT / "nccl-tests"
NORMAL = (CORPUS / "all_reduce_perf-2node-16xh100-a3mega-normal-8B-8G.txt").read_text()
GIB = 1024**3


def test_normal_two_node_run_passes_with_plateau_busbw():
    v = judge_output(NORMAL, op="all_reduce", max_bytes=8 * GIB, expected_ranks=16)
    assert v.verdict == "pass", v.details["reasons"]
    assert v.details["plateau_sizes"] == [8 * GIB]
    assert v.details["busbw_gbps"] == pytest.approx(338.82)  # the 8 GiB row, not "Avg bus bandwidth" 70.742
    assert v.details["ranks"] == 16 and v.details["hosts"] == ["gpu-node-0001", "gpu-node-0002"]


def test_plateau_from_the_recipe_averages_the_largest_sizes():
    v = judge_output(NORMAL, op="all_reduce", max_bytes=8 * GIB, plateau_bytes=2 * GIB)
    assert v.details["plateau_sizes"] == [2 * GIB, 4 * GIB, 8 * GIB]
    assert v.details["busbw_gbps"] == pytest.approx((318.40 + 330.58 + 338.82) / 3)


def test_fewer_ranks_than_expected_is_an_error():
    v = judge_output(NORMAL, op="all_reduce", max_bytes=8 * GIB, expected_ranks=32)
    assert v.verdict == "error" and "16 ranks listed, 32 expected" in v.text()


def test_truncated_run_is_an_error_not_a_pass():
    cut = NORMAL[: NORMAL.index("  2147483648")]  # the job died after the 1 GiB row
    v = judge_output(cut, op="all_reduce", max_bytes=8 * GIB, expected_ranks=16)
    assert v.verdict == "error"
    assert "stopped at 1073741824 bytes before the requested 8589934592" in v.text()


def test_integer_wrong_count_fails_whatever_the_bandwidth():
    lines = NORMAL.splitlines()
    i = next(k for k, line in enumerate(lines) if line.strip().startswith("4294967296"))
    lines[i] = re.sub(r"(\s)0(\s+24365)", r"\g<1>7\2", lines[i])
    v = judge_output("\n".join(lines), op="all_reduce", max_bytes=8 * GIB, expected_ranks=16)
    assert v.verdict == "fail" and v.details["wrong"] == 7
    assert "#wrong = 7 (sizes 4294967296)" in v.text()
    assert v.details["busbw_gbps"] == pytest.approx(338.82)  # the bandwidth was fine: still a fail


def test_legacy_wrong_results_out_of_bounds_fail():
    text = (CORPUS / "all_gather-FAILED-then-all_reduce-dgx2-12gpu-legacy-error-column-concatenated.txt").read_text()
    log = nccl_tests.parse(text)
    from nvtest.jobs.nccl import judge_run

    gather = judge_run(log.tests[0], op="all_gather", max_bytes=10737418240, expected_ranks=12)
    assert gather.verdict == "fail" and "out of bounds values: 4" in gather.text()
    reduce = judge_run(log.tests[1], op="all_reduce", max_bytes=8 * GIB, expected_ranks=12)
    assert reduce.verdict == "pass" and reduce.details["busbw_gbps"] is not None


def test_failed_init_names_the_site_and_host():
    text = (CORPUS / "all_reduce_perf-2node-init-failure-internal-error-openmpi-abort.txt").read_text()
    v = judge_output(text, op="all_reduce", max_bytes=134217728, expected_ranks=4)
    assert v.verdict == "fail" and v.details["failure_site"] == "common.cu:959"
    assert "NCCL failure at common.cu:959 on node001: internal error" in v.text()


def test_legacy_cuda_error_fails():
    text = (CORPUS / "all_reduce_perf-nccl1-legacy-header-cuda-error.txt").read_text()
    v = judge_output(text, op="all_reduce")
    assert v.verdict == "fail" and "all_reduce.cu:95" in v.text() and "unhandled cuda error" in v.text()


def test_nccl_warn_lines_reach_the_reason_and_details():
    text = NORMAL.replace(
        "# Out of bounds values : 0 OK",
        "gpu-node-0002:6733:6790 [0] NCCL WARN NET/IB : Got completion with error 12, opcode 0\n"
        "gpu-node-0002: Test NCCL failure common.cu:1279 'remote process exited or there was a network error'\n"
        "# Out of bounds values : 0 OK",
    )
    v = judge_output(text, op="all_reduce", max_bytes=8 * GIB)
    assert v.verdict == "fail"
    assert any("Got completion with error 12" in w for w in v.details["nccl_warnings"])
    assert "NCCL WARN" in v.text() and "common.cu:1279" in v.text()
    assert v.details["failure_site"] == "common.cu:1279"


def test_a_launch_failure_is_an_error_in_the_shells_words():
    # the shell's words are nccl-tests' failure record (issue 25, class 1), not foreign text
    v = judge_output("bash: all_reduce_perf: command not found\n", op="all_reduce")
    assert v.verdict == "error" and "could_not_start" in v.text()
    assert "command not found" in v.text()


def test_not_nccl_output_is_an_error():
    v = judge_output("The job finished.\nSee the attached log for details.\n", op="all_reduce")
    assert v.verdict == "error" and "printed no report" in v.text()
    assert "See the attached log for details." in v.text()  # the tool's own last words


def test_recipe_command_line_and_environment():
    r = NcclRecipe.from_recipe(
        {
            "ops": ["all_reduce", "alltoall"],
            "max_bytes": 2 * GIB,
            "iters": 20,
            "env": {"NCCL_IB_QPS_PER_CONNECTION": 4},
        },
        tests_dir="/opt/nccl-tests/build",
    )
    assert perf_argv("alltoall", r, 8) == [
        "/opt/nccl-tests/build/alltoall_perf",
        "-b",
        "8",
        "-e",
        "2147483648",
        "-f",
        "2",
        "-g",
        "8",
        "-c",
        "1",
        "-n",
        "20",
    ]
    env = nccl_env(r, {"NCCL_IB_HCA": "mlx5_0,mlx5_1", "HOME": "/root"}, nics_only=True)
    assert env == {
        "NCCL_DEBUG": "INFO",
        "NCCL_IB_HCA": "mlx5_0,mlx5_1",
        "NCCL_IB_QPS_PER_CONNECTION": "4",
        **NICS_ONLY_ENV,
    }
    with pytest.raises(ValueError, match="unknown nccl operation"):
        NcclRecipe.from_recipe({"ops": ["allreduce"]})
    with pytest.raises(ValueError, match="unknown nccl recipe key"):
        NcclRecipe.from_recipe({"maxbytes": 1})


# -- what ran, not what was asked (issue 16 rule 3) ------------------------------------------

REDUCED = (CORPUS / "gather_perf-2node-a100-reducing-maxBytes-memory-limitation-excerpt.txt").read_text()


def test_a_sweep_the_tool_shortened_is_an_error_naming_its_own_line():
    """nccl-tests #350: asked for 12 GiB, the tool printed that it reduced maxBytes for memory;
    the rows reach 11.4 GB, within the step factor of 12 GiB, so only the tool's line tells."""
    v = judge_output(REDUCED, op="gather", max_bytes=12884901888, expected_ranks=2)
    assert v.verdict == "error"
    assert "threshold's point (12884901888 bytes) was not measured" in v.text()
    assert "Reducing maxBytes to 12703978837 due to memory limitation" in v.text()
    assert v.details["requested"]["max_bytes"] == 12884901888
    assert (
        v.details["effective"]["max_bytes"] == 12703978837 and v.details["effective"]["max_size_reached"] == 11408506880
    )
    # a threshold defined within what the tool did run is not a gap; this excerpt stops before
    # the tool's summary, so it is still an error, for that reason only
    ok = judge_output(REDUCED, op="gather", max_bytes=12884901888, plateau_bytes=8 * GIB, expected_ranks=2)
    assert ok.verdict == "error" and "crash_after_partial_output" in ok.text()
    assert "was not measured" not in ok.text() and ok.details["busbw_gbps"]


def test_a_correctness_gate_switched_off_is_an_error_not_a_pass():
    off = NORMAL.replace("validation: 1", "validation: 0")
    assert off != NORMAL
    v = judge_output(off, op="all_reduce", max_bytes=8 * GIB, expected_ranks=16)
    assert v.verdict == "error" and "correctness gate switched off" in v.text()
    assert v.details["effective"]["validation"] == 0


def test_every_verdict_records_what_ran_beside_what_was_asked():
    v = judge_output(NORMAL, op="all_reduce", max_bytes=8 * GIB, expected_ranks=16)
    eff = v.details["effective"]
    assert eff["ranks"] == 16 and eff["validation"] == 1 and eff["dtypes"] == ["float"]
    assert eff["max_size_reached"] == 8 * GIB and eff["hosts"] == ["gpu-node-0001", "gpu-node-0002"]
    assert v.details["requested"] == {"max_bytes": 8 * GIB, "plateau_bytes": 8 * GIB, "ranks": 16}


def test_launch_that_never_started_is_an_error_with_the_launchers_words():
    text = (
        CORPUS_ROOT / "nccl-tests" / "all_reduce_perf-2pod-sriov-ucx-ibv-create-ah-no-such-device-never-started.txt"
    ).read_text()
    v = judge_output(text, op="all_reduce")
    assert v.verdict == "error" and "could_not_start" in v.text() and "UCX" in v.text()


def test_table_cut_before_its_summary_is_an_error_even_at_full_size():
    cut = NORMAL[: NORMAL.index("# Out of bounds")]  # every row, then the job was killed
    v = judge_output(cut, op="all_reduce", max_bytes=8 * GIB, expected_ranks=16)
    assert v.verdict == "error" and "crash_after_partial_output" in v.text()


def test_nccl_debug_info_wins_over_the_recipe_and_the_environment():
    """The path rules read NCCL's INFO lines: a site's NCCL_DEBUG cannot switch them off."""
    r = NcclRecipe.from_recipe({"env": {"NCCL_DEBUG": "WARN", "NCCL_NVLS_ENABLE": "0"}})
    env = nccl_env(r, {"NCCL_DEBUG": "VERSION"})
    assert env["NCCL_DEBUG"] == "INFO" and env["NCCL_NVLS_ENABLE"] == "0"
    assert nccl_env(NcclRecipe(), {}, nics_only=True)["NCCL_DEBUG"] == "INFO"


@pytest.mark.parametrize(
    ("recipe_env", "environ", "said"),
    [
        ({"NCCL_NVLS_ENABLE": "0"}, {}, "recipe.nccl.env.NCCL_NVLS_ENABLE=0"),
        ({"NCCL_ALGO": "Ring,Tree"}, {}, "recipe.nccl.env.NCCL_ALGO=Ring,Tree"),
        ({"NCCL_ALGO": "^NVLS,CollnetDirect"}, {}, "recipe.nccl.env.NCCL_ALGO=^NVLS,CollnetDirect"),
        ({"NCCL_ALGO": "allreduce:ring;broadcast:nvls"}, {}, "recipe.nccl.env.NCCL_ALGO=allreduce:ring"),
        ({}, {"NCCL_ALGO": "ring"}, "environment NCCL_ALGO=ring"),
        ({"NCCL_ALGO": "NVLS,Ring"}, {}, None),
        ({"NCCL_ALGO": "^Tree"}, {}, None),
        ({"NCCL_ALGO": "broadcast:ring"}, {}, None),
        ({"NCCL_NVLS_ENABLE": "1"}, {}, None),
        ({}, {}, None),
    ],
)
def test_a_recipe_that_switches_nvls_off_is_named(recipe_env, environ, said):
    from nvtest.jobs.nccl import nvls_switched_off

    r = NcclRecipe.from_recipe({"env": recipe_env})
    got = nvls_switched_off(nccl_env(r, environ), r)
    assert (got is None) if said is None else (got is not None and got.startswith(said)), got


def test_the_nccl_check_warns_naming_the_recipe_line_on_an_nvls_sku():
    """intra/multinode call this on a SKU with expect.nvls: the item is at least WARN."""
    from nvtest.checks.api import Judge
    from nvtest.checks.interconnect.nccl import _nvls_recipe

    r = NcclRecipe.from_recipe({"env": {"NCCL_NVLS_ENABLE": "0"}})
    judge = Judge(None, "nccl", "n1", None)
    _nvls_recipe(judge, nccl_env(r, {}), r, "recipe.nccl")
    assert judge.verdict.value == "warn", judge.verdict
    assert any("recipe.nccl.env.NCCL_NVLS_ENABLE=0" in w for w in judge.warnings), judge.warnings
