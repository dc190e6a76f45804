"""The Pallas cell as a module: device detection, lowering choice, loading, cell-line errors.

See :mod:`jupyter_ktune.backends.pallas.backend` for the cell contract. Nothing here imports JAX.
"""

from __future__ import annotations

import ast
import inspect
import re
import sys
import traceback
import types
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from jupyter_ktune.backends.cache_folder import cache_dir, cached_text
from jupyter_ktune.errors import CannotRun, CellError, CompileFailure, Diagnostic
from jupyter_ktune.spec import KernelSpec

LOWERINGS = ("triton", "mosaic_gpu", "tpu", "interpret")
DEFAULT_LOWERINGS = ("triton", "tpu", "interpret")
_NEEDS = {"mosaic_gpu": "an NVIDIA Hopper GPU (Mosaic GPU, compute capability 9.0 or newer)",
          "triton": "an NVIDIA GPU (Pallas' Triton lowering)", "tpu": "a TPU (Mosaic TPU)",
          "interpret": "interpret mode (LOWERINGS does not list 'interpret')"}
_MAX_MESSAGE = 3000


@dataclass(frozen=True)
class Target:
    """The device the worker's JAX sees and the Pallas lowerings it offers, best first."""

    platform: str  # "gpu" | "tpu" | "cpu"
    name: str
    offers: tuple[str, ...]
    compute_capability: str | None = None
    sm_count: int | None = None


def detect_target(devices: Sequence[Any]) -> Target:
    """Describe the first JAX device: platform, name and the lowerings Pallas has for it.

    Examples
    --------
    >>> detect_target(jax.devices())  # doctest: +SKIP
    Target(platform='gpu', name='NVIDIA H200', offers=('triton', 'mosaic_gpu', 'interpret'), ...)
    """
    if not devices:
        return Target("cpu", "no JAX device", ("interpret",))
    dev = devices[0]
    platform = str(getattr(dev, "platform", "cpu")).lower()
    kind = str(getattr(dev, "device_kind", platform))
    if platform in ("gpu", "cuda", "rocm"):
        cc = getattr(dev, "compute_capability", None)
        major = int(str(cc).split(".")[0]) if cc else 0
        # interpret mode last: a cell written for a TPU (LOWERINGS = ['tpu', 'interpret']) is
        # checked on a GPU machine too, by the host clock
        offers = ("triton", "mosaic_gpu", "interpret") if major >= 9 else ("triton", "interpret")
        cores = getattr(dev, "core_count", None)
        return Target("gpu", kind, offers, str(cc) if cc else None,
                      int(cores) if isinstance(cores, int) else None)
    if platform == "tpu":
        return Target("tpu", kind, ("tpu",))
    return Target("cpu", f"CPU ({kind}), Pallas interpret mode", ("interpret",))


def cell_lowerings(spec: KernelSpec, tree: ast.Module) -> tuple[str, ...]:
    """Read a top-level ``LOWERINGS = [...]`` literal from the cell, or the default."""
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name) and node.targets[0].id == "LOWERINGS"):
            fix = f"Write e.g. LOWERINGS = ['mosaic_gpu'] (names: {', '.join(LOWERINGS)})."
            try:
                value = ast.literal_eval(node.value)
            except ValueError:
                raise failure_at(node.lineno, "LOWERINGS must be a literal list of names",
                                  fix) from None
            names = (value,) if isinstance(value, str) else tuple(value)
            bad = [n for n in names if n not in LOWERINGS]
            if bad or not names:
                raise failure_at(node.lineno, f"unknown lowering {bad[0]!r}" if bad
                                  else "LOWERINGS is empty", fix)
            return names
    return DEFAULT_LOWERINGS


def choose_lowering(wanted: Sequence[str], target: Target) -> str:
    """Return the first lowering the cell wants that the device offers; else raise CannotRun."""
    for name in wanted:
        if name in target.offers:
            return name
    if target.platform == "cpu":
        here = "only a CPU, where Pallas runs in interpret mode"
    else:
        cc = target.compute_capability
        cc = f" (compute capability {cc})" if cc else ""
        here = f"{target.name}{cc}, where Pallas offers {' and '.join(target.offers)}"
    raise CannotRun(f"[ktune] this cell needs {_NEEDS[wanted[0]]}; this machine has {here}")


#: the Pallas module a cell imports -> (what it writes, the LOWERINGS line that runs it)
_WRITTEN_FOR = {
    "pallas.mosaic_gpu": ("a Mosaic GPU kernel (it imports plgpu)", "mosaic_gpu",
                          "LOWERINGS = ['mosaic_gpu']  (it then runs on a Hopper GPU and says "
                          "so elsewhere)"),
    "pallas.tpu": ("a Mosaic TPU kernel (it imports pltpu)", "tpu",
                   "LOWERINGS = ['tpu', 'interpret']  (a TPU runs it; elsewhere it runs in "
                   "interpret mode, timed by the host clock)"),
}


def written_for(tree: ast.Module) -> tuple[int, str] | None:
    """(cell line, Pallas module) of a cell that imports Pallas' Mosaic GPU (``plgpu``) or
    Mosaic TPU (``pltpu``) and names no ``LOWERINGS``, or None: such a cell's kernel runs under
    the default lowerings (interpret mode on a CPU, Triton on a GPU), which may not run it."""
    if any(isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "LOWERINGS"
                                             for t in n.targets) for n in tree.body):
        return None
    for node in ast.walk(tree):
        names = ([f"{node.module}.{a.name}" for a in node.names]
                 if isinstance(node, ast.ImportFrom) and node.module
                 else [a.name for a in node.names] if isinstance(node, ast.Import) else [])
        for module in _WRITTEN_FOR:
            if any(module in n for n in names):
                return node.lineno, module
    return None


def without_lowerings(exc: CompileFailure, found: tuple[int, str],
                      lowering: str) -> CompileFailure:
    """A Mosaic GPU or Mosaic TPU cell's failure under another lowering, said as the missing
    ``LOWERINGS`` (JAX's own words, e.g. "run_scoped interpret rule does not support collective
    axes" or "assert rule is not None", do not say it)."""
    line, module = found
    what, _, fix = _WRITTEN_FOR[module]
    said = exc.diagnostics[0].message if exc.diagnostics else exc.log.strip()
    first = (said.splitlines() or [""])[0][:300]
    return failure_at(line, f"this cell writes {what} and names no LOWERINGS, so it ran under "
                            f"'{lowering}' and failed ({first})", f"Add the line: {fix}")


def native_lowering(found: tuple[int, str]) -> str:
    """The lowering a cell found by :func:`written_for` is written for."""
    return _WRITTEN_FOR[found[1]][1]


def failure_at(line: int | None, message: str, fix: str = "") -> CompileFailure:
    """Return a compile failure with one diagnostic on ``line`` (the message, then the fix)."""
    text = f"{message}. {fix}".strip()
    return CompileFailure("pallas", text, [Diagnostic(line, "error", text)])


def _cell_file(spec: KernelSpec) -> tuple[Path, str]:
    """Write the cell to a module file whose line numbers are the cell's, in the private cache
    folder (named and checked by its content hash, issue 15 item 9); return it and its text."""
    header = f"# %%kernel {spec.name} --backend pallas (jupyter-ktune; lines = cell lines)\n"
    text = header + "\n" * max(spec.body_line - 2, 0) + spec.source
    return cached_text(cache_dir(), f"pallas_{spec.name}", ".py", text)


def cell_failure(exc: BaseException, path: Path) -> CompileFailure:
    """Map an exception from the cell (import, tracing, lowering) to its innermost cell line."""
    line = None
    chain: list[BaseException] = []
    seen: BaseException | None = exc
    while seen is not None and seen not in chain:
        chain.append(seen)
        seen = seen.__cause__ or seen.__context__
    for e in chain:
        if isinstance(e, SyntaxError) and e.filename == str(path):
            line = e.lineno
        for frame, lineno in traceback.walk_tb(e.__traceback__):
            if frame.f_code.co_filename == str(path):
                line = lineno  # the innermost frame in the cell wins
        if line is None:  # Pallas quotes the user's source location in some messages
            m = re.search(re.escape(path.name) + r'"?(?:, line |:)(\d+)', str(e))
            line = int(m.group(1)) if m else None
        if line is not None:
            break
    text = str(exc).strip() or _where_raised(exc)
    if len(text) > _MAX_MESSAGE:
        text = text[:_MAX_MESSAGE] + " ..."
    message = f"{type(exc).__name__}: {text}"
    log = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return CompileFailure("pallas", log, [Diagnostic(line, "error", message)])


def _where_raised(exc: BaseException) -> str:
    """For an exception with no message (``AttributeError()`` from a C++ object), the code that
    raised it: the innermost frame's file, line and source text."""
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return repr(exc)
    last = frames[-1]
    where = Path(last.filename)
    short = "/".join(where.parts[-3:]) if len(where.parts) > 3 else str(where)
    code = f": {last.line.strip()}" if last.line else ""
    hint = (" (an attribute that a CPU device lacks: this code asks for a GPU)"
            if "jax.devices()" in (last.line or "") else "")
    return f"raised in {short} line {last.lineno}{code}{hint}"


def cell_module_name(spec: KernelSpec, lowering: str) -> str:
    """The ``sys.modules`` key of the cell's module for ``lowering`` (:func:`load_cell` caches
    it there; the Mosaic profiler sets it aside to execute the cell again under its wrap)."""
    return f"ktune_pallas_{spec.name}_{spec.source_hash}_{lowering}"


def load_cell(spec: KernelSpec, lowering: str) -> types.ModuleType:
    """Execute the cell file as a module with INTERPRET and LOWERING defined (once per worker)."""
    path, text = _cell_file(spec)
    name = cell_module_name(spec, lowering)
    if name in sys.modules:
        return sys.modules[name]
    module = types.ModuleType(name)
    module.__file__ = str(path)
    module.__dict__.update(INTERPRET=lowering == "interpret", LOWERING=lowering)
    # Registered before it runs, as an import would be: dataclasses, typing.get_type_hints and
    # pickle look the class's module up in sys.modules while the cell is still executing.
    sys.modules[name] = module
    try:
        # dont_inherit: the cell gets its own __future__ flags, not this package's annotations
        code = compile(text, str(path), "exec", dont_inherit=True)  # the checked text
        exec(code, module.__dict__)  # noqa: S102
    except Exception as exc:  # noqa: BLE001 - any failure of the cell is reported on its line
        sys.modules.pop(name, None)
        raise cell_failure(exc, path) from None
    return module


def call_names(fn: Callable[..., Any], host_args: Mapping[str, Any],
               outputs: Sequence[str]) -> tuple[tuple[str, ...], bool]:
    """Names of the inputs to pass, and whether they go by keyword (False: positionally).

    A callable with named parameters gets those inputs by name; one that takes only ``*args``
    gets every array input in the dict's order except the ``--out`` names.
    """
    try:
        params = list(inspect.signature(fn, follow_wrapped=False).parameters.values())
    except (TypeError, ValueError):
        params = []
    named = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD,
                                             p.KEYWORD_ONLY)]
    if not named:
        return tuple(k for k, v in host_args.items()
                     if k not in outputs and isinstance(v, np.ndarray)), False
    missing = [p.name for p in named if p.name not in host_args and p.default is p.empty]
    if missing:
        raise CellError(f"the kernel's callable takes '{missing[0]}', which the inputs function "
                        f"does not return (it returns {', '.join(host_args) or 'nothing'})",
                        line=1, fix=f"Return '{missing[0]}' from the inputs function.")
    return tuple(p.name for p in named if p.name in host_args), True


def takes_arrays(fn: Callable[..., Any], tunables: Mapping[str, Any]) -> bool:
    """Whether ``fn`` is the op itself (it has required parameters that are not tunables, the
    arrays), not a factory of the cell contract (``NAME(**tunables) -> callable``)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.default is p.empty and p.name not in tunables
               and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params)


def parse_cell_source(spec: KernelSpec) -> ast.Module:
    """Parse the cell body with cell line numbers; a syntax error is a CellError on its line."""
    text = "\n" * (spec.body_line - 1) + spec.source
    try:
        return ast.parse(text)
    except SyntaxError as exc:
        raise CellError(f"SyntaxError: {exc.msg}", line=exc.lineno) from None
