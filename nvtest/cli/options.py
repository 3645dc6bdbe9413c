"""Command-line options generated from the transports' option descriptions.

:func:`with_options` adds one Typer option per field of
:class:`~nvtest.transports.options.SshOptions` and/or
:class:`~nvtest.transports.options.SlurmOptions` to a verb, and hands the verb the
built option sets as its ``ssh`` / ``slurm`` keyword arguments, so an option is
declared once, in :mod:`nvtest.transports.options`, for every verb that takes it.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Annotated, Any, TypeVar, get_type_hints

import typer

from nvtest.transports.options import SlurmOptions, SshOptions, build_options, option_infos

__all__ = ["with_options"]

F = TypeVar("F", bound=Callable[..., Any])

_PREFIX = {SshOptions: "ssh", SlurmOptions: "slurm"}


def _parameters(
    cls: type[SshOptions] | type[SlurmOptions], exclude: Collection[str]
) -> list[tuple[str, str, inspect.Parameter]]:
    """(field, cli param, Parameter) for every field of ``cls`` not in ``exclude``."""
    out = []
    hints = get_type_hints(cls)
    for f, info in option_infos(cls):
        if f.name in exclude:
            continue
        param = info.param or f.name
        typ = Path | None if info.path else hints[f.name]
        names = (info.flag,) if info.flag else ()
        opt = typer.Option(*names, help=f"{_PREFIX[cls]}: {info.help}")
        out.append(
            (
                f.name,
                param,
                inspect.Parameter(
                    param, inspect.Parameter.KEYWORD_ONLY, default=f.default, annotation=Annotated[typ, opt]
                ),
            )
        )
    return out


def with_options(*, ssh: bool = False, slurm: bool = False, exclude: Collection[str] = ()) -> Callable[[F], F]:
    """Add the SSH and/or Slurm option sets to a Typer command function.

    The function takes ``ssh: SshOptions`` and/or ``slurm: SlurmOptions`` keyword
    arguments instead of one parameter per option.
    ``exclude`` leaves fields out (``nvtest submit`` passes ``--mpi`` through to run).
    """
    sets: list[tuple[str, type[SshOptions] | type[SlurmOptions]]] = []
    if ssh:
        sets.append(("ssh", SshOptions))
    if slurm:
        sets.append(("slurm", SlurmOptions))

    def deco(fn: F) -> F:
        sig = inspect.signature(fn, eval_str=True)
        own = [p for p in sig.parameters.values() if p.name not in {name for name, _ in sets}]
        added: dict[str, list[tuple[str, str]]] = {}
        extra: list[inspect.Parameter] = []
        for name, cls in sets:
            params = _parameters(cls, exclude)
            added[name] = [(field, param) for field, param, _ in params]
            extra += [p for _, _, p in params]

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            for name, cls in sets:
                values = {field: kwargs.pop(param) for field, param in added[name]}
                kwargs[name] = build_options(cls, values, where=f"--{name} options")  # type: ignore[type-var]
            return fn(*args, **kwargs)

        wrapper.__signature__ = sig.replace(parameters=[*own, *extra])  # type: ignore[attr-defined]
        wrapper.__annotations__ = {p.name: p.annotation for p in [*own, *extra]}
        return wrapper  # type: ignore[return-value]

    return deco
