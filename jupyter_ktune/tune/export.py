"""Deployable artefacts from a sweep: a ``triton.Config`` list, a C++ header, a Pallas table.

Each exporter takes a :class:`~jupyter_ktune.tune.report.TuneReport` and returns source text,
with the configs fastest first and the measured time and verdict in a comment, so the numbers
travel with the artefact. Kernel Tuner's T4 JSON lives in :mod:`jupyter_ktune.tune.kerneltuner`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from jupyter_ktune.space import cxx_value
from jupyter_ktune.tune.store import StoredResult

if TYPE_CHECKING:  # annotations only: TuneReport.export() imports this module
    from jupyter_ktune.tune.report import TuneReport

#: Triton launch options: keyword arguments of ``triton.Config``, not ``kwargs`` entries
TRITON_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg")


def _ranked(report: TuneReport, k: int) -> list[StoredResult]:
    """Winner first (by the verdict), then the rest of the sweep's fastest."""
    ranked = report.ranked
    best = report.best
    if best is not None:
        ranked = [best] + [r for r in ranked if r.config != best.config]
    return ranked[:k]


def _header(report: TuneReport, comment: str) -> list[str]:
    lines = [f"{comment} Tuned by jupyter-ktune: {report.kernel} ({report.backend}) on "
             f"{report.device}, strategy '{report.strategy}', "
             f"{len(report.evaluations)} of {report.valid_configs} configs evaluated"]
    if report.verdict is not None:
        lines.append(f"{comment} {report.verdict.text()}")
    return lines


def _cell_decorators(spec: Any, kernel: str) -> list[str]:
    """The kernel's ``@triton.autotune(...)`` line with ``configs=configs`` and its other
    arguments (``key``, ``prune_configs_by``, ``reset_to_zero``, ...) as the cell wrote them,
    then its other decorators; [] when the cell's kernel has no autotune decorator."""
    import ast

    try:
        tree = ast.parse(spec.source)
    except SyntaxError:
        return []
    fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == kernel), None)
    if fn is None:
        return []
    out, found = [], False
    for dec in fn.decorator_list:
        if isinstance(dec, ast.Call) and "autotune" in ast.unparse(dec.func):
            found = True
            args = ["configs=configs"] + [ast.unparse(k) for k in dec.keywords
                                          if k.arg != "configs"]
            out.append(f"@{ast.unparse(dec.func)}({', '.join(args)})")
        else:
            out.append(f"@{ast.unparse(dec)}")
    return out if found else []


def triton_configs(report: TuneReport, k: int = 3, key: tuple[str, ...] = (),
                   spec: Any = None) -> str:
    """Write a ``configs = [triton.Config(...), ...]`` list and an ``@triton.autotune`` decorator.

    With the cell's ``spec``, a kernel that came with its own ``@triton.autotune`` gets that
    decorator back with the tuned list (same ``key``, hooks and pruning), and a kernel read with
    ``--from`` says which package and version it came from.

    Examples
    --------
    >>> print(report.export("triton", k=2, key=("M", "N", "K")))   # doctest: +SKIP
    """
    origin = getattr(spec, "origin", "") if spec is not None else ""
    lines = ["import triton", "", *_header(report, "#"),
             *([f"# Kernel from {origin}"] if origin else []), "configs = ["]
    for r in _ranked(report, k):
        kwargs = {n: v for n, v in r.config.items() if n not in TRITON_OPTIONS}
        opts = "".join(f", {n}={r.config[n]!r}" for n in TRITON_OPTIONS if n in r.config)
        time = f"  # {r.median_ms * 1e3:.2f} µs" if r.median_ms is not None else ""
        lines.append(f"    triton.Config({kwargs!r}{opts}),{time}")
    own = _cell_decorators(spec, report.kernel) if spec is not None else []
    if own:
        lines += ["]", "", *(f"# {d}" for d in own), f"# def {report.kernel}(...): ..."]
    else:
        lines += ["]", "", f"# @triton.autotune(configs=configs, key={list(key)!r})",
                  "# @triton.jit", f"# def {report.kernel}(...): ..."]
    return "\n".join(lines) + "\n"


def cpp_header(report: TuneReport, k: int = 1) -> str:
    """Write a header of ``constexpr int`` constants for the winner (``KT_<KERNEL>_<PARAM>``)."""
    best = _ranked(report, max(1, k))
    if not best:
        raise ValueError("[ktune] the sweep has no successful config to export")
    stem = re.sub(r"\W", "_", report.kernel).upper()
    lines = ["#pragma once", *_header(report, "//")]
    r = best[0]
    if r.median_ms is not None:
        lines.append(f"// median {r.median_ms * 1e3:.2f} µs over {r.times_ms.size} runs")  # type: ignore[union-attr]
    for p in report.space.params:
        value = r.config[p.name]
        note = "" if isinstance(value, int) else f"  // {value}"
        lines.append(f"constexpr int KT_{stem}_{p.name} = {cxx_value(value, p.values)};{note}")
    return "\n".join(lines) + "\n"


def pallas_table(report: TuneReport, k: int = 1, name: str = "TUNED_BLOCK_SIZES") -> str:
    """Write a dict literal keyed by (kernel, device), like JAX's ``tuned_block_sizes.py``."""
    rows = _ranked(report, max(1, k))
    if not rows:
        raise ValueError("[ktune] the sweep has no successful config to export")
    lines = [*_header(report, "#"), f"{name} = {{"]
    key = (report.kernel, report.device)
    entries = [dict(r.config) for r in rows]
    value: Any = entries[0] if k == 1 else entries
    lines.append(f"    {key!r}: {value!r},")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _kernel_tuner(report: TuneReport, **kw: Any) -> str:
    import json

    from jupyter_ktune.tune.kerneltuner import to_t4

    return json.dumps(to_t4([e.result for e in report.evaluations]), indent=1)


#: exporter name -> function(report, **kw) -> text
EXPORTERS: dict[str, Callable[..., str]] = {
    "triton": triton_configs,
    "cpp": cpp_header,
    "pallas": pallas_table,
    "kernel_tuner": _kernel_tuner,
}


def export(report: TuneReport, kind: str, **kw: Any) -> str:
    """Export ``report`` as ``kind``; an unknown kind lists the known ones."""
    fn = EXPORTERS.get(kind)
    if fn is None:
        raise ValueError(f"[ktune] unknown export '{kind}'. Choose one of: "
                         f"{', '.join(sorted(EXPORTERS))}.")
    return fn(report, **kw)

