"""``manifest.sha256``: a digest of every file of a run directory, optionally signed.

The manifest is a ``sha256sum`` file (``<64 hex>  <path relative to the run directory>``,
one line per file, sorted by path, ``/`` as separator), so ``sha256sum -c manifest.sha256``
run in the run directory checks it as well as ``nvtest verify`` does.

What it covers: every regular file below the run directory (results.jsonl, results.json,
junit.xml, results.csv/.parquet, report.html, report.pdf, the as-built record, every raw
log), with three exceptions:

- ``manifest.sha256`` itself and its signature ``manifest.sha256.sig`` (a file cannot hold
  its own digest);
- a sub-directory holding a ``manifest.sha256`` of its own (an ``nvtest evaluate`` copy
  written inside the run): a separate set of evidence. The manifest lists that set's
  ``manifest.sha256`` (and its signature), so the top manifest, which the signature
  covers, pins the nested one; :func:`verify_manifest` trusts and walks a nested set only
  where the top manifest lists its manifest with that digest, else it names the
  directory ADDED.

Symbolic links are never followed: a symlink, FIFO, socket or device is not a regular file
and is not listed; :func:`verify_manifest` names each one (ADDED, or CHANGED where the
manifest lists a file of that name). Names are written as GNU ``sha256sum`` writes them: a
name holding a backslash or a newline gets a leading ``\\`` on its line and ``\\\\`` /
``\\n`` escapes; a name's bytes are kept as they are (``os.fsencode``), UTF-8 or not.

The report cannot contain the digest of a manifest that lists the report, so the manifest
is made in two stages. The *evidence digest* (:func:`evidence_digest`) is the SHA-256 of the
manifest's lines for every file but ``report.html`` and ``report.pdf``; the reports show it
on their first page. The manifest then adds the reports' own lines. A printed report's
digest therefore proves which evidence (results, logs, tables, as-built record) it was
rendered from; the manifest's last lines and its signature cover the report files.

Signing: Ed25519 (the ``cryptography`` package), keys in PEM (``openssl genpkey -algorithm
ed25519``); the signature is the raw 64 bytes over the manifest file's bytes, written to
``manifest.sha256.sig``, so ``openssl pkeyutl -verify -rawin`` checks it too
(docs/report.md).
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nvtest.errors import ConfigError, OutputWriteError
from nvtest.results import write_atomic

__all__ = [
    "MANIFEST",
    "REPORTS",
    "SIGNATURE",
    "Verification",
    "check_sign_key",
    "evidence_digest",
    "file_digests",
    "manifest_lines",
    "parse_manifest",
    "sign_manifest",
    "verify_manifest",
    "write_manifest",
]

MANIFEST = "manifest.sha256"
SIGNATURE = "manifest.sha256.sig"
#: The files that show the evidence digest, listed in the manifest after it is taken.
REPORTS = frozenset({"report.html", "report.pdf"})
_CHUNK = 1 << 20
_KINDS = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISDIR, "a directory"),
)


def _read_regular(path: Path, *, follow: bool = True) -> bytes:
    """The bytes of ``path``, a regular file; never blocks on a FIFO (O_NONBLOCK, checked by fstat).

    Raises:
        OSError: unreadable, absent, or not a regular file (EINVAL; ``follow=False``: a
            symlink is ELOOP).
    """
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    fd = os.open(path, flags)
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(22, "not a regular file", str(path))
        return fh.read()


def _sha256(path: Path) -> str:
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(22, "not a regular file", str(path))
        h = hashlib.sha256()
        while chunk := fh.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def _what(path: Path, st: os.stat_result) -> str:
    """What a non-regular entry is, in words (``a symlink to /etc``, ``a FIFO``)."""
    if stat.S_ISLNK(st.st_mode):
        try:
            return f"a symlink to {os.readlink(path)}"
        except OSError:
            return "a symlink"
    return next((name for test, name in _KINDS if test(st.st_mode)), "not a regular file")


def _is_set(path: Path) -> bool:
    """True when the directory ``path`` holds a regular (not symlinked) manifest.sha256."""
    try:
        return stat.S_ISREG(os.lstat(path / MANIFEST).st_mode)
    except OSError:
        return False


@dataclass
class _Tree:
    """What :func:`_scan` found below a run directory (paths relative, ``/``-separated)."""

    files: list[str] = field(default_factory=list)
    odd: dict[str, str] = field(default_factory=dict)  # not a regular file -> what it is
    empty: list[str] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)  # directories (trailing /) and entries
    nested: list[str] = field(default_factory=list)


def _scan(run_dir: Path) -> _Tree:
    """Walk ``run_dir`` without following any symlink (see the module doc)."""
    tree = _Tree()
    stack = [""]
    while stack:
        rel_dir = stack.pop()
        here = run_dir / rel_dir if rel_dir else run_dir
        try:
            with os.scandir(here) as it:
                entries = list(it)
        except OSError:
            tree.unreadable.append(f"{rel_dir}/")
            continue
        if not entries and rel_dir:
            tree.empty.append(f"{rel_dir}/")
        for entry in entries:
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            if rel in (MANIFEST, SIGNATURE):
                continue  # the manifest and its signature: read by name
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                tree.unreadable.append(rel)
                continue
            if stat.S_ISREG(st.st_mode):
                tree.files.append(rel)
            elif stat.S_ISDIR(st.st_mode) and _is_set(Path(entry.path)):
                tree.nested.append(rel)  # a set of its own: its manifest (and signature) listed here
                tree.files.append(f"{rel}/{MANIFEST}")
                sig = Path(entry.path) / SIGNATURE
                if sig.is_file() and not sig.is_symlink():
                    tree.files.append(f"{rel}/{SIGNATURE}")
            elif stat.S_ISDIR(st.st_mode):
                stack.append(rel)
            else:
                tree.odd[rel] = _what(Path(entry.path), st)
    return tree


def file_digests(run_dir: Path) -> dict[str, str]:
    """``relative path -> sha256 hex`` of every file the manifest covers (see the module doc).

    Raises:
        OSError: a file or directory could not be read.
    """
    tree = _scan(run_dir)
    if tree.unreadable:
        raise PermissionError(13, "cannot read", str(run_dir / tree.unreadable[0]))
    return {rel: _sha256(run_dir / rel) for rel in sorted(tree.files)}


def _line(rel: str, digest: str) -> bytes:
    """One manifest line as GNU sha256sum writes it (escaped where the name needs it)."""
    name = os.fsencode(rel)
    if b"\\" in name or b"\n" in name:
        return b"\\" + digest.encode() + b"  " + name.replace(b"\\", b"\\\\").replace(b"\n", b"\\n") + b"\n"
    return digest.encode() + b"  " + name + b"\n"


def manifest_lines(digests: dict[str, str]) -> bytes:
    """The manifest file's bytes for ``relative path -> sha256 hex``, sorted by path's bytes."""
    return b"".join(_line(rel, d) for rel, d in sorted(digests.items(), key=lambda kv: os.fsencode(kv[0])))


def _unescape(name: bytes) -> bytes | None:
    out, i = bytearray(), 0
    while i < len(name):
        c = name[i : i + 1]
        if c == b"\\":
            nxt = name[i + 1 : i + 2]
            if nxt not in (b"\\", b"n"):
                return None
            out += b"\\" if nxt == b"\\" else b"\n"
            i += 2
        else:
            out += c
            i += 1
    return bytes(out)


def parse_manifest(data: bytes) -> tuple[dict[str, str], list[str]]:
    """``(relative path -> sha256 hex, malformed line descriptions)`` of a manifest's bytes.

    Reads what :func:`manifest_lines` and GNU ``sha256sum`` write, escaped lines included;
    a name's bytes that are not UTF-8 are kept (``os.fsdecode``).
    """
    listed: dict[str, str] = {}
    malformed: list[str] = []
    for i, line in enumerate(data.split(b"\n"), 1):
        if not line and i > data.count(b"\n"):
            break  # after the last newline
        escaped = line.startswith(b"\\")
        digest, sep, raw = (line[1:] if escaped else line).partition(b"  ")
        name = _unescape(raw) if escaped else raw
        if not sep or len(digest) != 64 or any(c not in b"0123456789abcdef" for c in digest) or not name:
            malformed.append(f"{MANIFEST} line {i}")
            continue
        listed[os.fsdecode(name)] = digest.decode()
    return listed, malformed


def evidence_digest(run_dir: Path, digests: dict[str, str] | None = None) -> str:
    """SHA-256 (hex) of the manifest's lines for every file but ``report.html``/``report.pdf``.

    The same as ``grep -vE '  report\\.(html|pdf)$' manifest.sha256 | sha256sum``.

    Raises:
        OSError: ``digests`` is None and a file could not be read.
    """
    digests = file_digests(run_dir) if digests is None else digests
    evidence = {rel: d for rel, d in digests.items() if rel not in REPORTS}
    return hashlib.sha256(manifest_lines(evidence)).hexdigest()


def write_manifest(run_dir: Path, sign_key: Path | None = None) -> Path:
    """Write ``run_dir/manifest.sha256`` for the files there now; sign it with ``sign_key``.

    Without a key a signature left from before is removed (it would not match).

    Raises:
        OutputWriteError: the manifest or its signature could not be written, or a file
            could not be read to digest it.
        ConfigError: ``sign_key`` is not an Ed25519 private key in PEM.
    """
    try:
        text = manifest_lines(file_digests(run_dir))
    except OSError as exc:
        raise OutputWriteError.of(run_dir / MANIFEST, exc) from exc
    signature = sign_manifest(text, sign_key) if sign_key is not None else None
    path = write_atomic(run_dir / MANIFEST, text)
    sig = run_dir / SIGNATURE
    if signature is not None:
        write_atomic(sig, signature)
    else:
        try:
            sig.unlink(missing_ok=True)
        except OSError as exc:
            raise OutputWriteError.of(sig, exc) from exc
    return path


def _read_pem(path: Path, what: str) -> bytes:
    try:
        return _read_regular(path)
    except OSError as exc:
        raise ConfigError(f"cannot read the {what}: {exc.strerror or exc}", path=str(path)) from exc


def _private_key(key_file: Path) -> Any:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    try:
        key = load_pem_private_key(_read_pem(key_file, "signing key"), password=None)
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"not an unencrypted PEM private key: {exc}", path=str(key_file)) from exc
    if not isinstance(key, Ed25519PrivateKey):
        raise ConfigError("not an Ed25519 key (openssl genpkey -algorithm ed25519)", path=str(key_file))
    return key


def check_sign_key(key_file: Path | None) -> None:
    """Check that ``key_file`` (None: nothing to check) can sign, before anything is written.

    Raises:
        ConfigError: the file is unreadable, not a regular file (a FIFO is never opened
            blocking), or not an unencrypted Ed25519 private key in PEM.
    """
    if key_file is not None:
        _private_key(key_file)


def sign_manifest(data: bytes, key_file: Path) -> bytes:
    """The raw 64-byte Ed25519 signature of ``data`` with the PEM private key in ``key_file``.

    Raises:
        ConfigError: the file is unreadable, not a regular file, or not an unencrypted
            Ed25519 private key in PEM.
    """
    return bytes(_private_key(key_file).sign(data))


def _public_key(pubkey: Path) -> Any:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
    from cryptography.hazmat.primitives.serialization import load_pem_public_key

    try:
        key = load_pem_public_key(_read_pem(pubkey, "public key"))
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"not a PEM public key: {exc}", path=str(pubkey)) from exc
    if not isinstance(key, Ed25519PublicKey):
        raise ConfigError("not an Ed25519 public key", path=str(pubkey))
    return key


def _signature_ok(data: bytes, sig: bytes, key: Any) -> bool:
    from cryptography.exceptions import InvalidSignature

    try:
        key.verify(sig, data)
    except InvalidSignature:
        return False
    return True


@dataclass
class Verification:
    """What :func:`verify_manifest` found: ``ok`` when nothing differs and a signature
    asked for is good. Paths are relative to the run directory.

    ``evidence_digest``: the manifest's (what the report shows); ``evidence_digest_now``:
    the same recomputed from the files as they are now. ``signature``: None (not asked),
    ``"good"``, ``"bad"``, ``"missing"`` or ``"unreadable"``; ``kinds``: what a changed or
    added entry that is not a regular file is (``a symlink to /etc``); ``empty``: empty
    directories (named, not a failure: they hold no evidence and a manifest cannot list
    them); ``nested``: the separate sets of evidence the manifest lists, each verified, by
    their directory.
    """

    run_dir: Path
    evidence_digest: str = ""
    evidence_digest_now: str = ""
    manifest_digest: str = ""
    changed: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    malformed: list[str] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)
    empty: list[str] = field(default_factory=list)
    kinds: dict[str, str] = field(default_factory=dict)
    signature: str | None = None
    nested: dict[str, Verification] = field(default_factory=dict)

    @property
    def files_match(self) -> bool:
        """True when every file of this set (not its nested sets) matches and none is missing,
        added, unreadable, or a malformed line."""
        return not (self.changed or self.missing or self.added or self.malformed or self.unreadable)

    @property
    def ok(self) -> bool:
        """True when every file matches, none is missing or added, and the signature (if asked) is good,
        here and in every nested set."""
        return self.files_match and self.signature in (None, "good") and all(v.ok for v in self.nested.values())


def _under(rel: str, dirs: list[str]) -> bool:
    return any(d.endswith("/") and rel.startswith(d) for d in dirs)


def verify_manifest(run_dir: Path, pubkey: Path | None = None, *, _key: Any = None) -> Verification:
    """Recompute every digest of ``run_dir`` against its ``manifest.sha256``.

    Args:
        run_dir: the run directory (it may be a symlink; nothing below it is followed).
        pubkey: an Ed25519 public key in PEM, checked first: the signature
            ``manifest.sha256.sig`` must verify with it (``"missing"`` when there is none),
            and so must each nested set's.

    Returns:
        The :class:`Verification` (changed, missing, added and unreadable entries named).

    Raises:
        ConfigError: no manifest.sha256 in ``run_dir`` or not a regular file, or an
            unreadable, non-regular or wrong key.
    """
    key = _key if _key is not None or pubkey is None else _public_key(pubkey)
    mpath = run_dir / MANIFEST
    try:
        data = _read_regular(mpath, follow=False)
    except OSError as exc:
        raise ConfigError(f"no manifest to verify: {exc.strerror or exc}", path=str(mpath)) from exc
    result = Verification(run_dir=run_dir, manifest_digest=hashlib.sha256(data).hexdigest())
    listed, result.malformed = parse_manifest(data)
    result.evidence_digest = evidence_digest(run_dir, listed)
    tree = _scan(run_dir)
    now: dict[str, str] = {}
    for rel in sorted(tree.files):
        try:
            now[rel] = _sha256(run_dir / rel)
        except OSError:
            tree.unreadable.append(rel)
    result.unreadable = sorted(tree.unreadable)
    result.evidence_digest_now = evidence_digest(run_dir, now)
    result.empty = sorted(tree.empty)
    for rel, digest in sorted(listed.items()):
        if rel in now:
            if now[rel] != digest:
                result.changed.append(rel)
        elif rel in tree.odd:
            result.changed.append(rel)
            result.kinds[rel] = tree.odd[rel]
        elif rel not in result.unreadable and not _under(rel, result.unreadable):
            result.missing.append(rel)
    for sub in tree.nested:
        m = f"{sub}/{MANIFEST}"
        if m in listed and now.get(m) == listed[m]:
            result.nested[sub] = verify_manifest(run_dir / sub, pubkey, _key=key)
        elif m not in listed:  # a set the signed manifest does not pin: not trusted
            result.added.append(f"{sub}/")
            result.kinds[f"{sub}/"] = "a separate evidence set this manifest does not list"
            for name in (m, f"{sub}/{SIGNATURE}"):
                now.pop(name, None)
    result.added = sorted([*result.added, *(set(now) - set(listed)), *(set(tree.odd) - set(listed))])
    result.kinds.update({rel: tree.odd[rel] for rel in result.added if rel in tree.odd})
    if key is not None:
        result.signature = _check_signature(run_dir / SIGNATURE, data, key)
    return result


def _check_signature(sig: Path, data: bytes, key: Any) -> str:
    try:
        st = os.lstat(sig)
    except FileNotFoundError:
        return "missing"
    except OSError:
        return "unreadable"
    if not stat.S_ISREG(st.st_mode):
        return "bad"
    try:
        raw = _read_regular(sig, follow=False)
    except OSError:
        return "unreadable"
    return "good" if _signature_ok(data, raw, key) else "bad"
