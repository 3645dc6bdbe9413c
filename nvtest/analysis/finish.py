"""The one place a run ends: assemble, post-process, write, render.

:func:`finish_run` is called by the plugin at the end of every run, by
``--drain-failed`` after a drain, by ``nvtest evaluate`` for its re-judged copy and
by ``nvtest report`` to rebuild a run's files; none of them repeats the sequence.

It also keeps the run in the history (:mod:`nvtest.history`): each node's change since its
previous run goes into results.json's ``history`` section (the report's "Since the last
run"), then the run is written to the database (once per run id: a rebuild replaces it).
A re-judged copy (``nvtest evaluate``) is not a new measurement and is not recorded; a
history that cannot be reached is a run warning, never a failed run.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nvtest.analysis.postprocess import post_process
from nvtest.report import render_all
from nvtest.report.manifest import write_manifest
from nvtest.results import assemble, write_results

__all__ = ["Finished", "finish_run"]


@dataclass(frozen=True)
class Finished:
    """A finished run: its results.json document and every file written (results.json first)."""

    doc: dict[str, Any]
    paths: list[Path]


def finish_run(
    run_dir: Path,
    catalog: Any | None = None,
    *,
    doc: dict[str, Any] | None = None,
    pdf: bool = False,
    extra: Iterable[str] = (),
    history: str | bool | None = None,
    sign_key: Path | None = None,
    rejudged: str | None = None,
) -> Finished:
    """End ``run_dir``: its document, analysed, written as results.json and rendered.

    Args:
        run_dir: the run directory (``results.json`` and the reports are written there).
        catalog: the SKU catalog whose ``recipe.fleet`` policies the analysis uses;
            None reads the bundled profiles and the run's overlay.
        doc: the document to finish; None assembles it from ``run_dir/results.jsonl``
            (every measurement is there first: a crash before this loses nothing).
        pdf: also write report.pdf.
        extra: results.jsonl lines that could not be written to it (a full disk; see
            :attr:`nvtest.results.ResultStore.unwritten`), read after the file's.
        history: where the history is (a path or URL, see
            :func:`nvtest.history.resolve_target`); None: ``$NVTEST_HISTORY`` or the
            default file; False: do not record this run.
        sign_key: an Ed25519 private key (PEM) that signs the manifest.
        rejudged: who judges stored evidence again (``nvtest report``, ``nvtest
            evaluate``): recorded as ``run.rejudged`` (by, at) and shown in the reports.

    Last, ``manifest.sha256`` is written over every file of ``run_dir``
    (:mod:`nvtest.report.manifest`; the reports show its evidence digest), signed with
    ``sign_key`` when given; it is the last path returned.

    Returns:
        The document as written and the paths of the files written.

    Raises:
        OutputWriteError: results.json or a report could not be written (one line: the
            path and the errno); each file is whole or absent, never cut.
        ConfigError: ``pdf`` was asked and no PDF engine is available, or ``sign_key`` is
            not an Ed25519 private key.
    """
    if doc is None:
        doc = assemble(run_dir / "results.jsonl", extra)
    if rejudged:
        run = doc.setdefault("run", {})
        origin = (run.get("evaluated_from") or {}).get("run_id")
        run["rejudged"] = {"by": rejudged, "at": time.time(), **({"evaluated_from": origin} if origin else {})}
    post_process(doc, catalog=catalog, run_dir=run_dir)
    if history is not False and not (doc.get("run") or {}).get("evaluated_from"):
        _record_history(doc, None if history is True else history)
    written = write_results(run_dir, doc)
    reports = render_all(run_dir, doc, pdf=pdf)
    return Finished(doc, [written, *reports, write_manifest(run_dir, sign_key)])


def _record_history(doc: dict[str, Any], target: str | None) -> None:
    """Annotate ``doc`` with its nodes' history and write it there; a failure is a warning."""
    from nvtest.errors import ConfigError, HistoryError
    from nvtest.history import HistoryStore
    from nvtest.history.annotate import record_run

    try:
        store = HistoryStore.open(target)
        if store is None:
            return
        try:
            record_run(store, doc)
        finally:
            store.close()
    except (HistoryError, ConfigError) as exc:
        warnings = doc.setdefault("run", {}).setdefault("warnings", [])
        message = f"history not recorded: {exc}"
        if message not in warnings:
            warnings.append(message)
