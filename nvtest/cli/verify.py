"""``nvtest verify RUN_DIR``: recompute the run's manifest.sha256 (and check its signature).

Exit 0 when every file matches (and, with ``--pubkey``, the signature is good); 1 naming
each changed, missing or added file (or a bad or missing signature); 2 for no manifest or
an unreadable key. The format and what the digests prove: :mod:`nvtest.report.manifest`,
docs/report.md.
"""

from __future__ import annotations

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


def _say(result: Verification, prefix: str = "") -> None:
    out = console.print
    for what, paths in (("changed", result.changed), ("missing", result.missing),
                        ("added", result.added), ("malformed", result.malformed)):  # fmt: skip
        for p in paths:
            out(f"{what.upper()}: {prefix}{p}", markup=False, highlight=False)
    if result.signature == "bad":
        out(f"BAD SIGNATURE: {prefix}manifest.sha256.sig does not verify with this key", markup=False)
    elif result.signature == "missing":
        out(f"NO SIGNATURE: {prefix}manifest.sha256.sig is missing", markup=False)
    for sub, nested in result.nested.items():
        state = "ok" if nested.ok else "FAILED"
        signed = "" if nested.signature else " (unsigned)"
        out(
            f"separate evidence set {prefix}{sub}/ (a re-judged copy, its own manifest): {state}{signed}",
            markup=False, highlight=False,
        )  # fmt: skip
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
    same = not (result.changed or result.missing or result.added or result.malformed)
    files = "every file matches" if same else "the evidence does NOT match its manifest"
    sig = {"good": "; signature good", None: ""}.get(result.signature, "; the signature does NOT verify")
    console.print(f"{run_dir}: {files}{sig}", markup=False, highlight=False)
    console.print(
        f"evidence digest {result.evidence_digest} (the report's first page shows its first 16 digits); "
        f"manifest.sha256 {result.manifest_digest}",
        markup=False, highlight=False,
    )  # fmt: skip
    raise typer.Exit(EXIT_OK if result.ok else EXIT_CHECK_FAILED)
