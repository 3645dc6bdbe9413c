#!/usr/bin/env python3
"""Checkpoint tier bandwidth: write, fsync, read back and verify a checkpoint-sized file.

Usage::

    python3 ckpt_probe.py --tier mem|local|shared --path DIR [--size-mib 2048] [--chunk-mib 16]
                          [--model] [--inject-corruption] [--deadline-s S]

Write: ``size`` bytes in ``chunk`` pieces (random bytes; the first 8 bytes of
each chunk carry its index so no two chunks are equal), then ``fsync``.
``write_gbps = size / (sum of write() times + fsync time) / 1e9``.  The
CRC-32 of the data is computed between writes, outside the timed calls.

Read: the page cache of the file is dropped first (``posix_fadvise
DONTNEED`` after the fsync: clean pages leave the cache; on tmpfs the data
stays in memory, which is that tier), then the file is read with
``readinto``; ``read_gbps = size / (sum of readinto() times) / 1e9``.  The
CRC-32 of what came back must equal the one written (``verified``).

``--model``: the model state of the training smoke run (the tiny transformer
and its AdamW state after one step) saved with ``torch.save`` + fsync and
loaded with ``torch.load``; seconds each, tensors compared.

``--inject-corruption``: flip one byte in the middle of the file between the
write and the read (a test of the verification: ``verified`` must be false).

Each result carries wall-clock start/end of its write and read phases
(``time.time()``) so that the controller can compute the aggregate bandwidth
of all nodes writing a shared filesystem at once.

The shared tier is the site's: its directory must exist (it is never created: an unmounted
path would be a local directory), then a small marker file
(``.nvtest-writable-<host>``) is written, fsynced and removed before the measurement.
``--deadline-s``: the whole measurement runs in a child process (its stdio on /dev/null, so
that a child stuck on a hung mount holds nothing of the caller's open); if it does not
answer within S seconds, the document says at which step (``stat``, ``writable``,
``write``, ``read``) the path stopped answering, and the probe exits at once (a process
stuck in an NFS ``D`` state cannot be killed; it is left behind, named). Each such outcome
is a ``kind: reach`` result ``{"reachable": false, "step", "reason"}``; a path that answered
gives ``{"reachable": true, "writable": true, "seconds"}``.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import json  # noqa: E402
import select  # noqa: E402
import signal  # noqa: E402
import time  # noqa: E402
import zlib  # noqa: E402
from typing import Any  # noqa: E402

import _contract as contract  # noqa: E402
import _libraries as libs  # noqa: E402
import _timing as timing  # noqa: E402

PROBE = "ckpt"


def mount_of(path: str, mounts: str = "/proc/mounts") -> dict[str, str | None]:
    """``{"mount_point", "fs_type", "device"}`` of the mount holding ``path`` (longest prefix)."""
    real = os.path.realpath(path)
    best = {"mount_point": None, "fs_type": None, "device": None}
    best_len = -1
    try:
        with open(mounts, encoding="utf-8") as fh:
            for line in fh:
                parts = line.split()
                if len(parts) < 3:
                    continue
                mp = parts[1].replace("\\040", " ")
                if (real == mp or real.startswith(mp.rstrip("/") + "/")) and len(mp) > best_len:
                    best, best_len = {"mount_point": mp, "fs_type": parts[2], "device": parts[0]}, len(mp)
    except OSError:
        pass
    return best


def _drop_cache(fd: int) -> bool:
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        return True
    except (AttributeError, OSError):
        return False


def write_file(path: str, size: int, chunk: int) -> dict[str, Any]:
    """Write ``size`` bytes to ``path``; timing of the write calls and fsync, and the CRC-32."""
    buf = bytearray(os.urandom(chunk))
    view = memoryview(buf)
    crc, timed, written, index = 0, 0.0, 0, 0
    t_start = time.time()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        while written < size:
            n = min(chunk, size - written)
            buf[0:8] = index.to_bytes(8, "little")
            crc = zlib.crc32(view[:n], crc)
            t0 = time.perf_counter()
            off = 0
            while off < n:
                off += os.write(fd, view[off:n])
            timed += time.perf_counter() - t0
            written += n
            index += 1
        t0 = time.perf_counter()
        os.fsync(fd)
        fsync_s = time.perf_counter() - t0
        timed += fsync_s
        dropped = _drop_cache(fd)
    finally:
        os.close(fd)
    return {"write_s": timed, "fsync_s": fsync_s, "crc32": crc, "cache_dropped": dropped,
            "t_write_start": t_start, "t_write_end": time.time()}


def corrupt(path: str, size: int) -> int:
    """Flip the bits of the byte at ``size // 2``; returns its offset."""
    pos = size // 2
    with open(path, "r+b") as fh:
        fh.seek(pos)
        b = fh.read(1)
        fh.seek(pos)
        fh.write(bytes([b[0] ^ 0xFF]))
        fh.flush()
        os.fsync(fh.fileno())
        _drop_cache(fh.fileno())
    return pos


def read_file(path: str, chunk: int) -> dict[str, Any]:
    """Read ``path`` back; timing of the readinto calls, bytes read and the CRC-32."""
    buf = bytearray(chunk)
    view = memoryview(buf)
    crc, timed, total = 0, 0.0, 0
    t_start = time.time()
    with open(path, "rb", buffering=0) as fh:
        while True:
            t0 = time.perf_counter()
            n = fh.readinto(buf)
            timed += time.perf_counter() - t0
            if not n:
                break
            crc = zlib.crc32(view[:n], crc)
            total += n
    return {"read_s": timed, "read_bytes": total, "read_crc32": crc, "t_read_start": t_start,
            "t_read_end": time.time()}


def _no_step(name: str) -> None:
    """The step callback of an unbounded measurement (nothing to report to)."""


def check_writable(directory: str, step: Any = _no_step) -> dict[str, Any] | None:
    """The shared tier's directory answers and takes a write: ``stat`` (it must exist and be a
    directory), then a small marker file written, fsynced and removed. None when it does, else
    the ``kind: reach`` result saying what failed, in the OS's words."""

    def unreachable(at: str, reason: str, writable: bool | None = None) -> dict[str, Any]:
        return {"kind": "reach", "reachable": writable is not None, "writable": writable, "step": at,
                "reason": f"{directory}: {reason}"}

    step("stat")
    try:
        os.stat(directory)
    except OSError as exc:
        return unreachable("stat", f"not reachable: {exc.strerror or exc} (not mounted?)")
    if not os.path.isdir(directory):
        return unreachable("stat", "not a directory")
    step("writable")
    marker = os.path.join(directory, f".nvtest-writable-{contract.hostname()}")
    try:
        fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, b"nvtest\n")
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.remove(marker)
        except FileNotFoundError:  # a node of the same host name (containers) removed it first
            pass
    except OSError as exc:
        return unreachable("writable", f"not writable: {exc.strerror or exc}", writable=False)
    return None


def bounded(fn: Any, deadline_s: float) -> dict[str, Any]:
    """``fn(step)`` in a child process, its result back within ``deadline_s`` seconds, else a
    ``kind: reach`` result naming the step it was at. ``step(name)`` reports progress.

    Raises:
        ProbeError: the child's own ProbeError (a missing or read-only path: said as is).
    """
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: nothing of the caller's stdio, so a stuck child holds no pipe open
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.close(r)

        def say(doc: dict[str, Any]) -> None:
            os.write(w, (json.dumps(doc) + "\n").encode())

        try:
            say({"result": fn(lambda name: say({"step": name}))})
        except contract.ProbeError as exc:
            say({"error": str(exc)})
        except BaseException as exc:  # noqa: BLE001 - the parent words it
            say({"error": f"{type(exc).__name__}: {exc}"})
        os._exit(0)
    os.close(w)
    t0 = time.monotonic()
    last, buf, got = "start", b"", None
    while got is None:
        left = deadline_s - (time.monotonic() - t0)
        if left <= 0 or not select.select([r], [], [], left)[0]:
            break
        chunk = os.read(r, 1 << 16)
        if not chunk:
            break
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            msg = json.loads(line)
            last = msg.get("step", last)
            if "result" in msg or "error" in msg:
                got = msg
    os.close(r)
    if got is None:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
        time.sleep(0.2)
        gone = os.waitpid(pid, os.WNOHANG)[0] == pid
        left_behind = "" if gone else f"; its process {pid} did not die on SIGKILL (uninterruptible I/O: a hung mount)"
        return {"kind": "reach", "reachable": False, "step": last, "seconds": round(time.monotonic() - t0, 3),
                "reason": f"no answer within {deadline_s:g} s at step '{last}'{left_behind}"}
    os.waitpid(pid, 0)
    if "error" in got:
        raise contract.ProbeError(got["error"])
    return got["result"]


def measure_tier(tier: str, directory: str, size: int, chunk: int, inject: bool, step: Any = _no_step) -> dict[str, Any]:
    """Write, (corrupt,) read back and verify one file in ``directory`` (the shared tier's must
    exist and take a write first: :func:`check_writable`)."""
    if tier == "shared":
        if (bad := check_writable(directory, step)) is not None:
            return bad
    else:
        os.makedirs(directory, exist_ok=True)
    step("write")
    st = os.statvfs(directory)
    free = st.f_bavail * st.f_frsize
    if free < size * 1.05:
        raise contract.ProbeError(f"{directory}: {free / 2**20:.0f} MiB free, need {size / 2**20:.0f} MiB")
    path = os.path.join(directory, f"nvtest-ckpt-{contract.hostname()}-{os.getpid()}.bin")
    try:
        w = write_file(path, size, chunk)
        flipped = corrupt(path, size) if inject else None
        step("read")
        r = read_file(path, chunk)
    finally:
        try:
            os.remove(path)
        except FileNotFoundError:
            pass
    verified = r["read_bytes"] == size and r["read_crc32"] == w["crc32"]
    return {
        "kind": "tier", "tier": tier, "path": directory, **mount_of(directory), "size_bytes": size,
        "chunk_bytes": chunk, **w, **r, "write_gbps": timing.gbps(size, w["write_s"]),
        "read_gbps": timing.gbps(r["read_bytes"], r["read_s"]) if r["read_s"] > 0 else None,
        "checksum": f"crc32:{w['crc32']:08x}", "read_checksum": f"crc32:{r['read_crc32']:08x}",
        "verified": verified, "corruption_injected_at": flipped,
    }


def measure_model_state(directory: str) -> dict[str, Any]:
    """Save and restore the smoke run's model + AdamW state with torch; seconds and bytes."""
    torch = libs.require("torch")
    import train_smoke as smoke

    torch.manual_seed(smoke.SEED)
    model = smoke.build_model(torch)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    perm = torch.randperm(smoke.VOCAB, generator=torch.Generator().manual_seed(smoke.SEED))
    batch = smoke.make_batch(torch, torch.Generator().manual_seed(1), perm, smoke.BATCH, smoke.SEQ)
    loss = torch.nn.functional.cross_entropy(model(batch[:, :-1]).reshape(-1, smoke.VOCAB), batch[:, 1:].reshape(-1))
    loss.backward()
    opt.step()
    state = {"model": model.state_dict(), "optimizer": opt.state_dict(), "step": 1}
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"nvtest-model-{contract.hostname()}-{os.getpid()}.pt")
    try:
        t0 = time.perf_counter()
        with open(path, "wb") as fh:
            torch.save(state, fh)
            fh.flush()
            os.fsync(fh.fileno())
        save_s = time.perf_counter() - t0
        size = os.path.getsize(path)
        t0 = time.perf_counter()
        back = torch.load(path, weights_only=True)
        load_s = time.perf_counter() - t0
    finally:
        try:
            os.remove(path)
        except FileNotFoundError:
            pass
    same = all(torch.equal(v, back["model"][k]) for k, v in state["model"].items())
    params = sum(p.numel() for p in model.parameters())
    return {"kind": "model_state", "path": directory, "save_s": save_s, "load_s": load_s, "bytes": size,
            "parameters": params, "verified": same, "library": libs.library_label(torch)}


def build_parser() -> contract.ProbeArgumentParser:
    p = contract.ProbeArgumentParser(prog="ckpt_probe.py", description=__doc__.splitlines()[0])
    p.add_argument("--tier", choices=("mem", "local", "shared"), required=True)
    p.add_argument("--path", default="", help="directory on the tier (empty for shared: skipped)")
    p.add_argument("--size-mib", type=float, default=2048.0)
    p.add_argument("--chunk-mib", type=float, default=16.0)
    p.add_argument("--model", action="store_true", help="also save/restore the smoke run's model state")
    p.add_argument("--inject-corruption", action="store_true")
    p.add_argument("--deadline-s", type=float, default=0.0,
                   help="seconds the path has to answer (0: no bound but the caller's)")
    return p


def body(args: Any, doc: dict[str, Any]) -> None:
    if not args.path:
        if args.tier == "shared":
            raise contract.ProbeSkip("no shared filesystem path configured (recipe ckpt.shared_path)")
        raise contract.ProbeError(f"usage error: --path is required for tier {args.tier}")
    size = int(args.size_mib * 2**20)
    chunk = max(4096, int(args.chunk_mib * 2**20))
    if size <= 0:
        raise contract.ProbeError("usage error: --size-mib must be > 0")
    doc.update(tier=args.tier, library="python zlib.crc32")
    if args.deadline_s > 0:
        t0 = time.monotonic()
        res = bounded(lambda step: measure_tier(args.tier, args.path, size, chunk, args.inject_corruption, step),
                      args.deadline_s)
        reach = {"kind": "reach", "reachable": True, "writable": True, "seconds": round(time.monotonic() - t0, 3)}
    else:
        res = measure_tier(args.tier, args.path, size, chunk, args.inject_corruption)
        reach = {"kind": "reach", "reachable": True, "writable": True} if args.tier == "shared" else None
    if res.get("kind") == "reach":  # the path did not answer or take a write: nothing measured
        why = str(res.get("reason"))
        why = why if why.startswith(args.path) else f"{args.path}: {why}"
        doc["results"] = [{**res, "reason": why, "tier": args.tier, "path": args.path}]
        return
    results = [res, *([reach] if reach else [])]
    if args.model:
        mod, why = libs.optional_import("torch")
        results.append(measure_model_state(args.path) if mod is not None
                       else {"kind": "model_state", "status": "skip", "reason": why})
    doc["results"] = results


if __name__ == "__main__":
    sys.exit(contract.run(PROBE, build_parser(), body))
