"""Reference data the checks use to explain what a parser found (e.g. the Xid catalog)."""

from __future__ import annotations

from nvtest.playbook.xid import XID_CATALOG, XidInfo, describe_xid, is_hardware_fault, lookup_xid

__all__ = ["XID_CATALOG", "XidInfo", "describe_xid", "is_hardware_fault", "lookup_xid"]
