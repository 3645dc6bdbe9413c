"""Stand-in tools: executables that replay a recorded real output, for nodes with no GPU.

A GPU or RDMA path is tested end to end on a machine without the hardware by putting
stand-ins for the field's tools (``nvidia-smi``, ``lspci``, ``dmesg``, ``ibstat``,
``dcgmi``, ``all_reduce_perf``...) first on a node's ``PATH``: each prints the recorded
stdout and stderr of one real run and exits with its exit code, chosen by the
arguments it is called with::

    tools = StandInTools(tmp_path / "bin")
    tools.add("nvidia-smi", Recording.of_file(corpus / "plain-h100.txt"),
              by_args={"-q -x": Recording.of_file(corpus / "q-x-h100.xml")})
    env = {"PATH": tools.path_prefix()}          # local runs
    SSHDCluster(4, node_env={"sim02": {"PATH": tools.path_prefix()}})  # one node of a cluster

Each stand-in is a POSIX ``sh`` script (no Python needed on the node): a ``case`` on
``"$*"`` (the arguments joined by one space, matched as a shell glob pattern, in the
order given), then the default. A call with no recording for its arguments exits 127
with ``stand-in <tool>: no recording for: <args>`` on stderr, as a missing tool would.
Every call is appended to ``<bin_dir>/.calls`` (``<tool> <args>``), so a test can
assert what ran.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Recording", "StandInTools"]


@dataclass(frozen=True)
class Recording:
    """One recorded run of a tool: what it printed and how it exited.

    Attributes:
        stdout: text printed on stdout.
        stderr: text printed on stderr.
        exit_code: the exit status (0-255).
        sleep_s: seconds to wait before printing (a slow or hung tool; ``sleep`` runs
            in the foreground, so a deadline must kill it).
        prelude: shell run first (e.g. :meth:`nvtest.testing.wedged.Freezer.wedge_command`
            then ``wait``: a tool stuck where SIGKILL cannot end it).
    """

    stdout: str = ""
    stderr: str = ""
    exit_code: int = 0
    sleep_s: float = 0.0
    prelude: str = ""

    @classmethod
    def of_file(cls, path: Path, *, exit_code: int = 0, stderr: str = "") -> Recording:
        """A recording whose stdout is the text of ``path`` (a corpus file)."""
        return cls(stdout=path.read_text(encoding="utf-8"), stderr=stderr, exit_code=exit_code)


class StandInTools:
    """A directory of stand-in executables (see the module docstring).

    Args:
        bin_dir: created if missing; put it first on the node's ``PATH``.
    """

    def __init__(self, bin_dir: Path) -> None:
        self.bin_dir = Path(bin_dir)
        self.bin_dir.mkdir(parents=True, exist_ok=True)
        self._data = self.bin_dir / ".recordings"
        self._data.mkdir(exist_ok=True)
        self.calls_file = self.bin_dir / ".calls"

    def add(
        self,
        tool: str,
        default: Recording | None = None,
        *,
        by_args: Mapping[str, Recording] | None = None,
    ) -> Path:
        """Write the stand-in for ``tool``; return its path.

        ``by_args``: glob pattern of the joined arguments -> recording, tried in order;
        ``default``: for any other arguments (None: exit 127 as an unknown call).

        Raises:
            ValueError: ``tool`` is not a plain file name.
        """
        if not tool or "/" in tool or tool.startswith("."):
            raise ValueError(f"not a tool name: {tool!r}")
        arms = []
        for i, (pattern, rec) in enumerate((by_args or {}).items()):
            arms.append(f"  {_glob(pattern)}) {self._replay(tool, i, rec)} ;;")
        if default is not None:
            arms.append(f"  *) {self._replay(tool, 'default', default)} ;;")
        else:
            arms.append(f'  *) echo "stand-in {tool}: no recording for: $*" >&2; exit 127 ;;')
        script = "\n".join(
            [
                "#!/bin/sh",
                f"# stand-in for {tool}: replays recorded real outputs (nvtest.testing.standin)",
                f'printf "%s %s\\n" {shlex.quote(tool)} "$*" >> {shlex.quote(str(self.calls_file))}',
                'case "$*" in',
                *arms,
                "esac",
                "",
            ]
        )
        path = self.bin_dir / tool
        path.write_text(script, encoding="utf-8")
        path.chmod(0o755)
        return path

    def add_missing(self, tool: str) -> None:
        """Make ``tool`` absent even where the machine has it (a stand-in that exits 127
        like the shell's "command not found")."""
        self.add(tool, Recording(stderr=f"sh: 1: {tool}: not found\n", exit_code=127))

    def _replay(self, tool: str, key: int | str, rec: Recording) -> str:
        out = self._data / f"{tool}.{key}.out"
        err = self._data / f"{tool}.{key}.err"
        out.write_text(rec.stdout, encoding="utf-8")
        err.write_text(rec.stderr, encoding="utf-8")
        steps = [f"{rec.prelude.rstrip().rstrip(';')};"] if rec.prelude.strip() else []
        steps += [f"sleep {rec.sleep_s:g};"] if rec.sleep_s > 0 else []
        steps += [f"cat {shlex.quote(str(out))};", f"cat {shlex.quote(str(err))} >&2;", f"exit {int(rec.exit_code)}"]
        return " ".join(steps)

    def calls(self) -> list[str]:
        """Every call so far, ``<tool> <args>`` each, in order."""
        if not self.calls_file.exists():
            return []
        return self.calls_file.read_text(encoding="utf-8").splitlines()

    def path_prefix(self, path: str | None = None) -> str:
        """``PATH`` with the stand-ins first (``path``: the rest; default this process's)."""
        rest = os.environ.get("PATH", "") if path is None else path
        return f"{self.bin_dir}{os.pathsep}{rest}" if rest else str(self.bin_dir)


def _glob(pattern: str) -> str:
    """A ``case`` pattern that matches ``pattern`` as a glob (spaces and quotes escaped)."""
    out = []
    for ch in pattern:
        if ch in "*?[]":
            out.append(ch)
        elif ch.isalnum() or ch in "-_.,=/:+%@":
            out.append(ch)
        else:
            out.append("\\" + ch)
    return "".join(out) or "''"
