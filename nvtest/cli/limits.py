"""The sane range of every numeric option of the verbs that run unattended (``gate``,
``sweep``, ``run``), checked before anything starts.

A ``--budget nan`` or ``inf`` is no budget at all (every comparison with NaN is false, so
every deadline check passes or none does), ``1e-9`` judges nothing, and ``1e12`` never ends:
each is a usage error (exit 2) naming the option and its range, never a gate that crashes in
a Prolog or a sweep that runs forever. The ranges are :data:`LIMITS`, by verb and parameter
name; a test walks every numeric option of these verbs against them.
"""

from __future__ import annotations

import math

import typer

from nvtest.cli.app import err_console
from nvtest.errors import EXIT_CONFIG

__all__ = ["LIMITS", "Unparsed", "check_numbers", "lenient_float", "lenient_int", "out_of_range"]

#: verb -> parameter name -> (option, least, most), both ends allowed.
LIMITS: dict[str, dict[str, tuple[str, float, float]]] = {
    "gate": {"budget": ("--budget", 0.5, 3600.0), "expect_gpus": ("--expect-gpus", 0, 1024)},
    "sweep": {
        "nice": ("--nice", 0, 2_147_483_645),  # sbatch --nice: a negative one needs an operator's privilege
        "time_limit": ("--time", 1, 43_200),  # minutes: 30 days
        "wait": ("--wait", 1.0, 30 * 86_400.0),
        "breaker_share": ("--breaker-share", 0.01, 1.0),
        "breaker_min_nodes": ("--breaker-min-nodes", 1, 100_000),
    },
    "run": {
        "timeout_scale": ("--timeout-scale", 0.01, 100.0),
        "duration": ("--duration", 1.0, 30 * 86_400.0),
        "drain_max_fraction": ("--drain-max-fraction", 0.01, 1.0),
    },
}


class Unparsed(float):
    """The text of a numeric option that is not a number (``--budget 10s``): a NaN that
    keeps :attr:`text`, so that a verb run by a hook can name it and use its default
    instead of failing in the option parser (exit 2, no document)."""

    text: str

    def __new__(cls, text: str) -> Unparsed:  # noqa: D102 - the class says it
        obj = super().__new__(cls, "nan")
        obj.text = text
        return obj


def lenient_float(text: str | float) -> float:
    """typer ``parser=`` of a float option: the number, or :class:`Unparsed` for text that
    is not one (``'10s'``, ``''``, ``'0x10'``)."""
    if isinstance(text, int | float):
        return float(text)
    try:
        return float(text)
    except ValueError:
        return Unparsed(text)


def lenient_int(text: str | int) -> int:
    """typer ``parser=`` of an int option: the integer (base 10), or :class:`Unparsed` for
    text that is not one (``'abc'``, ``'1e3'``, ``'eight'``)."""
    if isinstance(text, int):
        return text
    try:
        return int(text, 10)
    except ValueError:
        return Unparsed(text)  # type: ignore[return-value]  # a NaN marker, checked by the verb


def out_of_range(verb: str, name: str, value: float | None) -> str | None:
    """Why ``value`` of ``verb``'s parameter ``name`` is refused, or None (None values and
    parameters without a range are accepted)."""
    if value is None or name not in LIMITS.get(verb, {}):
        return None
    option, lo, hi = LIMITS[verb][name]
    if isinstance(value, float) and not math.isfinite(value):
        return f"{option} {value}: must be a finite number from {lo:g} to {hi:g}"
    if not lo <= value <= hi:
        return f"{option} {value:g}: must be from {lo:g} to {hi:g}"
    return None


def check_numbers(verb: str, **values: float | None) -> None:
    """Exit 2 with the first of ``values`` (parameter name -> value) out of its range.

    Raises:
        typer.Exit: a value out of range (the option and its range printed on stderr).
    """
    for name, value in values.items():
        why = out_of_range(verb, name, value)
        if why:
            err_console.print(f"nvtest: error: {why}", markup=False, highlight=False)
            raise typer.Exit(EXIT_CONFIG)
