"""What the gate keeps on the node between runs: the kernel-log cursor, unresolved fatal
GPU events, the IB error counters of the last gate, the SKU the node last matched, and when
it last ran.

One JSON file per node name, ``<state dir>/gate-<node>.json``: the state directory is
``--state-dir``, else ``$NVTEST_GATE_STATE_DIR``, else ``/var/lib/nvtest`` when it can be
written (root: the Slurm hooks), else ``$XDG_STATE_HOME/nvtest`` (``~/.local/state/nvtest``).
Writes are whole and atomic: a temporary file (flushed to disk) renamed over the old one,
under an ``flock`` so a Prolog and a HealthCheckProgram that end together merge their changes
instead of losing one; a temporary file of a write that failed is removed. Before the rename
the last good generation is copied to ``gate-<node>.json.prev``.

Reading tells three cases apart (:class:`Loaded`): no file (a first gate), a valid file, and
an unreadable one (truncated, zeroed, not JSON, JSON of the wrong shape or types). An
unreadable file is never a crash and never a first gate: the previous generation is read in
its place (events since it are read again from the kernel log), and when that is not good
either, what the state held is marked unknown (``sku_unknown``, ``fatal_events_unknown``, with
why) and the kernel log of this boot is read again from its beginning. The marks stay in the
state until they are resolved (a clean SKU match; a reboot, a kernel log that reaches back to
the boot, or ``--clear-xids``) or an operator forgets the SKU (``--forget-sku``).

The kernel-log cursor is (boot id, seconds since boot of the last line read): a reboot
(a new ``/proc/sys/kernel/random/boot_id``) starts the log afresh and clears the fatal
events of the previous boot.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import stat
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

from pydantic import TypeAdapter, ValidationError

__all__ = [
    "GateState",
    "Loaded",
    "boot_id",
    "boot_started_at",
    "default_state_dir",
    "load_state",
    "read_state",
    "save_state",
    "state_path",
    "write_atomic",
]

STATE_VERSION = 1
#: Fields of :class:`GateState` that live for one gate only (never saved, never read).
TRANSIENT = ("warnings", "expected_by")
#: Suffix of the previous good generation, next to the state file.
PREV_SUFFIX = ".prev"


def boot_id() -> str:
    """This boot's id (``/proc/sys/kernel/random/boot_id``), or ``unknown``."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text(encoding="ascii").strip()
    except OSError:
        return "unknown"


def boot_started_at() -> float | None:
    """Epoch seconds at which this boot began (now minus ``/proc/uptime``), or None."""
    try:
        return time.time() - float(Path("/proc/uptime").read_text(encoding="ascii").split()[0])
    except (OSError, ValueError, IndexError):
        return None


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
        kernel_log_ts: seconds since boot of the last kernel-log line read (None: none yet,
            the log is read from its beginning).
        fatal_events: fatal GPU events seen this boot and not cleared: dicts with code (int),
            kind, pci, ts (seconds since boot), first_seen (epoch s), text; ``verdict``
            ``unknown`` for a code the Xid catalog does not know.
        ib_counters: counter path -> value at ``ib_counters_at`` (epoch s).
        last_gate_at: epoch seconds of the last gate; None for the first.
        sku: the SKU profile the node last matched cleanly.
        sku_unknown: why the remembered SKU is unknown (the state was unreadable), else None.
        fatal_events_unknown: why the uncleared fatal events of this boot are unknown, else None.
        warnings: what reading the state found wrong (not saved).
        expected_by: this gate's second witness of GPUs the PCI bus does not show: (the count
            it expects, None when unknown; its words), else None (not saved; set by the SKU
            match, read by the GPU checks).
    """

    boot_id: str = ""
    kernel_log_ts: float | None = None
    fatal_events: list[dict[str, Any]] = field(default_factory=list)
    ib_counters: dict[str, int] = field(default_factory=dict)
    ib_counters_at: float | None = None
    last_gate_at: float | None = None
    sku: str | None = None
    sku_unknown: str | None = None
    fatal_events_unknown: str | None = None
    warnings: list[str] = field(default_factory=list)
    expected_by: tuple[int | None, str] | None = None

    def to_json(self) -> dict[str, Any]:
        """The saved form (docs/operations.md "Gate state"): every field but :data:`TRANSIENT`."""
        out = asdict(self)
        for name in TRANSIENT:
            out.pop(name)
        return {"version": STATE_VERSION, "saved_at": time.time(), **out}


@dataclass(frozen=True)
class _Event:
    """The shape one saved fatal event must have (more keys are kept as they are)."""

    code: int


_STATE = TypeAdapter(GateState)
_EVENT = TypeAdapter(_Event)


@dataclass(frozen=True)
class Loaded:
    """One read state file: ``state`` when it is valid, else ``why`` it is not (``missing``
    when there is no file); ``mtime``: its modification time (epoch s), None when missing."""

    state: GateState | None
    why: str | None = None
    mtime: float | None = None

    @property
    def missing(self) -> bool:
        return self.state is None and self.why == "missing"


def state_path(state_dir: Path, node: str) -> Path:
    """The state file of ``node`` in ``state_dir`` (characters unsafe in a file name -> ``_``)."""
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in node)
    return state_dir / f"gate-{safe}.json"


def _shape_error(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first.get("loc", ())) or "the document"
    return f"of the wrong shape: {where}: {first.get('msg')}"


#: The most of a state file that is read, bytes: a real one is a few KiB.
MAX_STATE_BYTES = 16 * 1024 * 1024


def _read_regular(path: Path) -> tuple[bytes, float]:
    """``path``'s bytes and mtime, opened without blocking and only when it is a regular file
    of at most :data:`MAX_STATE_BYTES` (a FIFO or a device in its place would otherwise hold
    the gate in ``open()`` or ``read()``, where no deadline and no signal reaches it).

    Raises:
        FileNotFoundError: no such file. OSError: not a regular file, too large, unreadable.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        if info.st_size > MAX_STATE_BYTES:
            raise OSError(errno.EFBIG, f"{info.st_size} bytes, more than a state file holds")
        with os.fdopen(os.dup(fd), "rb") as fh:
            return fh.read(MAX_STATE_BYTES + 1), info.st_mtime
    finally:
        os.close(fd)


def read_state(path: Path) -> Loaded:
    """Read and validate one state file (see :class:`Loaded`); never raises."""
    try:
        data, mtime = _read_regular(path)
    except FileNotFoundError:
        return Loaded(None, "missing")
    except OSError as exc:
        return Loaded(None, f"cannot be read: {exc.strerror or exc}")
    if not data.strip(b" \t\r\n"):
        return Loaded(None, f"empty ({len(data)} bytes): truncated", mtime)
    if not data.strip(b"\0"):
        return Loaded(None, f"zeroed ({len(data)} NUL bytes)", mtime)
    try:
        raw = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        return Loaded(None, f"not JSON ({exc}): truncated or overwritten", mtime)
    if not isinstance(raw, dict):
        return Loaded(None, f"of the wrong shape: a JSON {type(raw).__name__}, not an object", mtime)
    try:
        st = _STATE.validate_python(
            {k: v for k, v in raw.items() if k in GateState.__dataclass_fields__ and k not in TRANSIENT}
        )
    except ValidationError as exc:
        return Loaded(None, _shape_error(exc), mtime)
    for i, e in enumerate(st.fatal_events):
        try:
            _EVENT.validate_python({"code": e.get("code")})
        except ValidationError as exc:
            return Loaded(None, f"of the wrong shape: fatal_events.{i}.{_shape_error(exc).split(': ', 1)[1]}", mtime)
    return Loaded(st, None, mtime)


def load_state(state_dir: Path, node: str) -> GateState:
    """The node's state (see the module docstring); never raises.

    A missing file is a fresh state (a first gate). An unreadable one is replaced by its
    previous generation, else by a fresh state whose SKU (and, when the file was written in
    this boot, whose uncleared fatal events) are marked unknown; either way ``warnings`` says
    which file and why. A state of an earlier boot keeps only what outlives a reboot
    (counters restart, so they are dropped).
    """
    path = state_path(state_dir, node)
    main = read_state(path)
    st = main.state
    if st is None and not main.missing:
        st = _recover(path, main)
    elif st is None:
        prev = read_state(path.with_name(path.name + PREV_SUFFIX))
        if not prev.missing:  # the file is gone but an older generation is there: not a first gate
            st = _recover(path, Loaded(None, "missing, but its previous generation exists", prev.mtime))
    st = st or GateState()
    now_boot = boot_id()
    if st.boot_id and st.boot_id != now_boot:
        st = GateState(last_gate_at=st.last_gate_at, sku=st.sku, sku_unknown=st.sku_unknown, warnings=st.warnings)
    st.boot_id = now_boot
    return st


def _recover(path: Path, main: Loaded) -> GateState:
    """The state to use in place of an unreadable ``path`` (see :func:`load_state`)."""
    prev_path = path.with_name(path.name + PREV_SUFFIX)
    prev = read_state(prev_path)
    if prev.state is not None:
        st = prev.state
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(prev.mtime)) if prev.mtime else "?"
        st.warnings.append(
            f"gate state {path} is {main.why}; its previous generation {prev_path} (saved {when}) is used: "
            "kernel-log lines since then are read again"
        )
        return st
    why = f"gate state {path} is {main.why} and no good previous generation exists ({prev_path}: {prev.why})"
    st = GateState(sku_unknown=why)
    started = boot_started_at()
    if main.mtime is None or started is None or main.mtime >= started:
        st.fatal_events_unknown = why  # written in this boot: it may have held uncleared events
    st.warnings.append(
        f"{why}: the remembered SKU"
        + (" and any uncleared fatal GPU event of this boot are" if st.fatal_events_unknown else " is")
        + " unknown; the kernel log of this boot is read again from its beginning"
    )
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
    # without blocking: a FIFO in the lock's place must not hold the gate in open()
    fd = os.open(path.with_suffix(".lock"), os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NONBLOCK | os.O_NOCTTY, 0o644)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, f"{path.with_suffix('.lock')}: not a regular file")
    with os.fdopen(fd, "a", encoding="utf-8") as fh:
        _flock_until(fh, timeout_s)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` whole: a flushed temporary file renamed over it; the
    temporary file is removed when anything fails.

    Raises:
        OSError: the directory cannot be written.
    """
    tmp = path.with_name(f"{path.name}.tmp{os.getpid()}")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        tmp.replace(path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def save_state(
    state_dir: Path, node: str, st: GateState, *, cleared: bool = False, timeout_s: float | None = None
) -> Path:
    """Write ``st``, merged with a state another gate wrote meanwhile (the later cursor and
    counters win, fatal events are united unless ``cleared``); the file's path. The file it
    replaces, when valid, is kept as the previous generation (``.prev``).

    ``timeout_s``: the longest to wait for the file's lock (None: as long as it takes).

    Raises:
        OSError: the state directory cannot be written; TimeoutError (an OSError): the lock
            was held by another process for ``timeout_s``.
    """
    path = state_path(state_dir, node)
    with _locked(path, timeout_s):
        for stale in path.parent.glob(
            f"{path.name}*.tmp*"
        ):  # of a writer killed mid-write: under the lock, none is live
            with contextlib.suppress(OSError):
                stale.unlink()
        current = read_state(path)
        other = current.state or GateState()
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
        if current.state is not None:
            write_atomic(path.with_name(path.name + PREV_SUFFIX), path.read_bytes())
        write_atomic(path, json.dumps(st.to_json(), indent=1).encode("utf-8"))
        _fsync_dir(path.parent)
    return path
