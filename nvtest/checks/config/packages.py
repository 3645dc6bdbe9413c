"""``package_drift``: kernel and NVIDIA driver packages against the fleet, the boot and the image.

Input: the ``config`` probe's package query, one line per package,
``name<TAB>version<TAB>installed-at<TAB>status``: ``dpkg-query -W -f
'${Package}\\t${Version}\\t${db-fsys:Last-Modified}\\t${db:Status-Abbrev}\\n'`` (dpkg >= 1.19.3;
``installed-at`` is the mtime of the package's file list, i.e. when it was last
installed or upgraded) or ``rpm -qa --qf '%{NAME}\\t%{VERSION}-%{RELEASE}\\t%{INSTALLTIME}\\tii\\n'``;
the loaded ``nvidia`` module's version (``/sys/module/nvidia/version``), the running
kernel (``/proc/sys/kernel/osrelease``), the boot time (``btime`` of ``/proc/stat``), and
the image marker (``/etc/nvtest-image-id``: its modification time is when the image was
built).

Verdicts (each names the package):

- a package whose version differs from the strict majority of the SKU's nodes, or that
  the majority has and this node lacks (or the reverse): **fail**;
- a package installed or upgraded after the image marker was written: **fail**
  ("changed since the image was built");
- a package installed or upgraded after the running kernel booted: **fail**;
- an NVIDIA driver package (driver, libnvidia-compute, kernel module, fabric manager,
  cuda-drivers) whose upstream version differs from the loaded module's: **fail**
  (NVML's "Driver/library version mismatch", field case D1);
- kernel packages installed, none for the running kernel: **fail**;
- no package tool (neither dpkg-query nor rpm): **error** (not measured).

Metric: ``drifted_packages`` (count of packages named in failures).
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from nvtest.checks.config import ConfigFinding, record
from nvtest.checks.config.platform import Platform
from nvtest.checks.config.probe import CONFIG_PROBE, platform
from nvtest.checks.health import Outcome
from nvtest.jobs.base import fleet_cache
from nvtest.playbook.config_audit import REMEDIATION
from nvtest.session.probe import each_node, measure_probe

if TYPE_CHECKING:
    from nvtest.config.inventory import Node
    from nvtest.session.context import RunContext

__all__ = ["DRIVER_PREFIXES", "Package", "fleet_packages", "fleet_versions", "package_drift", "packages_of"]

#: Packages whose upstream version must equal the loaded NVIDIA kernel module's.
DRIVER_PREFIXES = (
    "nvidia-driver",
    "libnvidia-compute",
    "nvidia-kernel-",
    "nvidia-dkms",
    "kmod-nvidia",
    "cuda-drivers",
    "nvidia-utils",
    "nvidia-fabricmanager",
)
#: Seconds of slack between the image marker's mtime and a package's (the build writes both).
IMAGE_SLACK_S = 300


@dataclass(frozen=True)
class Package:
    """One installed package: version as the manager prints it, install time (epoch s) or None."""

    name: str
    version: str
    installed_at: int | None

    @property
    def upstream(self) -> str:
        """``1:535.104.05-0ubuntu1`` -> ``535.104.05``."""
        return self.version.split(":")[-1].split("-")[0]


def packages_of(p: Platform) -> dict[str, Package] | None:
    """The installed packages the probe listed (None when no package tool could report)."""
    run = p.tool("packages")
    if run is None or run.rc is None:
        return None
    if run.rc != 0 and not run.stdout.strip():
        benign = all(
            "no packages found matching" in ln or "is not installed" in ln
            for ln in run.stderr.strip().splitlines()
            if ln.strip()
        )
        return {} if benign else None
    out: dict[str, Package] = {}
    for line in run.stdout.splitlines():
        f = line.split("\t")
        if len(f) < 4 or not f[0]:
            continue
        status = f[3].strip()
        if len(status) < 2 or status[1] != "i":
            continue  # dpkg: not installed (un), config files only (rc)
        when = f[2].strip()
        out[f[0]] = Package(f[0], f[1].strip(), int(when) if when.isdigit() else None)
    return out


def fleet_versions(fleet: Mapping[str, Mapping[str, Package]]) -> dict[str, tuple[str | None, int, int]]:
    """package -> (the strict-majority version or None for "absent", its count, nodes) over ``fleet``.

    A package with no strict majority is left out (no fleet value to compare with).
    """
    names = sorted({n for pk in fleet.values() for n in pk})
    total = len(fleet)
    out: dict[str, tuple[str | None, int, int]] = {}
    for name in names:
        c = Counter((pk[name].version if name in pk else None) for pk in fleet.values())
        version, count = c.most_common(1)[0]
        if count * 2 > total:
            out[name] = (version, count, total)
    return out


def _date(ts: int | None) -> str:
    return "?" if ts is None else dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%d %H:%M UTC")


def _against_fleet(
    out: Outcome,
    mine: Mapping[str, Package],
    fleet: Mapping[str, Mapping[str, Package]],
    source: str,
    drifted: set[str],
) -> None:
    if len(fleet) < 2:
        record(out, ConfigFinding("note", "one node of this SKU: packages not compared with a fleet", source))
        return
    for name, (version, count, total) in fleet_versions(fleet).items():
        have = mine.get(name)
        if (have.version if have else None) == version:
            continue
        drifted.add(name)
        if have is None:
            msg = f"{name} {version} is on {count} of {total} nodes, not on this one"
        elif version is None:
            msg = f"{name} {have.version} (installed {_date(have.installed_at)}) is on this node, on no other of the {count} nodes"
        else:
            msg = (
                f"{name} {have.version} (installed {_date(have.installed_at)}); {count} of {total} nodes have {version}"
            )
        record(out, ConfigFinding("fail", msg, source, REMEDIATION["package_fleet"].format(package=name)))


def _against_time(out: Outcome, p: Platform, mine: Mapping[str, Package], source: str, drifted: set[str]) -> None:
    marker = p.image_marker or {}
    built = marker.get("mtime")
    if built is None:
        record(
            out,
            ConfigFinding(
                "note",
                f"no image marker ({marker.get('path') or '/etc/nvtest-image-id'}: "
                f"{marker.get('reason') or 'absent'}): changes since the image was built are not dated",
                str(marker.get("path") or p.sysfs("etc/nvtest-image-id")),
            ),
        )
    for pkg in sorted(mine.values(), key=lambda k: k.name):
        if pkg.installed_at is None:
            continue
        if built is not None and pkg.installed_at > int(built) + IMAGE_SLACK_S:
            drifted.add(pkg.name)
            record(
                out,
                ConfigFinding(
                    "fail",
                    f"{pkg.name} {pkg.version} changed on {_date(pkg.installed_at)}, after image "
                    f"{marker.get('id')!r} was built ({_date(int(built))})",
                    f"{source}; {marker.get('path')} (mtime)",
                    REMEDIATION["package_after_image"].format(package=pkg.name),
                ),
            )
        elif p.boot_time is not None and pkg.installed_at > p.boot_time:
            drifted.add(pkg.name)
            record(
                out,
                ConfigFinding(
                    "fail",
                    f"{pkg.name} {pkg.version} changed on {_date(pkg.installed_at)}, after the "
                    f"running kernel booted ({_date(p.boot_time)})",
                    f"{source}; {p.sysfs('proc/stat')} (btime)",
                    REMEDIATION["package_after_boot"].format(package=pkg.name),
                ),
            )


def _against_running(out: Outcome, p: Platform, mine: Mapping[str, Package], source: str, drifted: set[str]) -> None:
    module = (p.modules.get("nvidia") or {}).get("version")
    if module:
        by_version: dict[str, list[Package]] = {}
        for pkg in sorted(mine.values(), key=lambda k: k.name):
            if pkg.name.startswith(DRIVER_PREFIXES) and pkg.upstream != module:
                drifted.add(pkg.name)
                by_version.setdefault(pkg.upstream, []).append(pkg)
        for pkgs in by_version.values():  # one finding per version: one sentence, not one per package
            if len(pkgs) == 1:
                what = f"{pkgs[0].name} {pkgs[0].version} is installed"
            else:
                what = f"{len(pkgs)} driver packages ({', '.join(k.name for k in pkgs)}) are installed at {pkgs[0].upstream}"
            record(
                out,
                ConfigFinding(
                    "fail",
                    f"{what}, the loaded nvidia module is {module}",
                    f"{source}; {p.sysfs('sys/module/nvidia/version')}",
                    REMEDIATION["driver_module_mismatch"],
                ),
            )
    kernels = [k for k in mine if k.startswith(("linux-image-", "kernel"))]
    running = p.kernel or ""
    if kernels and running:
        ours = [k for k in kernels if k.endswith(running) or running.startswith(mine[k].version)]
        if not ours:
            record(
                out,
                ConfigFinding(
                    "fail",
                    f"the running kernel {running} has no installed package (installed: {', '.join(sorted(kernels))})",
                    f"{source}; {p.sysfs('proc/sys/kernel/osrelease')}",
                    REMEDIATION["package_after_boot"].format(package="the kernel"),
                ),
            )
    elif not kernels:
        record(
            out,
            ConfigFinding(
                "note",
                f"no kernel package installed (running {running or '?'}): a container or a custom kernel",
                source,
            ),
        )


def package_drift(p: Platform, fleet: Mapping[str, Mapping[str, Package]]) -> Outcome:
    """Judge this node's packages (see the module doc).

    ``fleet``: node name -> its packages, for the nodes of this node's SKU (itself included).
    """
    out = Outcome()
    run = p.tool("packages")
    source = run.command if run and run.cmd else "dpkg-query -W / rpm -qa"
    mine = packages_of(p)
    if mine is None:
        out.error = f"the kernel and driver packages could not be listed: {run.words() if run else 'not queried'}"
        record(out, ConfigFinding("note", out.error, source))
        return out
    drifted: set[str] = set()
    # the loaded module against the packages first: the one-line reason (results.REASON_MAX_CHARS)
    # starts with the finding that names the cause (a driver changed under a running module)
    _against_running(out, p, mine, source, drifted)
    _against_fleet(out, mine, fleet, source, drifted)
    _against_time(out, p, mine, source, drifted)
    out.measure("drifted_packages", len(drifted), "count")
    out.details["packages"] = {
        k: {"version": v.version, "installed": _date(v.installed_at)} for k, v in sorted(mine.items())
    }
    return out


def fleet_packages(ctx: RunContext, node: Node, check: str = "package_drift") -> dict[str, dict[str, Package]]:
    """node -> its packages, for every reachable node of ``node``'s SKU whose config probe
    answered (once per run and SKU: an item compares, it does not walk the fleet)."""
    match = ctx.states[node.name].match
    sku_name = match.name if match else None
    return fleet_cache(ctx).get(f"{check}:fleet:{sku_name}", lambda: _fleet_packages(ctx, sku_name, check))


def _fleet_packages(ctx: RunContext, sku_name: str | None, check: str) -> dict[str, dict[str, Package]]:
    by_name = ctx.inventory.by_name()
    targets = [by_name[n] for n in (ctx.check_nodes.get(check) or list(by_name))]
    same = [
        n
        for n in targets
        if not (st := ctx.states[n.name]).down_reason and (st.match.name if st.match else None) == sku_name
    ]
    got, _ = each_node(same, lambda n: packages_of(platform(measure_probe(ctx, CONFIG_PROBE, n, targets))))
    return {name: pk for name, pk in got.items() if pk is not None}
