"""The ``config`` probe keeps the JSON contract, reads only under its root, and changes nothing."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from tests.checks.config.fakesys import a100_topo, build


def _tree(root: Path) -> str:
    h = hashlib.sha256()
    for dirpath, dirs, files in sorted(os.walk(root)):
        dirs.sort()
        for name in sorted(files):
            p = Path(dirpath) / name
            st = p.lstat()
            h.update(f"{p.relative_to(root)} {st.st_size} {st.st_mtime_ns}".encode())
            if not p.is_symlink():
                h.update(p.read_bytes())
    return h.hexdigest()


def test_forced_error_and_usage_error_are_documents(probe):
    run = probe("config_probe.py", env={"NVTEST_PROBE_FORCE_ERROR": "config"})
    assert run.returncode == 1 and run.doc["probe"] == "config" and "forced failure" in run.doc["reason"]
    bad = probe("config_probe.py", "--no-such-option")
    assert bad.doc["status"] == "error" and "usage error" in bad.doc["reason"]


def test_this_machine_is_read_as_it_is(probe):
    run = probe("config_probe.py")
    doc = run.doc
    assert doc["status"] == "ok" and doc["root"] == "/"
    assert doc["kernel"] == os.uname().release and doc["boot_time"] > 0
    assert doc["cpus_allowed"] and doc["raw"]["ip"]["cmd"] == ["ip", "-d", "-j", "addr", "show"]
    assert doc["raw"]["packages"]["manager"] in ("dpkg", "rpm")


def test_a_fake_root_is_read_under_the_root_only_and_left_unchanged(probe, tmp_path):
    root = build(tmp_path / "root", a100_topo())
    before = _tree(root)
    run = probe("config_probe.py", "--sysfs-root", str(root))
    doc = run.doc
    assert _tree(root) == before
    assert len(doc["pci"]) == 26 and doc["numa_nodes"]["3"] == "48-63" and doc["cpus_allowed"] == "0-127"
    gpu = next(d for d in doc["pci"] if d["bdf"] == "0000:13:00.0")
    assert gpu["path"] == ["0000:10:01.1", "0000:11:00.0", "0000:12:00.0"] and gpu["iommu_group_type"] == "identity"
    assert doc["bridges"]["0000:11:00.0"]["device"] == "0x8747"
    assert doc["modules"]["nvidia_peermem"] == {"loaded": True, "version": "535.104.05"}
    assert doc["image_marker"]["id"] == "rack07-2024.04" and doc["image_marker"]["mtime"] == 1_713_000_000
