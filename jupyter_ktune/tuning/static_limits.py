"""Configs known not to launch, from their static report alone: skipped before any launch.

A config whose kernel needs more shared memory per block than the device grants, or more
registers per block than an SM has, cannot launch; the sweep's compile pool has its static
report before the device sees it, so such a config is recorded as "out of resources" with the
numbers, and no device time is spent on it (issue 21).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def static_excess(static: Any, limits: Mapping[str, int]) -> str | None:
    """Why ``static`` (a StaticReport) cannot launch under ``limits``, or None when it can.

    Examples
    --------
    >>> static_excess(report, {"SMEM_PER_BLOCK": 232448})        # doctest: +SKIP
    'static: 245,760 B shared memory > 232,448 B per block'
    """
    kernels = getattr(static, "kernels", None) or {}
    threads = getattr(static, "threads_per_block", None)
    smem_cap, regs_cap = limits.get("SMEM_PER_BLOCK"), limits.get("REGS_PER_SM")
    for k in kernels.values():
        smem = getattr(k, "smem_static", 0) or 0
        if smem_cap and smem > smem_cap:
            return f"static: {smem:,} B shared memory > {smem_cap:,} B per block"
        regs = getattr(k, "registers", 0) or 0
        if regs_cap and threads and regs * threads > regs_cap:
            return (f"static: {regs} registers x {threads} threads = {regs * threads:,} "
                    f"> {regs_cap:,} registers per SM")
    return None
