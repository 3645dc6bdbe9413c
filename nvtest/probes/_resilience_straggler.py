"""Per-rank section timings and straggler scores.

nvidia-resiliency-ext's ``straggler.Detector`` cannot start on a CPU-only node:
``Detector.initialize`` builds a ``CuptiManager`` that imports the
``nvrx_cupti_module`` extension, which links ``libcupti.so.12`` (CUDA), and
``Detector.generate_report`` calls ``torch.cuda.synchronize()``.  Its scoring
half, ``straggler.reporting.ReportGenerator``, is plain torch.distributed
(gloo works) and takes the section summaries as input.  So the sections are
timed here with ``time.perf_counter`` (the CPU elapsed time the Detector itself
records for custom sections) and scored by ``ReportGenerator`` when the package
imports, else by the same formula computed here:

    relative score of rank r in section s = min over ranks of median_s / median_s(r)

(1.0 for the fastest rank; 0.5 for a rank twice as slow).  A rank's score is
the minimum over the sections that contain no collective (a fast rank waits in
those for the slow one).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Sequence
from typing import Any

import _contract as contract
import _libraries as libs
import _timing as timing


class SectionTimer:
    """Collects elapsed seconds per named section (no-op when disabled)."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self.times: dict[str, list[float]] = {}

    @contextlib.contextmanager
    def section(self, name: str) -> Iterator[None]:
        if not self.enabled:
            yield
            return
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.times.setdefault(name, []).append(time.perf_counter() - t0)

    def medians(self) -> dict[str, float]:
        """Section -> median seconds."""
        return {k: timing.stats(v)["median"] for k, v in self.times.items() if v}


def relative_scores(medians_by_rank: dict[int, dict[str, float]]) -> dict[str, dict[int, float]]:
    """Section -> rank -> fastest median / this rank's median (0..1)."""
    sections = sorted({s for m in medians_by_rank.values() for s in m})
    out: dict[str, dict[int, float]] = {}
    for s in sections:
        vals = {r: m[s] for r, m in medians_by_rank.items() if s in m and m[s] > 0}
        if vals:
            best = min(vals.values())
            out[s] = {r: best / v for r, v in vals.items()}
    return out


def _nvrx_scores(torch: Any, timer: SectionTimer) -> tuple[dict[str, dict[int, float]] | None, str | None]:
    """Relative section scores from nvidia-resiliency-ext's ReportGenerator (rank 0 gets all ranks)."""
    mod, why = libs.optional_import("nvidia_resiliency_ext.straggler.reporting")
    if mod is None:
        return None, why
    stat_mod, why = libs.optional_import("nvidia_resiliency_ext.straggler.statistics")
    if stat_mod is None:
        return None, why
    st = stat_mod.Statistic
    summaries = {}
    for name, vals in sorted(timer.times.items()):
        s = timing.stats(vals)
        summaries[name] = {st.MIN: s["min"], st.MAX: s["max"], st.MED: s["median"], st.AVG: s["mean"],
                           st.STD: 0.0, st.NUM: s["n"]}
    gen = mod.ReportGenerator(scores_to_compute=["relative_perf_scores"], gather_on_rank0=True,
                              node_name=contract.hostname())
    report = gen.generate_report(summaries, {})
    if report is None:  # not rank 0
        return {}, None
    return {s: {int(r): float(v) for r, v in ranks.items()}
            for s, ranks in report.section_relative_perf_scores.items()}, None


def gather_scores(torch: Any, dist: Any, timer: SectionTimer, rank: int, world: int,
                  exclude: Sequence[str] = ()) -> dict[str, Any]:
    """Collective: every rank calls it; rank 0's result has every rank's medians and scores."""
    medians = timer.medians()
    gathered: list[Any] = [None] * world
    dist.all_gather_object(gathered, {"rank": rank, "host": contract.hostname(), "medians": medians})
    by_rank = {int(g["rank"]): g["medians"] for g in gathered}
    nvrx, why = _nvrx_scores(torch, timer)
    scorer = "nvidia_resiliency_ext.straggler.reporting.ReportGenerator" if nvrx is not None else "nvtest"
    sections = nvrx or relative_scores(by_rank)
    rank_score = {}
    for r in by_rank:
        vals = [sec[r] for s, sec in sections.items() if s not in exclude and r in sec]
        rank_score[str(r)] = min(vals) if vals else None
    return {
        "scorer": scorer, "scorer_fallback_reason": why, "timing": "time.perf_counter per section (CPU elapsed)",
        "hosts": {str(g["rank"]): g["host"] for g in gathered},
        "section_medians_s": {str(r): m for r, m in by_rank.items()},
        "section_scores": {s: {str(r): v for r, v in sec.items()} for s, sec in sections.items()},
        "comm_sections": list(exclude),
        "rank_scores": rank_score,
    }
