"""Drain and resume from the gate, through ``scontrol`` (both opt-in: ``--drain``, ``--resume``).

- Drain: a failed gate drains its node with ``nvtest: <check> <short reason>`` (at most
  :data:`REASON_LIMIT` characters) unless the node is already drained: by nvtest (nothing to
  do) or by a person (their reason is kept, never overwritten).
- Resume: a gate whose every check passed (``pass``/``warn``/``skip``; an ``unknown`` is not
  a pass) resumes the node only if it is drained with a reason starting with ``nvtest:``
  (:data:`NVTEST_PREFIX`); a node a person drained stays drained, and the refusal is logged.

Every action is logged on stderr and to syslog (ident ``nvtest-gate``) and recorded in the
gate document and the history.
"""

from __future__ import annotations

import shlex
import syslog
from collections.abc import Callable
from dataclasses import dataclass

from nvtest.errors import TransportError
from nvtest.text import one_line
from nvtest.transports._slurm_client import call_client
from nvtest.transports._slurm_cmd import drain_argv, resume_argv, show_node_argv
from nvtest.transports._slurm_parse import parse_node_records, states_from_records

__all__ = ["NVTEST_PREFIX", "REASON_LIMIT", "SlurmAction", "drain_node", "gate_reason", "node_gres", "resume_node"]

#: Every drain reason nvtest gives starts with this; only such nodes are resumed.
NVTEST_PREFIX = "nvtest:"
#: Slurm keeps the reason in sinfo -R; keep it to one readable line.
REASON_LIMIT = 120


@dataclass(frozen=True)
class SlurmAction:
    """What the gate did (or declined to do) to the node in Slurm."""

    action: str  # drain, resume, kept (already drained), refused (a person's drain), none, error
    node: str
    reason: str
    state_before: str | None = None
    reason_before: str | None = None

    def to_json(self) -> dict[str, str | None]:
        return {
            "action": self.action,
            "node": self.node,
            "reason": self.reason,
            "state_before": self.state_before,
            "reason_before": self.reason_before,
        }


def gate_reason(check: str, reason: str) -> str:
    """``nvtest: <check> <short reason>``, one line, at most :data:`REASON_LIMIT` characters."""
    return one_line(f"{NVTEST_PREFIX} {check} {reason}".replace('"', "'"), REASON_LIMIT)


#: The longest one scontrol call may take when the caller gives no budget, s.
CALL_TIMEOUT_S = 15.0
#: The least an scontrol call is given, s (a tight budget still tries).
MIN_CALL_S = 0.5

#: A timeout: seconds, or a function giving the seconds left now (the gate's budget).
Timeout = float | Callable[[], float]


def _call(argv: list[str], timeout_s: Timeout = CALL_TIMEOUT_S) -> str:
    """Run one scontrol call within ``timeout_s`` (a hook must not wait on a busy controller).

    Raises:
        TransportError: it failed, or no time was left for it.
    """
    left = timeout_s() if callable(timeout_s) else timeout_s
    if left <= 0:
        raise TransportError(f"{shlex.join(argv)}: not run: no time left in the gate's budget")
    return call_client(argv, timeout_s=max(MIN_CALL_S, left))


def _state(node: str, timeout_s: Timeout = CALL_TIMEOUT_S) -> tuple[str, str]:
    recs = states_from_records(parse_node_records(_call(show_node_argv(node), timeout_s)))
    st = recs.get(node)
    if st is None:
        raise TransportError(f"scontrol does not know node {node}")
    return st.state, st.reason


def _log(message: str) -> None:
    try:
        syslog.openlog("nvtest-gate")
        syslog.syslog(syslog.LOG_WARNING, message)
    except OSError:
        pass


def drain_node(node: str, check: str, reason: str, *, timeout_s: Timeout = CALL_TIMEOUT_S) -> SlurmAction:
    """Drain ``node`` for ``check`` (see the module docstring); each scontrol call within
    ``timeout_s`` (seconds, or a function of the seconds left); never raises."""
    want = gate_reason(check, reason)
    try:
        state, before = _state(node, timeout_s)
        flags = {p.strip("*~#!%$@^-").upper() for p in state.split("+")}
        if flags & {"DRAIN", "DRAINED", "DRAINING"}:
            if before.startswith(NVTEST_PREFIX):
                return SlurmAction("kept", node, before, state, before)
            _log(f"{node}: not drained again: already drained by someone else ({before})")
            return SlurmAction("refused", node, f"already drained by someone else: {before}", state, before)
        _call(drain_argv(node, want), timeout_s)
    except TransportError as exc:
        return SlurmAction("error", node, str(exc))
    _log(f"{node}: drained: {want}")
    return SlurmAction("drain", node, want, state, before or None)


def resume_node(node: str, *, timeout_s: Timeout = CALL_TIMEOUT_S) -> SlurmAction:
    """Resume ``node`` if nvtest drained it (see the module docstring); each scontrol call
    within ``timeout_s`` (as :func:`drain_node`); never raises."""
    try:
        state, before = _state(node, timeout_s)
        flags = {p.strip("*~#!%$@^-").upper() for p in state.split("+")}
        if not flags & {"DRAIN", "DRAINED", "DRAINING"}:
            return SlurmAction("none", node, "not drained", state, before or None)
        if not before.startswith(NVTEST_PREFIX):
            _log(f"{node}: not resumed: drained by someone else ({before})")
            return SlurmAction("refused", node, f"drained by someone else, left drained: {before}", state, before)
        _call(resume_argv(node), timeout_s)
    except TransportError as exc:
        return SlurmAction("error", node, str(exc))
    _log(f"{node}: resumed (every gate check passed; drained before: {before})")
    return SlurmAction("resume", node, "every gate check passed", state, before)


def node_gres(node: str, timeout_s: float) -> dict[str, str]:
    """``node``'s ``Gres``, ``AvailableFeatures`` and ``ActiveFeatures`` as ``scontrol show
    node -o`` prints them (``gpu:h100:8(S:0-1)``, ``h100,ib``; ``(null)`` kept as printed);
    {} when scontrol does not list the node. Waits at most ``timeout_s`` seconds (as every
    scontrol call of the gate, :func:`_call`).

    Raises:
        TransportError: scontrol is missing, failed, ran past ``timeout_s`` or had no time.
    """
    recs = parse_node_records(_call(show_node_argv(node), timeout_s))
    rec = next((r for r in recs if r.get("NodeName") == node), None)
    if rec is None:
        return {}
    return {k: rec[k] for k in ("Gres", "AvailableFeatures", "ActiveFeatures") if k in rec}
