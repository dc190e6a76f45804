"""HTML view of a :class:`~jupyter_ktune.measure.static.StaticReport` for notebooks.

Kept apart from :mod:`jupyter_ktune.measure.static` so that module holds the compile and parse
logic and this one only presentation: one table row per kernel with registers, smem, spills,
stack, occupancy and SASS highlights. Inline styles only, so it works in static renders and
nbviewer. ``StaticReport._repr_html_`` calls :func:`report_html`, so the report and its
kernels are annotated ``Any`` here: importing their types back, even for the type checker only,
made the two modules a circle.
"""

from __future__ import annotations

from html import escape
from typing import Any

from jupyter_ktune.measure.sass import WGMMA_OPCODES, SassMix, category
from jupyter_ktune.render import counted

__all__ = ["report_html"]

_CELL = "padding:2px 8px;text-align:left;border-bottom:1px solid #ddd"
_WARN = "color:#b00020;font-weight:bold"


def report_html(rep: Any) -> str:
    """Render ``rep`` as an HTML table, one row per kernel."""
    head = ["kernel", "regs", "smem", "spills st/ld", "stack", "occupancy", "SASS"]
    rows = ["<tr>" + "".join(f'<th style="{_CELL}">{h}</th>' for h in head) + "</tr>"]
    for k in rep.kernels.values():
        spill = f"{k.spill_stores}/{k.spill_loads} B"
        smem = _bytes(k.smem_static) + (f" + {_bytes(rep.dynamic_smem)} dynamic"
                                        if rep.dynamic_smem else "")
        cells = [f"<code>{escape(k.demangled)}</code>", str(k.registers), smem,
                 _warn(spill, k.spill_stores or k.spill_loads), _warn(_bytes(k.local_memory),
                                                                     k.local_memory),
                 _occupancy_cell(rep, k), "<br>".join(_highlights(k.sass, rep.sass_error))]
        rows.append("<tr>" + "".join(f'<td style="{_CELL}">{c}</td>' for c in cells) + "</tr>")
    versions = ", ".join(f"{escape(t)} {escape(v)}" for t, v in rep.versions.items())
    caption = f"static report for {escape(rep.arch)} ({versions})"
    return (f'<table style="border-collapse:collapse;font-size:12px">'
            f'<caption style="text-align:left">{caption}</caption>{"".join(rows)}</table>')


def _occupancy_cell(rep: Any, k: Any) -> str:
    if rep.threads_per_block is None:
        return "block size unknown"
    try:
        occ = rep.occupancy(k.name, rep.threads_per_block)
    except ValueError as exc:
        return escape(str(exc))
    text = (f"{occ.occupancy:.0%}: {counted(occ.active_blocks_per_sm, 'block')} of "
            f"{counted(rep.threads_per_block, 'thread')} per SM, "
            f"limited by {occ.limiter.replace('_', ' ')}")
    return _warn(text, occ.active_blocks_per_sm == 0)


def _highlights(mix: SassMix | None, error: str) -> list[str]:
    if mix is None:
        return [escape(error or "no SASS")]
    gmma = sum(mix.opcodes.get(op, 0) for op in WGMMA_OPCODES)
    if mix.uses_wgmma:
        out = [f"HGMMA/QGMMA (wgmma): {gmma}"]
    elif mix.uses_tensor_cores:
        out = [f"MMA: {mix.tensor_mma} ({', '.join(_ops(mix, 'tensor_mma'))})"]
    else:
        out = ["MMA: 0 — no tensor cores"]
    out += [f"LDG.{w}: {n}" for w, n in mix.global_load_bits.items()]
    out += [f"STG.{w}: {n}" for w, n in mix.global_store_bits.items()]
    ldl, stl = mix.categories.get("local_load", 0), mix.categories.get("local_store", 0)
    out.append(_warn(f"LDL/STL: {ldl}/{stl}", ldl + stl))
    for cat, label in (("tma", "TMA"), ("async_copy", "cp.async"), ("shared_load", "LDS/LDSM"),
                       ("shared_store", "STS/STSM"), ("barrier", "barriers"), ("fp32", "fp32")):
        if mix.categories.get(cat):
            out.append(f"{label}: {mix.categories[cat]}")
    return [*out, f"total: {mix.instructions}"]


def _ops(mix: SassMix, kind: str) -> list[str]:
    return [op for op in mix.opcodes if category(op) == kind]


def _bytes(n: int) -> str:
    return f"{n / 1024:.1f} KiB" if n >= 1024 else f"{n} B"


def _warn(text: str, bad: object) -> str:
    return f'<span style="{_WARN}">{text}</span>' if bad else text
