"""Helpers of the audit tests: the real probe on a fake sysfs root with stand-in tools."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from nvtest.checks.api import Judge, ProbeSkip
from nvtest.checks.config.platform import Platform, platform_from_probe
from nvtest.checks.health import Outcome, apply
from nvtest.config.metrics import check_names, metric_names
from nvtest.errors import ProbeError
from nvtest.testing.standin import Recording, StandInTools
from nvtest.verdict import Verdict
from tests.checks.config.fakesys import CONFIG_DATA, Machine, build, lspci_vvv
from tests.conftest import PROBES

#: The tools the probe runs, as a stand-in replays them (by the probe's exact arguments).
ARGS = {
    "lspci": "-D -vvv",
    "ip": "-d -j addr show",
    "nvidia-smi": "--query-gpu=pci.bus_id,persistence_mode --format=csv,noheader",
}
DESKTOP_IP = (CONFIG_DATA / "ip-j-addr-desktop-docker0-compose-bridge-no-carrier.json").read_text()
#: nvidia-smi's own words when the driver is not loaded (stdout, exit 9).
SMI_NO_DRIVER = (
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure "
    "that the latest NVIDIA driver is installed and running.\n"
)


def persistence_csv(m: Machine, mode: str = "Enabled") -> str:
    """``nvidia-smi --query-gpu=pci.bus_id,persistence_mode --format=csv,noheader`` for ``m``'s GPUs."""
    return "".join(f"0000{d.bdf.upper()}, {mode}\n" for d in m.devices if d.vendor == "0x10de")


def dpkg_lines(packages: Mapping[str, tuple[str, int]]) -> str:
    """``dpkg-query -W -f '${Package}\\t${Version}\\t${db-fsys:Last-Modified}\\t${db:Status-Abbrev}\\n'``."""
    return "".join(f"{n}\t{v}\t{t}\tii \n" for n, (v, t) in packages.items())


def standins(bin_dir: Path, m: Machine, tools: Mapping[str, Recording | None] | None = None) -> StandInTools:
    """Stand-ins for every tool the probe runs; ``tools`` overrides (None: the tool is absent)."""
    st = StandInTools(bin_dir)
    given = dict(tools or {})
    defaults: dict[str, Recording] = {
        "lspci": Recording(stdout=lspci_vvv(m)),
        "ip": Recording(stdout=DESKTOP_IP),
        "nvidia-smi": Recording(stdout=persistence_csv(m)),
        "dpkg-query": Recording(stdout=dpkg_lines({})),
    }
    for tool, rec in {**defaults, **given}.items():
        if rec is None:
            st.add_missing(tool)
        elif tool in ARGS:
            st.add(tool, by_args={ARGS[tool]: rec})
        else:
            st.add(tool, rec)
    return st


def run_probe(tmp: Path, m: Machine, tools: Mapping[str, Recording | None] | None = None) -> dict:
    """The ``config`` probe's JSON document on ``m`` (fake root, stand-in tools)."""
    root = build(tmp / "root", m)
    st = standins(tmp / "bin", m, tools)
    env = {**os.environ, "PATH": st.path_prefix(), "NVTEST_SYSFS_ROOT": str(root)}
    proc = subprocess.run(
        [sys.executable, str(PROBES / "config_probe.py")], env=env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def probe_platform(tmp: Path, m: Machine, tools: Mapping[str, Recording | None] | None = None) -> Platform:
    return platform_from_probe(run_probe(tmp, m, tools))


def _check_of(out: Outcome) -> str:
    """The audit check that declares ``out``'s metrics in the metric catalog (the Judge
    refuses a metric its check does not declare)."""
    names = {m.name for m in out.metrics}
    for check in check_names():
        if names and names <= set(metric_names(check)):
            return check
    return "config"


def verdict_of(out: Outcome) -> Verdict:
    """The item verdict the plugin gives ``out`` (no SKU thresholds), judged as the check
    that declares its metrics."""
    j = Judge(None, _check_of(out), "node001", None)
    try:
        apply(out, j)
    except ProbeSkip:
        return Verdict.SKIP
    except ProbeError:
        return Verdict.ERROR
    return j.verdict
