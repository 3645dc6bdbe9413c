"""manifest.sha256: written by finish_run over every file of a run, checked by ``nvtest verify``
(and by ``sha256sum -c``), signed with Ed25519; a rebuild and ``nvtest evaluate`` write their own."""

from __future__ import annotations

import hashlib
import json
import os
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
from nvtest.errors import ConfigError
from nvtest.report.manifest import (
    MANIFEST,
    SIGNATURE,
    check_sign_key,
    evidence_digest,
    verify_manifest,
    write_manifest,
)
from nvtest.testing.synthetic import synthetic_doc
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
    assert "names it ADDED" in proc.stdout
    copy = run / "evaluate-h100-sxm-80gb"
    assert (copy / MANIFEST).is_file() and verify_manifest(copy).ok
    assert "nvtest evaluate" in (copy / "report.html").read_text(encoding="utf-8")
    result = verify_manifest(run)  # a set the run's manifest does not list is not trusted: added
    assert not result.ok and result.added == ["evaluate-h100-sxm-80gb/"] and not result.nested
    write_manifest(run)  # the run's manifest now lists the copy's manifest: the copy is pinned
    result = verify_manifest(run)
    assert result.ok and not result.added and list(result.nested) == ["evaluate-h100-sxm-80gb"]
    (copy / "results.csv").write_text("forged\n")
    result = verify_manifest(run)
    assert not result.ok and result.nested["evaluate-h100-sxm-80gb"].changed == ["results.csv"]


def test_an_unlisted_evidence_set_a_symlink_loop_and_a_link_outside_are_added_never_followed(
    signed_run: Path, keys: dict[str, tuple[Path, Path]], tmp_path: Path
) -> None:
    run = _copy(signed_run, tmp_path / "run")
    forged = run / "forged"
    forged.mkdir()
    (forged / "report.html").write_text("<h1>ALL PASS</h1>\n")
    write_manifest(forged)  # a valid manifest of its own, which the signed one does not list
    (run / "loop").symlink_to(".")
    (run / "other").symlink_to(signed_run)
    proc = run_nvtest("verify", str(run), "--pubkey", str(keys["vendor"][1]))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "ADDED: forged/ (a separate evidence set this manifest does not list)" in proc.stdout
    assert "ADDED: loop (not a regular file: a symlink to .)" in proc.stdout
    assert f"ADDED: other (not a regular file: a symlink to {signed_run})" in proc.stdout
    assert "separate evidence set" not in proc.stdout.replace("ADDED: forged/ (a separate evidence set", "")
    assert "loop/loop" not in proc.stdout and "signature good" in proc.stdout
    assert "the evidence does NOT match its manifest" in proc.stdout


def test_a_listed_evidence_set_must_be_signed_when_a_key_is_asked_and_the_summary_agrees(
    signed_run: Path, keys: dict[str, tuple[Path, Path]], tmp_path: Path
) -> None:
    priv, pub = keys["vendor"]
    run = _copy(signed_run, tmp_path / "run")
    copy = _copy(run / "logs", run / "copy")
    write_manifest(copy)  # unsigned
    write_manifest(run, priv)  # the signed manifest lists copy/manifest.sha256
    assert "copy/manifest.sha256" in (run / MANIFEST).read_text()
    assert verify_manifest(run).ok  # no key asked: an unsigned nested set is said, not failed
    result = verify_manifest(run, pub)
    assert result.signature == "good" and not result.ok and result.nested["copy"].signature == "missing"
    proc = run_nvtest("verify", str(run), "--pubkey", str(pub))
    assert proc.returncode == 1
    assert "signature good" not in proc.stdout and "NOT verified: the separate evidence set copy/ FAILED" in proc.stdout
    write_manifest(copy, keys["other"][0])
    write_manifest(run, priv)
    assert verify_manifest(run, pub).nested["copy"].signature == "bad"
    write_manifest(copy, priv)
    write_manifest(run, priv)
    assert verify_manifest(run, pub).ok


def test_every_entry_that_is_not_a_listed_regular_file_is_named(signed_run: Path, tmp_path: Path) -> None:
    run = _copy(signed_run, tmp_path / "run")
    log = sorted((run / "logs").rglob("*.log"))[0]
    vm = log.parent
    os.mkfifo(vm / "extra.fifo")
    (vm / "etc").symlink_to("/etc")
    (vm / "dangle.log").symlink_to("/nonexistent")
    (vm / "newdir").mkdir()
    outside = tmp_path / "outside.log"
    shutil.copyfile(log, outside)
    log.unlink()
    log.symlink_to(outside)  # identical bytes, but not a file of the run
    rel = vm.relative_to(run).as_posix()
    result = verify_manifest(run)
    assert not result.ok
    assert result.added == [f"{rel}/dangle.log", f"{rel}/etc", f"{rel}/extra.fifo"]
    assert result.changed == [log.relative_to(run).as_posix()]
    assert result.kinds[f"{rel}/extra.fifo"] == "a FIFO" and result.kinds[f"{rel}/etc"] == "a symlink to /etc"
    assert result.empty == [f"{rel}/newdir/"]
    assert result.evidence_digest_now != result.evidence_digest


def test_fifos_never_hang_and_a_key_is_checked_first(
    signed_run: Path, keys: dict[str, tuple[Path, Path]], tmp_path: Path
) -> None:
    from cryptography.hazmat.primitives.asymmetric import rsa

    fifo = tmp_path / "key.fifo"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError, match="not a regular file"):
        check_sign_key(fifo)
    with pytest.raises(ConfigError, match="not a regular file"):
        verify_manifest(signed_run, fifo)
    run = tmp_path / "run"
    run.mkdir()
    os.mkfifo(run / MANIFEST)
    proc = run_nvtest("verify", str(run), timeout=60)
    assert proc.returncode == 2 and "not a regular file" in proc.stderr, proc.stdout + proc.stderr
    rsa_pub = tmp_path / "rsa.pub.pem"
    key = rsa.generate_private_key(public_exponent=65537, key_size=1024)
    rsa_pub.write_bytes(key.public_key().public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo))
    unsigned = _copy(signed_run, tmp_path / "unsigned")
    (unsigned / SIGNATURE).unlink()
    for bad in (rsa_pub, tmp_path / "nokey.pem"):  # a wrong key is a usage error, not NO SIGNATURE
        with pytest.raises(ConfigError):
            verify_manifest(unsigned, bad)


def test_a_bad_sign_key_on_report_and_evaluate_changes_nothing(
    signed_run: Path, keys: dict[str, tuple[Path, Path]], tmp_path: Path
) -> None:
    from cryptography.hazmat.primitives.asymmetric import rsa

    run = _copy(signed_run, tmp_path / "run")
    rsa_key = tmp_path / "rsa.pem"
    key = rsa.generate_private_key(public_exponent=65537, key_size=1024)
    rsa_key.write_bytes(key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()))
    before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    proc = run_nvtest("report", str(run), "--sign-key", str(rsa_key))
    assert proc.returncode == 2 and "not an Ed25519 key" in proc.stderr, proc.stdout + proc.stderr
    proc = run_nvtest("evaluate", str(run), "--sku", "h100-sxm-80gb", "--sign-key", str(tmp_path / "missing.pem"))
    assert proc.returncode == 2 and "missing.pem" in proc.stderr, proc.stdout + proc.stderr
    assert {p: p.read_bytes() for p in run.rglob("*") if p.is_file()} == before
    assert not (run / "evaluate-h100-sxm-80gb").exists()
    assert verify_manifest(run, keys["vendor"][1]).ok


@pytest.mark.parametrize("name", [b"bad\xff.log", b"a\nb.log", b"back\\slash.log"])
def test_odd_file_names_round_trip_as_sha256sum_writes_them(signed_run: Path, tmp_path: Path, name: bytes) -> None:
    run = _copy(signed_run, tmp_path / "run")
    odd = os.path.join(os.fsencode(run / "logs"), name)
    with open(odd, "wb") as fh:
        fh.write(b"odd\n")
    write_manifest(run)
    result = verify_manifest(run)
    assert result.ok and not result.malformed, result
    assert os.fsdecode(b"logs/" + name) not in result.added
    if shutil.which("sha256sum"):
        proc = subprocess.run(["sha256sum", "-c", "--quiet", MANIFEST], cwd=run, capture_output=True)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    with open(odd, "ab") as fh:
        fh.write(b"x")
    assert verify_manifest(run).changed == [os.fsdecode(b"logs/" + name)]


def test_unreadable_entries_are_named_without_a_traceback(
    signed_run: Path, keys: dict[str, tuple[Path, Path]], tmp_path: Path
) -> None:
    run = _copy(signed_run, tmp_path / "run")
    log = sorted((run / "logs").rglob("*.log"))[0]
    log.chmod(0)
    vm = sorted((run / "logs").iterdir())[-1]
    vm.chmod(0)
    (run / SIGNATURE).chmod(0)
    cmd = ["verify", str(run), "--pubkey", str(keys["vendor"][1])]
    prefix: list[str] = []
    if os.geteuid() == 0:  # root reads anything: drop the capabilities that let it
        if not shutil.which("setpriv"):
            pytest.skip("running as root without setpriv: chmod 000 cannot make a file unreadable")
        prefix = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search"]
    from tests.conftest import NVTEST

    try:
        proc = subprocess.run(
            [*prefix, *NVTEST, *cmd], capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "200"}
        )
    finally:
        vm.chmod(0o755)
        log.chmod(0o644)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert f"UNREADABLE: {log.relative_to(run).as_posix()}" in proc.stdout
    assert f"UNREADABLE: {vm.relative_to(run).as_posix()}/" in proc.stdout
    assert "MISSING" not in proc.stdout
    assert f"UNREADABLE: {SIGNATURE} (the signature cannot be read)" in proc.stdout
