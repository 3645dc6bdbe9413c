"""What a deadline kills: every process of a command, wherever its children went.

A command's processes ("the task") are found on the node by four marks, so a child that
leaves the process group (``setpgid``), starts its own session (``setsid``) or is
reparented to init still belongs to it:

- its process group (the command runs as the leader of its own group and session);
- its session (a child that changed group but not session);
- descent: any process whose parent is a member (read from ``/proc/<pid>/stat``);
- the task token: every command gets ``NVTEST_TASK=<random>`` in its environment, which
  children inherit (read from ``/proc/<pid>/environ``); a daemon that calls ``setsid()``
  and double-forks away keeps it.

At the deadline the task gets SIGTERM, then, after a grace, SIGKILL (everything found by a
fresh scan, so late forks die too). A process still there (not a zombie) a grace after
SIGKILL cannot be killed: it is in uninterruptible sleep (state ``D``: a wedged driver or
GPU, a filesystem or an HCA that does not answer). The command's result then says
``unkillable`` with each survivor (and, where ``/proc/<pid>/wchan`` reads, what it waits in),
and the caller stops waiting for it. What it was stuck on is the phase's to say (it knows
what the probe touches: :mod:`nvtest.playbook.stuck`), not the transport's.

:func:`kill_task` does this here (the ``local`` transport); :func:`kill_task_script` is
the same procedure as POSIX ``sh`` + ``awk`` for a remote node (the ``ssh`` transport runs
it over the connection), printing what it found as :func:`parse_kill_report` reads it.
Linux's ``/proc`` (``proc(5)``: ``stat`` fields 3-6 state, ppid, pgrp, session) is the
source; elsewhere only the process group is killed.
"""

from __future__ import annotations

import os
import secrets
import shlex
import signal
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "TASK_ENV",
    "KillReport",
    "TaskProcess",
    "kill_task",
    "kill_task_script",
    "new_token",
    "parse_kill_report",
    "task_processes",
]

#: The environment variable that marks every process of one command.
TASK_ENV = "NVTEST_TASK"

#: The word of an unkillable task in a result's error (``unkillable (still alive after
#: SIGKILL: ...)``); the phase runner puts what it was stuck on after it.
UNKILLABLE = "unkillable"


def new_token() -> str:
    """A fresh task token (16 hex digits)."""
    return secrets.token_hex(8)


@dataclass(frozen=True)
class TaskProcess:
    """One process of a task, as ``/proc/<pid>/stat`` shows it.

    Attributes:
        pid: process id.
        state: the state letter (``R`` running, ``S`` sleeping, ``D`` uninterruptible,
            ``Z`` zombie, ``T`` stopped...).
        comm: the executable's name (at most 15 characters, the kernel's ``comm``).
        wchan: the kernel function it sleeps in (``/proc/<pid>/wchan``), "" when not read.
    """

    pid: int
    state: str
    comm: str
    wchan: str = ""

    def __str__(self) -> str:
        where = f", wchan {self.wchan}" if self.wchan else ""
        return f"{self.comm} (pid {self.pid}, state {self.state}{where})"


@dataclass(frozen=True)
class KillReport:
    """What killing a task found.

    Attributes:
        hung: the task's processes at the deadline, before any signal.
        survivors: processes still alive (not zombies) a grace after SIGKILL.
    """

    hung: tuple[TaskProcess, ...] = ()
    survivors: tuple[TaskProcess, ...] = ()

    @property
    def unkillable(self) -> bool:
        return bool(self.survivors)

    def hung_names(self) -> tuple[str, ...]:
        """The distinct process names running at the deadline, in pid order."""
        return tuple(dict.fromkeys(p.comm for p in sorted(self.hung, key=lambda p: p.pid)))

    def describe(self, what: str = "process group and session killed") -> str:
        """One clause for a result's error: what was killed, or the unkillable verdict."""
        if self.survivors:
            alive = ", ".join(str(p) for p in self.survivors[:5])
            return f"{UNKILLABLE} (still alive after SIGKILL: {alive})"
        names = ", ".join(self.hung_names()[:8])
        return f"{what}" + (f" (running at the deadline: {names})" if names else "")


def _stat(pid: int) -> tuple[str, int, int, int, str] | None:
    """(state, ppid, pgrp, session, comm) of ``pid``, None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    head, _, rest = text.rpartition(")")
    fields = rest.split()
    if len(fields) < 4:
        return None
    comm = head.partition("(")[2]
    return fields[0], int(fields[1]), int(fields[2]), int(fields[3]), comm


def _has_token(pid: int, token: str) -> bool:
    try:
        env = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return False
    return f"{TASK_ENV}={token}".encode() in env.split(b"\0")


def task_processes(pgid: int, token: str | None) -> list[TaskProcess]:
    """Every process of the task whose group (and session) id is ``pgid`` and whose
    processes carry ``token`` (see the module text); this process excluded."""
    me = os.getpid()
    table: dict[int, tuple[str, int, int, int, str]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if entry.isdigit() and int(entry) != me:
            st = _stat(int(entry))
            if st is not None:
                table[int(entry)] = st
    members = {
        pid
        for pid, (_, _, pgrp, sid, _) in table.items()
        if pgrp == pgid or sid == pgid or (token and _has_token(pid, token))
    }
    changed = True
    while changed:
        changed = False
        for pid, (_, ppid, _, _, _) in table.items():
            if pid not in members and ppid in members:
                members.add(pid)
                changed = True
    return [TaskProcess(pid, table[pid][0], table[pid][4]) for pid in sorted(members)]


def _signal(pids: Iterable[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def _living(pgid: int, token: str | None) -> list[TaskProcess]:
    return [p for p in task_processes(pgid, token) if p.state != "Z"]


def _wait_gone(pgid: int, token: str | None, grace_s: float) -> list[TaskProcess]:
    deadline = time.monotonic() + grace_s
    while True:
        left = _living(pgid, token)
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.05)


def kill_task(pgid: int, token: str | None, grace_s: float) -> KillReport:
    """SIGTERM every process of the task, SIGKILL what is left after ``grace_s``, and
    report what did not die a further ``grace_s`` after SIGKILL.

    Never raises for processes that vanish meanwhile. Without ``/proc`` (not Linux) only
    the process group is signalled.
    """
    hung = tuple(p for p in task_processes(pgid, token) if p.state != "Z")
    no_proc = not Path("/proc/self/stat").exists()
    for sig in (signal.SIGTERM, signal.SIGCONT):
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            pass
        _signal((p.pid for p in hung), sig)
    if no_proc:
        time.sleep(min(grace_s, 0.5))
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        return KillReport(hung)
    left = _wait_gone(pgid, token, grace_s)
    for _ in range(2):  # twice: a process forked between the scan and the signal
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        _signal((p.pid for p in _living(pgid, token) or left), signal.SIGKILL)
    survivors = _wait_gone(pgid, token, grace_s) if left else []
    return KillReport(hung, tuple(_with_wchan(p) for p in survivors))


def _with_wchan(p: TaskProcess) -> TaskProcess:
    """``p`` with the kernel function it sleeps in (``/proc/<pid>/wchan``; "" when unreadable or 0)."""
    try:
        w = Path(f"/proc/{p.pid}/wchan").read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return p
    return TaskProcess(p.pid, p.state, p.comm, "" if w in ("", "0") else w)


#: awk program over ``T <pid>`` lines (pids carrying the token) and ``/proc/*/stat`` lines:
#: prints ``<pid> <state> <comm>`` of every task member (group, session, token, descent).
_AWK_MEMBERS = r"""
$1 == "T" { tok[$2] = 1; next }
{
  pid = $1; rest = $0; sub(/^.*\) /, "", rest); n = split(rest, f, " ");
  if (n < 4) next;
  comm = $0; sub(/^[0-9]+ \(/, "", comm); sub(/\) [^)]*$/, "", comm); gsub(/ /, "_", comm);
  st[pid] = f[1]; pp[pid] = f[2]; name[pid] = comm; all[pid] = 1;
  if (f[3] == p || f[4] == p || (pid in tok)) m[pid] = 1
}
END {
  do { c = 0; for (q in all) if (!(q in m) && (pp[q] in m)) { m[q] = 1; c = 1 } } while (c);
  for (q in m) if (q != self) print q, st[q], name[q]
}
"""


def kill_task_script(pgid: int | None, token: str | None, grace_s: float, *, same_env: str | None = None) -> str:
    """POSIX shell doing :func:`kill_task` on a remote node (needs ``/proc``, ``awk``, ``grep``).

    ``pgid`` None: the task is found by ``token`` (and descent) alone (a Slurm step's
    tasks, whose group the controller does not know). ``same_env``: a variable whose value
    the script's own environment gives (``SLURMD_NODENAME``): a token holder must carry the
    same value (several slurmd on one host share one ``/proc``). Prints ``hung <pid> <state> <comm>``
    for each process at the start and ``survivor <pid> <state> <comm> <wchan>`` for each one
    alive after SIGKILL + grace (``wchan``: ``/proc/<pid>/wchan``, empty where unreadable);
    exits 0.
    """
    if pgid is None and not token:
        raise ValueError("a task is found by its process group or its token: give one")
    p = -1 if pgid is None else int(pgid)  # -1 matches no group
    group = "" if pgid is None else f"kill -s $s -- -{p} 2>/dev/null; "
    cs = max(10, int(grace_s * 100))  # the grace in centiseconds, the unit of /proc/uptime
    tok = shlex.quote(token or "")
    narrow = ""
    if same_env:
        if not same_env.replace("_", "a").isalnum():
            raise ValueError(f"not a variable name: {same_env!r}")
        narrow = f'| xargs grep -l -a -F "{same_env}=${{{same_env}}}" 2>/dev/null '
    members = (
        '_m() { { [ -n "$t" ] && grep -l -a -F "' + TASK_ENV + '=$t" /proc/[0-9]*/environ '
        f"2>/dev/null {narrow}| sed 's,^/proc/,T ,; s,/environ$,,'; cat /proc/[0-9]*/stat 2>/dev/null; }} "
        f'| awk -v p={p} -v self="$$" {shlex.quote(_AWK_MEMBERS)}; }}; '
    )
    return (
        f"t={tok}; {members}"
        "_live() { _m | awk '$2 != \"Z\"'; }; "
        "_now() { read -r u _ < /proc/uptime; c=${u#*.}; echo $(( ${u%.*} * 100 + ${c#0} )); }; "
        "_wait() { e=$(( $(_now) + " + str(cs) + " )); while :; do l=$(_live); "
        '[ -z "$l" ] && break; [ $(_now) -ge $e ] && break; sleep 0.1; done; }; '
        "h=$(_live); printf '%s\\n' \"$h\" | sed '/^$/d; s/^/hung /'; "
        f"for s in TERM CONT; do {group}"
        "for q in $(printf '%s\\n' \"$h\" | awk '{print $1}'); do kill -s $s $q 2>/dev/null; done; done; "
        "_wait; "
        f'if [ -n "$l" ]; then for r in 1 2; do s=KILL; {group}'
        "for q in $(_live | awk '{print $1}'); do kill -s $s $q 2>/dev/null; done; done; "
        '_wait; printf \'%s\\n\' "$l" | while read -r q s c; do [ -n "$q" ] && '
        'echo "survivor $q $s $c $(cat /proc/$q/wchan 2>/dev/null)"; done; fi; exit 0'
    )


def parse_kill_report(text: str) -> KillReport:
    """The :class:`KillReport` in the output of :func:`kill_task_script`."""
    hung: list[TaskProcess] = []
    survivors: list[TaskProcess] = []
    for line in text.splitlines():
        parts = line.split(maxsplit=3)
        if len(parts) == 4 and parts[0] in ("hung", "survivor") and parts[1].isdigit():
            comm, _, wchan = parts[3].strip().partition(" ")  # the script writes a comm's spaces as _
            wchan = wchan.strip() if parts[0] == "survivor" and wchan.strip() != "0" else ""
            proc = TaskProcess(int(parts[1]), parts[2], comm, wchan)
            (hung if parts[0] == "hung" else survivors).append(proc)
    return KillReport(tuple(hung), tuple(survivors))
