"""scripts/setup.sh (``make setup``, ``make run``) leaves this machine's own daemons alone.

The script runs in a copy of the checkout with stand-in ``apt-get``, ``dpkg-query`` and
``systemctl`` first on PATH (the real ones would install packages and stop services);
they record what the script asked of them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

STANDINS = {
    # every package is missing, so the script installs; installing starts slurmd
    "dpkg-query": "#!/bin/sh\nexit 1\n",
    "apt-get": '#!/bin/sh\necho "apt-get $*" >> "$STATE/calls"\n'
    'case "$1" in install) echo slurmd >> "$STATE/active";; esac\n',
    "systemctl": '#!/bin/sh\necho "systemctl $*" >> "$STATE/calls"\n'
    'case "$1" in\n'
    '  is-active) grep -qx "$3" "$STATE/active";;\n'
    '  stop) grep -vx "$2" "$STATE/active" > "$STATE/a"; mv "$STATE/a" "$STATE/active";;\n'
    "esac\n",
}


@pytest.mark.skipif(os.geteuid() != 0, reason="the Debian step runs only as root")
def test_setup_stops_only_the_daemons_its_install_started(tmp_path: Path) -> None:
    tree = tmp_path / "checkout"
    (tree / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "setup.sh", tree / "scripts" / "setup.sh")
    shutil.copy(ROOT / "pyproject.toml", tree / "pyproject.toml")
    venv_bin = tree / ".venv" / "bin"
    venv_bin.mkdir(parents=True)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in {**STANDINS, "python": "#!/bin/sh\nexit 0\n"}.items():
        target = venv_bin / name if name == "python" else bin_dir / name
        target.write_text(text)
        target.chmod(0o755)
    state = tmp_path / "state"
    state.mkdir()
    (state / "active").write_text("ssh\nmunge\n")  # the machine's own sshd and munge
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "STATE": str(state)}
    proc = subprocess.run(["bash", "scripts/setup.sh"], cwd=tree, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    calls = (state / "calls").read_text().splitlines()
    assert any(c.startswith("apt-get install") for c in calls), calls
    stopped = [c.split()[-1] for c in calls if c.startswith("systemctl stop")]
    assert stopped == ["slurmd"], calls
    assert (state / "active").read_text().split() == ["ssh", "munge"]
