"""A CPU backend for tests: the cell is Python, "launching" calls it on NumPy arrays.

It exercises everything generic (constraints, verification with poisoned outputs, the timing
protocol, the worker's crash/hang/fatal handling) without a GPU. Registered for the worker via
``KTUNE_BACKEND_MODULES=fake=ktune_fake_backend`` with ``tests/`` on PYTHONPATH. It implements
the required protocol of ``jupyter_ktune/backends/base.py`` and ``line_file``; it has no scope
profiler (tests check the reason shown). :class:`ProfilingFakeBackend` adds one: a host-timed
call reported as one event per scope named in a ``# scope: NAME`` comment.

Fault kinds a cell can produce (issue 9): ``os.abort()`` (a crash), an endless loop (a hang),
``raise FatalFault(...)`` (a sticky device error: the worker restarts), ``raise
OutOfResources(...)`` (mapped to "out of resources", as the CUDA backend's launch checks are), a
huge NumPy allocation (out of memory), and a compile error chosen by the config: lines between
``#if EXPR`` and ``#endif`` (EXPR over the config's C++ values, as the C preprocessor sees them)
are kept only when EXPR is true, so ``#if K == 3`` / ``def broken(:`` / ``#endif`` fails to
compile for K=3 only, on the cell's own line.
"""

from __future__ import annotations

import re
import time
from types import SimpleNamespace
from typing import Any, ClassVar

import numpy as np

from jupyter_ktune.backends.base import BackendBase, DeviceInfo
from jupyter_ktune.errors import CompileFailure, Diagnostic, OutOfResources
from jupyter_ktune.measure.breakdown import Breakdown, Event
from jupyter_ktune.measure.integrity import guard_breach_of, guarded_empty
from jupyter_ktune.measure.verify import poison


class FatalFault(RuntimeError):
    """Stands in for a sticky CUDA error (illegal address)."""


class FakeTimer:
    """Host clock, clearly named so: the fake has no device."""

    name = "host perf_counter (fake backend)"
    l2_flush_bytes = 0

    def __init__(self):
        self._t = []

    def synchronize(self): pass
    def new_event(self): return []
    def record(self, e): e.append(time.perf_counter())
    def elapsed_ms(self, s, e): return (e[0] - s[0]) * 1e3
    def flush_l2(self): pass
    def graph_ms(self, launch, n): return None
    def kernel_clock(self): return "no CUPTI in the fake backend"
    def empty_launch(self): pass


class Bound:
    """Every array argument is a copy inside a guarded buffer (measure.integrity): the kernel
    gets the inner view, so a write past its end (``as_strided`` in a cell stands for a raw
    pointer) lands in the guard and is reported, as on a GPU backend with guard regions."""

    def __init__(self, fn, host_args, outputs):
        self.fn, self.outputs, self.args, self._guarded = fn, outputs, {}, {}
        for k, v in host_args.items():
            if isinstance(v, np.ndarray):
                whole, inner = guarded_empty(v.shape, v.dtype)
                inner[...] = v
                self._guarded[k] = (whole, v.size)
                v = inner
            self.args[k] = v

    def launch(self) -> None:
        self.fn(**self.args)

    def poison_outputs(self) -> None:
        for o in self.outputs:
            poison(self.args[o])

    def read_outputs(self):
        return {o: self.args[o].copy() for o in self.outputs}

    def read_inputs(self, names):
        return {n: self.args[n].copy() for n in names}

    def guard_breaches(self):
        found = (guard_breach_of(k, whole, size) for k, (whole, size) in self._guarded.items())
        return [b for b in found if b is not None]

    def launch_info(self):
        return {"kernel": self.fn.__name__}


_STATIC = re.compile(r"#\s*static smem:\s*(.+?)\s*$", re.MULTILINE)
_REGS = re.compile(r"#\s*static regs:\s*(.+?)\s*$", re.MULTILINE)
_SCOPE = re.compile(r"#\s*scope:\s*(\w+)")
_IF = re.compile(r"^\s*#if\s+(?P<expr>.+?)\s*$")
_ENDIF = re.compile(r"^\s*#endif\b")


def preprocess(source: str, env: dict[str, int]) -> str:
    """Drop ``#if EXPR`` ... ``#endif`` blocks whose EXPR is false (blank lines keep numbering)."""
    out, keep = [], [True]
    for text in source.splitlines():
        if m := _IF.match(text):
            keep.append(keep[-1] and bool(eval(m.group("expr"), {}, dict(env))))  # noqa: S307
            out.append("")
        elif _ENDIF.match(text) and len(keep) > 1:
            keep.pop()
            out.append("")
        else:
            out.append(text if keep[-1] else "")
    return "\n".join(out) + "\n"


class Variant:
    def __init__(self, spec, config):
        ns: dict[str, Any] = {"np": np, "FatalFault": FatalFault,
                              "OutOfResources": OutOfResources}
        env = spec.space.cxx_env(config)
        ns.update(env)
        try:
            code = compile(preprocess(spec.source, env), "cell", "exec")
        except SyntaxError as exc:  # like a compiler error: mapped to the cell's own line
            line = spec.body_line + (exc.lineno or 1) - 1
            raise CompileFailure("fake", str(exc),
                                 [Diagnostic(line, "error", exc.msg)]) from None
        exec(code, ns)  # noqa: S102 - test backend
        self.fn, self.spec = ns[spec.name], spec

    def bind(self, host_args):
        return Bound(self.fn, host_args, self.spec.outputs)


class FakeBackend(BackendBase):
    name: ClassVar[str] = "fake"

    def check(self, spec): pass
    def device(self): return DeviceInfo(True, "fake CPU device", limits={"SMEM_PER_BLOCK": 1000})
    def static_report(self, spec, config):
        """None, or with a ``# static smem: EXPR`` line a report of EXPR bytes of shared memory
        (EXPR over the config), so the sweep's check of static resources can be tested; a
        ``# static regs: EXPR`` line sets the registers (32 without one)."""
        m = _STATIC.search(spec.source)
        if m is None:
            return None
        env = spec.space.cxx_env(config)
        smem = int(eval(m.group(1), {}, env))  # noqa: S307
        r = _REGS.search(spec.source)
        regs = int(eval(r.group(1), {}, env)) if r else 32  # noqa: S307
        kernel = SimpleNamespace(smem_static=smem, registers=regs)
        return SimpleNamespace(kernels={spec.name: kernel}, threads_per_block=128)
    def compile(self, spec, config): return Variant(spec, config)
    def timer(self): return FakeTimer()
    def is_fatal(self, exc): return isinstance(exc, FatalFault)
    def line_file(self, variant): return "cell"


class ProfilingFakeBackend(FakeBackend):
    """The fake with the optional scope profiler of the protocol."""

    def profile_scopes(self, spec, config, inputs):
        """One launch, timed on the host, reported as one event per ``# scope: NAME`` line."""
        names = _SCOPE.findall(spec.source) or [spec.name]
        bound = self.compile(spec, config).bind(inputs())
        t0 = time.perf_counter_ns()
        bound.launch()
        ns = time.perf_counter_ns() - t0
        events = [Event(n, 0, 0, 0, i * ns, (i + 1) * ns, float(i * ns), float((i + 1) * ns))
                  for i, n in enumerate(names)]
        return Breakdown.from_events(events, kernel=spec.name, source="fake", unit_kind="warp",
                                     sm_clock_mhz=1000.0, clock_source="fake (host ns)")


BACKEND = FakeBackend()


def copy_cell_spec(n: int, blocks: str = "1, 2") -> Any:
    """A parsed fake-backend cell ``k`` copying ``x`` to ``y``, whose inputs function returns
    ``dict(n=n)``: a fresh function per call, as a cell run again makes (its key follows ``n``)."""
    from jupyter_ktune.api import parse_cell

    namespace: dict = {}
    exec(f"def inputs():\n    return dict(n={n})\n", namespace)
    return parse_cell("k --backend fake --inputs inputs", f"# ktune: B in [{blocks}]\n"
                      "def k(x, y):\n    y[:] = x\n", namespace)
