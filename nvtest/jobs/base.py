"""Multi-node phases inside a per-node report: one launch, one share per node.

A fleet-level check (a pair schedule, an mpirun over all nodes, a torchrun job) runs once per
run, when its first pytest item asks; the check's other items read their node's share from
:func:`fleet_cache`, so the report stays one verdict per (check, node). Commands go through
the run's :class:`~nvtest.session.phase.PhaseRunner` (``ctx.phases``), so every command's evidence
lands under ``logs/<node>/<key>.log`` like any other probe's.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from nvtest.config.inventory import Node
from nvtest.config.resources import probes_dir
from nvtest.config.thresholds import SkuProfile, assess
from nvtest.session.facts import hardware_of
from nvtest.transports.base import Command, CommandResult
from nvtest.verdict import Verdict

if TYPE_CHECKING:
    from nvtest.session.context import RunContext

__all__ = [
    "FleetCache",
    "address",
    "check_nodes",
    "fleet_cache",
    "judge_value",
    "node_recipe",
    "probe_argv",
    "profile_of",
    "run_commands",
    "up_nodes",
]

T = TypeVar("T")


class FleetCache:
    """Results computed once per run and key; a second caller waits for the first."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}
        self._values: dict[str, Any] = {}
        self._errors: dict[str, BaseException] = {}

    def get(self, key: str, compute: Callable[[], T]) -> T:
        """The value of ``key``, computing it on first use. A computation that raised raises
        the same exception for every later caller (each node item gets the same error)."""
        with self._lock:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            if key in self._errors:
                # the same exception object, its traceback dropped: raised again as it was,
                # each raise would add this frame to it, and every item of a 4,096-node
                # check would carry (and format) the tracebacks of all the items before it
                raise self._errors[key].with_traceback(None)
            if key not in self._values:
                try:
                    self._values[key] = compute()
                except Exception as exc:
                    self._errors[key] = exc
                    raise
            return self._values[key]  # type: ignore[no-any-return]


_CACHES: dict[int, tuple[weakref.ref[Any], FleetCache]] = {}
_CACHES_LOCK = threading.Lock()


def fleet_cache(ctx: RunContext) -> FleetCache:
    """The :class:`FleetCache` of this run (one per :class:`~nvtest.session.context.RunContext`)."""
    with _CACHES_LOCK:
        entry = _CACHES.get(id(ctx))
        if entry is None or entry[0]() is not ctx:
            for k in [k for k, (ref, _) in _CACHES.items() if ref() is None]:
                del _CACHES[k]
            entry = (weakref.ref(ctx), FleetCache())
            _CACHES[id(ctx)] = entry
        return entry[1]


def check_nodes(ctx: RunContext, check: str) -> list[Node]:
    """The reachable nodes the check targets (its pytest items' nodes), in inventory order
    (computed once per check: see :meth:`~nvtest.session.context.RunContext.reachable_targets`)."""
    return ctx.reachable_targets(check)


def require_up(ctx: RunContext, node: Node) -> None:
    """Raise the node's down error (:meth:`~nvtest.session.context.NodeState.down_error`:
    a :class:`~nvtest.errors.NodeError` worded by its cause) when it was down at the start."""
    state = ctx.states[node.name]
    if state.down_reason:
        raise state.down_error()


def address(ctx: RunContext, node: Node) -> str:
    """Where other nodes reach ``node``: its inventory address, else what the transport
    resolved its name to (ssh: the client config's HostName), else its name
    (:meth:`~nvtest.transports.base.Transport.node_address`)."""
    return ctx.transport.node_address(node)


def up_nodes(ctx: RunContext) -> list[Node]:
    """The run's nodes that were not down at the start, in inventory order."""
    return [n for n in ctx.nodes if not ctx.states[n.name].down_reason]


def profile_of(ctx: RunContext, node: Node) -> SkuProfile | None:
    """The node's SKU profile (None: none matched)."""
    match = ctx.states[node.name].match
    return match.profile if match else None


def node_recipe(ctx: RunContext, node: Node, key: str) -> dict[str, Any]:
    """The recipe section ``key`` of the node's SKU profile ({} when none)."""
    prof = profile_of(ctx, node)
    return dict((prof.recipe.get(key) if prof else None) or {})


def probe_argv(ctx: RunContext, node: Node, script: str, *args: str) -> list[str]:
    """``[python, <probe dir>/<script>, *args]`` for ``node``."""
    pdir = ctx.probe_dirs.get(node.name, str(probes_dir()))
    return [node.python, f"{pdir}/{script}", *args]


def run_commands(
    ctx: RunContext,
    key: str,
    nodes: Sequence[Node],
    commands: Mapping[str, Command],
    *,
    timeout_s: float,
    env: Mapping[str, str] | None = None,
    needs: Sequence[str] = (),
) -> dict[str, CommandResult]:
    """Run ``commands[node]`` on every node at once through the phase runner (cached by
    ``key``, evidence written); ``timeout_s`` is scaled by ``--timeout-scale``; ``needs``:
    the tools and devices the commands need (a hang blocks, see
    :class:`~nvtest.session.phase.PhaseRunner`)."""
    return ctx.phases.run(
        key,
        list(nodes),
        lambda n: commands[n.name],
        timeout_s=timeout_s * ctx.config.timeout_scale,
        env=dict(env) if env else None,
        needs=needs,
    )


def judge_value(
    ctx: RunContext, node: Node, check: str, metric: str, value: float | None, unit: str
) -> tuple[Verdict, str]:
    """``value`` judged as the Judge judges it (declared, plausible on the node's hardware,
    then the node's SKU threshold for (check, metric)): (verdict, reason)."""
    prof = profile_of(ctx, node)
    hw = hardware_of(ctx.states[node.name].facts, prof, len(ctx.nodes) or 1)
    a = assess(check, metric, value, unit, prof, hw)
    return a.verdict, a.reason


def controller_env(name: str) -> str | None:
    """A setting from the controller's environment (``NVTEST_*``), None when unset or empty."""
    return os.environ.get(name) or None
