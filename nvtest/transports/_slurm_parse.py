"""Pure readers of Slurm client output: ``scontrol show node -o``, ``srun -v -l``,
``salloc``, ``sbatch --parsable``. No I/O, no subprocess.

Formats are those of Slurm 22.05 (Debian 12's ``slurm-wlm`` 22.05.8), which are
unchanged through 23.x and 24.x for the lines read here.
"""

from __future__ import annotations

import re
import signal
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from ClusterShell.NodeSet import NodeSet, NodeSetParseError

__all__ = [
    "SRUN_IO_MSG_LEN",
    "UNAVAILABLE_FLAGS",
    "SlurmNodeState",
    "SrunLog",
    "TaskStatus",
    "parse_job_id",
    "parse_node_records",
    "parse_sbatch_job_id",
    "parse_task_ids",
    "split_labelled",
    "states_from_records",
]

#: State words (``scontrol`` ``State=A+B`` parts) that keep a node out of a run.
UNAVAILABLE_FLAGS = frozenset(
    {
        "DOWN",
        "DRAIN",
        "DRAINED",
        "DRAINING",
        "FAIL",
        "FAILING",
        "NOT_RESPONDING",
        "FUTURE",
        "POWERED_DOWN",
        "POWERING_DOWN",
        "POWER_DOWN",
        "REBOOT_ISSUED",
        "INVALID",
        "INVALID_REG",
        "NOT_FOUND",
    }
)


@dataclass(frozen=True)
class SlurmNodeState:
    """One node as Slurm sees it.

    Attributes:
        state: Slurm's state, base and flags joined by ``+`` as ``scontrol``
            prints it (``IDLE``, ``IDLE+DRAIN``, ``DOWN*+NOT_RESPONDING``);
            ``NOT_FOUND`` for a name Slurm does not know.
        reason: the admin reason (``scontrol update ... reason=``), without
            Slurm's ``[user@time]`` suffix; empty when none.
        features: active features (``ActiveFeatures``), empty when none.
        gres: the node's GRES string (``gpu:h100:8``), empty when none.
        address: ``NodeAddr``, where the other nodes reach it (empty when Slurm gives none).
    """

    state: str
    reason: str = ""
    features: tuple[str, ...] = ()
    gres: str = ""
    address: str = ""

    @property
    def flags(self) -> frozenset[str]:
        """The state's words, upper case, without Slurm's ``*~#!%$@^-`` suffixes."""
        return frozenset(p.strip().rstrip("*~#!%$@^-").upper() for p in self.state.split("+") if p.strip())

    @property
    def available(self) -> bool:
        """False when the node is down, drained, draining, failed, not responding..."""
        return not (self.flags & UNAVAILABLE_FLAGS) and "*" not in self.state


_REASON_RE = re.compile(r"(?:^|\s)Reason=(?P<reason>.*?)(?:\s+\[(?P<who>[^\]@\s]+)@(?P<when>[^\]\s]+)\])?\s*$")
_KEY_RE = re.compile(r"(?:^|\s)([A-Za-z][A-Za-z0-9_]*)=")


def parse_node_records(text: str) -> list[dict[str, str]]:
    """Read ``scontrol show node -o`` (one node per line) into key -> value maps.

    Values may hold spaces (``OS=Linux 6.1 #1 SMP``); ``Reason=`` runs to the
    end of the line (it is the last field in Slurm 22.05-24.x) and may hold
    ``=``; its ``[user@time]`` suffix goes to ``ReasonUser``/``ReasonTime``.
    Lines without ``NodeName=`` are skipped.
    """
    records = []
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("NodeName="):
            continue
        rec: dict[str, str] = {}
        m = _REASON_RE.search(line)
        if m:
            rec["Reason"] = m.group("reason").strip()
            if m.group("who"):
                rec["ReasonUser"], rec["ReasonTime"] = m.group("who"), m.group("when")
            line = line[: m.start()]
        keys = list(_KEY_RE.finditer(line))
        for i, k in enumerate(keys):
            end = keys[i + 1].start() if i + 1 < len(keys) else len(line)
            rec[k.group(1)] = line[k.end() : end].strip()
        records.append(rec)
    return records


def _none_if_null(value: str) -> str:
    return "" if value in ("(null)", "N/A", "none", "(none)") else value


def states_from_records(records: Iterable[dict[str, str]]) -> dict[str, SlurmNodeState]:
    """node name -> :class:`SlurmNodeState` from :func:`parse_node_records`' records."""
    out = {}
    for rec in records:
        features = _none_if_null(rec.get("ActiveFeatures", rec.get("Features", "")))
        out[rec["NodeName"]] = SlurmNodeState(
            state=rec.get("State", "UNKNOWN"),
            reason=_none_if_null(rec.get("Reason", "")),
            features=tuple(f for f in features.split(",") if f),
            gres=_none_if_null(rec.get("Gres", "")),
            address=_none_if_null(rec.get("NodeAddr", "")),
        )
    return out


_LABEL_RE = re.compile(rb"^ *(\d+): ?(.*)$", re.DOTALL)

#: The most bytes slurmstepd sends srun in one output message (``MAX_MSG_LEN`` in
#: Slurm 22.05's ``io_hdr.h``): a longer line reaches srun in pieces of exactly this size.
SRUN_IO_MSG_LEN = 1024


def split_labelled(data: bytes, *, msg_len: int = SRUN_IO_MSG_LEN) -> tuple[dict[int, str], str]:
    """Split ``srun --label`` output into task id -> text, and the unlabelled rest.

    srun prefixes each line of task ``t`` with ``t: `` (right-aligned to the
    widest task id). In its default (line-buffered) mode slurmstepd sends a
    task's output up to its last newline, or ``msg_len`` bytes of a longer
    line; srun labels each piece and ends it with a newline. So a labelled
    piece of exactly ``msg_len`` bytes continues on the task's next piece and
    is joined back without a newline: long lines (a probe's one-line JSON)
    come back whole. A last line without a newline gets one. Decoded as UTF-8
    (undecodable bytes replaced) after joining.
    """
    tasks: dict[int, bytearray] = {}
    rest: list[bytes] = []
    for line in data.split(b"\n"):
        m = _LABEL_RE.match(line)
        if not m:
            if line:
                rest.append(line + b"\n")
            continue
        piece = m.group(2)
        buf = tasks.setdefault(int(m.group(1)), bytearray())
        buf += piece if len(piece) == msg_len else piece + b"\n"
    joined = {t: bytes(b).decode("utf-8", "replace") for t, b in tasks.items()}
    return joined, b"".join(rest).decode("utf-8", "replace")


def parse_task_ids(text: str) -> list[int]:
    """``0``, ``[0-1]``, ``0-3,5``, ``[2,4-5]`` -> sorted task ids."""
    ids: set[int] = set()
    for part in text.strip().strip("[]").split(","):
        part = part.strip()
        if not part:
            continue
        lo, _, hi = part.partition("-")
        ids.update(range(int(lo), int(hi or lo) + 1))
    return sorted(ids)


def _expand(hosts: str) -> list[str]:
    try:
        return list(NodeSet(hosts))
    except (NodeSetParseError, ValueError):
        return [hosts]


@dataclass(frozen=True)
class TaskStatus:
    """How a task ended, as srun reports it.

    Attributes:
        exit_code: the exit status; ``128 + N`` when killed by signal N.
        message: srun's own line for it (``node2: task 1: Exited with exit code 3``).
    """

    exit_code: int
    message: str


_SIGNALS = {signal.strsignal(s) or "": int(s) for s in signal.Signals}
_LAUNCH_RE = re.compile(r"launching (?:StepId=)?(\d+)\.(\d+) on host (\S+), \d+ tasks?: (\S+)")
_JOB_RE = re.compile(r"^srun: (?:jobid (\d+):|job (\d+) (?:queued|has been allocated)|Granted job allocation (\d+))")
_STATUS_RE = re.compile(r"^srun: (?:error: |launch/slurm: _task_finish: )?(\S+): tasks? (\S+): (.+)$")
_EXIT_RE = re.compile(r"Exited with exit code (\d+)")


@dataclass
class SrunLog:
    """What ``srun --verbose`` says on stderr, read line by line as it comes.

    Feed each unlabelled stderr line to :meth:`feed`. Slurm 22.05 lines read:

    - ``srun: jobid 5: nodes(2):`node[1-2]', ...`` / ``srun: job 5 queued ...`` -> job id
    - ``srun: launching StepId=5.0 on host node1, 1 tasks: 0`` -> step id, task -> node
    - ``srun: launch/slurm: _task_finish: node1: task 0: Completed`` -> exit 0
    - ``srun: error: node2: task 1: Exited with exit code 3`` -> exit 3
    - ``srun: error: node1: task 0: Killed`` -> exit 128 + 9

    Attributes:
        job_id, step_id: as strings, None until seen.
        task_node: task id -> node name.
        status: task id -> :class:`TaskStatus`.
        messages: srun's other ``error:``/``warning:``/``fatal:`` lines and its option
            errors (``srun: unrecognized option '--container-image=...'`` where no
            plugin provides the option), in order.
    """

    job_id: str | None = None
    step_id: str | None = None
    task_node: dict[int, str] = field(default_factory=dict)
    status: dict[int, TaskStatus] = field(default_factory=dict)
    messages: list[str] = field(default_factory=list)

    def feed(self, line: str) -> None:
        """Read one line of srun's own stderr (without its newline)."""
        line = line.rstrip("\n")
        m = _JOB_RE.match(line)
        if m:
            self.job_id = self.job_id or next(g for g in m.groups() if g)
            return
        m = _LAUNCH_RE.search(line)
        if m:
            self.job_id, self.step_id = m.group(1), m.group(2)
            for t in parse_task_ids(m.group(4)):
                self.task_node[t] = m.group(3)
            return
        m = _STATUS_RE.match(line)
        if m and not m.group(1).startswith("launch/"):
            code = self._exit_code(m.group(3))
            if code is not None:
                for t in parse_task_ids(m.group(2)):
                    self.status[t] = TaskStatus(code, line[m.start(1) :])
                return
        if re.match(
            r"^srun: (error|warning|fatal|Force Terminated|Job step aborted|unrecognized option"
            r"|invalid option|option requires)",
            line,
        ):
            self.messages.append(line)

    @staticmethod
    def _exit_code(text: str) -> int | None:
        text = text.strip()
        if text == "Completed":
            return 0
        m = _EXIT_RE.match(text)
        if m:
            return int(m.group(1))
        name = text.removesuffix(" (core dumped)")
        if name in _SIGNALS:
            return 128 + _SIGNALS[name]
        return None

    def node_tasks(self) -> dict[str, list[int]]:
        """node -> its task ids, from the launch lines."""
        out: dict[str, list[int]] = {}
        for t, node in sorted(self.task_node.items()):
            for name in _expand(node):
                out.setdefault(name, []).append(t)
        return out


def parse_job_id(text: str) -> str | None:
    """The job id in ``salloc: Granted job allocation 7`` (or ``Pending job allocation 7``)."""
    m = re.search(r"(?:Granted|Pending) job allocation (\d+)", text)
    return m.group(1) if m else None


def parse_sbatch_job_id(stdout: str) -> str:
    """The job id of ``sbatch --parsable`` output: ``123`` or ``123;cluster``.

    Raises:
        ValueError: no job id in the output.
    """
    first = stdout.strip().splitlines()[0] if stdout.strip() else ""
    job = first.split(";", 1)[0].strip()
    if not job.isdigit():
        raise ValueError(f"sbatch printed no job id: {stdout.strip()[:200]!r}")
    return job


def parse_squeue_fields(text: str, fields: Sequence[str]) -> dict[str, dict[str, str]]:
    """Read ``squeue -h -O F1:|,F2:|,...`` (``fields``, the first a job id): job id -> fields.

    Lines with fewer fields, or no job id, are left out.
    """
    out = {}
    for line in text.splitlines():
        parts = [p.strip() for p in line.split("|")]
        if len(parts) >= len(fields) and parts[0]:
            out[parts[0]] = dict(zip(fields, parts, strict=False))
    return out
