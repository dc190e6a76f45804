"""A CPU backend for tests: the cell is Python, "launching" calls it on NumPy arrays.

It exercises everything generic (constraints, verification with poisoned outputs, the timing
protocol, the worker's crash/hang/fatal handling) without a GPU. Registered for the worker via
``KTUNE_BACKEND_MODULES=fake=ktune_fake_backend`` with ``tests/`` on PYTHONPATH.
"""

from __future__ import annotations

import time
from typing import Any, ClassVar

import numpy as np

from jupyter_ktune.backends.base import DeviceInfo
from jupyter_ktune.errors import CompileFailure, Diagnostic
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
    def __init__(self, fn, args, outputs):
        self.fn, self.args, self.outputs = fn, args, outputs

    def launch(self) -> None:
        self.fn(**self.args)

    def poison_outputs(self) -> None:
        for o in self.outputs:
            poison(self.args[o])

    def read_outputs(self):
        return {o: self.args[o].copy() for o in self.outputs}

    def launch_info(self):
        return {"kernel": self.fn.__name__}


class Variant:
    def __init__(self, spec, config):
        ns: dict[str, Any] = {"np": np, "FatalFault": FatalFault}
        ns.update(spec.space.cxx_env(config))
        try:
            code = compile(spec.source, "cell", "exec")
        except SyntaxError as exc:  # like a compiler error: mapped to the cell's own line
            line = spec.body_line + (exc.lineno or 1) - 1
            raise CompileFailure("fake", str(exc),
                                 [Diagnostic(line, "error", exc.msg)]) from None
        exec(code, ns)  # noqa: S102 - test backend
        self.fn, self.spec = ns[spec.name], spec

    def bind(self, host_args):
        return Bound(self.fn, {k: (v.copy() if isinstance(v, np.ndarray) else v)
                               for k, v in host_args.items()}, self.spec.outputs)


class FakeBackend:
    name: ClassVar[str] = "fake"

    def check(self, spec): pass
    def device(self): return DeviceInfo(True, "fake CPU device", limits={"SMEM_PER_BLOCK": 1000})
    def static_report(self, spec, config): return None
    def compile(self, spec, config): return Variant(spec, config)
    def timer(self): return FakeTimer()
    def is_fatal(self, exc): return isinstance(exc, FatalFault)


BACKEND = FakeBackend()
