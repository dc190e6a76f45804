"""Deployable artefacts from a sweep: a ``triton.Config`` list, a C++ header, a Pallas table.

Each exporter takes a :class:`~jupyter_ktune.tuning.report.TuneReport` and returns source text,
with the configs fastest first and the measured time and verdict in a comment, so the numbers
travel with the artefact. Kernel Tuner's T4 JSON lives in :mod:`jupyter_ktune.tuning.kerneltuner`.
Any report can be written in any format; which ones fit a backend, and the one written when
none is named, is the backend's fact (``BackendBase.export_formats``), so a new backend picks
its default in its own class.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from jupyter_ktune.backends import get_backend
from jupyter_ktune.render import counted
from jupyter_ktune.space import cxx_value
from jupyter_ktune.tunable_values import COMPILER_CONTROLS, NOT_FOR_KERNEL
from jupyter_ktune.tuning.store import StoredResult

# A TuneReport and a ShapesReport are annotated Any here: TuneReport.export() and
# ShapesReport.dispatch() import this module, and importing their types back, even for the type
# checker only, made the three modules a circle.

#: Triton launch options: keyword arguments of ``triton.Config``, not ``kwargs`` entries
TRITON_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg")


def _ranked(report: Any, k: int) -> list[StoredResult]:
    """Winner first (by the verdict), then the rest of the sweep's fastest."""
    ranked = report.ranked
    best = report.best
    if best is not None:
        ranked = [best] + [r for r in ranked if r.config != best.config]
    return ranked[:k]


def _header(report: Any, comment: str) -> list[str]:
    lines = [f"{comment} Tuned by jupyter-ktune: {report.kernel} ({report.backend}) on "
             f"{report.device}, strategy '{report.strategy}', "
             f"{len(report.evaluations)} of {counted(report.valid_configs, 'config')} evaluated"]
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


def triton_configs(report: Any, k: int = 3, key: tuple[str, ...] = (),
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
        notes = [f"{r.median_ms * 1e3:.2f} µs"] if r.median_ms is not None else []
        if r.config.get("name_prefix"):  # a triton.Config cannot rename: say what was timed
            notes.append(compiler_note(report.kernel, "name_prefix", r.config["name_prefix"]))
        time = f"  # {'; '.join(notes)}" if notes else ""
        lines.append(f"    {triton_config(r.config)},{time}")
    own = _cell_decorators(spec, report.kernel) if spec is not None else []
    if own:
        lines += ["]", "", *(f"# {d}" for d in own), f"# def {report.kernel}(...): ..."]
    else:
        lines += ["]", "", f"# @triton.autotune(configs=configs, key={list(key)!r})",
                  "# @triton.jit", f"# def {report.kernel}(...): ..."]
    return "\n".join(lines) + "\n"


def cpp_header(report: Any, k: int = 1) -> str:
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
        if p.name in COMPILER_CONTROLS:  # what the compiler was told, not a constant
            lines.append(f"// {compiler_note(report.kernel, p.name, value)}")
            continue
        note = "" if isinstance(value, int) else f"  // {value}"
        lines.append(f"constexpr int KT_{stem}_{p.name} = {cxx_value(value, p.values)};{note}")
    return "\n".join(lines) + "\n"


def triton_config(config: Any) -> str:
    """``triton.Config({constexprs}, launch options)`` for one config; ``name_prefix`` is left
    out (a triton.Config cannot rename a kernel; the line's comment says it)."""
    kwargs = {n: v for n, v in config.items()
              if n not in TRITON_OPTIONS and n not in NOT_FOR_KERNEL}
    opts = "".join(f", {n}={config[n]!r}" for n in TRITON_OPTIONS if n in config)
    return f"triton.Config({kwargs!r}{opts})"


def compiler_note(kernel: str, name: str, value: Any) -> str:
    """A compiler control of the winner, in words for the exported header."""
    if name == "name_prefix":
        return f"kernel named {value}{kernel}" if value else f"kernel named {kernel}"
    if name == "maxnreg":
        return f"compiled with -maxrregcount={value}"
    return f"compiled with {' '.join(value) or 'no extra nvcc flags'}"


def pallas_table(report: Any, k: int = 1, name: str = "TUNED_BLOCK_SIZES") -> str:
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


def _kernel_tuner(report: Any, **kw: Any) -> str:
    import json

    from jupyter_ktune.tuning.kerneltuner import to_t4

    return json.dumps(to_t4([e.result for e in report.evaluations]), indent=1)


#: exporter name -> function(report, **kw) -> text
EXPORTERS: dict[str, Callable[..., str]] = {
    "triton": triton_configs,
    "cpp": cpp_header,
    "pallas": pallas_table,
    "kernel_tuner": _kernel_tuner,
}


def _winners(shapes: Any) -> list[tuple[dict[str, Any], StoredResult]]:
    out = [(dict(s), w) for s, w in zip(shapes.shapes, shapes.winners, strict=True) if w]
    if not out:
        raise ValueError("[ktune] no shape has a successful config to export")
    return out


def _shape_text(shape: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in shape.items())


def dispatch_triton(shapes: Any) -> str:
    """A ``triton.autotune`` config list of the distinct winners, with the shapes' key."""
    lines = ["import triton", "", "# Tuned per shape by jupyter-ktune; winners:"]
    distinct: list[StoredResult] = []
    for shape, w in _winners(shapes):
        lines.append(f"#   {_shape_text(shape)}: {w.config.label()} "
                     f"({(w.median_ms or 0) * 1e3:.2f} µs)")
        if all(d.config != w.config for d in distinct):
            distinct.append(w)
    lines.append("configs = [")
    for r in distinct:
        lines.append(f"    {triton_config(r.config)},")
    lines += ["]", f"key = {list(shapes.key)!r}", "",
              "# @triton.autotune(configs=configs, key=key)", "# @triton.jit"]
    return "\n".join(lines) + "\n"


def dispatch_cpp(shapes: Any) -> str:
    """A C++ function that switches over shape buckets (ceil(log2) of each dimension) and
    returns that bucket's winner; other shapes get the winner of the most shapes."""
    winners = _winners(shapes)
    reports = shapes.reports[0]
    stem = re.sub(r"\W", "_", reports.kernel)
    # a compiler control is no value a kernel can be handed at run time
    params = [p for p in reports.space.params if p.name not in COMPILER_CONTROLS]
    dims = list(shapes.key)
    lines = ["#pragma once", f"// Tuned per shape by jupyter-ktune: {reports.kernel} on "
             f"{reports.device}", f"struct kt_{stem}_config {{ "
             + " ".join(f"int {p.name};" for p in params) + " };", "",
             "// bucket of a dimension: ceil(log2(v)), 0..63",
             "inline int kt_bucket(long long v) { int b = 0; while ((1LL << b) < v) ++b; "
             "return b; }", "",
             f"inline kt_{stem}_config kt_{stem}_dispatch("
             + ", ".join(f"long long {d}" for d in dims) + ") {",
             "  switch (" + " + ".join(f"kt_bucket({d}) * {64 ** (len(dims) - 1 - i)}"
                                      for i, d in enumerate(dims)) + ") {"]

    def value(r: StoredResult) -> str:
        return "{" + ", ".join(str(cxx_value(r.config[p.name], p.values)) for p in params) + "}"

    seen: set[int] = set()
    for shape, w in winners:
        bucket = sum(_bucket(int(shape[d])) * 64 ** (len(dims) - 1 - i)
                     for i, d in enumerate(dims))
        if bucket in seen:
            continue  # two shapes in one bucket: the first listed wins
        seen.add(bucket)
        lines.append(f"    case {bucket}: return {value(w)};  // {_shape_text(shape)}: "
                     f"{w.config.label()}, {(w.median_ms or 0) * 1e3:.2f} us")
    common = max((w for _s, w in winners),
                 key=lambda w: sum(x.config == w.config for _s, x in winners))
    lines += [f"    default: return {value(common)};  // the winner of the most shapes",
              "  }", "}"]
    return "\n".join(lines) + "\n"


def _bucket(v: int) -> int:
    b = 0
    while (1 << b) < v:
        b += 1
    return b


def dispatch_pallas(shapes: Any, name: str = "TUNED_BLOCK_SIZES") -> str:
    """A dict literal keyed by (kernel, device, shape values), like JAX's tuned tables."""
    first = shapes.reports[0]
    lines = [f"# Tuned per shape by jupyter-ktune; key: (kernel, device, {', '.join(shapes.key)})",
             f"{name} = {{"]
    for shape, w in _winners(shapes):
        key = (first.kernel, first.device, *shape.values())
        lines.append(f"    {key!r}: {dict(w.config)!r},")
    return "\n".join([*lines, "}"]) + "\n"


#: dispatch-table exporter name -> function(shapes report, **kw) -> text
DISPATCH: dict[str, Callable[..., str]] = {
    "triton": dispatch_triton, "cpp": dispatch_cpp, "pallas": dispatch_pallas}


def _exporter(registry: dict[str, Callable[..., str]], kind: str, what: str) -> Callable[..., str]:
    fn = registry.get(kind)
    if fn is None:
        raise ValueError(f"[ktune] unknown {what} '{kind}'. Choose one of: "
                         f"{', '.join(sorted(registry))}.")
    return fn


def default_format(backend: str, registry: dict[str, Callable[..., str]], what: str) -> str:
    """The first of ``backend``'s export formats (``BackendBase.export_formats``) that
    ``registry`` writes: what an export that names no format gives."""
    offered = get_backend(backend).export_formats
    kind = next((f for f in offered if f in registry), None)
    if kind is None:
        raise ValueError(f"[ktune] --backend {backend} has no default {what} (it offers "
                         f"{', '.join(offered) or 'none'}). Name one of: "
                         f"{', '.join(sorted(registry))}.")
    return kind


def dispatch(shapes: Any, kind: str | None = None, **kw: Any) -> str:
    """Export a per-shape dispatch table as ``kind`` (None: the backend's default format);
    an unknown kind lists the known ones."""
    what = "dispatch export"
    kind = kind or default_format(shapes.reports[0].backend, DISPATCH, what)
    return _exporter(DISPATCH, kind, what)(shapes, **kw)


def export(report: Any, kind: str | None = None, **kw: Any) -> str:
    """Export ``report`` as ``kind`` (None: the backend's default format); an unknown kind
    lists the known ones."""
    kind = kind or default_format(report.backend, EXPORTERS, "export")
    return _exporter(EXPORTERS, kind, "export")(report, **kw)
