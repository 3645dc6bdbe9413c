"""``nvtest verify RUN_DIR``: recompute the run's manifest.sha256 (and check its signature).

Exit 0 when every file matches (and, with ``--pubkey``, the signature is good); 1 naming
each changed, missing, added (a symlink, FIFO or unlisted evidence set among them) or
unreadable entry (or a bad or missing signature); 2 for no manifest, a manifest or key that
is not a regular file, or a key that is not an Ed25519 public key (checked first). The format and what the digests prove: :mod:`nvtest.report.manifest`,
docs/report.md.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from nvtest.cli.app import app, console, fail
from nvtest.errors import EXIT_CHECK_FAILED, EXIT_OK, NvtestError

if TYPE_CHECKING:
    from nvtest.report.manifest import Verification

__all__ = ["rejudged_line", "verify_cmd"]


def rejudged_line(verb: str, run_dir: Path) -> str:
    """The console line of a verb that judged stored evidence again and wrote a new manifest."""
    from nvtest.report.manifest import MANIFEST, evidence_digest

    return (
        f"evidence re-judged by {verb} (nothing measured again): new {run_dir / MANIFEST}, "
        f"evidence digest {evidence_digest(run_dir)[:16]}"
    )


def _shown(path: str) -> str:
    """A path as printed: its bytes that are not printable UTF-8 escaped (``bad\\xff.log``)."""
    return path if path.isprintable() else repr(os.fsencode(path))[2:-1]


def _say(result: Verification, prefix: str = "") -> None:
    out = console.print
    for what, paths in (
        ("changed", result.changed),
        ("missing", result.missing),
        ("added", result.added),
        ("malformed", result.malformed),
        ("unreadable", result.unreadable),
    ):
        for p in paths:
            kind = f" (not a regular file: {result.kinds[p]})" if p in result.kinds and not p.endswith("/") else ""
            kind = f" ({result.kinds[p]})" if p.endswith("/") and p in result.kinds else kind
            out(f"{what.upper()}: {_shown(prefix + p)}{kind}", markup=False, highlight=False)
    for p in result.empty:
        out(f"EMPTY DIRECTORY: {_shown(prefix + p)} (holds no file; not a failure)", markup=False, highlight=False)
    if result.signature == "bad":
        out(f"BAD SIGNATURE: {prefix}manifest.sha256.sig does not verify with this key", markup=False)
    elif result.signature == "missing":
        out(f"NO SIGNATURE: {prefix}manifest.sha256.sig is missing", markup=False)
    elif result.signature == "unreadable":
        out(f"UNREADABLE: {prefix}manifest.sha256.sig (the signature cannot be read)", markup=False)
    for sub, nested in result.nested.items():
        state = "ok" if nested.ok else "FAILED"
        signed = "" if nested.signature else " (unsigned)"
        out(
            f"separate evidence set {_shown(prefix + sub)}/ (listed by the manifest above, its own manifest): "
            f"{state}{signed}",
            markup=False,
            highlight=False,
        )
        _say(nested, f"{prefix}{sub}/")


@app.command("verify", epilog="Example: nvtest verify reports/latest --pubkey vendor.pub.pem")
def verify_cmd(
    run_dir: Annotated[Path, typer.Argument(help="A run directory holding manifest.sha256.")],
    pubkey: Annotated[
        Path | None,
        typer.Option(help="Ed25519 public key (PEM): manifest.sha256.sig must verify with it."),
    ] = None,
) -> None:
    """Check every file of a run against its manifest.sha256 (and its signature with --pubkey)."""
    from nvtest.report.manifest import verify_manifest

    try:
        result = verify_manifest(run_dir, pubkey)
    except NvtestError as exc:
        raise fail(exc) from exc
    _say(result)
    files = "every file matches" if result.files_match else "the evidence does NOT match its manifest"
    sig = {"good": "; signature good", None: ""}.get(result.signature, "; the signature does NOT verify")
    line = f"{run_dir}: {files}{sig}"
    if result.files_match and result.signature in (None, "good") and not result.ok:  # agrees with exit 1
        failed = ", ".join(f"{sub}/" for sub, v in result.nested.items() if not v.ok)
        what = "files match and its signature verifies" if result.signature else "files match"
        line = f"{run_dir}: NOT verified: the separate evidence set {failed} FAILED (the top set's {what})"
    console.print(line, markup=False, highlight=False)
    now = result.evidence_digest_now
    console.print(
        f"evidence digest {result.evidence_digest} in the manifest (the report's first page shows its first "
        f"16 digits); {'the same' if now == result.evidence_digest else now} from the files as they are now; "
        f"manifest.sha256 {result.manifest_digest}",
        markup=False,
        highlight=False,
    )
    raise typer.Exit(EXIT_OK if result.ok else EXIT_CHECK_FAILED)
