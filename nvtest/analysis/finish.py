"""The one place a run ends: assemble, post-process, write, render.

:func:`finish_run` is called by the plugin at the end of every run, by
``--drain-failed`` after a drain, by ``nvtest evaluate`` for its re-judged copy and
by ``nvtest report`` to rebuild a run's files; none of them repeats the sequence.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nvtest.analysis.postprocess import post_process
from nvtest.report import render_all
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

    Returns:
        The document as written and the paths of the files written.

    Raises:
        OutputWriteError: results.json or a report could not be written (one line: the
            path and the errno); each file is whole or absent, never cut.
        ConfigError: ``pdf`` was asked and no PDF engine is available.
    """
    if doc is None:
        doc = assemble(run_dir / "results.jsonl", extra)
    post_process(doc, catalog=catalog)
    written = write_results(run_dir, doc)
    return Finished(doc, [written, *render_all(run_dir, doc, pdf=pdf)])
