"""``nvtest evidence``: measure this GPU node with every capture and probe, and bring the
evidence back in one directory (the first thing to run on a GPU machine: docs/gpu-evidence.md).

The steps are :mod:`nvtest.ops.evidence.steps`; :class:`~nvtest.ops.evidence.kit.Kit` runs
them (the command, ``nvtest.cli.evidence``, only parses its options). Each runs through the
local transport's runner (:func:`nvtest.transports.local.run_argv`: at its deadline its whole
task is killed) at ``min(its deadline, what is left of the budget)`` (8 minutes in all, by
default), with its stdout kept verbatim, its stderr, exit code, duration and the tool's version; a step that
cannot run says why (tool not on PATH, no device, deadline, budget spent). OUT is the only
place written: every step runs with ``HOME``, ``TMPDIR`` and the caches in ``OUT/.scratch``
(removed at the end) and without bytecode files.

OUT afterwards::

    manifest.json        every step: tool, argv, status, exit code, version, duration, reason, files
    summary.md           each figure against the SKU profile the node matched (nvtest.analysis.evidence)
    captures/            the tools' outputs (<step>.txt/.xml/.csv, <step>.stderr.txt, <tool>-version.txt)
    probes/              each probe's JSON document (<step>.json, <step>.stderr.txt)
    runs/<suite>/<id>/   the delivery and burn-in run directories; runs/<suite>.console.txt

Then everything under OUT is sanitised (:mod:`nvtest.analysis.sanitise`): host names, serial
numbers, UUIDs, MAC addresses, GUIDs and IP addresses become stable placeholders.

Exit codes: 0 the kit ran to its end (whatever the node measured: the verdicts are in the
evidence), 2 a usage error (OUT holds files that are not a previous kit's), 3 the kit failed.
"""

from __future__ import annotations

from nvtest.ops.evidence.kit import KIT_ENTRIES, Kit, StepOutcome, check_steps, run_with_deadline

__all__ = ["KIT_ENTRIES", "Kit", "StepOutcome", "check_steps", "run_with_deadline"]
