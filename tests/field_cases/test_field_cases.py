"""The field-case suite: every ``cases/<id>/case.yaml`` is one test (id = the folder name).

Each case is a situation from the field (a public report: what happened, what the tools
printed, what was wrong), replayed by stand-in nodes, run through the real ``nvtest run``
and checked against the verdict, cause and next step it should get. README.md beside this
file says how to add one; INDEX.md lists them with their sources. A case with ``pending:``
is a strict xfail until the fix it names lands.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.field_cases.fieldcase import (
    CASES,
    Case,
    CaseError,
    Clusters,
    all_case_dirs,
    check_expectations,
    load_case,
    run_case,
)

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent


def _params() -> list[object]:
    out: list[object] = []
    for folder in all_case_dirs():
        try:
            case: Case | None = load_case(folder)
        except CaseError:
            case = None  # the test reports the error: one bad case never hides the others
        marks = []
        if case is not None and case.pending:
            marks.append(pytest.mark.xfail(strict=True, reason=case.pending))
        if case is not None and case.arrangement.backend != "local":
            marks.append(getattr(pytest.mark, "sshd" if case.arrangement.backend == "ssh" else "slurm"))
        out.append(pytest.param(folder, id=folder.name, marks=marks))
    return out


@pytest.fixture(scope="module")
def clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Clusters]:
    """The sshd and Slurm clusters the multi-node cases share (started on first use)."""
    c = Clusters(tmp_path_factory.mktemp("field-clusters"))
    try:
        yield c
    finally:
        c.close()


@pytest.mark.parametrize("folder", _params())
def test_field_case(folder: Path, clusters: Clusters, tmp_path: Path) -> None:
    case = load_case(folder)
    run = run_case(case, folder, tmp_path, clusters)
    problems = check_expectations(case, run)
    assert not problems, "\n".join(
        [f"case {folder.name}: {case.title}", *problems, "--- nvtest output (tail):", run.output[-3000:]]
    )


def test_a_bad_case_yaml_names_the_file_and_the_key(tmp_path: Path) -> None:
    folder = tmp_path / "bad-case"
    folder.mkdir()
    (folder / "case.yaml").write_text(
        "title: t\nfamily: f\nsource: [https://example.org/x]\nsituation: s\n"
        "arrangement: {backend: local, nodes: [n1], checks: [gpus]}\n"
        "nodes: {n1: {profile: h100_healthy, tools: {nvidia-smi: {default: {stdout: gone.txt, exits: 3}}}}}\n"
        "expect: {nodes: {n1: {verdict: maybe}}}\n"
    )
    with pytest.raises(CaseError) as err:
        load_case(folder)
    text = str(err.value)
    assert str(folder / "case.yaml") in text
    assert "nodes.n1.tools.nvidia-smi.dict[str,Output].default.exits" in text or "default.exits" in text, text
    assert "expect.nodes.n1.verdict" in text, text
    (folder / "case.yaml").write_text(
        "title: t\nfamily: f\nsource: [https://example.org/x]\nsituation: s\n"
        "arrangement: {backend: local, nodes: [n1], checks: [gpus]}\n"
        "nodes: {n1: {tools: {nvidia-smi: {default: {stdout: gone.txt}}}}}\n"
        "expect: {exit: 0}\n"
    )
    with pytest.raises(CaseError, match=r"nodes\.n1\.tools\.nvidia-smi\.default\.stdout: no file 'gone.txt'"):
        load_case(folder)


def test_every_case_is_valid_and_in_the_index() -> None:
    """Each case folder loads, and INDEX.md has one line per case giving its sources."""
    index = (HERE / "INDEX.md").read_text(encoding="utf-8")
    rows = {
        m.group(1): m.group(0)
        for m in re.finditer(r"^\| *`?([a-z0-9][a-z0-9-]*)`? *\|.*$", index, re.M)
        if m.group(1) != "id"
    }
    problems = []
    for folder in all_case_dirs():
        try:
            case = load_case(folder)
        except CaseError as exc:
            problems.append(str(exc))
            continue
        row = rows.get(folder.name)
        if row is None:
            problems.append(f"{folder.name}: no line in INDEX.md")
            continue
        problems += [f"{folder.name}: INDEX.md lacks its source {s}" for s in case.source if s not in row]
    problems += [
        f"INDEX.md: {name} has no folder under {CASES}" for name in set(rows) - {f.name for f in all_case_dirs()}
    ]
    assert not problems, "\n".join(problems)
    assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", "nccl-socket-fallback")
    for folder in all_case_dirs():
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", folder.name), f"case id not kebab case: {folder.name}"
