"""The GPU evidence kit (``make gpu-evidence``, ``nvtest evidence``): the short form end to end
on this machine, the GPU captures on recorded real outputs through stand-in tools, deadlines
and the budget, the read-only rule, and the summary's figures against a SKU profile."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nvtest.checks.health.nvlink import FM_SCRIPT
from nvtest.config.resources import probes_dir
from nvtest.ops.evidence.steps import (
    FABRIC_QUERY,
    capture_steps,
    probe_steps,
    read_only_nvidia_smi,
    run_steps,
)
from nvtest.testing.standin import Recording, StandInTools
from tests.conftest import CORPUS, REPO, run_nvtest

STATUSES = {"ok", "empty", "failed", "absent", "timed-out", "stopped", "not-run", "skip", "error"}
STEP_KEYS = {
    "name",
    "group",
    "tool",
    "argv",
    "status",
    "exit_code",
    "duration_s",
    "deadline_s",
    "started_at",
    "version",
    "version_argv",
    "reason",
    "files",
}
HOST = socket.gethostname().split(".")[0]


def _host_re() -> re.Pattern[str]:
    return re.compile(rf"(?<![A-Za-z0-9_]){re.escape(HOST)}(?![A-Za-z0-9_])")


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() or p.is_symlink())


def _assert_manifest_complete(manifest: dict) -> None:
    """Every step has every field; what is not ``ok`` says why."""
    for s in manifest["steps"]:
        assert STEP_KEYS <= set(s), (s["name"], STEP_KEYS - set(s))
        assert s["status"] in STATUSES, s
        if s["status"] != "ok":
            assert s["reason"], s
        for rel in s["files"]:
            assert rel.startswith(("captures/", "probes/", "runs/")), rel


@pytest.mark.slow
def test_short_form_runs_end_to_end_and_writes_a_complete_out(tmp_path: Path) -> None:
    """``make gpu-evidence`` in its short form on a machine without a GPU: every GPU capture
    records why it could not run, the CPU paths run, the runs are kept, OUT is sanitised."""
    out = tmp_path / "evidence"
    proc = subprocess.run(
        ["bash", str(REPO / "scripts" / "gpu_evidence.sh")],
        env={**os.environ, "OUT": str(out), "GPU_EVIDENCE_SHORT": "1", "PYTHON": sys.executable, "COLUMNS": "200"},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["mode"] == "short" and manifest["budget_s"] == 180
    planned = [s.name for s in capture_steps()]
    planned += [s.name for s in probe_steps(probes_dir(), short=True, gpus=0)]
    planned += [s.name for s in run_steps(out, short=True)]
    assert [s["name"] for s in manifest["steps"]] == planned
    _assert_manifest_complete(manifest)
    steps = {s["name"]: s for s in manifest["steps"]}
    for s in manifest["steps"]:
        if s["tool"] == "nvidia-smi" and shutil.which("nvidia-smi") is None:
            assert s["status"] == "absent" and "nvidia-smi not found on PATH" in s["reason"]
    if shutil.which("lspci"):
        assert steps["lspci-nvidia"]["version"] and steps["lspci-nvidia"]["exit_code"] == 0
    assert steps["gemm"]["status"] == "ok" and "gemm probe" in steps["gemm"]["version"]
    gemm = json.loads((out / "probes" / "gemm.json").read_text())
    assert {r["dtype"] for r in gemm["results"]} >= {"fp64", "fp32", "tf32", "fp16", "bf16", "fp8"}
    if not (REPO / "nvtest" / "probes" / "inference_probe.py").exists():
        assert steps["inference"]["status"] == "absent" and "not present in this nvtest" in steps["inference"]["reason"]
    for run in ("delivery", "burnin"):
        assert steps[run]["status"] == "ok", steps[run]
        assert (out / steps[run]["run_dir"] / "results.json").is_file()
        assert (out / steps[run]["run_dir"] / "report.html").is_file()
    summary = (out / "summary.md").read_text()
    assert "cpu-generic" in summary and "Figures against the profile" in summary
    for name in planned:
        assert f"| {name} |" in summary, name
    assert not (out / ".scratch").exists()
    assert not [p for p in _files(out) if p.is_symlink()]
    assert {r["why"] for r in manifest["sanitised"]["removed"]} <= {
        "binary file (NUL bytes), cannot be sanitised as text"
    }
    if HOST not in ("localhost",):
        leaks = [str(p) for p in _files(out) if _host_re().search(p.read_text(errors="replace") + str(p))]
        assert leaks == []
    assert manifest["duration_s"] < manifest["budget_s"]


def _standins(bin_dir: Path) -> tuple[StandInTools, list[str]]:
    """nvidia-smi, lspci, dcgmi and nvbandwidth replaying recorded real outputs, with real-looking
    identifiers (the corpus holds placeholders) and this machine's host name put back in."""
    uuid, serial = "GPU-5e1c2d3a-9b8f-4c7d-a6e5-1f2e3d4c5b6a", "1654922000123"
    smi = CORPUS / "nvidia-smi"
    xml = (smi / "q-x-a100-sxm4-80gb-mig-enabled-v12.xml.txt").read_text()
    xml = xml.replace("GPU-00000000-0000-0000-0000-000000000000", uuid).replace(
        "<serial>0000000000000</serial>", f"<serial>{serial}</serial>"
    )
    q = (smi / "q-h100-sxm-driver565-gpu0-only.txt").read_text()
    q = q.replace("GPU-00000000-0000-0000-0000-000000000000", uuid).replace(": 0000000000000", f": {serial}")
    nvb = (CORPUS / "nvbandwidth" / "v0.8-all-tests-1gpu-laptop-waived-lines-hostname-line.txt").read_text()
    nvb = nvb.replace("\nnode001\n", f"\n{HOST}\n")
    tools = StandInTools(bin_dir)
    tools.add(
        "nvidia-smi",
        Recording.of_file(smi / "plain-h100-sxm-x8-driver565.txt"),
        by_args={
            "--version": Recording(stderr="Invalid combination of input arguments.\n", exit_code=2),
            "-q": Recording(stdout=q),
            "-q -x": Recording(stdout=xml),
            "topo -m": Recording.of_file(smi / "topo-m-a100x8-18nics-8numa.txt"),
            "nvlink -s": Recording.of_file(smi / "nvlink-s-v100-inactive-links-truncated.txt"),
            "nvlink -e": Recording(),
            "--query-gpu=index,fabric.state,fabric.status --format=csv": Recording(
                stderr='Field "fabric.state" is not a valid field to query.\n', exit_code=2
            ),
            "--query-gpu=*clocks_throttle_reasons.active*": Recording(
                stderr='Field "clocks_throttle_reasons.active" is not a valid field to query.\n', exit_code=2
            ),
            "--query-gpu=*": Recording.of_file(smi / "query-gpu-csv-nounits-tesla-p100-NA-fan.csv.txt"),
        },
    )
    tools.add(
        "lspci",
        Recording(),
        by_args={
            "--version": Recording(stdout="lspci version 3.9.0\n"),
            "-vvv -nn -D -d 10de:": Recording.of_file(
                CORPUS / "lspci" / "vvv-egrep-lnk-rtx3080-width-x4-downgraded-vs-normal.txt"
            ),
        },
    )
    tools.add(
        "dcgmi",
        Recording(stderr="stand-in dcgmi: no recording\n", exit_code=127),
        by_args={
            "diag -r 1": Recording.of_file(
                CORPUS / "dcgmi" / "diag-r2-text-gpu-memory-fail-thermal-warning-wrapped-excerpt.txt"
            )
        },
    )
    tools.add("nvbandwidth", Recording(stdout=nvb))
    return tools, [uuid.removeprefix("GPU-"), serial]


def test_gpu_captures_on_recorded_outputs_keep_exit_codes_versions_and_reasons(tmp_path: Path) -> None:
    tools, secrets = _standins(tmp_path / "bin")
    out = tmp_path / "ev"
    proc = run_nvtest(
        "evidence",
        "--out",
        str(out),
        "--steps",
        "capture",
        cwd=tmp_path,
        timeout=120,
        env={"PATH": tools.path_prefix()},
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    manifest = json.loads((out / "manifest.json").read_text())
    _assert_manifest_complete(manifest)
    steps = {s["name"]: s for s in manifest["steps"]}
    for name in (
        "nvidia-smi",
        "nvidia-smi-q",
        "nvidia-smi-q-x",
        "nvidia-smi-topo-m",
        "nvidia-smi-nvlink-s",
        "nvidia-smi-query-gpu",
    ):
        assert steps[name]["status"] == "ok" and steps[name]["exit_code"] == 0, steps[name]
        # no --version on this driver: the version comes from the -q capture's header
        assert steps[name]["version"] == "driver 565.57.01, CUDA 12.7", steps[name]
    broad = steps["nvidia-smi-query-gpu"]
    assert "clocks_throttle_reasons.active" in broad["requested_argv"][1] and "clocks_throttle" not in broad["argv"][1]
    assert broad["notes"] == [
        "'clocks_throttle_reasons.active' is not a valid field on this driver: queried without it"
    ]
    assert steps["nvidia-smi-nvlink-e"]["status"] == "empty"
    fabric = steps["nvidia-smi-query-gpu-fabric"]
    assert fabric["status"] == "failed" and fabric["exit_code"] == 2 and "not a valid field" in fabric["reason"]
    assert steps["lspci-nvidia"]["status"] == "ok" and steps["lspci-nvidia"]["version"] == "3.9.0"
    assert steps["lspci-mellanox"]["status"] == "empty" and "15b3" in steps["lspci-mellanox"]["reason"]
    assert steps["dcgmi-discovery-l"]["status"] == "failed" and "exit 127" in steps["dcgmi-discovery-l"]["reason"]
    assert steps["dcgmi-diag-r1"]["status"] == "ok" and steps["dcgmi-diag-r1"]["version"] is None
    assert "dcgmi --version" in steps["dcgmi-diag-r1"]["version_reason"]
    assert steps["nvbandwidth"]["status"] == "ok" and steps["nvbandwidth"]["version"] == "v0.8"
    for s in manifest["steps"]:
        if s["group"] != "capture":
            assert s["status"] == "not-run" and "not selected" in s["reason"]
    # verbatim but sanitised: the recorded layout parses, the identifiers are gone
    xml = (out / "captures" / "nvidia-smi-q-x.xml").read_text()
    assert "<product_name>NVIDIA A100-SXM4-80GB</product_name>" in xml
    assert "GPU-00000000-0000-0000-0000-000000000001" in xml and "<serial>0000000000001</serial>" in xml
    for p in _files(out):
        text = p.read_text(errors="replace")
        for secret in secrets:
            assert secret not in text, (p, secret)
        assert not _host_re().search(text), p
    summary = (out / "summary.md").read_text()
    assert "**a100-sxm-80gb**" in summary and "1 x NVIDIA A100-SXM4-80GB (81920 MiB)" in summary
    # read-only: every call the kit made is in the allow-list
    calls = [line.split(" ", 1) + [""] for line in tools.calls()]
    smi_calls = {tuple(args.split()) for tool, args, *_ in calls if tool == "nvidia-smi"}
    assert len(smi_calls) == 10 and all(read_only_nvidia_smi(c) for c in smi_calls), smi_calls
    assert {args for tool, args, *_ in calls if tool == "dcgmi"} <= {"discovery -l", "diag -r 1", "--version"}


def test_a_hung_tool_is_stopped_at_its_deadline_and_the_budget_holds(tmp_path: Path) -> None:
    tools = StandInTools(tmp_path / "bin")
    tools.add("nvidia-smi", Recording(stdout="late\n", sleep_s=61.7), by_args={"--version": Recording(exit_code=2)})
    out = tmp_path / "ev"
    t0 = time.monotonic()
    proc = run_nvtest(
        "evidence",
        "--out",
        str(out),
        "--steps",
        "nvidia-smi,nvidia-smi-q",
        "--budget-s",
        "14",
        cwd=tmp_path,
        timeout=120,
        env={"PATH": tools.path_prefix()},
    )
    took = time.monotonic() - t0
    assert proc.returncode == 0, proc.stderr[-2000:]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["duration_s"] <= manifest["budget_s"] == 14
    steps = {s["name"]: s for s in manifest["steps"]}
    first, second = steps["nvidia-smi"], steps["nvidia-smi-q"]
    assert first["status"] == "timed-out" and "deadline" in first["reason"], first
    assert first["duration_s"] <= first["deadline_s"] + 6
    assert second["status"] == "not-run" and "budget" in second["reason"], second
    assert took < 14 + 45, f"took {took:.0f} s: the kit did not stop at its budget"
    alive = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if b"61.7" in cmdline.read_bytes() and b"sleep" in cmdline.read_bytes():
                alive.append(cmdline.parent.name)
        except OSError:
            continue
    assert alive == [], "the hung tool's children outlived its deadline"


def test_sigterm_stops_the_step_and_the_kit_still_summarises_and_sanitises(tmp_path: Path) -> None:
    tools = StandInTools(tmp_path / "bin")
    tools.add("nvidia-smi", Recording(stdout="late\n", sleep_s=62.3), by_args={"--version": Recording(exit_code=2)})
    out = tmp_path / "ev"
    proc = subprocess.Popen(
        [sys.executable, "-m", "nvtest.cli", "evidence", "--out", str(out), "--steps", "capture"],
        cwd=tmp_path,
        env={**os.environ, "PATH": tools.path_prefix()},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    while not (out / "captures" / "nvidia-smi.txt").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(0.5)
    proc.terminate()
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err[-2000:]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["stopped"] == "the kit received SIGTERM"
    steps = manifest["steps"]
    assert steps[0]["status"] == "stopped" and steps[0]["reason"] == "stopped: the kit received SIGTERM"
    assert all(s["status"] == "not-run" and "SIGTERM" in s["reason"] for s in steps[1:])
    assert "sanitised" in manifest and (out / "summary.md").is_file()


def test_out_holding_other_files_and_unknown_steps_are_refused(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine\n")
    proc = run_nvtest("evidence", "--out", str(tmp_path), "--steps", "capture", timeout=60)
    assert proc.returncode == 2 and "notes.txt" in proc.stderr
    assert (tmp_path / "notes.txt").read_text() == "mine\n"
    typo = run_nvtest("evidence", "--out", str(tmp_path / "ev"), "--steps", "gemm,devmen", timeout=60)
    assert typo.returncode == 2 and "unknown step(s) devmen" in typo.stderr and not (tmp_path / "ev").exists()
    for budget in ("0", "-5", "nan"):  # 0 ran the default 480 s; -5 and nan ran nothing and exited 0
        bad = run_nvtest(
            "evidence", "--out", str(tmp_path / "ev"), "--steps", "capture", "--budget-s", budget, timeout=60
        )
        assert bad.returncode == 2 and "--budget-s must be a positive number" in bad.stderr, (budget, bad.stderr)
        assert not (tmp_path / "ev").exists()


# ------------------------------------------------------------------ the read-only rule

#: nvidia-smi options that change the GPU's state (nvidia-smi --help, driver 5xx).
STATE_CHANGING = (
    "-pm",
    "--persistence-mode",
    "-pl",
    "--power-limit",
    "-ac",
    "--applications-clocks",
    "-rac",
    "-lgc",
    "--lock-gpu-clocks",
    "-rgc",
    "-lmc",
    "-rmc",
    "-r",
    "--gpu-reset",
    "-mig",
    "--multi-instance-gpu",
    "--gom",
    "-c",
    "--compute-mode",
    "-e",
    "--ecc-config",
    "-am",
    "-caa",
    "-cc",
    "-dm",
    "--auto-boost-default",
    "-acp",
)
NVML_SETTERS = re.compile(r"nvmlDevice(?:Set|Reset|Clear)\w*|nvmlGpuInstance(?:Create|Destroy)|nvml\w*Mig\w*Set")


def _kit_sources() -> list[Path]:
    kit = [REPO / "scripts" / name for name in ("gpu_evidence.sh", "gpu_evidence_install.sh", "gpu_evidence_bundle.sh")]
    kit += [REPO / "nvtest" / "cli" / "evidence.py", *sorted((REPO / "nvtest" / "ops" / "evidence").glob("*.py"))]
    return kit + sorted((REPO / "nvtest" / "probes").glob("*.py"))


def test_no_kit_source_nor_probe_it_runs_changes_gpu_state() -> None:
    bad = []
    flags = "|".join(re.escape(f) for f in STATE_CHANGING)
    pattern = re.compile(rf"""nvidia-smi\b[^\n]*?(?<![\w-])["']?({flags})(?![\w-])""")
    for path in _kit_sources():
        for n, line in enumerate(path.read_text().splitlines(), 1):
            for m in pattern.finditer(line):
                if m.group(1) == "-e" and "nvlink" in line[: m.start(1)]:
                    continue  # nvidia-smi nvlink -e: the links' error counters, read-only
                bad.append(f"{path.relative_to(REPO)}:{n}: {line.strip()}")
            if NVML_SETTERS.search(line):
                bad.append(f"{path.relative_to(REPO)}:{n}: {line.strip()}")
    assert bad == []


def test_every_planned_command_is_read_only() -> None:
    steps = capture_steps() + probe_steps(probes_dir(), short=False, gpus=8) + run_steps(Path("/out"), short=False)
    for s in steps:
        if s.argv[0] == "nvidia-smi":
            assert read_only_nvidia_smi(s.argv[1:]), s
        if s.argv[0] == "dcgmi":
            assert s.argv[1:] in (("discovery", "-l"), ("diag", "-r", "1")), s
        if s.group == "run":
            assert "--drain-failed" not in s.argv and "--backend" in s.argv and "local" in s.argv


def test_the_fabric_query_is_the_one_nvtest_reads() -> None:
    m = re.search(r"--query-gpu=(\S+)", FM_SCRIPT)
    assert m and tuple(m.group(1).split(",")) == FABRIC_QUERY


def _plan(tmp_path: Path, index: str) -> str:
    """What ``make gpu-evidence`` would do in a fresh clone (no venv, no bundle) with ``index``."""
    clone = tmp_path / "clone"
    (clone / "scripts").mkdir(parents=True, exist_ok=True)
    for name in ("gpu_evidence.sh", "gpu_evidence_install.sh"):
        shutil.copy(REPO / "scripts" / name, clone / "scripts" / name)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHON", "PYTHONPATH") and not k.startswith("PIP_")}
    env.update(
        GPU_EVIDENCE_PLAN="1",
        PIP_INDEX_URL=index,
        PIP_CONFIG_FILE="/dev/null",
        GPU_EVIDENCE_VENV=str(tmp_path / "venv"),
        GPU_EVIDENCE_BUNDLE=str(tmp_path / "no-bundle"),
    )
    proc = subprocess.run(
        ["bash", str(clone / "scripts" / "gpu_evidence.sh")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stderr


def test_a_fresh_clone_installs_from_the_index_where_it_answers_and_needs_the_bundle_only_without(
    tmp_path: Path,
) -> None:
    import http.server
    import threading

    class Index(http.server.BaseHTTPRequestHandler):
        seen: list[str] = []

        def do_HEAD(self) -> None:
            Index.seen.append(self.path)
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Index)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/simple/"
        said = _plan(tmp_path, url)
        assert f"plan: install from the package index {url} into {tmp_path / 'venv'} (it answers)" in said
        assert Index.seen == ["/simple/pip/"]
    finally:
        server.shutdown()
        server.server_close()
    with socket.socket() as s:  # a loopback port nobody listens on: the index is refused
        s.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{s.getsockname()[1]}/simple/"
    said = _plan(tmp_path, closed)
    assert f"the package index {closed} does not answer" in said and "install from the package index" not in said
    (tmp_path / "no-bundle").mkdir()
    (tmp_path / "no-bundle" / "install.sh").write_text("exit 1\n")
    assert f"plan: install from the bundle {tmp_path / 'no-bundle'}" in _plan(tmp_path, closed)
