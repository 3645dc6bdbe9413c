"""The one place a run ends: assemble, post-process, write, render.

:func:`finish_run` is called by the plugin at the end of every run, by
``--drain-failed`` after a drain, by ``nvtest evaluate`` for its re-judged copy and
by ``nvtest report`` to rebuild a run's files; none of them repeats the sequence.

It also keeps the run in the history (:mod:`nvtest.history`): each node's change since its
previous run goes into results.json's ``history`` section (the report's "Since the last
run"), then the run is written to the database (once per run id: a rebuild replaces it).
A re-judged copy (``nvtest evaluate``) is not a new measurement and is not recorded; a
history that cannot be reached is a run warning, never a failed run.

The nodes' as-built records (:mod:`nvtest.analysis.asbuilt`) are written as asbuilt.json,
summed up in results.json's ``asbuilt`` section (the fleet's drift, and what changed since
each node's previous acceptance in the history), and kept in the history for the next one.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nvtest.analysis.asbuilt import collect, write_asbuilt_json
from nvtest.analysis.asbuilt import summary as asbuilt_summary
from nvtest.analysis.postprocess import post_process
from nvtest.playbook.legacy import add_legacy_causes
from nvtest.report import render_all
from nvtest.report.manifest import check_sign_key, write_manifest
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
        OutputWriteError: results.json, asbuilt.json or a report could not be written (one
            line: the path and the errno); each file is whole or absent, never cut.
        ConfigError: ``pdf`` was asked and no PDF engine is available, or ``sign_key`` is
            not an Ed25519 private key (checked before anything is written).
    """
    check_sign_key(sign_key)  # a key that cannot sign stops before a file is rewritten
    if doc is None:
        doc = assemble(run_dir / "results.jsonl", extra)
    if rejudged:
        add_legacy_causes(doc)  # a document written before results carried cause keys
        run = doc.setdefault("run", {})
        origin = (run.get("evaluated_from") or {}).get("run_id")
        run["rejudged"] = {"by": rejudged, "at": time.time(), **({"evaluated_from": origin} if origin else {})}
    records = collect(run_dir)
    source = (doc.get("run") or {}).get("evaluated_from") or {}
    if not records and source.get("run_dir"):  # a re-judged copy: the run's own records
        records = collect(Path(str(source["run_dir"])))
    post_process(doc, catalog=catalog, run_dir=run_dir)
    since_last: dict[str, Any] | None = None
    if history is not False and not (doc.get("run") or {}).get("evaluated_from"):
        since_last = _record_history(doc, None if history is True else history, records)
    elif isinstance(doc.get("asbuilt"), dict):
        since_last = doc["asbuilt"].get("since_last")  # a re-judged copy keeps what its run found
    if records:
        doc["asbuilt"] = asbuilt_summary(records, since_last)
    written = [write_results(run_dir, doc)]
    if records:
        written.append(write_asbuilt_json(run_dir, doc, records))
    reports = render_all(run_dir, doc, pdf=pdf)
    return Finished(doc, [*written, *reports, write_manifest(run_dir, sign_key)])


def _record_history(
    doc: dict[str, Any], target: str | None, records: dict[str, dict[str, Any]]
) -> dict[str, Any] | None:
    """Annotate ``doc`` with its nodes' history and write it there, the as-built records too;
    what changed in them since each node's previous acceptance (None: no history). A failure
    is a warning."""
    from nvtest.errors import ConfigError, HistoryError
    from nvtest.history import HistoryStore
    from nvtest.history.annotate import record_run, run_key
    from nvtest.history.asbuilt import since_last_acceptance, write_asbuilt
    from nvtest.history.cluster import cluster_of_run

    since_last: dict[str, Any] | None = None
    try:
        store = HistoryStore.open(target)
        if store is None:
            return None
        try:
            record_run(store, doc)
            if records:
                run = doc.get("run") or {}
                cluster, key = cluster_of_run(run), run_key(doc)
                at = float(run.get("started_at") or 0.0)
                since_last = since_last_acceptance(store, records, cluster=cluster, before=at, run_key=key)
                write_asbuilt(store, records, run_key=key, cluster=cluster, at=at)
        finally:
            store.close()
    except (HistoryError, ConfigError) as exc:
        warnings = doc.setdefault("run", {}).setdefault("warnings", [])
        message = f"history not recorded: {exc}"
        if message not in warnings:
            warnings.append(message)
    return since_last
