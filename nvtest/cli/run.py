"""``nvtest run``: run a suite on the nodes and write ``reports/<run-id>/``.

The verb checks its inputs (suite, inventory, SKU, backend), writes
``run_config.json`` and starts pytest with the nvtest plugin
(:mod:`nvtest.run.plugin`) on the suite's modules; the plugin ends the run
through :func:`nvtest.analysis.finish.finish_run`. ``--rerun-failed RUN_DIR``
reruns the failed and errored items of an earlier run with its inventory, backend,
options, SKU and overlay unless given again.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Annotated, Any

import typer

from nvtest import __version__
from nvtest.analysis.acting import DRAIN_MAX_FRACTION
from nvtest.cli.app import app, console, err_console, fail, new_run_id, remove_latest, update_latest
from nvtest.cli.limits import check_numbers
from nvtest.cli.options import with_options
from nvtest.errors import (
    EXIT_CHECK_FAILED,
    EXIT_CONFIG,
    EXIT_HARNESS,
    EXIT_INTERRUPTED,
    EXIT_OK,
    ConfigError,
    NvtestError,
    OutputWriteError,
    exit_code_of_signal,
)
from nvtest.results import write_atomic
from nvtest.transports.options import SlurmOptions, SshOptions, cli_param_of

__all__ = ["exit_code_of_run", "run"]


def exit_code_of_run(run_dir: Path, pytest_rc: int) -> int:
    """The exit code of a finished run from its results.json and pytest's exit code."""
    from nvtest.results import load_results

    if pytest_rc == 4:
        return EXIT_CONFIG
    if pytest_rc == 3:
        return EXIT_HARNESS
    try:
        doc = load_results(run_dir)
    except ConfigError:
        return EXIT_HARNESS
    run = doc.get("run", {})
    if run.get("interrupted"):
        return exit_code_of_signal(run.get("interrupt_signal"))
    if pytest_rc == 5 or not doc.get("results"):
        err_console.print("nvtest: error: no check was selected (check -k and --suite)")
        return EXIT_CONFIG
    verdict = doc["summary"]["verdict"]
    return EXIT_CHECK_FAILED if verdict in ("fail", "error") else EXIT_OK


@dataclass
class RunRequest:
    """What the user asked ``nvtest run`` for, completed from an earlier run on a rerun."""

    suite: str | None
    inventory: Path | None
    nodes: str | None
    backend: str
    sku: str | None
    sku_dir: list[Path] | None
    overlay: Path | None
    timeout_scale: float
    duration: float | None
    ssh: SshOptions
    slurm: SlurmOptions
    #: backend option fields taken from the earlier run (not given again)
    prev_options: dict[str, Any] = field(default_factory=dict)
    #: nodes of the partition Slurm had taken out of service -> its state and reason
    excluded: dict[str, str] = field(default_factory=dict)
    rerun_items: list[tuple[str, str]] | None = None
    rerun_of: str | None = None
    #: why the backend was chosen without --backend ("implied by --inventory"), or None
    backend_implied: str | None = None
    #: the inventory file's known_hosts (absolute), used when --known-hosts is not given
    inventory_known_hosts: str | None = None


def _previous_config(run_dir: Path) -> dict[str, Any]:
    """The ``run_config.json`` of an earlier run ({} when it has none, e.g. an old run).

    Raises:
        ConfigError: the file exists but is not valid JSON.
    """
    path = run_dir / "run_config.json"
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ConfigError(f"unreadable: {exc}", path=str(path)) from exc
    return data if isinstance(data, dict) else {}


def _from_rerun(req: RunRequest, rerun_failed: Path, unset: Any) -> RunRequest:
    """``req`` completed from the earlier run: what the user did not give again is taken from it.

    Raises:
        typer.Exit: (0) nothing failed in the earlier run.
        ConfigError: its results.json or run_config.json is unreadable.
    """
    from nvtest.config.inventory import fold_hostlist
    from nvtest.results import load_results

    prev = load_results(rerun_failed)
    items = [(r["check"], r["node"]) for r in prev["results"] if r["verdict"] in ("fail", "error")]
    if not items:
        console.print(f"nothing failed in {rerun_failed}: nothing to rerun")
        raise typer.Exit(EXIT_OK)
    before = _previous_config(rerun_failed)
    prun = prev["run"]
    req = replace(req, rerun_items=items, rerun_of=str(prun.get("run_id")))
    if req.suite is None:
        req.suite = str(before.get("suite") or prun.get("suite") or "delivery")
    if unset("backend"):
        req.backend = str(before.get("backend") or prun.get("backend") or req.backend)
    if req.inventory is None and req.nodes is None and before.get("inventory"):
        req.inventory = Path(before["inventory"])
    if req.nodes is None:
        req.nodes = fold_hostlist(sorted({n for _, n in items}))
    if req.sku is None and before.get("sku"):
        req.sku = str(before["sku"])
    if req.sku_dir is None and before.get("sku_dirs"):
        req.sku_dir = [Path(d) for d in before["sku_dirs"]]
    if req.overlay is None and before.get("overlay"):
        req.overlay = Path(before["overlay"])
    if unset("timeout_scale") and before.get("timeout_scale"):
        req.timeout_scale = float(before["timeout_scale"])
    if req.duration is None and before.get("duration_s") is not None:
        req.duration = float(before["duration_s"])
    if req.backend == before.get("backend"):
        params = {**cli_param_of(SshOptions), **cli_param_of(SlurmOptions)}
        req.prev_options = {
            k: v for k, v in (before.get("backend_options") or {}).items() if k in params and unset(params[k])
        }
    return req


def _validate(req: RunRequest) -> Any:
    """Load what the run will load, so a bad file fails before anything starts; the suite spec.

    Raises:
        ConfigError: a bad suite, inventory, hostlist, SKU profile, overlay or backend; an
            unknown SKU in the inventory (its file and line); more than one node on the
            local backend.
    """
    from nvtest.config.inventory import expand_hostlist, load_inventory, select_nodes
    from nvtest.config.skus import check_inventory_skus, load_catalog
    from nvtest.config.suites import load_suite

    if req.backend not in ("local", "ssh", "slurm"):
        raise ConfigError(f"unknown backend {req.backend!r}; known: local, ssh, slurm", field="--backend")
    spec = load_suite(req.suite or "delivery")
    catalog = load_catalog(list(req.sku_dir or []), req.overlay)
    if req.sku:
        catalog.get(req.sku)
    count = 0
    if req.inventory is not None:
        inv = load_inventory(req.inventory)
        if req.nodes is not None:
            inv = select_nodes(inv, req.nodes)
        check_inventory_skus(inv, catalog)
        req.inventory_known_hosts = inv.known_hosts
        count = len(inv.nodes)
    elif req.nodes is not None:
        count = len(expand_hostlist(req.nodes))
    if req.backend == "local" and count > 1:
        raise ConfigError(
            f"the local backend runs one node (this machine); {count} were given: use --backend ssh or slurm",
            field="--backend",
        )
    return spec


def _backend_options(req: RunRequest) -> dict[str, Any]:
    """``run_config.json``'s backend_options: the backend's option set, the earlier run's on top.

    Raises:
        ConfigError: the slurm backend with no node source.
    """
    opts: dict[str, Any] = {}
    if req.backend == "ssh":
        opts = {k: v for k, v in req.ssh.as_kwargs().items() if v is not None}
        if req.inventory_known_hosts and "known_hosts" not in opts:
            opts["known_hosts"] = req.inventory_known_hosts
    elif req.backend == "slurm":
        opts = req.slurm.as_kwargs()
    opts.update(req.prev_options)
    if req.backend == "slurm":
        if not (req.inventory or req.nodes or opts.get("partition") or os.environ.get("SLURM_JOB_NODELIST")):
            raise ConfigError(
                "the slurm backend needs --nodes, --partition, --inventory or a Slurm allocation", field="--nodes"
            )
        if req.nodes is None and req.inventory is None:
            from nvtest.config.inventory import fold_hostlist
            from nvtest.transports.slurm import discover_nodes

            names = discover_nodes(
                partition=opts.get("partition"), nodelist=os.environ.get("SLURM_JOB_NODELIST"), include_unavailable=True
            )
            req.excluded = {**submitted_excluded(), **excluded_nodes(names)}
            req.nodes = fold_hostlist([*names, *(n for n in req.excluded if n not in names)])
    return opts


#: In a run directory ``nvtest submit --partition`` made: the partition's nodes Slurm had taken
#: out of service at submission -> its state and reason (the batch job's run lists them).
EXCLUDED_FILE = "slurm-excluded.json"


def submitted_excluded() -> dict[str, str]:
    """Inside ``nvtest submit``'s batch job (``NVTEST_RUN_DIR`` set): the nodes it found out of
    service (:data:`EXCLUDED_FILE`); else, or unreadable, {}."""
    preset = os.environ.get("NVTEST_RUN_DIR")
    if not preset:
        return {}
    try:
        data = json.loads((Path(preset) / EXCLUDED_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def excluded_nodes(names: list[str]) -> dict[str, str]:
    """Of ``names``, the nodes Slurm has taken out of service (drained, down, not
    responding, failed...) -> ``Slurm state <STATE>, reason: <Reason=>`` (``scontrol show
    node``): nodes of the run nvtest does not start on, each reported with Slurm's words.

    Raises:
        TransportError: scontrol could not run.
    """
    from nvtest.transports.slurm import node_states

    out: dict[str, str] = {}
    for name, st in node_states(names).items():
        if not st.available:
            reason = f", reason: {st.reason}" if st.reason else ", no reason given"
            out[name] = f"Slurm state {st.state}{reason}"
    return out


def _make_run_dir(out: Path) -> tuple[str, Path, Path]:
    """(run id, run directory, out): a new ``out/<run-id>/``, or the one ``nvtest submit`` chose.

    Raises:
        ConfigError: the directory cannot be created.
    """
    preset = os.environ.get("NVTEST_RUN_DIR")  # set by the batch script of `nvtest submit`
    try:
        if preset:
            run_dir = Path(preset).resolve()
            run_dir.mkdir(parents=True, exist_ok=True)
            return run_dir.name, run_dir, run_dir.parent
        run_id = new_run_id()
        out.mkdir(parents=True, exist_ok=True)
        run_dir = (out / run_id).resolve()
        run_dir.mkdir(parents=True)
        return run_id, run_dir, out
    except OSError as exc:
        raise ConfigError(
            f"cannot create the run directory: {exc.strerror or exc}", path=str(out), field="--out"
        ) from exc


def pytest_args(run_dir: Path, targets: list[str], cfg_path: Path, progress: str, keyword: str | None) -> list[str]:
    """pytest's argv for one run: the suite's modules with only the nvtest plugin's output."""
    args = [
        *targets,
        "-c",
        str(run_dir / "pytest.ini"),
        "--rootdir",
        str(run_dir),
        "--import-mode=importlib",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:terminal",
        "-p",
        "no:randomly",
        "-p",
        "no:xdist",  # one run is one process: a check is a phase of threads, not workers
        # per-item work the run never reads (its verdicts, logs and warnings are nvtest's own)
        "-p",
        "no:logging",
        "-p",
        "no:warnings",
        "-p",
        "no:junitxml",
        "-p",
        "no:pastebin",
        "-p",
        "no:doctest",
        "-p",
        "no:stepwise",
        "-p",
        "no:unraisableexception",
        "-p",
        "no:threadexception",
        "-p",
        "no:subtests",
        "--capture=no",  # the live view draws on the terminal while checks run
        "--nvtest-config",
        str(cfg_path),
        "--nvtest-progress",
        progress,
    ]
    return [*args, "-k", keyword] if keyword else args


def _usable_sign_key(sign_key: Path | None) -> None:
    """A ``--sign-key`` that cannot sign is a usage error before anything runs.

    Raises:
        typer.Exit: the key is unreadable or not an Ed25519 private key (the error printed).
    """
    if sign_key is None:
        return
    from nvtest.report.manifest import check_sign_key

    try:
        check_sign_key(sign_key)
    except NvtestError as exc:
        raise fail(exc) from exc


def _write_config(run_dir: Path, cfg: Any) -> Path:
    """Write the run's ``run_config.json`` (``cfg``: a RunConfig) and an empty ``pytest.ini`` into
    ``run_dir``; returns the config's path.

    Raises:
        typer.Exit: the directory cannot be written (the run directory is removed, the error printed).
    """
    cfg_path = run_dir / "run_config.json"
    try:
        write_atomic(cfg_path, cfg.model_dump_json(indent=1))
        write_atomic(run_dir / "pytest.ini", "[pytest]\n")
    except OutputWriteError as exc:
        shutil.rmtree(run_dir, ignore_errors=True)
        raise fail(exc) from exc
    return cfg_path


@app.command(
    epilog="Example: nvtest run --suite delivery --inventory rack07.yaml --backend ssh --out reports/",
)
@with_options(ssh=True, slurm=True)
def run(
    ctx: typer.Context,
    suite: Annotated[
        str | None, typer.Option(help="Suite name (nvtest list suites) or a suite YAML file. Default: delivery.")
    ] = None,
    inventory: Annotated[Path | None, typer.Option(help="Inventory YAML file (nodes, groups, SKU, tags).")] = None,
    nodes: Annotated[str | None, typer.Option(help="Nodes as a hostlist, e.g. 'gpu[001-004]'.")] = None,
    backend: Annotated[
        str,
        typer.Option(help="local, ssh or slurm. Default: ssh with --inventory or --nodes, else local (this machine)."),
    ] = "local",
    sku: Annotated[str | None, typer.Option(help="Force this SKU profile for every node (nvtest list skus).")] = None,
    sku_dir: Annotated[list[Path] | None, typer.Option(help="Extra directory of SKU profiles (repeatable).")] = None,
    overlay: Annotated[Path | None, typer.Option(help="Site overlay file that overrides thresholds.")] = None,
    out: Annotated[Path, typer.Option(help="Where run directories are created.")] = Path("reports"),
    keyword: Annotated[str | None, typer.Option("-k", help="pytest -k expression to select checks or nodes.")] = None,
    timeout_scale: Annotated[float, typer.Option(help="Multiply every probe timeout by this.")] = 1.0,
    duration: Annotated[
        float | None, typer.Option(help="Seconds of sustained load for suites that have one (burnin).")
    ] = None,
    rerun_failed: Annotated[
        Path | None, typer.Option(help="Run only the failed and errored items of this run directory.")
    ] = None,
    progress: Annotated[str, typer.Option(help="auto, live, plain or none.")] = "auto",
    drain_failed: Annotated[
        bool,
        typer.Option(
            help="slurm: drain nodes that failed, with the reason (opt-in); never for an error, a systemic failure or past --drain-max-fraction."
        ),
    ] = False,
    drain_max_fraction: Annotated[
        float,
        typer.Option(
            help="With --drain-failed: the largest share of the run's nodes drained (at least one node); past it none is drained. 1 drains every failed node."
        ),
    ] = DRAIN_MAX_FRACTION,
    pdf: Annotated[bool, typer.Option("--pdf", help="Also write report.pdf (needs WeasyPrint or Chromium).")] = False,
    sign_key: Annotated[
        Path | None, typer.Option(help="Ed25519 private key (PEM) that signs the run's manifest.sha256.")
    ] = None,
    *,
    ssh: SshOptions,
    slurm: SlurmOptions,
) -> None:
    """Run a suite on the nodes and write reports/<run-id>/ (results.json, junit.xml, report.html)."""
    import pytest

    from nvtest.config.suites import suite_targets
    from nvtest.session.context import RunConfig

    def unset(param: str) -> bool:
        source = ctx.get_parameter_source(param)  # click's ParameterSource (vendored by typer)
        return source is None or source.name == "DEFAULT"

    check_numbers("run", timeout_scale=timeout_scale, duration=duration, drain_max_fraction=drain_max_fraction)
    _usable_sign_key(sign_key)
    req = RunRequest(suite, inventory, nodes, backend, sku, sku_dir, overlay, timeout_scale, duration, ssh, slurm)
    try:
        if rerun_failed is not None:
            req = _from_rerun(req, rerun_failed, unset)
        elif unset("backend") and (req.inventory is not None or req.nodes is not None):
            req.backend = "ssh"
            req.backend_implied = "implied by --inventory" if req.inventory is not None else "implied by --nodes"
        spec = _validate(req)
        backend_options = _backend_options(req)
        run_id, run_dir, out = _make_run_dir(out)
    except NvtestError as exc:
        raise fail(exc) from exc
    cfg = RunConfig(
        run_id=run_id,
        run_dir=str(run_dir),
        suite=spec.name,
        backend=req.backend,
        backend_options=backend_options,
        inventory=str(req.inventory.resolve()) if req.inventory else None,
        nodes=req.nodes,
        sku=req.sku,
        sku_dirs=[str(p.resolve()) for p in (req.sku_dir or [])],
        overlay=str(req.overlay.resolve()) if req.overlay else None,
        command_line=shlex.join(["nvtest", *sys.argv[1:]]),
        timeout_scale=req.timeout_scale,
        duration_s=req.duration,
        rerun_of=req.rerun_of,
        rerun_items=req.rerun_items,
        excluded=req.excluded,
    )
    cfg_path = _write_config(run_dir, cfg)
    implied = f" ({req.backend_implied})" if req.backend_implied else ""
    console.print(
        f"nvtest {__version__}: run {run_id}, suite {spec.name}, backend {req.backend}{implied}; writing {run_dir}"
    )
    try:
        rc = int(pytest.main(pytest_args(run_dir, suite_targets(spec), cfg_path, progress, keyword)))
    except KeyboardInterrupt:  # Ctrl-C while pytest starts, before the run's handlers
        rc = int(pytest.ExitCode.INTERRUPTED)
    if rc == pytest.ExitCode.INTERRUPTED and not (run_dir / "results.json").is_file() and not _measured(run_dir):
        # stopped before the run began (pytest starting up): nothing planned, nothing measured
        shutil.rmtree(run_dir, ignore_errors=True)
        err_console.print(f"nvtest: interrupted before the run began: nothing was measured ({run_dir} removed)")
        raise typer.Exit(EXIT_INTERRUPTED)
    code = exit_code_of_run(run_dir, rc)
    if not (run_dir / "results.json").is_file() and code != EXIT_CONFIG and _measured(run_dir):
        # results.jsonl holds the measurements; the error line said why results.json is missing
        remove_latest(out)
        raise typer.Exit(EXIT_HARNESS)
    if code == EXIT_CONFIG or not (run_dir / "results.json").is_file():
        # nothing was measured (a usage error, no check selected): leave no empty run behind
        shutil.rmtree(run_dir, ignore_errors=True)
        raise typer.Exit(code)
    try:
        update_latest(out, run_dir)
    except OutputWriteError as exc:
        err_console.print(f"nvtest: error: {exc}; {out / 'latest'} removed (it pointed at an earlier run)")
        code = EXIT_HARNESS
    _after_run(run_dir, cfg, code, drain=drain_max_fraction if drain_failed else None, pdf=pdf, sign_key=sign_key)
    raise typer.Exit(code)


def _measured(run_dir: Path) -> bool:
    """True when the run's results.jsonl holds a run record (the run began: keep its directory)."""
    try:
        with (run_dir / "results.jsonl").open(encoding="utf-8") as fh:
            return any('"kind": "run"' in line for line in fh)
    except OSError:
        return False


def _after_run(
    run_dir: Path, cfg: Any, code: int, *, drain: float | None, pdf: bool, sign_key: Path | None = None
) -> None:
    """Drain (opt-in: ``drain`` is the largest share of nodes drained; each node's decision is
    printed), the PDF (opt-in), the manifest again for what they wrote (signed with ``sign_key``),
    then the summary on the console."""
    if drain is not None and cfg.backend == "slurm" and code in (EXIT_OK, EXIT_CHECK_FAILED):
        from nvtest.analysis.acting import NOTHING_FAILED
        from nvtest.run.drain import drain_failed_nodes

        decisions = drain_failed_nodes(run_dir, cfg.backend_options, max_fraction=drain)
        for d in decisions:
            if d.why != NOTHING_FAILED:
                console.print(
                    f"drain: {d.node}: {'drained: ' if d.drain else ''}{d.why}", markup=False, highlight=False
                )
        if passed := sum(d.why == NOTHING_FAILED for d in decisions):
            console.print(f"drain: {passed} node(s) not drained: nothing failed", markup=False, highlight=False)
    if pdf:
        from nvtest.report import render_pdf

        try:
            render_pdf(run_dir)
        except NvtestError as exc:
            err_console.print(f"nvtest: error: report.pdf not written: {exc}")
    if (pdf or sign_key is not None) and (run_dir / "results.json").is_file():
        from nvtest.report.manifest import write_manifest

        try:
            write_manifest(run_dir, sign_key)
        except NvtestError as exc:
            err_console.print(f"nvtest: error: manifest.sha256 not signed: {exc}")
    print_summary(run_dir)


def print_summary(run_dir: Path) -> None:
    """The run's overall verdict, every item that did not pass, the run's warnings and the
    report's path, on the console; plain text, never cut (lines wrap between words).

    Items with the same verdict, check and reason are one line naming their nodes;
    skips (not applicable) come after the rest, one line per reason naming its items.
    """
    from nvtest.report.console import wrap_text
    from nvtest.results import load_results

    try:
        doc = load_results(run_dir)
    except ConfigError as exc:
        err_console.print(f"nvtest: no results.json: {exc}")
        return
    width = max(40, console.width)

    def say(text: str, indent: str = "") -> None:
        for line in wrap_text(text, width, indent=indent, more=indent + "    "):
            console.print(line)

    s = doc["summary"]
    incomplete = f"  ({s['incomplete']})" if s.get("incomplete") else ""
    nodes = ", ".join(f"{v} {k}" for k, v in s["nodes"].items() if v)
    say(f"overall: {s['verdict'].upper()}{incomplete}  nodes: {nodes}")
    groups: dict[tuple[str, str, str], list[str]] = {}
    for r in doc["results"]:
        if r["verdict"] != "pass":
            groups.setdefault((r["verdict"], r["check"], " ".join(str(r.get("reason") or "").split())), []).append(
                r["node"]
            )
    rank = {"error": 0, "fail": 1, "warn": 2, "skip": 3}
    ordered = sorted(groups.items(), key=lambda kv: (rank.get(kv[0][0], 9), kv[0][1], kv[0][2]))
    bad = [(k, v) for k, v in ordered if k[0] != "skip"]
    skipped = [(k, v) for k, v in ordered if k[0] == "skip"]
    if bad:
        say(f"not passed ({sum(len(v) for _, v in bad)} item(s)):")
        for (verdict, check, reason), names in bad:
            say(f"{verdict.upper():5} {check}[{node_list(names)}]: {reason or verdict}", indent="  ")
    if skipped:  # by reason: "no NVIDIA GPU ..." is one line for every check it skipped
        say(f"skipped, not applicable ({sum(len(v) for _, v in skipped)} item(s)):")
        by_reason: dict[str, list[str]] = {}
        for (_, check, reason), names in skipped:
            by_reason.setdefault(reason or "no reason given", []).append(f"{check}[{node_list(names)}]")
        for reason, items in by_reason.items():
            say(f"{reason}: {', '.join(items)}", indent="  ")
    warnings = list(dict.fromkeys(str(w) for w in doc["run"].get("warnings") or []))
    if warnings:
        say(f"warnings ({len(warnings)}):")
        for w in warnings:
            say(w, indent="  ")
    report = run_dir / "report.html"
    if report.is_file():
        console.print(f"report: {report}")
    else:  # not written (disk full, read-only): the error line above names why
        console.print(f"report: not written; rebuild it with: nvtest report {run_dir}")


def node_list(names: list[str]) -> str:
    """Node names for one line: a hostlist (``gpu[001-004]``) where every name is plain
    letters, digits, ``.``, ``_`` and ``-`` (the hostlist syntax reads those back the same),
    else the names as they are, separated by ``", "``."""
    from nvtest.config.inventory import fold_hostlist

    if all(_PLAIN_NAME.fullmatch(n) for n in names):
        return fold_hostlist(sorted(names))
    return ", ".join(names)


_PLAIN_NAME = re.compile(r"[A-Za-z0-9._-]+")
