"""What the gate keeps on the node between runs: the kernel-log cursor, unresolved fatal
GPU events, the IB error counters of the last gate, and when it last ran.

One JSON file per node name, ``<state dir>/gate-<node>.json``: the state directory is
``--state-dir``, else ``$NVTEST_GATE_STATE_DIR``, else ``/var/lib/nvtest`` when it can be
written (root: the Slurm hooks), else ``$XDG_STATE_HOME/nvtest`` (``~/.local/state/nvtest``).
Writes go to a temporary file renamed over the old one, under an ``flock`` so a Prolog and a
HealthCheckProgram that end together merge their changes instead of losing one.

The kernel-log cursor is (boot id, seconds since boot of the last line read): a reboot
(a new ``/proc/sys/kernel/random/boot_id``) starts the log afresh and clears the fatal
events of the previous boot.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

__all__ = ["GateState", "boot_id", "default_state_dir", "load_state", "save_state"]

STATE_VERSION = 1


def boot_id() -> str:
    """This boot's id (``/proc/sys/kernel/random/boot_id``), or ``unknown``."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text(encoding="ascii").strip()
    except OSError:
        return "unknown"


def default_state_dir() -> Path:
    """Where the state lives when ``--state-dir`` is not given (see the module docstring)."""
    env = os.environ.get("NVTEST_GATE_STATE_DIR")
    if env:
        return Path(env)
    system = Path("/var/lib/nvtest")
    try:
        system.mkdir(parents=True, exist_ok=True)
        if os.access(system, os.W_OK):
            return system
    except OSError:
        pass
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "nvtest"


@dataclass
class GateState:
    """The node's gate state.

    Attributes:
        boot_id: the boot the kernel-log cursor belongs to.
        kernel_log_ts: seconds since boot of the last kernel-log line read (None: none yet).
        fatal_events: fatal GPU events seen this boot and not cleared: dicts with code, pci,
            ts (seconds since boot), first_seen (epoch s), text.
        ib_counters: counter path -> value at ``ib_counters_at`` (epoch s).
        last_gate_at: epoch seconds of the last gate; None for the first.
        sku: the SKU profile the node last matched cleanly.
    """

    boot_id: str = ""
    kernel_log_ts: float | None = None
    fatal_events: list[dict[str, Any]] = field(default_factory=list)
    ib_counters: dict[str, int] = field(default_factory=dict)
    ib_counters_at: float | None = None
    last_gate_at: float | None = None
    sku: str | None = None


def _path(state_dir: Path, node: str) -> Path:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in node)
    return state_dir / f"gate-{safe}.json"


def _read(path: Path) -> GateState:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return GateState()
    known = GateState.__dataclass_fields__
    return GateState(**{k: v for k, v in raw.items() if k in known})


def load_state(state_dir: Path, node: str) -> GateState:
    """The node's state; a fresh one when there is none or it is unreadable. A state of an
    earlier boot keeps only what outlives a reboot (counters restart, so they are dropped)."""
    st = _read(_path(state_dir, node))
    now_boot = boot_id()
    if st.boot_id and st.boot_id != now_boot:
        st = GateState(last_gate_at=st.last_gate_at, sku=st.sku)
    st.boot_id = now_boot
    return st


def _flock_until(fh: IO[str], timeout_s: float | None) -> None:
    """``flock(LOCK_EX)``, tried until ``timeout_s`` has passed (None: wait as long as it takes).

    Raises:
        TimeoutError: another process held the lock all that time.
    """
    if timeout_s is None:
        fcntl.flock(fh, fcntl.LOCK_EX)
        return
    until = time.monotonic() + timeout_s
    while True:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= until:
                raise TimeoutError(f"{fh.name} stayed locked by another process for {timeout_s:.1f} s") from None
            time.sleep(0.02)


@contextlib.contextmanager
def _locked(path: Path, timeout_s: float | None = None) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "a", encoding="utf-8") as fh:
        _flock_until(fh, timeout_s)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def save_state(state_dir: Path, node: str, st: GateState, *, cleared: bool = False, timeout_s: float | None = None) -> Path:
    """Write ``st``, merged with a state another gate wrote meanwhile (the later cursor and
    counters win, fatal events are united unless ``cleared``); the file's path.

    ``timeout_s``: the longest to wait for the file's lock (None: as long as it takes).

    Raises:
        OSError: the state directory cannot be written; TimeoutError (an OSError): the lock
            was held by another process for ``timeout_s``.
    """
    path = _path(state_dir, node)
    with _locked(path, timeout_s):
        other = _read(path)
        if other.boot_id == st.boot_id:
            if other.kernel_log_ts is not None and (st.kernel_log_ts or -1) < other.kernel_log_ts:
                st.kernel_log_ts = other.kernel_log_ts
            if not cleared:
                seen = {(e.get("code"), e.get("pci"), e.get("ts")) for e in st.fatal_events}
                st.fatal_events += [
                    e for e in other.fatal_events if (e.get("code"), e.get("pci"), e.get("ts")) not in seen
                ]
            if (other.ib_counters_at or 0) > (st.ib_counters_at or 0):
                st.ib_counters, st.ib_counters_at = other.ib_counters, other.ib_counters_at
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps({"version": STATE_VERSION, "saved_at": time.time(), **asdict(st)}, indent=1), encoding="utf-8")
        tmp.replace(path)
    return path
