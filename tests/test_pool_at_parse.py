"""The compile pool starts at parse, beside the device worker's import of the cell's module.

Once the worker read a Triton cell's ``@triton.autotune`` list at parse (importing the kernel's
package there), the pool started only 3-4 s before the first result, and its processes' own
import of the package (7-9 s for fla or liger on the H200) held Autotune's first result back
7.2-11.8 s after the press (bench/results/first_minute/2026-12-04-1554, in the history at
faf832e). The pool's processes now import the module while the worker does (a hook the
notebook layer, ``ui.start``, registers: the core knows no pool); a machine without a GPU
starts no pool.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

import jupyter_ktune.ui.start  # noqa: F401 - the notebook layer registers the pool's start
from jupyter_ktune.api import parse_cell
from jupyter_ktune.runner import describe
from jupyter_ktune.tuning import pool_warm

CELL = """# ktune: BLOCK in [32, 64]
# ktune: grid = lambda META: (triton.cdiv(n, META['BLOCK']),)
@triton.jit
def double(x, y, n, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y + o, 2.0 * tl.load(x + o, mask=o < n), mask=o < n)
"""


class Worker:
    """A device worker that logs what it is asked, in order."""

    def __init__(self, events: list, capability: tuple | None) -> None:
        self.events, self.capability, self.ready_waits_s = events, capability, []

    def device(self, backend: str) -> SimpleNamespace:
        self.events.append("device")
        return SimpleNamespace(available=True, compute_capability=self.capability)

    def request(self, message: tuple, timeout: float) -> tuple:
        self.events.append(message[0])
        return "ok", {}


@pytest.fixture
def events(monkeypatch: pytest.MonkeyPatch) -> list:
    log: list = []
    monkeypatch.setattr(pool_warm, "compile_pool_size", lambda *a: 4)
    monkeypatch.setattr(pool_warm, "shared_pool", lambda n, backend: ("pool", n, backend))
    monkeypatch.setattr(pool_warm, "preload_pool", lambda pool, spec, processes=None:
                        log.append(("preload", pool, spec.name, processes)))
    monkeypatch.setattr(pool_warm, "hints_for", lambda pool, spec: log.append("hints"))
    return log


def test_the_pool_imports_the_module_before_the_worker_reads_the_autotune_list(events):
    spec = parse_cell("double --backend triton", CELL, {})
    describe.describe_in_worker(spec, Worker(events, (9, 0)))
    # a few processes import the module beside the worker (all of them slowed the worker's
    # own import by 3-4 s); the argument types need the complete space: not read at parse
    assert events == ["device", ("preload", ("pool", 4, "triton"), "double",
                                 pool_warm.PARSE_PRELOADERS), "describe"]
    assert 1 <= pool_warm.PARSE_PRELOADERS < 4


def test_the_panel_then_has_every_pool_process_import_the_module(events):
    spec = parse_cell("double --backend triton", CELL, {})
    device = SimpleNamespace(available=True, compute_capability=(9, 0))
    pool_warm.warm_pool(spec, device)
    assert events == ["hints", ("preload", ("pool", 4, "triton"), "double", None)]


def test_preload_pool_sends_two_tasks_per_asked_process():
    from jupyter_ktune.tuning import runners

    sent = []
    pool = SimpleNamespace(_max_workers=15, submit=lambda fn, blob: sent.append(fn))
    spec = parse_cell("double --backend triton", CELL, {})
    assert len(runners.preload_pool(pool, spec, 2)) == 4
    assert len(runners.preload_pool(pool, spec)) == 30
    assert len(runners.preload_pool(pool, spec, 99)) == 30


def test_no_pool_where_no_gpu_runs_the_variants(events):
    spec = parse_cell("double --backend triton", CELL, {})
    describe.describe_in_worker(spec, Worker(events, None))
    assert events == ["device", "describe"]


def test_the_switch_leaves_the_pools_start_to_the_panel(events, monkeypatch):
    """``KTUNE_POOL_AT_PARSE=0`` (to compare on a device): no pool at parse; the panel's
    ``warm_pool`` starts it, every process importing the module."""
    monkeypatch.setenv(pool_warm.POOL_AT_PARSE_ENV, "0")
    spec = parse_cell("double --backend triton", CELL, {})
    describe.describe_in_worker(spec, Worker(events, (9, 0)))
    assert events == ["device", "describe"]
