"""``nvidia-bug-report.sh`` on the nodes that failed, at the end of a run, for their RMA bundle.

Opt-in per SKU profile or site overlay (``recipe: {bug_report: {enabled: true, timeout_s:
300}}``, :class:`~nvtest.config.recipes.BugReportRecipe`): it is slow (minutes) and its log
holds everything about the node. Only nodes with a ``fail`` verdict, only nodes that answered,
each within its deadline. The node-side command writes the report into a fresh temporary
directory, prints its text (the ``.gz`` the tool writes, decompressed) and removes the
directory; its output is the phase's evidence, ``logs/<node>/nvidia-bug-report.log``, which
``nvtest rma`` puts in the node's bundle. A tool that is missing, fails or runs past its
deadline is a run warning, never a verdict.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from nvtest.config.inventory import Node
from nvtest.transports.base import CommandResult

__all__ = ["KEY", "SCRIPT", "bug_report_targets", "collect_bug_reports"]

#: The phase key: the evidence file is ``logs/<node>/nvidia-bug-report.log``.
KEY = "nvidia-bug-report"
#: The node-side command (POSIX sh): the report into a temporary directory, its text on stdout.
SCRIPT = (
    'command -v nvidia-bug-report.sh >/dev/null 2>&1 || { echo "nvidia-bug-report.sh not found on PATH" >&2; exit 127; }; '
    "d=$(mktemp -d) || exit 1; "
    'nvidia-bug-report.sh --output-file "$d/nvidia-bug-report.log" >"$d/stdout" 2>&1; rc=$?; '
    'if [ -f "$d/nvidia-bug-report.log.gz" ]; then gzip -dc "$d/nvidia-bug-report.log.gz"; '
    'elif [ -f "$d/nvidia-bug-report.log" ]; then cat "$d/nvidia-bug-report.log"; '
    'else cat "$d/stdout" >&2; [ "$rc" -ne 0 ] || rc=1; fi; '
    'rm -rf "$d"; exit $rc'
)


def bug_report_targets(
    failed: Iterable[str], recipes: Mapping[str, Mapping[str, Any] | None]
) -> tuple[float, list[str]]:
    """The deadline (s: the longest any of them asks) and the failed nodes whose SKU's recipe
    enables ``bug_report``. ``recipes``: node -> its SKU profile's ``recipe`` (None: no profile)."""
    names: list[str] = []
    deadline = 0.0
    for node in sorted(set(failed)):
        section = (recipes.get(node) or {}).get("bug_report") or {}
        if section.get("enabled"):
            names.append(node)
            deadline = max(deadline, float(section.get("timeout_s") or 300.0))
    return deadline, names


def collect_bug_reports(
    nodes: Sequence[Node],
    timeout_s: float,
    run: Callable[..., dict[str, CommandResult]],
    warn: Callable[[str], None],
) -> dict[str, CommandResult]:
    """Run :data:`SCRIPT` on ``nodes`` within ``timeout_s``; ``run`` is
    :meth:`nvtest.session.phase.PhaseRunner.run` (evidence written under :data:`KEY`).
    Each node whose report could not be taken is one ``warn`` line with why."""
    if not nodes:
        return {}
    got = run(KEY, list(nodes), lambda _n: ["sh", "-c", SCRIPT], timeout_s=timeout_s)
    for name, r in sorted(got.items()):
        if not r.completed or r.exit_code != 0:
            said = (r.error or r.stderr.strip()[-300:] or f"exit {r.exit_code}").replace("\n", " ")
            warn(f"{name}: nvidia-bug-report.sh not collected: {said}")
    return got
