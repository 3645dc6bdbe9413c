"""manifest.sha256: written by finish_run over every file of a run, checked by ``nvtest verify``
(and by ``sha256sum -c``), signed with Ed25519; a rebuild and ``nvtest evaluate`` write their own."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    NoEncryption,
    PrivateFormat,
    PublicFormat,
)

from nvtest.analysis.finish import finish_run
from nvtest.report.manifest import MANIFEST, SIGNATURE, evidence_digest, verify_manifest
from nvtest.report.synthetic import synthetic_doc
from tests.conftest import run_nvtest


def _keypair(d: Path, name: str) -> tuple[Path, Path]:
    key = Ed25519PrivateKey.generate()
    priv, pub = d / f"{name}.pem", d / f"{name}.pub.pem"
    priv.write_bytes(key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()))
    pub.write_bytes(key.public_key().public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo))
    return priv, pub


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path]]:
    d = tmp_path_factory.mktemp("keys")
    return {"vendor": _keypair(d, "vendor"), "other": _keypair(d, "other")}


@pytest.fixture(scope="module")
def signed_run(tmp_path_factory: pytest.TempPathFactory, keys: dict[str, tuple[Path, Path]]) -> Path:
    """A finished 8-node run with its raw logs, its manifest signed with the vendor's key."""
    run_dir = tmp_path_factory.mktemp("manifest") / "run"
    doc = synthetic_doc(8)
    for r in doc["results"]:
        if r.get("log"):
            log = run_dir / r["log"]
            log.parent.mkdir(parents=True, exist_ok=True)
            log.write_text(f"$ probe {r['check']}\nexit 0\n{r.get('reason') or 'ok'}\n", encoding="utf-8")
    finish_run(run_dir, doc=doc, history=False, sign_key=keys["vendor"][0])
    return run_dir


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def test_every_file_is_listed_and_sha256sum_agrees(signed_run: Path) -> None:
    listed = [line.split("  ", 1)[1] for line in (signed_run / MANIFEST).read_text().splitlines()]
    files = sorted(p.relative_to(signed_run).as_posix() for p in signed_run.rglob("*") if p.is_file())
    assert listed == [f for f in files if f not in (MANIFEST, SIGNATURE)]
    assert {"results.json", "report.html", "junit.xml", "results.csv"} <= set(listed)
    assert any(f.startswith("logs/") for f in listed)
    if shutil.which("sha256sum"):
        proc = subprocess.run(["sha256sum", "-c", "--quiet", MANIFEST], cwd=signed_run, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stdout + proc.stderr


def test_report_shows_the_evidence_digest_of_the_manifest_without_the_reports(signed_run: Path) -> None:
    lines = (signed_run / MANIFEST).read_text().splitlines(keepends=True)
    evidence = "".join(line for line in lines if not re.search(r"  report\.(html|pdf)$", line))
    digest = hashlib.sha256(evidence.encode()).hexdigest()
    assert digest == evidence_digest(signed_run)
    html = (signed_run / "report.html").read_text(encoding="utf-8")
    first_screen = html[: html.index('id="matrix-sec"')]
    assert f'<code class="digest">{digest[:16]}</code>' in first_screen and digest in first_screen


def test_fresh_run_verifies_and_its_signature_with_the_right_key_only(
    signed_run: Path, keys: dict[str, tuple[Path, Path]]
) -> None:
    proc = run_nvtest("verify", str(signed_run), "--pubkey", str(keys["vendor"][1]))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "every file matches; signature good" in proc.stdout
    proc = run_nvtest("verify", str(signed_run), "--pubkey", str(keys["other"][1]))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "BAD SIGNATURE" in proc.stdout


def test_one_byte_of_one_log_changed_exits_1_naming_it(signed_run: Path, tmp_path: Path) -> None:
    run = _copy(signed_run, tmp_path / "run")
    log = sorted((run / "logs").rglob("*.log"))[3]
    data = bytearray(log.read_bytes())
    data[5] ^= 0x01
    log.write_bytes(bytes(data))
    proc = run_nvtest("verify", str(run))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"CHANGED: {log.relative_to(run).as_posix()}" in proc.stdout
    assert proc.stdout.count("CHANGED:") == 1


def test_missing_and_added_files_are_named(signed_run: Path, tmp_path: Path) -> None:
    run = _copy(signed_run, tmp_path / "run")
    (run / "junit.xml").unlink()
    (run / "logs" / "note.txt").write_text("added later\n")
    result = verify_manifest(run)
    assert not result.ok
    assert result.missing == ["junit.xml"] and result.added == ["logs/note.txt"] and not result.changed
    (run / SIGNATURE).unlink()
    (run / "junit.xml").write_text("x")
    (run / "logs" / "note.txt").unlink()
    assert verify_manifest(run).changed == ["junit.xml"]


def test_no_manifest_and_a_wrong_key_are_usage_errors(signed_run: Path, tmp_path: Path) -> None:
    assert run_nvtest("verify", str(tmp_path)).returncode == 2
    bad = tmp_path / "not-a-key.pem"
    bad.write_text("-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n")
    proc = run_nvtest("verify", str(signed_run), "--pubkey", str(bad))
    assert proc.returncode == 2 and "not-a-key.pem" in proc.stderr


def test_rebuild_and_evaluate_write_a_new_manifest_and_say_rejudged(signed_run: Path, tmp_path: Path) -> None:
    run = _copy(signed_run, tmp_path / "run")
    proc = run_nvtest("report", str(run))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "evidence re-judged by nvtest report" in proc.stdout
    assert not (run / SIGNATURE).exists()  # the vendor's signature covered the files before
    assert verify_manifest(run).ok
    assert json.loads((run / "results.json").read_text())["run"]["rejudged"]["by"] == "nvtest report"
    assert 'id="rejudged"' in (run / "report.html").read_text(encoding="utf-8")
    proc = run_nvtest("evaluate", str(run), "--sku", "h100-sxm-80gb")
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    assert "evidence re-judged by nvtest evaluate" in proc.stdout
    copy = run / "evaluate-h100-sxm-80gb"
    assert (copy / MANIFEST).is_file() and verify_manifest(copy).ok
    assert "nvtest evaluate" in (copy / "report.html").read_text(encoding="utf-8")
    result = verify_manifest(run)  # the copy is a separate set: the run's own evidence is unchanged
    assert result.ok and not result.added and list(result.nested) == ["evaluate-h100-sxm-80gb"]
    (copy / "results.csv").write_text("forged\n")
    result = verify_manifest(run)
    assert not result.ok and result.nested["evaluate-h100-sxm-80gb"].changed == ["results.csv"]
