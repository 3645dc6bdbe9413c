"""``nvtest gate``: the node's passive checks in seconds, for Slurm's Prolog, Epilog and
HealthCheckProgram, a Kubernetes init container or a cron job.

Prints one JSON verdict document on stdout (docs/gate.schema.json) and one summary line on
stderr. Exit status: 1 when a check failed (or, with ``--strict``, a measurement could not be
made), else 0 — Slurm drains a node whose Prolog or Epilog exits non-zero, so nothing short of
a proven failure does. A mistake in the site's files (overlay, ``--sku-dir``) or options
(``--sku``; in a hook mode also ``--mode``, ``--check``, ``--budget``, ``--expect-gpus``, be
it out of range or text that is not a number, and options the gate does not know) never switches the
judging off: what the shipped profile can judge is judged, the checks that depend on the
broken part and the ``configuration`` check are ``unknown`` naming file, line and key
(:mod:`nvtest.ops.gate.config`). It never exits 1 by itself, also not with ``--strict``; in
``--mode manual`` it exits 2 after the document, unless a check failed (1).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Annotated

import typer
from typer.core import TyperCommand

from nvtest.cli.app import app, err_console
from nvtest.cli.early import forward
from nvtest.cli.limits import LIMITS, Unparsed, lenient_float, lenient_int, out_of_range
from nvtest.errors import EXIT_CONFIG, ConfigError, exit_code_of_signal
from nvtest.run.live import short

__all__ = ["gate"]

#: The most of the interpreter's start charged to the budget, s.
MAX_START_S = 5.0

_EPILOG = (
    "Examples: nvtest gate --mode prolog --drain   |   "
    "nvtest gate --mode healthcheck --drain --resume --history postgresql://nvtest@db/fleet"
)


def _summary(doc: dict) -> str:
    bad = [c for c in doc["checks"] if c["verdict"] in ("fail", "unknown", "warn")]
    what = "; ".join(f"{c['check']} {c['verdict']}: {short(c['reason'], 100)}" for c in bad[:3]) or "all checks passed"
    slurm = doc.get("slurm") or {}
    acts = [
        f"{a['action']}" for a in (slurm.get("drain"), slurm.get("resume")) if a and a.get("action") not in ("none",)
    ]
    conf = doc.get("configuration") or {}
    if conf.get("problems"):
        acts.append(f"configuration error: {', '.join(conf.get('files') or []) or 'options'}")
    return (
        f"nvtest gate {doc['node']}: {doc['verdict'].upper()} in {doc['duration_s']:.2f} s "
        f"({len(doc['checks'])} checks, sku {doc['sku']['name'] or '?'})"
        + (f" [{', '.join(acts)}]" if acts else "")
        + f": {what}"
    )


#: click's UsageError, whichever click typer uses (its own copy since typer 0.22, else click).
_USAGE_ERROR: type[Exception] = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "UsageError")
#: The modes that are a hook of slurmd (or of another program that drains on exit 1).
_HOOKS = ("prolog", "epilog", "healthcheck")
#: ``ctx.meta`` key: the option errors of the parser that a hook mode records, (option, message).
_PARSE_ERRORS = "nvtest.gate.parse_errors"


def _hook_of(args: list[str]) -> str | None:
    """The hook mode ``args`` run the gate in, or None for ``--mode manual`` (or no ``--mode``).
    A ``--mode`` without a value: the hook slurmd's environment names (``SLURM_SCRIPT_CONTEXT``
    ``prolog_slurmd`` -> ``prolog``, or ``SLURMD_NODENAME`` set -> ``healthcheck``), else None;
    an unknown mode is a hook (it runs as ``healthcheck`` with a configuration problem)."""
    mode: str | None = "manual"
    for i, arg in enumerate(args):
        if arg == "--mode":
            mode = args[i + 1] if i + 1 < len(args) else None
        elif arg.startswith("--mode="):
            mode = arg.split("=", 1)[1]
    if mode is None:
        context = os.environ.get("SLURM_SCRIPT_CONTEXT", "")
        if not context and not os.environ.get("SLURMD_NODENAME"):
            return None
        return next((h for h in _HOOKS if h in context), "healthcheck")
    return None if mode == "manual" else mode


class _GateCommand(TyperCommand):
    """The gate's command: in a hook mode an option the parser refuses (``--budget`` without a
    value, ``--strict=yes``) is left out and recorded in ``ctx.meta`` for the gate to name as a
    configuration problem, instead of click's exit 2 with no document (a drained node)."""

    def parse_args(self, ctx, args):  # type: ignore[no-untyped-def,override]  # noqa: D102 - the class says it
        args = list(args)
        for _ in range(len(args) + 1):
            ctx.params.clear()
            try:
                return super().parse_args(ctx, list(args))  # the parser consumes the list it is given
            except _USAGE_ERROR as exc:
                hook = _hook_of(args)
                param = getattr(exc, "param", None)
                name = getattr(exc, "option_name", None) or (
                    max(param.opts, key=len) if param is not None and param.opts else None
                )
                kept = [a for a in args if a != name and not a.startswith(f"{name}=")] if name else args
                if hook is None or kept == args:
                    raise
                if name == "--mode":
                    kept += ["--mode", hook]
                ctx.meta.setdefault(_PARSE_ERRORS, []).append((name, exc.format_message()))  # type: ignore[attr-defined]
                args = kept
        raise AssertionError("unreachable: each round leaves an argument out")


@app.command(
    cls=_GateCommand, epilog=_EPILOG, context_settings={"allow_extra_args": True, "ignore_unknown_options": True}
)
def gate(
    ctx: typer.Context,
    mode: Annotated[
        str, typer.Option(help="prolog, epilog, healthcheck or manual: the hook that runs the gate.")
    ] = "manual",
    budget: Annotated[
        float,
        typer.Option(
            parser=lenient_float,
            metavar="FLOAT",
            help="Wall-time budget of the checks, seconds; a check past it is unknown.",
        ),
    ] = 10.0,
    strict: Annotated[
        bool,
        typer.Option(
            help="Exit 1 on unknown (a check that could not be measured) too; never for a configuration error, which is not the node's fault."
        ),
    ] = False,
    drain: Annotated[
        bool, typer.Option(help="Drain this node in Slurm when a check fails (reason 'nvtest: <check> ...').")
    ] = False,
    resume: Annotated[
        bool, typer.Option(help="Resume this node when every check passes, if nvtest drained it.")
    ] = False,
    clear_xids: Annotated[
        bool,
        typer.Option(
            help="Forget the fatal Xids seen this boot (after the GPU reset they asked for); --mode manual only."
        ),
    ] = False,
    forget_sku: Annotated[
        bool, typer.Option(help="Forget the SKU this node last matched (a repurposed node); --mode manual only.")
    ] = False,
    expect_gpus: Annotated[
        int | None,
        typer.Option(
            parser=lenient_int,
            metavar="INTEGER",
            help="GPUs this node must have, where Slurm's Gres and the history do not say (a bus without them fails).",
        ),
    ] = None,
    node: Annotated[
        str | None, typer.Option(help="This node's Slurm name (default: $SLURMD_NODENAME, else the short hostname).")
    ] = None,
    sku: Annotated[
        str | None, typer.Option(help="Judge against this SKU profile (default: matched from nvidia-smi and lspci).")
    ] = None,
    sku_dir: Annotated[list[Path] | None, typer.Option(help="Extra directory of SKU profiles (repeatable).")] = None,
    overlay: Annotated[
        Path | None, typer.Option(help="Site overlay (thresholds, recipe.gate: mounts, services, disk).")
    ] = None,
    state_dir: Annotated[
        Path | None, typer.Option(help="Where the gate keeps its cursor (default /var/lib/nvtest).")
    ] = None,
    sysfs: Annotated[
        Path, typer.Option(help="Where the node's sysfs is mounted (a container: the host's /sys).")
    ] = Path("/sys"),
    history: Annotated[
        str | None, typer.Option(help="History database: a SQLite path, a postgresql:// URL, or 'off'.")
    ] = None,
    check: Annotated[list[str] | None, typer.Option("--check", help="Run only this check (repeatable).")] = None,
    cluster: Annotated[
        str | None,
        typer.Option(
            help="The cluster this node is known by in the history (default: $SLURM_CLUSTER_NAME, else slurm.conf's ClusterName, else local:<node>)."
        ),
    ] = None,
) -> None:
    """Run the passive health checks on this node and print one JSON verdict."""
    from nvtest.ops.gate.budget import Budget, process_age
    from nvtest.ops.gate.engine import GateOptions, run_gate

    mode, check, numbers, problems = _option_problems(
        mode,
        check,
        {"budget": budget, "expect_gpus": expect_gpus},
        _extra_args(ctx),
        _known_options(ctx),
        _parse_errors(ctx),
    )
    budget, expect_gpus = float(numbers["budget"] or 10.0), _int_or_none(numbers["expect_gpus"])
    opts = GateOptions(
        node=node,
        mode=mode,
        budget_s=budget,
        strict=strict,
        drain=drain,
        resume=resume,
        clear_xids=clear_xids,
        forget_sku=forget_sku,
        expect_gpus=expect_gpus,
        sku=sku,
        sku_dirs=list(sku_dir or []),
        overlay=overlay,
        state_dir=state_dir,
        sysfs=sysfs,
        history=history,
        only=list(check or []),
        config_problems=problems,
        cluster=cluster,
    )
    opts.emit = _emit
    budget_clock = Budget(
        budget, time.monotonic() - min(process_age(), MAX_START_S)
    )  # the start is paid from the budget
    forward(budget_clock.mark)  # a SIGTERM while the command started: the document at once
    try:
        doc = run_gate(opts, budget_clock)
    except ConfigError as exc:
        if mode == "manual":
            err_console.print(f"nvtest: error: {exc}", markup=False, highlight=False)
            raise typer.Exit(EXIT_CONFIG) from exc
        doc = _config_error_doc(opts, exc)
        _emit(doc)
    _after(doc)
    if doc.get("interrupted"):
        raise typer.Exit(exit_code_of_signal(str(doc["interrupted"])))
    raise typer.Exit(int(doc["exit_code"]))


def _emit(doc: dict) -> None:
    """Print the gate's document on stdout (one JSON line: a JSONL record in a hook's log) and
    its summary and configuration errors on stderr; called before the history write, so a slow
    database never hides the verdict."""
    sys.stdout.write(json.dumps(doc, default=str) + "\n")
    sys.stdout.flush()
    err_console.print(_summary(doc), markup=False, highlight=False)
    for p in (doc.get("configuration") or {}).get("problems") or []:
        err_console.print(f"nvtest gate: configuration error: {_problem_text(p)}", markup=False, highlight=False)


def _after(doc: dict) -> None:
    """The gate's warnings and where its history record went, on stderr."""
    for w in doc.get("warnings") or []:
        err_console.print(f"nvtest gate: warning: {w}", markup=False, highlight=False)
    hist = doc.get("history") or {}
    if hist.get("status") == "written":
        err_console.print(f"nvtest gate: history: recorded in {hist.get('database')}", markup=False, highlight=False)
    elif hist.get("status") in ("spooled", "lost"):
        where = f"spooled in {hist['spool']}" if hist.get("spool") else "lost"
        err_console.print(f"nvtest gate: history: {where} ({hist.get('error')})", markup=False, highlight=False)


def _problem_text(p: dict) -> str:
    place = f"{p['file']}:{p['line']}" if p.get("file") and p.get("line") else (p.get("file") or "")
    return ": ".join(x for x in (place, p.get("key") or "", p["message"]) if x)


#: The numeric options' defaults and what a hook does instead of a value that does not
#: parse or is out of range: parameter name -> (default, what the text says, the default's words).
_NUMBERS: dict[str, tuple[float | None, str, str]] = {
    "budget": (10.0, "a number of seconds", "the default 10 s is used"),
    "expect_gpus": (None, "a whole number of GPUs", "not used"),  # a witness that cannot be believed is no witness
}


def _extra_args(ctx: typer.Context) -> list[str]:
    return list(ctx.args)


def _parse_errors(ctx: typer.Context) -> list[tuple[str, str, str | None]]:
    return [(name, f"{message.rstrip('.')}; left out", None) for name, message in ctx.meta.get(_PARSE_ERRORS, [])]


def _known_options(ctx: typer.Context) -> list[str]:
    return [o for p in ctx.command.params for o in p.opts if o.startswith("--")]


def _int_or_none(value: float | None) -> int | None:
    return None if value is None else int(value)


def _option_problems(
    mode: str,
    check: list[str] | None,
    numbers: dict[str, float | None],
    extra: list[str],
    known: list[str],
    parse_errors: list[tuple[str, str, str | None]],
) -> tuple[str, list[str] | None, dict[str, float | None], list]:
    """A bad ``--mode``, ``--check``, numeric option (:data:`_NUMBERS`: text that is not a
    number, or out of its range) or an option the gate does not know (``extra``, the
    context's left-over arguments) or one the parser refused (``parse_errors``, left out by
    :class:`_GateCommand` in a hook mode): ``--mode manual`` (or no hook named) refuses it (exit 2);
    a hook mode records it as a configuration problem and runs with the default (an unknown
    ``--mode``: ``healthcheck``; unknown check names and options: left out)."""
    from nvtest.config.site import nearest_name
    from nvtest.ops.gate.engine import CHECKS, MODES

    found: list[tuple[str, str, str | None]] = list(parse_errors)
    if mode not in MODES:
        near = nearest_name(mode, MODES)
        found.append(("--mode", f"{mode!r} is not one of {', '.join(MODES)}; run as healthcheck", near))
        mode = "healthcheck"
    names = [n for n, _ in CHECKS]
    for name in sorted(set(check or []) - set(names)):
        near = nearest_name(name, names)
        found.append(("--check", f"unknown check {name!r}; known: {', '.join(names)}", near))
    if check and found:
        check = [c for c in check if c in names] or None
    numbers = dict(numbers)
    for name, value in numbers.items():
        default, kind, instead = _NUMBERS[name]
        option = LIMITS["gate"][name][0]
        why = f"{value.text!r} is not {kind}" if isinstance(value, Unparsed) else out_of_range("gate", name, value)
        if why:
            found.append((option, f"{why}; {instead}", None))
            numbers[name] = default
    for arg in extra:
        if arg.startswith("-"):
            key = arg.split("=", 1)[0]
            found.append((key, f"unknown option {arg!r}; left out", nearest_name(key, known)))
        else:
            found.append(("argument", f"unexpected argument {arg!r}; left out", None))
    return mode, check, numbers, _refuse_or_record(mode, found)


def _refuse_or_record(mode: str, found: list[tuple[str, str, str | None]]) -> list:
    """Option mistakes ``(option, why, nearest name)``: in ``--mode manual`` the first is a
    usage error (exit 2, nothing run); in a hook mode each is a configuration problem.

    Raises:
        typer.Exit: ``--mode manual`` and a mistake.
    """
    from nvtest.config.site import ConfigProblem

    if found and mode == "manual":
        key, why, near = found[0]
        hint = f" (did you mean {near!r}?)" if near else ""
        err_console.print(f"nvtest: error: {key}: {why}{hint}", markup=False)
        raise typer.Exit(EXIT_CONFIG)
    return [
        ConfigProblem("option", why + (f" (did you mean {near!r}?)" if near else ""), key=key, nearest=near)
        for key, why, near in found
    ]


def _config_error_doc(opts, exc: ConfigError) -> dict:  # type: ignore[no-untyped-def]
    """The document of a gate that could not start for a configuration error (a hook mode; a
    last resort: the site's files and options are judged inside the gate, so only a library
    caller's mistake reaches this). Exit 0, also with ``--strict``: a configuration error is
    not the node's fault (docs/operations.md)."""
    import time

    from nvtest.ops.gate.document import SCHEMA, SCHEMA_VERSION
    from nvtest.ops.gate.engine import node_name

    reason = f"configuration error, nothing judged: {exc}"
    return {
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "node": node_name(opts.node),
        "mode": opts.mode,
        "started_at": time.time(),
        "duration_s": 0.0,
        "budget_s": opts.budget_s,
        "verdict": "unknown",
        "exit_code": 0,
        "strict": opts.strict,
        "sku": {"name": None, "how": reason, "overlay": None},
        "checks": [
            {
                "check": "configuration",
                "verdict": "unknown",
                "reason": reason,
                "duration_s": 0.0,
                "decisions": [{"verdict": "unknown", "what": "configuration", "reason": reason}],
                "evidence": [],
                "metrics": [],
                "notes": [],
            }
        ],
        "slurm": {"drain": None, "resume": None},
        "warnings": [reason],
        "history": None,
    }
