"""One archive per failed node for the vendor's RMA: ``nvtest rma RUN_DIR NODE``.

:func:`write_bundle` reads a finished run directory (results.json, asbuilt.json, the node's
``logs/<node>/``) and writes a ``.tar.gz`` (stdlib :mod:`tarfile`) holding only that node:

=======================  ===================================================================
member                   what it is
=======================  ===================================================================
``README.txt``           what each file is, the run, the node's verdict
``asbuilt.json``         the node's as-built record (docs/asbuilt.md): serials, firmware
``verdicts.json``        every failing (``fail``/``error``) check of the node: verdict,
                         reason, metrics, details, the diagnosis and its next step
``diagnosis.md``         the same, as text: per check the cause and the Playbook's next step
``events.json``          the Xid / SXid scan of the kernel log (``xid_scan``), when it ran
``dcgm.json``            DCGM's diagnostics (``dcgm_diag``), when it ran
``node.json``            what the run read of the node (inventory facts, SKU match)
``logs/*.log``           the raw tool output behind each of them: the failing checks', the
                         Xid scan's, DCGM's, the inventory probe's, and
                         ``nvidia-bug-report.log`` where the run collected it
=======================  ===================================================================

Nothing of another node goes in: only results whose node is this one, only log files under
this node's log directory. Host names (every node of the run, the controller) and addresses
(IP, MAC) are replaced by :class:`~nvtest.analysis.sanitise.Sanitiser` as ``nvtest evidence``
replaces them; the parts' own identities (serials, UUIDs, GUIDs) are kept: they are what the
vendor's RMA asks for.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nvtest.analysis.asbuilt import SOURCES, written
from nvtest.analysis.sanitise import Sanitiser
from nvtest.errors import ConfigError, OutputWriteError
from nvtest.results import load_results

__all__ = ["Bundle", "default_path", "resolve_run_dir", "target_path", "write_bundle"]

#: Where ``nvtest run`` creates run directories by default (``--out``): a bare run id that is
#: not a directory here is looked up in it, so the report's ``nvtest rma <run-id> <node>`` works.
REPORTS_DIR = Path("reports")

#: Verdicts a check must have to go into ``verdicts.json``.
FAILING = ("fail", "error")
#: Checks whose result goes in whatever its verdict (the evidence a vendor asks for first).
ALWAYS = {"xid_scan": "events.json", "dcgm_diag": "dcgm.json"}
#: Log files of the node taken whatever checks failed.
NODE_LOGS = ("inventory.log", "nvidia-bug-report.log")


@dataclass(frozen=True)
class Bundle:
    """A written RMA archive: its path, its members (names inside the archive), the node's
    placeholder name in it, and the counts of values the sanitiser replaced per class."""

    path: Path
    members: tuple[str, ...]
    node_as: str
    replaced: dict[str, int]


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_.@+" else "_" for c in name) or "_"


def default_path(run_id: str, node: str, where: Path | None = None) -> Path:
    """``<where>/<run-id>-<node>-rma.tar.gz`` (``where``: the current directory). Never inside
    the run directory: the run's manifest (``nvtest verify``) covers what the run wrote."""
    return (where or Path(".")) / f"{_safe(run_id)}-{_safe(node)}-rma.tar.gz"


def resolve_run_dir(run_dir: Path) -> Path:
    """``run_dir`` as given when it exists; a bare run id that is not a path here is looked up
    as ``reports/<run-id>`` (the default of ``nvtest run --out``). Unchanged when neither exists
    (reading it then says what is missing)."""
    if run_dir.exists() or len(run_dir.parts) != 1:
        return run_dir
    candidate = REPORTS_DIR / run_dir
    return candidate if candidate.exists() else run_dir


def target_path(out: Path | None, run_id: str, node: str) -> Path:
    """The archive's path for ``--out``: None is :func:`default_path`; an existing directory
    (not a link to one) takes the default name inside it.

    Raises:
        ConfigError: ``out`` exists and is not a regular file (a device such as /dev/null, a
            FIFO, a socket) or is a symbolic link: it is never replaced.
    """
    if out is None:
        return default_path(run_id, node)
    try:
        st = out.lstat()
    except FileNotFoundError:
        return out
    except OSError as exc:
        raise ConfigError(f"--out {out}: {exc.strerror or exc}") from None
    if stat.S_ISDIR(st.st_mode):
        return target_path(default_path(run_id, node, out), run_id, node)
    if stat.S_ISLNK(st.st_mode):
        raise ConfigError(f"--out {out} is a symbolic link: refusing to replace it (give a regular file's path)")
    if not stat.S_ISREG(st.st_mode):
        raise ConfigError(f"--out {out} exists and is not a regular file: refusing to replace it")
    return out


def _identities(doc: dict[str, Any]) -> list[str]:
    names = {str((doc.get("run") or {}).get("host") or "")}
    for name, nd in (doc.get("nodes") or {}).items():
        names.add(str(name))
        settings = nd.get("settings") or {}
        for key in ("address", "name"):
            if settings.get(key):
                names.add(str(settings[key]))
        inv = nd.get("inventory") or {}
        if inv.get("host"):
            names.add(str(inv["host"]))
    return sorted(n for n in names if n)


def _copy_log(run_dir: Path, log_dir: str, rel: str | None, stage: Path, taken: dict[str, str]) -> str | None:
    """Copy ``rel`` (a path relative to the run) into ``stage/logs/`` when it is under the
    node's ``log_dir``; its name in the bundle, or None."""
    if not rel or not log_dir or not rel.startswith(log_dir.rstrip("/") + "/"):
        return None
    if rel in taken:
        return taken[rel]
    src = (run_dir / rel).resolve()
    if not src.is_file() or run_dir.resolve() not in src.parents:
        return None
    name = f"logs/{rel[len(log_dir.rstrip('/')) + 1 :].replace('/', '_')}"
    (stage / "logs").mkdir(exist_ok=True)
    shutil.copyfile(src, stage / name)
    taken[rel] = name
    return name


def _result_doc(r: dict[str, Any], log: str | None) -> dict[str, Any]:
    keep = ("check", "verdict", "reason", "metrics", "details", "diagnosis", "started_at", "duration_s")
    return {**{k: r.get(k) for k in keep}, "log": log}


def _diagnosis_md(node_as: str, failing: list[dict[str, Any]]) -> str:
    lines = [f"# {node_as}: failing checks, causes and next steps", ""]
    if not failing:
        lines.append("No check failed or errored on this node in this run.")
    for r in failing:
        d = r.get("diagnosis") or {}
        lines += [
            f"## {r['check']}: {r['verdict']}",
            "",
            f"- reason: {r.get('reason') or '-'}",
            f"- cause: {d.get('cause') or 'not diagnosed'}",
            f"- next step: {d.get('action') or '-'}",
            f"- class: {d.get('class') or '-'}",
            f"- raw output: {r.get('log') or 'none kept'}",
            "",
        ]
    return "\n".join(lines)


def _readme(run: dict[str, Any], node_as: str, verdict: str, files: dict[str, str]) -> str:
    rows = "\n".join(f"  {name:<24} {what}" for name, what in files.items())
    return (
        f"nvtest RMA bundle\n=================\n\n"
        f"Node {node_as} of run {run.get('run_id')} (suite {run.get('suite')}), node verdict: {verdict}.\n"
        f"Written {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} by nvtest rma.\n\n"
        "Host names and addresses are replaced by placeholders (node001, 192.0.2.N, ...); the\n"
        "parts' serial numbers, UUIDs and GUIDs are kept as the node reported them. Nothing of\n"
        "any other node of the run is in this archive.\n\nFiles:\n"
        f"{rows}\n"
    )


def _write_archive(out: Path, stage: Path, members: list[str], prefix: str) -> None:
    """Stream the tar.gz of ``stage``'s ``members`` to a temporary file beside ``out`` (created
    exclusively), then rename it over ``out`` unless ``out`` became something else than a
    regular file meanwhile; the temporary file is removed whatever happens.

    Raises:
        ConfigError: ``out`` turned into a link or a device before the rename.
        OutputWriteError: a write failed (full disk, read-only mount, no such directory).
    """
    tmp_name: str | None = None
    try:
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp_name = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent)
            umask = os.umask(0o022)
            os.umask(umask)
            os.fchmod(fd, 0o666 & ~umask)  # as a plain open() would make it, not mkstemp's 0600
            with os.fdopen(fd, "wb") as fh, tarfile.open(fileobj=fh, mode="w:gz") as tar:
                for m in members:
                    tar.add(stage / m, arcname=f"{prefix}/{m}", recursive=False)
            target_path(out, "", "")  # refuses what is no longer a regular file (or absent)
            os.replace(tmp_name, out)
            tmp_name = None
        except OSError as exc:
            raise OutputWriteError.of(out, exc) from None
    finally:
        if tmp_name is not None:
            Path(tmp_name).unlink(missing_ok=True)


def write_bundle(run_dir: Path, node: str, out: Path | None = None) -> Bundle:
    """Write the RMA archive of ``node`` of the run in ``run_dir`` (see the module doc).

    Args:
        run_dir: a finished run directory (results.json in it).
        node: the node's name as the run knows it.
        out: the archive's path, or a directory to write the default name into; None:
            :func:`default_path` in the current directory, or beside the run directory when
            the current directory is inside it (see :func:`target_path`).

    The archive is written to a temporary file beside ``out`` and renamed over it; the staged
    copies (unsanitised) live in a temporary directory. Both are removed on any error and on
    KeyboardInterrupt / SystemExit (the CLI turns SIGTERM into one), so nothing unsanitised or
    half written is left behind.

    Raises:
        ConfigError: no results.json, the node is not in the run, or it did not fail
            (its verdict is ``pass`` or ``skip``: there is nothing to return); ``out`` exists
            and is not a regular file, or is a symbolic link.
        OutputWriteError: the archive could not be written.
    """
    run_dir = resolve_run_dir(run_dir)
    doc = load_results(run_dir)
    run_dir = run_dir.parent if run_dir.suffix == ".json" else run_dir
    nodes = doc.get("nodes") or {}
    if node not in nodes:
        raise ConfigError(f"node {node!r} is not in run {run_dir} (nodes: {', '.join(sorted(nodes)[:10])})")
    nd = nodes[node]
    verdict = str(nd.get("verdict") or "")
    if verdict in ("pass", "skip"):
        raise ConfigError(f"node {node!r} did not fail in run {run_dir} (verdict {verdict}): no RMA bundle to write")
    here = Path.cwd().resolve()
    if out is None and run_dir.resolve() in (here, *here.parents):  # run from inside the run
        out = run_dir.resolve().parent
    out = target_path(out, str((doc.get("run") or {}).get("run_id") or run_dir.name), node)
    log_dir = str(nd.get("log_dir") or "")
    mine = [r for r in doc.get("results") or [] if r.get("node") == node]
    sanitiser = Sanitiser(_identities(doc), keep=("serial", "uuid", "guid"))
    try:
        with tempfile.TemporaryDirectory(prefix="nvtest-rma-") as tmp:
            stage = Path(tmp) / "bundle"
            stage.mkdir()
            taken: dict[str, str] = {}
            files: dict[str, str] = {}

            def put(name: str, body: Any, what: str) -> None:
                text = body if isinstance(body, str) else json.dumps(body, indent=1, default=str) + "\n"
                (stage / name).write_text(text, encoding="utf-8")
                files[name] = what

            record = written(run_dir).get(node)
            put(
                "asbuilt.json",
                {"node": node, "run_id": (doc.get("run") or {}).get("run_id"), "record": record, "sources": SOURCES},
                "the node's as-built record: system, GPUs, NVSwitches, HCAs, versions (docs/asbuilt.md)",
            )
            failing = [
                _result_doc(r, _copy_log(run_dir, log_dir, r.get("log"), stage, taken))
                for r in mine
                if r.get("verdict") in FAILING
            ]
            put("verdicts.json", failing, "each failing check: verdict, reason, metrics, details, diagnosis")
            put("diagnosis.md", _diagnosis_md(node, failing), "the failing checks' causes and next steps, as text")
            for check, name in ALWAYS.items():
                got = [r for r in mine if r.get("check") == check and r.get("verdict") != "skip"]
                if got:
                    put(
                        name,
                        _result_doc(got[-1], _copy_log(run_dir, log_dir, got[-1].get("log"), stage, taken)),
                        f"the {check} result (its raw output under logs/)",
                    )
            put(
                "node.json",
                {k: nd.get(k) for k in ("name", "sku", "verdict", "down_message", "inventory")},
                "what the run read of the node: inventory facts, SKU",
            )
            for log in NODE_LOGS:
                _copy_log(run_dir, log_dir, f"{log_dir}/{log}", stage, taken)
            for name in sorted(set(taken.values())):
                files[name] = "raw tool output (command, exit code, stdout, stderr)"
            report = sanitiser.tree(stage)
            node_as = sanitiser.text(node)
            (stage / "README.txt").write_text(
                sanitiser.text(_readme(doc.get("run") or {}, node_as, verdict, {"README.txt": "this file", **files})),
                encoding="utf-8",
            )
            members = sorted(str(p.relative_to(stage)) for p in stage.rglob("*") if p.is_file())
            prefix = f"nvtest-rma-{sanitiser.text(str((doc.get('run') or {}).get('run_id')))}-{node_as}"
            _write_archive(out, stage, members, prefix)
    except OSError as exc:  # the staging directory: a full /tmp, an unreadable log
        raise OutputWriteError.of(exc.filename or out, exc) from None
    return Bundle(out, tuple(f"{prefix}/{m}" for m in members), node_as, report.replaced)
