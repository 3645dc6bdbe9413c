"""ECC mode, uncorrectable errors, retired pages and row remapping, per GPU.

Input: ``nvidia-smi -q -x`` (or ``-q``) read by :mod:`nvtest.parsers.nvidia_smi_xml`.
Policy (sku-reference.md, "ECC / row remap"; field case D9):

- ECC mode not Enabled where the SKU expects ECC: fail; Enabled now but pending Disabled
  (``nvidia-smi -e 0`` run, not yet applied): fail, the next reboot switches ECC off;
- any volatile uncorrectable error: fail (Imbue, CHS);
- row remapping failure: fail, RMA; remap pending or page retirement pending:
  fail, fixed by a GPU reset / reboot (no hardware service), then rerun;
- aggregate (lifetime) uncorrectable errors or retired pages: warn;
- a GPU nvidia-smi cannot read (lost): fail.

Metrics per GPU: ``ecc_volatile_uncorrectable``, ``ecc_volatile_correctable``,
``remapped_rows_uncorrectable`` (count).
"""

from __future__ import annotations

from nvtest.checks.health import Outcome
from nvtest.checks.health.gpus import ecc_off_key, lost_gpus
from nvtest.config.thresholds import SkuProfile
from nvtest.parsers.nvidia_smi_q import SmiGpu, SmiQuery

__all__ = ["ecc_health"]


def _n(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _gpu(i: int, g: SmiGpu, sku: SkuProfile | None, out: Outcome) -> None:
    tag = f"GPU {i} ({g.pci_bus_id})"
    want_ecc = sku is None or sku.expect.ecc is not False
    mode = (g.ecc_mode_current or "").strip()
    pending = (g.ecc_mode_pending or "").strip()
    if want_ecc and mode and mode.lower() not in ("enabled", "n/a"):
        if pending.lower() == "enabled":
            out.fail(
                f"{tag}: ECC mode {mode} (pending: {pending}): ECC enable pending, applies at the next reboot",
                "ecc:enable_pending",
            )
        else:
            out.fail(
                f"{tag}: ECC mode {mode}{f' (pending: {pending})' if pending else ''}, SKU expects Enabled",
                ecc_off_key(mode),
            )
    elif want_ecc and mode.lower() == "enabled" and pending and pending.lower() not in ("enabled", "n/a"):
        # what runs now passes; what the GPU boots into next does not (nvidia-smi -e 0 not yet applied)
        out.fail(
            f"{tag}: ECC mode Enabled, pending {pending}: ECC disable pending, the next reboot turns ECC off",
            "ecc:disable_pending",
        )
    vu, vc = _n(g.ecc_volatile_uncorrectable), _n(g.ecc_volatile_correctable)
    au = _n(g.ecc_aggregate_uncorrectable)
    rr_u, rr_c = _n(g.remapped_rows_uncorrectable), _n(g.remapped_rows_correctable)
    if vu is not None:
        out.measure("ecc_volatile_uncorrectable", vu, "count", gpu=i)
    if vc is not None:
        out.measure("ecc_volatile_correctable", vc, "count", gpu=i)
    if rr_u is not None:
        out.measure("remapped_rows_uncorrectable", rr_u, "count", gpu=i)
    if vu:
        out.fail(f"{tag}: {vu} uncorrectable ECC errors since the last reset", "ecc:uncorrectable")
    if g.row_remap_failed:
        out.fail(f"{tag}: row remapping failure (spare rows exhausted): RMA", "ecc:remap_failure")
    elif g.row_remap_pending:
        out.fail(
            f"{tag}: row remap pending ({rr_u or 0} uncorrectable): reset the GPU or reboot, then rerun acceptance",
            "ecc:remap_pending",
        )
    if g.page_retirement_pending:
        out.fail(
            f"{tag}: page retirement pending: reboot (no hardware service needed), then rerun acceptance",
            "ecc:remap_pending",
        )
    if au and not vu:
        out.warn(f"{tag}: {au} uncorrectable ECC errors over the GPU's lifetime (none since the last reset)")
    dbe = _n(g.retired_pages_dbe)
    if dbe:
        out.warn(f"{tag}: {dbe} pages retired for double-bit errors")
    if vc:
        out.note(f"{tag}: {vc} correctable ECC errors since the last reset")
    if rr_c:
        out.note(f"{tag}: {rr_c} rows remapped for correctable errors")


def ecc_health(query: SmiQuery, sku: SkuProfile | None) -> Outcome:
    """Judge ECC state of every GPU of one ``nvidia-smi -q -x`` output (see the module doc)."""
    out = Outcome()
    if query.failure is not None and not query.gpus and not query.lost_gpus:
        out.error = f"nvidia-smi -q -x: {query.failure.reason}"
        out.cause = f"tool:{query.failure.kind}"
        return out
    if not query.gpus and not query.lost_gpus:
        if sku and sku.expect.gpus:
            out.fail(f"nvidia-smi reports no GPU, SKU {sku.name} expects {sku.expect.gpus}", "gpu:lost")
        else:
            out.skip = "no NVIDIA GPU"
        return out
    for line in lost_gpus(query):
        out.fail(line, "gpu:lost")
    for i, g in enumerate(query.gpus):
        _gpu(i, g, sku, out)
    return out
