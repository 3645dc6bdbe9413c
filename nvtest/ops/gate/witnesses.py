"""Second witnesses of what a node should hold, for a gate whose PCI bus shows no NVIDIA GPU.

A node whose GPUs all vanished from the bus looks like a CPU node to ``lspci``; the gate asks
who else knows it had GPUs before it calls it ``cpu-generic``: the SKU this node last matched
(the gate state), Slurm's ``Gres=gpu:[type:]N`` or a feature naming a SKU profile (``scontrol
show node``), and the SKU the history last judged this node against. Each is asked only when
the bus shows no GPU, and each within the gate's time left; one that cannot answer is a note,
not a verdict.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from nvtest.config.skus import Catalog, GpuSummary
from nvtest.config.thresholds import SkuProfile
from nvtest.errors import ConfigError, HistoryError, TransportError
from nvtest.ops.gate.budget import attempt
from nvtest.ops.gate.slurm import node_gres
from nvtest.ops.gate.state import GateState

__all__ = ["WITNESS_SHARE", "Witness", "gpu_witnesses", "gres_gpus", "no_gpu_on_the_bus", "witness_time"]

T = TypeVar("T")
#: The share of the gate's budget the second witnesses may take (Slurm, history).
WITNESS_SHARE = 0.25
_GRES_RE = re.compile(r"(?:^|,)gpu(?::([A-Za-z0-9_.-]+))?:(\d+)")


@dataclass(frozen=True)
class Witness:
    """One source that says how many GPUs the node should have: ``gpus`` (None: it does not
    say), the SKU profile it names (None: none), and ``text`` naming the source and its words."""

    source: str
    text: str
    gpus: int | None = None
    sku: str | None = None


def gres_gpus(gres: str) -> int | None:
    """The GPU count of a Slurm ``Gres`` value (``gpu:8``, ``gpu:h100:8(S:0-1)``,
    ``gpu:a100:4,gpu:h100:4``: summed); None when it names no GPU (``(null)``)."""
    counts = [int(m.group(2)) for m in _GRES_RE.finditer(gres.strip())]
    return sum(counts) if counts else None


def _bounded(fn: Callable[[], T], timeout_s: float) -> tuple[T | None, str | None]:
    """``fn()`` within ``timeout_s`` seconds (:func:`~nvtest.ops.gate.budget.attempt`): (its
    value, None) or (None, why not)."""
    done, got = attempt(fn, timeout_s, "gate-witness")
    if not done:
        return None, f"no answer within {timeout_s:.1f} s"
    if isinstance(got, (TransportError, HistoryError, ConfigError, OSError)):
        return None, str(got)
    if isinstance(got, Exception):  # a witness's own failure is a note, never a crash of the gate
        return None, f"{type(got).__name__}: {got}"
    if isinstance(got, BaseException):  # SystemExit and the like in the thread: no answer, no word
        return None, None
    return got, None


def _profile_gpus(catalog: Catalog, sku: str) -> int | None:
    prof = catalog.profiles.get(sku)
    return prof.expect.gpus if prof is not None else None


def _slurm(node: str, catalog: Catalog, timeout_s: float) -> tuple[Witness | None, str | None]:
    rec, why = _bounded(lambda: node_gres(node, timeout_s), timeout_s + 0.5)
    if rec is None:
        return None, f"Slurm not read ({why})" if why else None
    gres = rec.get("Gres", "")
    n = gres_gpus(gres)
    features = [f for f in re.split(r"[,&|]", rec.get("AvailableFeatures", "")) if f and f != "(null)"]
    sku = next((f for f in features if f in catalog.profiles), None)
    if n:
        return Witness("slurm", f"Slurm Gres={gres} expects {n}", n, sku), None
    if sku and _profile_gpus(catalog, sku):
        return Witness(
            "slurm", f"Slurm feature {sku} expects {_profile_gpus(catalog, sku)}", _profile_gpus(catalog, sku), sku
        ), None
    return None, None


def _history(node: str, catalog: Catalog, target: str | None, timeout_s: float) -> tuple[Witness | None, str | None]:
    from pathlib import Path

    from nvtest.history.target import resolve_target

    try:
        url = resolve_target(target)
    except ConfigError:
        return None, None  # a bad --history is reported by the history write
    if url is None or (url.startswith("sqlite:///") and not Path(url.removeprefix("sqlite:///")).is_file()):
        return None, None

    def ask() -> tuple[str, float] | None:
        from nvtest.history import HistoryStore
        from nvtest.history.queries import last_sku

        with HistoryStore(url) as store:
            return last_sku(store, node)

    got, why = _bounded(ask, timeout_s)
    if got is None:  # the error's words may hold the database URL: name only that it failed
        return None, (
            "history not read" + (" (no answer in time)" if why and why.startswith("no answer") else "")
        ) if why else None
    sku, _at = got
    n = _profile_gpus(catalog, sku)
    if n:
        return Witness("history", f"the history's last SKU for this node, {sku}, expects {n}", n, sku), None
    return None, None


def gpu_witnesses(
    node: str,
    state: GateState,
    catalog: Catalog,
    history: str | None,
    timeout_s: float,
    expect_gpus: int | None = None,
) -> tuple[list[Witness], list[str]]:
    """Who says this node should have GPUs (see the module docstring), in order: the site's
    ``--expect-gpus``, the gate state's SKU, Slurm, the history; and notes on the witnesses
    that could not answer. Each of Slurm and the history gets half of ``timeout_s`` (s)."""
    out: list[Witness] = []
    notes: list[str] = []
    if expect_gpus:
        out.append(Witness("option", f"--expect-gpus {expect_gpus} expects {expect_gpus}", expect_gpus))
    if state.sku and _profile_gpus(catalog, state.sku):
        out.append(
            Witness(
                "state",
                f"this node last matched {state.sku}, which expects {_profile_gpus(catalog, state.sku)}",
                _profile_gpus(catalog, state.sku),
                state.sku,
            )
        )
    for ask in (lambda: _slurm(node, catalog, timeout_s / 2), lambda: _history(node, catalog, history, timeout_s / 2)):
        w, note = ask()
        out += [w] if w else []
        notes += [note] if note else []
    return out, notes


def witness_time(budget_s: float, deadline: float) -> float:
    """Seconds the witnesses may take: :data:`WITNESS_SHARE` of the budget (s), at most the
    time left before the tools' ``deadline`` (``time.monotonic()``)."""
    return max(0.0, min(deadline - time.monotonic(), WITNESS_SHARE * budget_s))


def no_gpu_on_the_bus(
    catalog: Catalog, state: GateState, witnesses: Callable[[], tuple[list[Witness], list[str]]] | None
) -> tuple[SkuProfile | None, str]:
    """The profile of a node whose PCI bus shows no NVIDIA GPU: a witness's SKU (or none) when
    one says GPUs are expected, none while the remembered SKU is unknown, else the catalog's
    GPU-less profile (``cpu-generic``)."""
    said, notes = witnesses() if witnesses else ([], [])
    asked = f" ({'; '.join(notes)})" if notes else ""
    expecting = [w for w in said if w.gpus]
    if expecting:
        w = expecting[0]
        prof = catalog.profiles.get(w.sku) if w.sku else None
        state.expected_by = (w.gpus, w.text)
        return prof, f"witness: lspci lists no NVIDIA GPU, but {w.text}" + (
            f"; judged as {prof.name}" if prof else ""
        ) + asked
    if state.sku_unknown:
        state.expected_by = (None, f"this node's remembered SKU is unknown: {state.sku_unknown}")
        return (
            None,
            f"unknown: lspci lists no NVIDIA GPU and this node's remembered SKU is unknown ({state.sku_unknown}){asked}",
        )
    m = catalog.match(GpuSummary())
    return m.profile, "matched: lspci lists no NVIDIA display device" + (
        f"; no other witness expects a GPU{asked}" if witnesses else ""
    )
