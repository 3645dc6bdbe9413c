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
  written inside the run): a separate set of evidence, verified on its own
  (:func:`verify_manifest` walks it).

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
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from nvtest.errors import ConfigError, OutputWriteError
from nvtest.results import write_atomic

__all__ = [
    "MANIFEST",
    "REPORTS",
    "SIGNATURE",
    "Verification",
    "evidence_digest",
    "file_digests",
    "sign_manifest",
    "verify_manifest",
    "write_manifest",
]

MANIFEST = "manifest.sha256"
SIGNATURE = "manifest.sha256.sig"
#: The files that show the evidence digest, listed in the manifest after it is taken.
REPORTS = frozenset({"report.html", "report.pdf"})
_CHUNK = 1 << 20


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def _walk(run_dir: Path) -> Iterable[str]:
    """Relative paths (``/``-separated) of the files the manifest covers, unsorted."""
    for top, dirs, files in os.walk(run_dir):
        here = Path(top)
        dirs[:] = [d for d in dirs if not (here / d / MANIFEST).is_file()]  # a set of its own
        rel_top = here.relative_to(run_dir).as_posix()
        for name in files:
            rel = name if rel_top == "." else f"{rel_top}/{name}"
            if rel in (MANIFEST, SIGNATURE) or not (here / name).is_file():
                continue
            yield rel


def file_digests(run_dir: Path) -> dict[str, str]:
    """``relative path -> sha256 hex`` of every file the manifest covers (see the module doc).

    Raises:
        OSError: a file could not be read.
    """
    return {rel: _sha256(run_dir / rel) for rel in sorted(_walk(run_dir))}


def _lines(digests: dict[str, str]) -> str:
    return "".join(f"{d}  {rel}\n" for rel, d in sorted(digests.items()))


def evidence_digest(run_dir: Path, digests: dict[str, str] | None = None) -> str:
    """SHA-256 (hex) of the manifest's lines for every file but ``report.html``/``report.pdf``.

    The same as ``grep -vE '  report\\.(html|pdf)$' manifest.sha256 | sha256sum``.
    """
    digests = file_digests(run_dir) if digests is None else digests
    evidence = {rel: d for rel, d in digests.items() if rel not in REPORTS}
    return hashlib.sha256(_lines(evidence).encode()).hexdigest()


def write_manifest(run_dir: Path, sign_key: Path | None = None) -> Path:
    """Write ``run_dir/manifest.sha256`` for the files there now; sign it with ``sign_key``.

    Without a key a signature left from before is removed (it would not match).

    Raises:
        OutputWriteError: the manifest or its signature could not be written, or a file
            could not be read to digest it.
        ConfigError: ``sign_key`` is not an Ed25519 private key in PEM.
    """
    try:
        text = _lines(file_digests(run_dir))
    except OSError as exc:
        raise OutputWriteError.of(run_dir / MANIFEST, exc) from exc
    path = write_atomic(run_dir / MANIFEST, text)
    sig = run_dir / SIGNATURE
    if sign_key is not None:
        write_atomic(sig, sign_manifest(text.encode(), sign_key))
    else:
        try:
            sig.unlink(missing_ok=True)
        except OSError as exc:
            raise OutputWriteError.of(sig, exc) from exc
    return path


def _read_pem(path: Path, what: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read the {what}: {exc.strerror or exc}", path=str(path)) from exc


def sign_manifest(data: bytes, key_file: Path) -> bytes:
    """The raw 64-byte Ed25519 signature of ``data`` with the PEM private key in ``key_file``.

    Raises:
        ConfigError: the file is unreadable or not an unencrypted Ed25519 private key in PEM.
    """
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    try:
        key = load_pem_private_key(_read_pem(key_file, "signing key"), password=None)
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"not an unencrypted PEM private key: {exc}", path=str(key_file)) from exc
    if not isinstance(key, Ed25519PrivateKey):
        raise ConfigError("not an Ed25519 key (openssl genpkey -algorithm ed25519)", path=str(key_file))
    return key.sign(data)


def _signature_ok(data: bytes, sig: bytes, pubkey: Path) -> bool:
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
    from cryptography.hazmat.primitives.serialization import load_pem_public_key

    try:
        key = load_pem_public_key(_read_pem(pubkey, "public key"))
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"not a PEM public key: {exc}", path=str(pubkey)) from exc
    if not isinstance(key, Ed25519PublicKey):
        raise ConfigError("not an Ed25519 public key", path=str(pubkey))
    try:
        key.verify(sig, data)
    except InvalidSignature:
        return False
    return True


@dataclass
class Verification:
    """What :func:`verify_manifest` found: ``ok`` when nothing differs and a signature
    asked for is good. Paths are relative to the run directory.

    ``signature``: None (not asked), ``"good"``, ``"bad"`` or ``"missing"``; ``nested``:
    the separate sets of evidence below the run (each verified) by their directory.
    """

    run_dir: Path
    evidence_digest: str = ""
    manifest_digest: str = ""
    changed: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    malformed: list[str] = field(default_factory=list)
    signature: str | None = None
    nested: dict[str, Verification] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True when every file matches, none is missing or added, and the signature (if asked) is good."""
        return (
            not (self.changed or self.missing or self.added or self.malformed)
            and self.signature in (None, "good")
            and all(v.ok for v in self.nested.values())
        )


def _parse(text: str, result: Verification) -> dict[str, str]:
    listed: dict[str, str] = {}
    for i, line in enumerate(text.splitlines(), 1):
        digest, sep, rel = line.partition("  ")
        if not sep or len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest) or not rel:
            result.malformed.append(f"{MANIFEST} line {i}")
            continue
        listed[rel] = digest
    return listed


def verify_manifest(run_dir: Path, pubkey: Path | None = None) -> Verification:
    """Recompute every digest of ``run_dir`` against its ``manifest.sha256``.

    Args:
        run_dir: the run directory.
        pubkey: an Ed25519 public key in PEM: the signature ``manifest.sha256.sig`` must
            verify with it (``"missing"`` when there is none).

    Returns:
        The :class:`Verification` (changed, missing and added files named).

    Raises:
        ConfigError: no manifest.sha256 in ``run_dir``, or an unreadable or wrong key.
    """
    mpath = run_dir / MANIFEST
    try:
        data = mpath.read_bytes()
    except OSError as exc:
        raise ConfigError(f"no manifest to verify: {exc.strerror or exc}", path=str(mpath)) from exc
    result = Verification(run_dir=run_dir, manifest_digest=hashlib.sha256(data).hexdigest())
    listed = _parse(data.decode("utf-8", "replace"), result)
    result.evidence_digest = evidence_digest(run_dir, listed)
    present = set(_walk(run_dir))
    for rel, digest in sorted(listed.items()):
        if rel not in present:
            result.missing.append(rel)
        elif _sha256(run_dir / rel) != digest:
            result.changed.append(rel)
    result.added = sorted(present - set(listed))
    if pubkey is not None:
        sig = run_dir / SIGNATURE
        if not sig.is_file():
            result.signature = "missing"
        else:
            result.signature = "good" if _signature_ok(data, sig.read_bytes(), pubkey) else "bad"
    for top, dirs, _files in os.walk(run_dir):
        for d in list(dirs):
            sub = Path(top) / d
            if (sub / MANIFEST).is_file():
                dirs.remove(d)
                signed = pubkey if (sub / SIGNATURE).is_file() else None  # an unsigned copy: said, not failed
                result.nested[sub.relative_to(run_dir).as_posix()] = verify_manifest(sub, signed)
    return result
