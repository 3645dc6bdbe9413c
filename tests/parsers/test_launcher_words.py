"""srun's and mpirun's words for a task that died are spelled once (nvtest/parsers/launcher_words.py)
and read by both readers: the nccl-tests parser's failure table and the MPI job's blame."""

from __future__ import annotations

import re
from pathlib import Path

from nvtest.config.inventory import Node
from nvtest.jobs.mpi import blame_from_output
from nvtest.parsers import launcher_words, nccl_tests

PACKAGE = Path(nccl_tests.__file__).resolve().parents[1]
#: The words themselves, as a module would spell them in a regex of its own.
WORDS = ("Exited with exit code", "noticed that process rank", "Primary job")
#: The transport reads srun's own --verbose task lines (every task's end, exit code and signal
#: included) below the parsers' layer (transports import only config): its reading stays its own.
LAYER_BELOW = {"transports/_slurm_parse.py"}


def test_no_module_spells_the_words_again() -> None:
    again = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = str(path.relative_to(PACKAGE))
        if path.name == "launcher_words.py" or rel in LAYER_BELOW or rel.startswith("probes/"):
            continue
        code = "\n".join(ln for ln in path.read_text(encoding="utf-8").splitlines() if "re.compile" in ln or 'r"' in ln)
        again += [f"{rel}: {w}" for w in WORDS if w in code]
    assert again == [], again


def test_both_readers_read_the_table() -> None:
    rows = {rx.pattern for rx, _, _ in nccl_tests.FAILURES.rules}
    for words in launcher_words.TASK_DIED:
        assert any(words.pattern in p for p in rows), words
    line = "srun: error: node2: task 1: Exited with exit code 3"
    nodes = [Node(name="node1"), Node(name="node2")]
    assert blame_from_output(line, nodes, {0: "node1", 1: "node2"}, srun=True) == {"node2": line}
    killed = "srun: error: node2: task 1: Killed"  # srun killed it: not the node's own fault
    assert blame_from_output(killed, nodes, {0: "node1", 1: "node2"}, srun=True) == {}
    assert re.search(launcher_words.SRUN_TASK_DIED, killed) is not None
