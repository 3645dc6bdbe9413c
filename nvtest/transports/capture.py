"""Bounded capture of a command's output: the first and last bytes kept, the rest counted.

Every output nvtest captures from a command (the local transport's pipes, an SSH channel,
srun's stdout and stderr, the gate's tools) goes through one :class:`BoundedCapture` per
stream, so whatever a node prints, the controller holds at most the capture limit per
stream: with 64 nodes at once, 64 x the limit, never the nodes' output.

The limit (:func:`capture_limit`) is ``$NVTEST_CAPTURE_BYTES`` (bytes; ``8MiB``, ``512KiB``
and ``1GB``-style suffixes are read too), else :data:`DEFAULT_LIMIT` (8 MiB): the first half
and the last half are kept. A cut output keeps a marker line where the middle was, and the
command's result says what was dropped (:func:`capture_note`), in the words a report shows:
``output of 300.0 MB exceeded the capture limit of 8 MiB: first and last 4 MiB kept,
291.6 MB dropped``.
"""

from __future__ import annotations

import os
import re
import select
import subprocess
import time
from collections import deque

__all__ = [
    "CAPTURE_ENV",
    "DEFAULT_LIMIT",
    "BoundedCapture",
    "capture_limit",
    "capture_note",
    "human_bytes",
    "joined_note",
    "pump_process",
    "read_capped",
]

#: The environment variable that sets the capture limit per stream, in bytes.
CAPTURE_ENV = "NVTEST_CAPTURE_BYTES"
#: The default capture limit per stream: 4 MiB head + 4 MiB tail.
DEFAULT_LIMIT = 8 * 1024 * 1024
#: The smallest limit accepted (a probe's JSON document must fit in the tail).
MIN_LIMIT = 64 * 1024

_UNITS = {
    "": 1,
    "b": 1,
    "k": 1000,
    "kb": 1000,
    "m": 1000**2,
    "mb": 1000**2,
    "g": 1000**3,
    "gb": 1000**3,
    "kib": 1024,
    "mib": 1024**2,
    "gib": 1024**3,
}


def capture_limit() -> int:
    """The capture limit per stream, bytes (``$NVTEST_CAPTURE_BYTES``, else 8 MiB; at least
    64 KiB). A value that does not read as a size is ignored (the default holds)."""
    raw = os.environ.get(CAPTURE_ENV, "").strip().lower().replace(" ", "")
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([a-z]*)", raw)
    if not m or m.group(2) not in _UNITS:
        return DEFAULT_LIMIT
    return max(MIN_LIMIT, int(float(m.group(1)) * _UNITS[m.group(2)]))


def human_bytes(n: float, *, binary: bool = False) -> str:
    """``n`` bytes as text: ``300.0 MB`` (decimal units), or ``4 MiB`` with ``binary``."""
    if binary:
        for unit, size in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
            if n >= size:
                v = n / size
                return f"{v:g} {unit}" if v == int(v) else f"{v:.1f} {unit}"
        return f"{int(n)} B"
    for unit, size in (("GB", 1000**3), ("MB", 1000**2), ("kB", 1000)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{int(n)} B"


def capture_note(total: int, limit: int, dropped: int, stream: str = "output") -> str:
    """The words for a cut stream: ``output of 300.0 MB exceeded the capture limit of 8 MiB:
    first and last 4 MiB kept, 291.6 MB dropped``."""
    half = human_bytes(limit // 2, binary=True)
    return (
        f"{stream} of {human_bytes(total)} exceeded the capture limit of {human_bytes(limit, binary=True)}: "
        f"first and last {half} kept, {human_bytes(dropped)} dropped"
    )


class BoundedCapture:
    """One stream's captured bytes: at most ``limit // 2`` from its start and ``limit // 2``
    from its end, and the count of everything in between.

    Not thread-safe: one reader feeds it (:meth:`add`), then the result is read.

    Args:
        limit: bytes kept at most (head + tail); None: :func:`capture_limit`.
    """

    def __init__(self, limit: int | None = None) -> None:
        self.limit = capture_limit() if limit is None else max(2, int(limit))
        self._head_max = self.limit // 2
        self._tail_max = self.limit - self._head_max
        self._head = bytearray()
        self._tail: deque[bytes] = deque()
        self._tail_len = 0
        #: bytes seen in all
        self.total = 0

    def add(self, chunk: bytes) -> None:
        """Take the next bytes of the stream."""
        if not chunk:
            return
        self.total += len(chunk)
        room = self._head_max - len(self._head)
        if room > 0:
            self._head += chunk[:room]
            chunk = chunk[room:]
            if not chunk:
                return
        self._tail.append(bytes(chunk))
        self._tail_len += len(chunk)
        while self._tail_len - len(self._tail[0]) >= self._tail_max:
            self._tail_len -= len(self._tail.popleft())

    def __iadd__(self, chunk: bytes) -> BoundedCapture:
        self.add(chunk)
        return self

    def prefix(self, n: int) -> bytes:
        """The stream's first ``n`` bytes (at most; a marker line a wrapper prints first)."""
        return bytes(self._head[:n])

    @property
    def dropped(self) -> int:
        """Bytes of the stream not kept."""
        return max(0, self.total - self._head_max - self._tail_max)

    @property
    def truncated(self) -> bool:
        """True when bytes were dropped."""
        return self.dropped > 0

    def note(self, stream: str = "output") -> str | None:
        """:func:`capture_note` of this stream, or None when nothing was dropped."""
        return capture_note(self.total, self.limit, self.dropped, stream) if self.truncated else None

    def getvalue(self) -> bytes:
        """The kept bytes: the head, a marker line when bytes were dropped, the tail."""
        parts: list[bytes] = [bytes(self._head)]
        if self.truncated:
            parts.append(f"\n[nvtest: {human_bytes(self.dropped)} of output dropped here (capture limit)]\n".encode())
        extra = self._tail_len - self._tail_max  # the first tail chunk may reach before the tail
        if extra > 0 and self._tail:
            parts.append(self._tail[0][extra:])
            parts.extend(list(self._tail)[1:])
        else:
            parts.extend(self._tail)
        return b"".join(parts)

    def take(self) -> bytes:
        """:meth:`getvalue`, then the buffers are released (the counts stay): the caller's
        copy is the only one."""
        value = self.getvalue()
        self._head = bytearray()
        self._tail.clear()
        self._tail_len = 0
        return value

    def __bytes__(self) -> bytes:
        return self.getvalue()

    def __len__(self) -> int:
        return len(self._head) + self._tail_len


def joined_note(stdout: BoundedCapture, stderr: BoundedCapture) -> str | None:
    """What the limit dropped of a command's two streams (``stdout of ...; stderr of ...``),
    or None when both were kept whole."""
    notes = [n for n in (stdout.note("stdout"), stderr.note("stderr")) if n]
    return "; ".join(notes) or None


def read_capped(path: str | os.PathLike[str], limit: int | None = None) -> BoundedCapture:
    """A file a job wrote (an sbatch job's output): its first and last ``limit // 2`` bytes
    (:func:`capture_limit` when None) through a :class:`BoundedCapture`, the middle skipped
    with a seek, never read.

    Raises:
        OSError: the file cannot be opened or read.
    """
    cap = BoundedCapture(limit)
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        head = cap.limit // 2
        cap.add(fh.read(head))
        skip = size - cap.limit
        if skip > 0:
            cap.total += skip  # counted as seen, never read
            fh.seek(head + skip)
        while chunk := fh.read(1 << 20):
            cap.add(chunk)
    return cap


def pump_process(
    proc: subprocess.Popen[bytes],
    stdin: bytes | None,
    deadline: float,
    into: tuple[BoundedCapture, BoundedCapture] | None = None,
) -> tuple[BoundedCapture, BoundedCapture, bool]:
    """Read a process's stdout/stderr pipes (and write ``stdin``) until both close or
    ``deadline`` (a ``time.monotonic()`` value), each into a :class:`BoundedCapture`: the
    one reader of every local process nvtest captures (the local transport, the gate's tools).

    ``into``: the captures to read on into (a second call after a kill); new ones when None.
    Returns (stdout, stderr, done); done is False at the deadline. Our pipe ends are left
    open for the caller to close.
    """
    assert proc.stdout is not None and proc.stderr is not None
    out, err = into or (BoundedCapture(), BoundedCapture())
    readers = {proc.stdout.fileno(): out, proc.stderr.fileno(): err}
    pending = memoryview(stdin) if stdin else None
    writer = proc.stdin.fileno() if proc.stdin is not None and pending is not None else None
    if proc.stdin is not None and writer is None:
        proc.stdin.close()
    while readers:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return out, err, False
        wlist = [writer] if writer is not None else []
        ready_r, ready_w, _ = select.select(list(readers), wlist, [], min(remaining, 0.5))
        for fd in ready_w:
            assert pending is not None and proc.stdin is not None
            try:
                n = os.write(fd, pending[:65536])
                pending = pending[n:]
            except (BrokenPipeError, OSError):
                pending = pending[:0]
            if not pending:
                proc.stdin.close()
                writer = None
        for fd in ready_r:
            chunk = os.read(fd, 65536)
            if chunk:
                readers[fd].add(chunk)
            else:
                del readers[fd]
    return out, err, True
