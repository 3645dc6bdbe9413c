"""The ``nvtest`` command line: one module per verb, each registering itself on the app.

==============  ==============================================================
verb            module
==============  ==============================================================
run             :mod:`nvtest.cli.run`
submit          :mod:`nvtest.cli.submit`
report          :mod:`nvtest.cli.report`
compare         :mod:`nvtest.cli.compare`
rma             :mod:`nvtest.cli.rma`
evaluate        :mod:`nvtest.cli.evaluate`
verify          :mod:`nvtest.cli.verify`
inventory       :mod:`nvtest.cli.inventory`
parse           :mod:`nvtest.cli.parse`
list            :mod:`nvtest.cli.list`
skus            :mod:`nvtest.cli.skus`
evidence        :mod:`nvtest.cli.evidence` (the kit: :mod:`nvtest.ops.evidence`)
gate            :mod:`nvtest.cli.gate`
sweep           :mod:`nvtest.cli.sweep`
history         :mod:`nvtest.cli.history`
export          :mod:`nvtest.cli.export`
config          :mod:`nvtest.cli.config` (``nvtest config check``)
==============  ==============================================================

The app, its consoles and the exit-code table are in :mod:`nvtest.cli.app`; the
SSH and Slurm options come from one description each (:mod:`nvtest.cli.options`).
"""

from __future__ import annotations

import importlib
import sys

from nvtest.cli.early import record_while_starting

record_while_starting()  # gate: a SIGTERM while importing is answered with a document

try:
    from nvtest.cli.app import app, main
except KeyboardInterrupt:  # Ctrl-C while the command starts: one line, not a traceback
    sys.stderr.write("nvtest: interrupted while starting: nothing was run\n")
    raise SystemExit(130) from None

__all__ = ["VERBS", "app", "main"]

#: The verb modules, in the order ``nvtest --help`` lists them; importing one registers it.
VERBS = (
    "run",
    "report",
    "list",
    "inventory",
    "submit",
    "parse",
    "skus",
    "evaluate",
    "verify",
    "compare",
    "rma",
    "evidence",
    "gate",
    "sweep",
    "history",
    "export",
    "config",
)

try:
    for _verb in VERBS:
        importlib.import_module(f"nvtest.cli.{_verb}")
except KeyboardInterrupt:  # the verbs' imports are most of a start (about a second)
    sys.stderr.write("nvtest: interrupted while starting: nothing was run\n")
    raise SystemExit(130) from None
