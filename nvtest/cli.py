"""The ``nvtest`` command line.

Exit codes (every verb):

====  =======================================================================
0     all checks passed (warnings allowed)
1     a check failed or errored (a node unreachable, a probe that could not run)
2     usage or configuration error (the message names the file and the field)
3     harness error (nvtest itself failed), or the run was stopped by SIGTERM
130   the run was interrupted by Ctrl-C (SIGINT); what was measured is kept
====  =======================================================================
"""

from __future__ import annotations

import datetime as dt
import json
import os
import secrets
import shlex
import shutil
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from nvtest import __version__
from nvtest.errors import (
    EXIT_CHECK_FAILED,
    EXIT_CONFIG,
    EXIT_HARNESS,
    EXIT_INTERRUPTED,
    EXIT_OK,
    ConfigError,
    NvtestError,
)

app = typer.Typer(
    name="nvtest",
    help="GPU cluster acceptance tests: run a suite on every node, judge against SKU thresholds, write a report.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
list_app = typer.Typer(help="List suites, checks or SKU profiles.", no_args_is_help=True)
app.add_typer(list_app, name="list")

console = Console(soft_wrap=True)
err_console = Console(stderr=True, soft_wrap=True)


def _fail(exc: NvtestError) -> typer.Exit:
    err_console.print(f"nvtest: error: {exc}", markup=False, highlight=False)
    return typer.Exit(exc.exit_code)


def _version_cb(value: bool) -> None:
    if value:
        console.print(f"nvtest {__version__}")
        raise typer.Exit(0)


@app.callback()
def _main(
    version: Annotated[bool, typer.Option("--version", callback=_version_cb, is_eager=True, help="Print the version.")] = False,
) -> None:
    """nvtest: acceptance tests for GPU clusters."""


def new_run_id() -> str:
    """``YYYYmmdd-HHMMSS-xxxx`` (UTC time and 4 random hex digits)."""
    return dt.datetime.now(tz=dt.UTC).strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(2)


def _update_latest(out: Path, run_dir: Path) -> None:
    latest = out / "latest"
    try:
        if latest.is_symlink() or latest.exists():
            latest.unlink()
        latest.symlink_to(run_dir.name)
    except OSError:
        pass


def _exit_code_of(run_dir: Path, pytest_rc: int) -> int:
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
        return EXIT_INTERRUPTED if run.get("interrupt_signal") in (None, "SIGINT") else EXIT_HARNESS
    if pytest_rc == 5 or not doc.get("results"):
        err_console.print("nvtest: error: no check was selected (check -k and --suite)")
        return EXIT_CONFIG
    verdict = doc["summary"]["verdict"]
    return EXIT_CHECK_FAILED if verdict in ("fail", "error") else EXIT_OK


def _slurm_options(**options: Any) -> dict[str, Any]:
    """The SlurmTransport keyword options the user set (unset and false ones left out)."""
    return {k: v for k, v in options.items() if v not in (None, False)}


def _rerun_items(prev: Path) -> tuple[list[tuple[str, str]], dict[str, Any]]:
    from nvtest.results import load_results

    doc = load_results(prev)
    items = [(r["check"], r["node"]) for r in doc["results"] if r["verdict"] in ("fail", "error")]
    return items, doc


#: RunConfig.backend_options key -> the `nvtest run` option that sets it.
_OPTION_PARAMS = {
    "parallel": "parallel",
    "connect_timeout_s": "connect_timeout",
    "insecure_host_keys": "insecure_host_keys",
    "connect_retries": "connect_retries",
    "ssh_config": "ssh_config",
    "known_hosts": "known_hosts",
    "partition": "partition",
    "time_limit": "time_limit",
    "account": "account",
    "reservation": "reservation",
    "qos": "qos",
    "exclusive": "exclusive",
    "gpus_per_node": "gpus_per_node",
    "mpi": "mpi",
}


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


@app.command(
    epilog="Example: nvtest run --suite delivery --inventory rack07.yaml --backend ssh --out reports/",
)
def run(
    ctx: typer.Context,
    suite: Annotated[
        str | None, typer.Option(help="Suite name (nvtest list suites) or a suite YAML file. Default: delivery.")
    ] = None,
    inventory: Annotated[Path | None, typer.Option(help="Inventory YAML file (nodes, groups, SKU, tags).")] = None,
    nodes: Annotated[str | None, typer.Option(help="Nodes as a hostlist, e.g. 'gpu[001-004]'.")] = None,
    backend: Annotated[str, typer.Option(help="local, ssh or slurm.")] = "local",
    sku: Annotated[str | None, typer.Option(help="Force this SKU profile for every node (nvtest list skus).")] = None,
    sku_dir: Annotated[list[Path] | None, typer.Option(help="Extra directory of SKU profiles (repeatable).")] = None,
    overlay: Annotated[Path | None, typer.Option(help="Site overlay file that overrides thresholds.")] = None,
    out: Annotated[Path, typer.Option(help="Where run directories are created.")] = Path("reports"),
    keyword: Annotated[str | None, typer.Option("-k", help="pytest -k expression to select checks or nodes.")] = None,
    parallel: Annotated[int, typer.Option(help="ssh: at most this many nodes at once.")] = 64,
    connect_timeout: Annotated[float, typer.Option(help="ssh: connect timeout, seconds.")] = 10.0,
    insecure_host_keys: Annotated[bool, typer.Option(help="ssh: accept unknown host keys (warned in the report).")] = False,
    ssh_config: Annotated[Path | None, typer.Option(help="ssh: OpenSSH client config (default ~/.ssh/config).")] = None,
    known_hosts: Annotated[Path | None, typer.Option(help="ssh: known_hosts file (default ~/.ssh/known_hosts).")] = None,
    connect_retries: Annotated[int, typer.Option(help="ssh: connection attempts after the first (never for commands).")] = 2,
    timeout_scale: Annotated[float, typer.Option(help="Multiply every probe timeout by this.")] = 1.0,
    duration: Annotated[
        float | None, typer.Option(help="Seconds of sustained load for suites that have one (burnin).")
    ] = None,
    rerun_failed: Annotated[Path | None, typer.Option(help="Run only the failed and errored items of this run directory.")] = None,
    progress: Annotated[str, typer.Option(help="auto, live, plain or none.")] = "auto",
    partition: Annotated[str | None, typer.Option(help="slurm: partition.")] = None,
    time_limit: Annotated[str | None, typer.Option("--time", help="slurm: allocation time limit.")] = None,
    account: Annotated[str | None, typer.Option(help="slurm: account.")] = None,
    reservation: Annotated[str | None, typer.Option(help="slurm: reservation.")] = None,
    qos: Annotated[str | None, typer.Option(help="slurm: QOS.")] = None,
    exclusive: Annotated[bool, typer.Option(help="slurm: exclusive node allocation.")] = False,
    gpus_per_node: Annotated[int | None, typer.Option(help="slurm: GPUs per node to allocate.")] = None,
    mpi: Annotated[str | None, typer.Option(help="slurm: srun --mpi plugin (pmix, pmi2).")] = None,
    drain_failed: Annotated[bool, typer.Option(help="slurm: drain nodes that failed, with the reason (opt-in).")] = False,
    pdf: Annotated[bool, typer.Option("--pdf", help="Also write report.pdf (needs WeasyPrint or Chromium).")] = False,
) -> None:
    """Run a suite on the nodes and write reports/<run-id>/ (results.json, junit.xml, report.html)."""
    import pytest

    from nvtest.context import RunConfig
    from nvtest.inventory import expand_hostlist, fold_hostlist, load_inventory, select_nodes
    from nvtest.skus import load_catalog
    from nvtest.suites import load_suite, suite_targets

    rerun_items = None
    rerun_of = None
    prev_options: dict[str, Any] = {}

    def unset(param: str) -> bool:
        source = ctx.get_parameter_source(param)  # click's ParameterSource (vendored by typer)
        return source is None or source.name == "DEFAULT"

    try:
        if rerun_failed is not None:
            # what the user does not give again is taken from the earlier run
            rerun_items, prev = _rerun_items(rerun_failed)
            rerun_of = str(prev["run"].get("run_id"))
            if not rerun_items:
                console.print(f"nothing failed in {rerun_failed}: nothing to rerun")
                raise typer.Exit(EXIT_OK)
            before = _previous_config(rerun_failed)
            if suite is None:
                suite = str(before.get("suite") or prev["run"].get("suite") or "delivery")
            if unset("backend"):
                backend = str(before.get("backend") or prev["run"].get("backend") or backend)
            if inventory is None and nodes is None and before.get("inventory"):
                inventory = Path(before["inventory"])
            if nodes is None:
                nodes = fold_hostlist(sorted({n for _, n in rerun_items}))
            if sku is None and before.get("sku"):
                sku = str(before["sku"])
            if sku_dir is None and before.get("sku_dirs"):
                sku_dir = [Path(d) for d in before["sku_dirs"]]
            if overlay is None and before.get("overlay"):
                overlay = Path(before["overlay"])
            if unset("timeout_scale") and before.get("timeout_scale"):
                timeout_scale = float(before["timeout_scale"])
            if duration is None and before.get("duration_s") is not None:
                duration = float(before["duration_s"])
            if backend == before.get("backend"):
                prev_options = {
                    k: v
                    for k, v in (before.get("backend_options") or {}).items()
                    if k in _OPTION_PARAMS and unset(_OPTION_PARAMS[k])
                }
        spec = load_suite(suite or "delivery")
        if inventory is not None:
            if nodes is not None:
                select_nodes(load_inventory(inventory), nodes)
            else:
                load_inventory(inventory)
        elif nodes is not None:
            expand_hostlist(nodes)
        catalog = load_catalog(list(sku_dir or []), overlay)
        if sku:
            catalog.get(sku)
        if backend not in ("local", "ssh", "slurm"):
            raise ConfigError(f"unknown backend {backend!r}; known: local, ssh, slurm", field="--backend")
    except NvtestError as exc:
        raise _fail(exc) from exc

    backend_options: dict[str, Any] = {}
    if backend == "ssh":
        backend_options = {
            "parallel": parallel,
            "connect_timeout_s": connect_timeout,
            "insecure_host_keys": insecure_host_keys,
            "connect_retries": connect_retries,
        }
        if ssh_config is not None:
            backend_options["ssh_config"] = str(ssh_config.resolve())
        if known_hosts is not None:
            backend_options["known_hosts"] = str(known_hosts.resolve())
    elif backend == "slurm":
        backend_options = _slurm_options(
            partition=partition,
            time_limit=time_limit,
            account=account,
            reservation=reservation,
            qos=qos,
            exclusive=exclusive,
            gpus_per_node=gpus_per_node,
            mpi=mpi,
        )
    backend_options.update(prev_options)
    if backend == "slurm" and not (inventory or nodes or partition or os.environ.get("SLURM_JOB_NODELIST")):
        raise _fail(ConfigError("the slurm backend needs --nodes, --partition, --inventory or a Slurm allocation", field="--nodes"))
    if backend == "slurm" and nodes is None and inventory is None:
        from nvtest.transports.slurm import discover_nodes

        names = discover_nodes(partition=partition, nodelist=os.environ.get("SLURM_JOB_NODELIST"))
        nodes = fold_hostlist(names)

    preset = os.environ.get("NVTEST_RUN_DIR")  # set by the batch script of `nvtest submit`
    try:
        if preset:
            run_dir = Path(preset).resolve()
            run_id, out = run_dir.name, run_dir.parent
            run_dir.mkdir(parents=True, exist_ok=True)
        else:
            run_id = new_run_id()
            out.mkdir(parents=True, exist_ok=True)
            run_dir = (out / run_id).resolve()
            run_dir.mkdir(parents=True)
    except OSError as exc:
        raise _fail(ConfigError(f"cannot create the run directory: {exc.strerror or exc}", path=str(out), field="--out")) from exc
    cfg = RunConfig(
        run_id=run_id,
        run_dir=str(run_dir),
        suite=spec.name,
        backend=backend,
        backend_options=backend_options,
        inventory=str(inventory.resolve()) if inventory else None,
        nodes=nodes,
        sku=sku,
        sku_dirs=[str(p.resolve()) for p in (sku_dir or [])],
        overlay=str(overlay.resolve()) if overlay else None,
        command_line=shlex.join(["nvtest", *sys.argv[1:]]),
        timeout_scale=timeout_scale,
        duration_s=duration,
        rerun_of=rerun_of,
        rerun_items=rerun_items,
    )
    cfg_path = run_dir / "run_config.json"
    cfg_path.write_text(cfg.model_dump_json(indent=1), encoding="utf-8")
    (run_dir / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    args = [
        *suite_targets(spec),
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
        "--capture=no",  # the live view draws on the terminal while checks run
        "--nvtest-config",
        str(cfg_path),
        "--nvtest-progress",
        progress,
    ]
    if keyword:
        args += ["-k", keyword]
    console.print(f"nvtest {__version__}: run {run_id}, suite {spec.name}, backend {backend}; writing {run_dir}")
    rc = int(pytest.main(args))
    code = _exit_code_of(run_dir, rc)
    if code == EXIT_CONFIG or not (run_dir / "results.json").is_file():
        # nothing was measured (a usage error, no check selected): leave no empty run behind
        shutil.rmtree(run_dir, ignore_errors=True)
        raise typer.Exit(code)
    _update_latest(out, run_dir)
    if drain_failed and backend == "slurm" and code in (EXIT_OK, EXIT_CHECK_FAILED):
        from nvtest.drain import drain_failed_nodes

        drain_failed_nodes(run_dir, backend_options)
    if pdf:
        from nvtest.report import render_pdf

        try:
            render_pdf(run_dir)
        except NvtestError as exc:
            err_console.print(f"nvtest: error: report.pdf not written: {exc}", markup=False, highlight=False)
    _print_summary(run_dir)
    raise typer.Exit(code)


def _print_summary(run_dir: Path) -> None:
    from nvtest.results import load_results

    try:
        doc = load_results(run_dir)
    except ConfigError as exc:
        err_console.print(f"nvtest: no results.json: {exc}")
        return
    s = doc["summary"]
    nodes = ", ".join(f"{v} {k}" for k, v in s["nodes"].items() if v)
    incomplete = f"  ({s['incomplete']})" if s.get("incomplete") else ""
    console.print(f"overall: {s['verdict'].upper()}{incomplete}  nodes: {nodes}", markup=False, highlight=False)
    bad = [r for r in doc["results"] if r["verdict"] in ("fail", "error")]
    for r in bad[:20]:
        console.print(f"  {r['verdict'].upper():5} {r['check']}[{r['node']}]: {r['reason'][:200]}", markup=False, highlight=False)
    if len(bad) > 20:
        console.print(f"  ... and {len(bad) - 20} more (see the report)")
    console.print(f"report: {run_dir / 'report.html'}")


@app.command(epilog="Example: nvtest report reports/latest")
def report(
    run_dir: Annotated[Path, typer.Argument(help="A run directory holding results.json.")],
    pdf: Annotated[bool, typer.Option("--pdf", help="Also write report.pdf (needs WeasyPrint or Chromium).")] = False,
) -> None:
    """Re-render report.html, junit.xml and results.csv (and report.pdf) from a run's results.json (no node is touched)."""
    from nvtest.report import render_all

    try:
        paths = render_all(run_dir, pdf=pdf)
    except NvtestError as exc:
        raise _fail(exc) from exc
    for p in paths:
        console.print(str(p))


@list_app.command("suites", epilog="Example: nvtest list suites")
def list_suites_cmd() -> None:
    """List the suites and what they run."""
    from nvtest.suites import list_suites

    try:
        suites = list_suites()
    except NvtestError as exc:
        raise _fail(exc) from exc
    from nvtest.suites import check_names

    t = Table("suite", "checks", "description")
    for name, spec in suites.items():
        t.add_row(name, str(sum(len(check_names(m)) for m in spec.checks)), spec.description)
    console.print(t)


@list_app.command("checks", epilog="Example: nvtest list checks --suite quick")
def list_checks_cmd(
    suite: Annotated[str | None, typer.Option(help="Only this suite's checks.")] = None,
) -> None:
    """List the checks (names for -k), their modules and the suites that run them."""
    from nvtest.suites import check_names, list_suites, load_suite

    try:
        suites = {suite: load_suite(suite)} if suite else list_suites()
    except NvtestError as exc:
        raise _fail(exc) from exc
    t = Table("check", "module", "suites")
    seen: dict[str, list[str]] = {}
    for name, spec in suites.items():
        for c in spec.checks:
            seen.setdefault(c, []).append(name)
    for module, names in seen.items():
        for check in check_names(module):
            t.add_row(check, module, ", ".join(names))
    console.print(t)


@list_app.command("skus", epilog="Example: nvtest list skus")
def list_skus_cmd(
    sku_dir: Annotated[list[Path] | None, typer.Option(help="Extra directory of SKU profiles.")] = None,
) -> None:
    """List the SKU profiles and how each is matched."""
    from nvtest.skus import load_catalog

    try:
        cat = load_catalog(list(sku_dir or []))
    except NvtestError as exc:
        raise _fail(exc) from exc
    t = Table("sku", "match", "thresholds", "description")
    for name in cat.names():
        p = cat.profiles[name]
        m = ", ".join(f"{k}={v}" for k, v in p.match.model_dump(exclude_none=True).items()) or "-"
        n = sum(len(v) for v in p.thresholds.values())
        t.add_row(name, m, str(n), p.description)
    console.print(t)


@app.command("inventory", epilog="Example: nvtest inventory --json")
def inventory_cmd(
    inventory: Annotated[Path | None, typer.Option(help="Inventory YAML file.")] = None,
    nodes: Annotated[str | None, typer.Option(help="Nodes as a hostlist.")] = None,
    backend: Annotated[str, typer.Option(help="local, ssh or slurm.")] = "local",
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
    insecure_host_keys: Annotated[bool, typer.Option(help="ssh: accept unknown host keys.")] = False,
    parallel: Annotated[int, typer.Option(help="ssh: at most this many nodes at once.")] = 64,
    ssh_config: Annotated[Path | None, typer.Option(help="ssh: OpenSSH client config (default ~/.ssh/config).")] = None,
    known_hosts: Annotated[Path | None, typer.Option(help="ssh: known_hosts file.")] = None,
) -> None:
    """Gather and print the inventory of the nodes (this machine by default)."""
    from nvtest.fleet_inventory import gather_inventory, print_inventory

    try:
        data = gather_inventory(
            inventory=inventory,
            nodes=nodes,
            backend=backend,
            insecure_host_keys=insecure_host_keys,
            parallel=parallel,
            ssh_config=str(ssh_config.resolve()) if ssh_config else None,
            known_hosts=str(known_hosts.resolve()) if known_hosts else None,
        )
    except NvtestError as exc:
        raise _fail(exc) from exc
    if as_json:
        sys.stdout.write(json.dumps(data, indent=1) + "\n")
    else:
        print_inventory(console, data)
    raise typer.Exit(EXIT_CHECK_FAILED if any(n.get("down_reason") for n in data["nodes"].values()) else EXIT_OK)


@app.command(
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    epilog="Example: nvtest submit --partition gpu --time 120 --exclusive --nodes 'gpu[001-016]' --suite delivery",
)
def submit(
    ctx: typer.Context,
    nodes: Annotated[str | None, typer.Option(help="Nodes as a hostlist; default: all available nodes of --partition.")] = None,
    inventory: Annotated[Path | None, typer.Option(help="Inventory YAML file (its nodes are allocated).")] = None,
    partition: Annotated[str | None, typer.Option(help="slurm: partition.")] = None,
    time_limit: Annotated[str | None, typer.Option("--time", help="slurm: time limit of the batch job.")] = None,
    account: Annotated[str | None, typer.Option(help="slurm: account.")] = None,
    reservation: Annotated[str | None, typer.Option(help="slurm: reservation.")] = None,
    qos: Annotated[str | None, typer.Option(help="slurm: QOS.")] = None,
    exclusive: Annotated[bool, typer.Option(help="slurm: exclusive nodes (recommended for acceptance).")] = False,
    gpus_per_node: Annotated[int | None, typer.Option(help="slurm: GPUs per node to allocate.")] = None,
    out: Annotated[Path, typer.Option(help="Where the run directory is created.")] = Path("reports"),
) -> None:
    """Submit `nvtest run --backend slurm` as a batch job in its own allocation.

    Every other option (--suite, -k, --sku, --overlay, --drain-failed, ...) is passed
    to `nvtest run` inside the job. The batch script is kept in the run directory;
    the job id and the report's path are printed.
    """
    from nvtest.inventory import expand_hostlist, load_inventory
    from nvtest.transports.slurm import SlurmTransport, discover_nodes

    passthrough = list(ctx.args)
    run_cmd = typer.main.get_command(app).get_command(ctx, "run")  # type: ignore[attr-defined]
    try:
        assert run_cmd is not None
        run_cmd.make_context("run", [*passthrough], parent=ctx, resilient_parsing=False)
    except Exception as exc:  # typer's (vendored click) usage errors
        message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
        err_console.print(f"nvtest: error: option not accepted by nvtest run: {message}")
        raise typer.Exit(EXIT_CONFIG) from exc
    try:
        if inventory is not None:
            names = load_inventory(inventory).names()
        elif nodes:
            names = expand_hostlist(nodes)
        elif partition:
            names = discover_nodes(partition=partition)
        else:
            raise ConfigError("nvtest submit needs --nodes, --inventory or --partition", field="--nodes")
        if not names:
            raise ConfigError(f"no available node in partition {partition!r}", field="--partition")
        opts = _slurm_options(
            partition=partition,
            time_limit=time_limit,
            account=account,
            reservation=reservation,
            qos=qos,
            exclusive=exclusive,
            gpus_per_node=gpus_per_node,
        )
        run_id = new_run_id()
        out.mkdir(parents=True, exist_ok=True)
        run_dir = (out / run_id).resolve()
        transport = SlurmTransport(allocate=False, run_id=run_id, **opts)  # type: ignore[arg-type]
        argv = [sys.executable, "-m", "nvtest.cli", "run", "--backend", "slurm", "--progress", "plain"]
        if inventory is not None:
            argv += ["--inventory", str(inventory.resolve())]
        argv += passthrough
        script = transport.write_batch_script(run_dir, argv, nodes=names)
        job_id = transport.submit(script)
    except NvtestError as exc:
        raise _fail(exc) from exc
    _update_latest(out, run_dir)
    console.print(f"submitted job {job_id}: {len(names)} node(s); batch script {script}", markup=False, highlight=False)
    console.print(f"report (when the job ends): {run_dir / 'report.html'}", markup=False, highlight=False)


# Verbs defined in their own modules: `nvtest parse`, `nvtest skus ...`, `nvtest evaluate`, `nvtest compare`.
from nvtest import cli_parse, cli_report, cli_skus  # noqa: E402

for _module in (cli_parse, cli_skus, cli_report):
    _module.register(app)


def main() -> None:
    """Console-script entry point; maps uncaught errors to the exit-code table."""
    try:
        app()
    except NvtestError as exc:
        err_console.print(f"nvtest: error: {exc}", markup=False, highlight=False)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        sys.exit(EXIT_INTERRUPTED)


if __name__ == "__main__":  # pragma: no cover
    main()
