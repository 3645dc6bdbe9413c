"""The gate's node checks: Xid events since the last gate, IB/RoCE ports and their error
counters, free disk and memory, the site's required mounts and services.

Xid events are read from the kernel log with its monotonic timestamps (``[ 1843.308145]``,
microseconds since boot) and a cursor kept on the node (:mod:`nvtest.ops.gate.state`): each
gate judges the lines logged since the previous one. A fatal or hardware Xid stays a failure
until the node reboots or an operator clears it (``nvtest gate --clear-xids``) after the GPU
reset the playbook asks for: a later gate that sees no new line must not put a GPU that fell
off the bus back into service. When that memory was lost (an unreadable state file), it is
rebuilt from a kernel log that reaches back to the boot, else the check stays ``unknown``
until a reboot or ``--clear-xids``.
"""

from __future__ import annotations

import re

from nvtest.checks.health import Outcome
from nvtest.checks.health.kernel_log import UNREADABLE, judge_xid, split_probe, xid_scan
from nvtest.checks.interconnect.rdma import PORT_DOWN, keyed_port_problems
from nvtest.errors import ParseError
from nvtest.ops.gate.context import GateContext, df_key, from_outcome
from nvtest.ops.gate.document import GateCheck
from nvtest.ops.gate.state import GateState
from nvtest.parsers import dmesg, ibstat
from nvtest.parsers.ibstat import IbReport
from nvtest.playbook.xid import describe_xid, recovery_step

__all__ = ["NODE_CHECKS", "new_kernel_lines"]

_TS_RE = re.compile(r"^\[\s*(\d+\.\d+)\]")
XID_SOURCE = "Xid catalog (nvtest.playbook.xid: NVIDIA Xid Errors; Azure and Imbue hardware-fault lists)"
GIB = 1024**3
#: A kernel log whose first line is at most this many seconds after boot holds the whole boot.
BOOT_LOG_START_S = 1.0


def new_kernel_lines(text: str, after: float | None) -> tuple[str, float | None, bool]:
    """The lines of a kernel log logged after ``after`` seconds since boot.

    Returns (the new lines, the last timestamp seen, whether the log had monotonic
    timestamps). Continuation lines (indented, no timestamp) follow their first line; a log
    without monotonic timestamps (``dmesg -T``) is returned whole.
    """
    keep: list[str] = []
    last: float | None = None
    stamped = False
    taking = True
    for line in text.splitlines():
        m = _TS_RE.match(line)
        if m:
            stamped = True
            ts = float(m.group(1))
            last = ts if last is None or ts > last else last
            taking = after is None or ts > after
        elif not line[:1].isspace():
            taking = True
        if taking:
            keep.append(line)
    return ("\n".join(keep) + "\n" if keep else ""), last, stamped


def _fatal_events(text: str, now: float) -> list[dict[str, object]]:
    """The events of ``text`` the gate remembers until a reboot or ``--clear-xids``: every
    Xid the catalog fails (:func:`judge_xid`: fatal, hardware fault, a recovery action other
    than None) or cannot judge (``verdict`` ``unknown``), and every fatal SXid."""
    try:
        log = dmesg.parse(text)
    except ParseError:
        return []
    out = []
    for e in log.events:
        verdict = ("fail" if e.severity == "fatal" else None) if e.kind == "sxid" else judge_xid(e)[0]
        if verdict in ("fail", "unknown"):
            out.append(
                {
                    "code": e.code,
                    "kind": e.kind,
                    "pci": e.pci_address,
                    "ts": e.timestamp_s,
                    "first_seen": now,
                    "text": e.message[:200],
                    "verdict": verdict,
                    "recovery_action": e.recovery_action,
                }
            )
    return out


def _first_ts(text: str) -> float | None:
    """Seconds since boot of the first monotonic timestamp of a kernel log, or None."""
    for line in text.splitlines():
        m = _TS_RE.match(line)
        if m:
            return float(m.group(1))
    return None


def _remembered(e: dict[str, object]) -> str:
    """One remembered event, said again: its GPU, code, when, and what to do."""
    code = int(e.get("code") or 0)  # type: ignore[call-overload]
    when = f"logged {e.get('ts') or '?'} s after boot, not cleared"
    where = f"GPU {e.get('pci') or '?'}"
    action = e.get("recovery_action")
    if isinstance(action, str):
        step = recovery_step(action)
        return f"{where}: Xid {code}: the driver asked for recovery action '{action}', {when}: " + (
            step[0] if step else "nothing to do"
        )
    if e.get("kind") == "sxid":
        return f"NVSwitch {e.get('pci') or '?'}: fatal SXid {code} {when}: reset the NVSwitch tray or reboot, then `nvtest gate --clear-xids`"
    info = describe_xid(code)
    if not info.known:
        return f"{where}: Xid {code} (not in nvtest's Xid catalog) {when}: not judged; {info.action}, then `nvtest gate --clear-xids`"
    return f"{where}: Xid {code} {info.name} {when}: reset the GPU or reboot, then `nvtest gate --clear-xids`"


def _memory_lost(st: GateState, text: str, stamped: bool, source: str) -> str | None:
    """Whether the uncleared fatal events, lost with an unreadable state, are rebuilt from
    this kernel log (it reaches back to the boot: its first line at most
    :data:`BOOT_LOG_START_S` after it); None when rebuilt (or never lost), else why not."""
    if st.fatal_events_unknown is None:
        return None
    first = _first_ts(text)
    if stamped and first is not None and first <= BOOT_LOG_START_S:
        st.fatal_events_unknown = None
        return None
    begins = f"begins {first:g} s after boot" if first is not None else "has no monotonic timestamps"
    return (
        f"fatal GPU events of this boot not cleared before are unknown: {st.fatal_events_unknown}; "
        f"the kernel log ({source}) {begins}, so what it no longer holds cannot be read again: "
        "reset the GPUs or reboot, or check them and run `nvtest gate --clear-xids`"
    )


def xid(ctx: GateContext) -> GateCheck:
    """Xid/SXid events logged since the last gate; fatal ones not cleared since this boot;
    ``unknown`` while the memory of them was lost and the kernel log cannot rebuild it."""
    res = GateCheck("xid_scan")
    if ctx.need(res, "kernel_log") is None:
        return res
    source, text = split_probe(ctx.sources.get("kernel_log").stdout)
    if source == UNREADABLE or not text.strip():
        res.add(
            "unknown",
            "kernel_log",
            f"kernel log not readable ({' | '.join(text.split(chr(10)))[:200]}): "
            "run the gate as root or let it read dmesg/the journal",
        )
        return res
    st = ctx.state
    new, last, stamped = new_kernel_lines(text, st.kernel_log_ts)
    if last is not None:
        st.kernel_log_ts = last
    if not stamped:
        res.notes.append(f"{source} has no monotonic timestamps: every line since boot was read")
    lost = _memory_lost(st, text, stamped, source)
    out = (
        xid_scan(new, source, storage="warn")
        if new.strip()
        else Outcome(notes=["no kernel-log line since the last gate"])
    )
    known = {(e.get("code"), e.get("pci"), e.get("ts")) for e in st.fatal_events}
    fresh = [e for e in _fatal_events(new, ctx.now) if (e["code"], e["pci"], e["ts"]) not in known]
    st.fatal_events += fresh
    fresh_keys = {(f["code"], f["pci"], f["ts"]) for f in fresh}
    unknown = [out.error] if out.error else []
    for e in st.fatal_events:
        if (e.get("code"), e.get("pci"), e.get("ts")) in fresh_keys:
            continue  # reported by xid_scan above, with the catalog's action
        if e.get("verdict") == "unknown":
            unknown.append(_remembered(e))
        else:
            out.fail(_remembered(e))
    if lost:
        unknown.append(lost)
    out.error = "; ".join(unknown) if unknown else None
    from_outcome(
        res,
        out,
        what="fatal_xid_events",
        value=len(st.fatal_events),
        unit="count",
        threshold="no fatal or hardware Xid, no recovery action, since boot that was not cleared",
        source=XID_SOURCE,
        passed="no Xid since the last gate" if not new.strip() else "no fatal Xid",
    )
    return res


def _counters(text: str) -> tuple[dict[str, int], list[str]]:
    values: dict[str, int] = {}
    devices: list[str] = []
    body, _, tail = text.partition("### devices")
    for line in body.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit():
            values[parts[0]] = int(parts[1])
    devices = [d for d in tail.split() if d]
    return values, devices


def _counter_rates(ctx: GateContext, res: GateCheck, out: Outcome, values: dict[str, int]) -> None:
    st = ctx.state
    prev, prev_t = st.ib_counters, st.ib_counters_at
    limits = ctx.recipe.ib_counter_max_per_h
    if prev_t is None or not prev:
        if values:
            out.note(f"{len(values)} IB error counters read: rates from the next gate on")
    else:
        hours = max((ctx.now - prev_t) / 3600.0, 1 / 60)
        for key, cur in sorted(values.items()):
            if key not in prev:
                continue
            hca, port, name = key.split("/", 2)
            delta = cur - prev[key]
            if delta < 0:
                out.note(f"{hca} port {port} {name}: counter went back ({prev[key]} -> {cur}): reset")
                continue
            rate = delta / hours
            res.metrics.append((f"{name}_per_h", round(rate, 3), "count", {"hca": hca, "port": port}))
            if name == "link_downed" and delta > 0:
                out.fail(f"{hca} port {port}: link went down {delta} time(s) since the last gate (link flapping)")
            elif delta > 0 and name in limits and rate > limits[name]:
                out.warn(f"{hca} port {port}: {name} {rate:.3g}/h since the last gate > {limits[name]:g}/h")
    st.ib_counters, st.ib_counters_at = values, ctx.now


def _fabric_ports(ctx: GateContext, report: IbReport, out: Outcome) -> int:
    expect = ctx.sku.expect.ib_hcas if ctx.sku else None
    rate = ctx.sku.expect.ib_rate_gbps if ctx.sku else None
    if ctx.recipe.hcas:
        listed = IbReport(tuple(ca for ca in report.cas if ca.name in ctx.recipe.hcas))
        for line, cause in keyed_port_problems(listed, {"hcas": ctx.recipe.hcas}, len(ctx.recipe.hcas), rate):
            out.fail(line, cause)
        return listed.active_ports
    good = [(c, p) for c, p in report.ports if p.active and (rate is None or (p.rate_gbps or 0) >= rate)]
    down = [f"{c} port {p.port} ({p.problem or 'below rate'})" for c, p in report.ports if not p.active]
    if expect and len(good) < expect:
        out.fail(
            f"{len(good)} of {expect} ports Active at >= {rate or 0:g} Gb/s; not active: {', '.join(down) or 'none'}",
            PORT_DOWN if down else "ib:rate_low",
        )
    elif down:
        out.note(f"ports not active, beyond the {expect or 0} the SKU needs: {', '.join(down)}")
    return len(good)


def ib(ctx: GateContext) -> GateCheck:
    """IB/RoCE ports Active at the SKU's rate (``ibstat``) and their error counters' rates
    since the last gate (``/sys/class/infiniband/*/ports/*/counters``)."""
    res = GateCheck("ib_ports")
    outs = ctx.need(res, "ibstat", "ib_counters")
    if outs is None:
        return res
    tool, counters = outs
    expect = ctx.sku.expect.ib_hcas if ctx.sku else None
    values, devices = _counters(counters.stdout)
    kw = {
        "threshold": f">= {expect} ports Active" if expect else None,
        "source": f"{ctx.sku_source} expect.ib_hcas, expect.ib_rate_gbps",
    }
    text = tool.stdout if tool.ok else ""
    report = ibstat.parse(text) if ibstat.detect(text) else IbReport(())
    if not report.cas:
        why = "ibstat not found" if tool.missing else (tool.tail(150) or "ibstat lists no HCA")
        if expect:
            res.add("fail", "ports_active", f"{why}: SKU expects {expect} HCAs", value=0, unit="count", **kw)
        elif not devices and counters.ok and (nics := _bus_rdma_nics(ctx)) is not None and not nics:
            res.add(
                "skip",
                "ports_active",
                "no RDMA device: lspci lists no Mellanox (15b3) network function, "
                "/sys/class/infiniband lists none and the SKU expects none",
                source="lspci; sysfs /sys/class/infiniband",
            )
        elif not devices and counters.ok and nics:
            res.add(
                "fail",
                "ports_active",
                f"{why}, but lspci lists {len(nics)} Mellanox (15b3) network "
                f"function(s): {', '.join(d.slot for d in nics[:4])}",
                value=0,
                unit="count",
                source="lspci",
            )
        elif not devices and counters.ok:
            res.add(
                "unknown", "ports_active", f"{why}; absence of RDMA NICs not proven: {ctx.pci[1] or 'lspci unread'}"
            )
        else:
            res.add("unknown", "ports_active", f"{why}, but the kernel lists RDMA devices {', '.join(devices)}")
        return res
    out = Outcome()
    n = _fabric_ports(ctx, report, out)
    _counter_rates(ctx, res, out, values)
    from_outcome(res, out, what="ports_active", value=n, unit="count", passed=f"{n} port(s) Active at rate", **kw)
    return res


def _bus_rdma_nics(ctx: GateContext) -> list | None:
    """The Mellanox/NVIDIA network functions (vendor 15b3, or named Mellanox) lspci lists;
    None when lspci could not be read (nothing proven)."""
    devs, _ = ctx.pci
    if devs is None:
        return None
    return [
        d
        for d in devs
        if (d.vendor_id == "15b3" or "Mellanox" in (d.vendor_name or ""))
        and (
            (d.class_code or "").startswith("02")
            or "Ethernet" in (d.class_name or "")
            or "Infiniband" in (d.class_name or "")
        )
    ]


def disk(ctx: GateContext) -> GateCheck:
    """Free space on each of the recipe's paths (``df -P -k``), GiB."""
    res = GateCheck("disk")
    if ctx.need(res, df_key(ctx.recipe)) is None:
        return res
    out = ctx.sources.get(df_key(ctx.recipe))
    rows = [ln.split() for ln in out.stdout.splitlines()[1:] if len(ln.split()) >= 6]
    it = iter(rows)
    for path, need_gib in ctx.recipe.disk_free_gib.items():
        kw = {"unit": "GiB", "threshold": f">= {need_gib:g} GiB free", "source": f"{ctx.recipe_source} disk_free_gib"}
        if f"df: {path}:" in out.stderr or f"df: '{path}':" in out.stderr:
            res.add("fail", f"free:{path}", f"{path}: {out.tail(150)}", **kw)
            continue
        row = next(it, None)
        if row is None or not row[3].isdigit():
            res.add("unknown", f"free:{path}", f"df printed no line for {path}: {out.tail(150)}", **kw)
            continue
        free = int(row[3]) * 1024 / GIB
        res.metrics.append(("free_gib", round(free, 3), "GiB", {"path": path}))
        verdict = "pass" if free >= need_gib else "fail"
        res.add(
            verdict,
            f"free:{path}",
            f"{path}: {free:.3g} GiB free (mounted on {row[5]})",
            value=round(free, 3),
            cause="disk:full" if verdict == "fail" else None,
            **kw,
        )
    if not ctx.recipe.disk_free_gib:
        res.add("skip", "disk", "no path to watch (recipe.gate.disk_free_gib is empty)", source=ctx.recipe_source)
    return res


def memory(ctx: GateContext) -> GateCheck:
    """``MemAvailable`` of ``/proc/meminfo`` against the recipe's minimum, GiB."""
    res = GateCheck("memory")
    if ctx.need(res, "meminfo") is None:
        return res
    m = re.search(r"^MemAvailable:\s+(\d+) kB", ctx.sources.get("meminfo").stdout, re.M)
    need_gib = ctx.recipe.memory_available_gib
    kw = {
        "unit": "GiB",
        "threshold": f">= {need_gib:g} GiB available",
        "source": f"{ctx.recipe_source} memory_available_gib",
    }
    if not m:
        res.add("unknown", "mem_available", "/proc/meminfo has no MemAvailable line", **kw)
        return res
    avail = int(m.group(1)) * 1024 / GIB
    res.metrics.append(("mem_available_gib", round(avail, 3), "GiB", {}))
    res.add(
        "pass" if avail >= need_gib else "fail",
        "mem_available",
        f"{avail:.3g} GiB available",
        value=round(avail, 3),
        **kw,
    )
    return res


def mounts(ctx: GateContext) -> GateCheck:
    """Each required mount mounted, and answering ``stat -f`` within the budget."""
    res = GateCheck("mounts")
    if not ctx.recipe.mounts:
        res.add("skip", "mounts", "no required mount configured (recipe.gate.mounts)", source=ctx.recipe_source)
    for path in ctx.recipe.mounts:
        out = ctx.sources.get(f"mount:{path}")
        res.evidence.append(out)
        kw = {"threshold": "mounted", "source": f"{ctx.recipe_source} mounts"}
        if out.timed_out:
            res.add(
                "unknown",
                path,
                f"{path}: stat did not answer within the budget ({ctx.budget_s:g} s): a hung mount?",
                **kw,
            )
        elif out.ok:
            res.add("pass", path, f"{path} mounted ({out.stdout.strip()})", value=out.stdout.strip(), **kw)
        else:
            res.add(
                "fail",
                path,
                f"{path} is not mounted{': ' + out.tail(150) if out.tail() else ''}",
                value="not mounted",
                **kw,
            )
    return res


def services(ctx: GateContext) -> GateCheck:
    """Each required service ``active`` (``systemctl is-active``)."""
    res = GateCheck("services")
    if not ctx.recipe.services:
        res.add("skip", "services", "no required service configured (recipe.gate.services)", source=ctx.recipe_source)
    for name in ctx.recipe.services:
        out = ctx.sources.get(f"service:{name}")
        res.evidence.append(out)
        state = out.stdout.strip().splitlines()[-1] if out.stdout.strip() else ""
        kw = {"threshold": "active", "source": f"{ctx.recipe_source} services", "value": state or None}
        if out.timed_out:
            res.add("unknown", name, f"systemctl is-active {name} did not answer within the budget", **kw)
        elif out.missing:
            res.add("unknown", name, f"systemctl not found: cannot tell whether {name} runs", **kw)
        elif state == "active":
            res.add("pass", name, f"{name} active", **kw)
        else:
            res.add("fail", name, f"service {name} is {state or 'not known'} ({out.tail(120)})", **kw)
    return res


#: (check name, function), in report order.
NODE_CHECKS = (
    ("xid_scan", xid),
    ("ib_ports", ib),
    ("disk", disk),
    ("memory", memory),
    ("mounts", mounts),
    ("services", services),
)
