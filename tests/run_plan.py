"""How the suite runs in parallel (pytest-xdist, ``-n`` in pyproject's addopts): groups, order, and
the tests that need the machine to themselves.

A plain ``python -m pytest`` took 27 min on CI's 2 cores, one test at a time, mostly waiting on
one core for child processes (device workers, notebook kernels, pip, a browser). Run on two
workers, three rules keep every test meaning what it meant when it ran alone:

- **a module stays on one worker** (an ``xdist_group`` per module, ``--dist loadgroup``): its
  module-scoped fixtures (one device worker, one kernel) start once, as in a serial run, and its
  tests run in their written order.
- **the longest groups are handed out first** (``--no-loadscope-reorder`` keeps this order), so
  no worker starts the browser tests while the other is nearly done.
- **a test marked ``alone`` runs with no other test running**: it measures wall time against a
  bound (a worker start under 1.9 s, a parse under 1 s) or reads machine-wide state (every
  ``/dev/shm`` segment). Every test holds a shared lock while it runs, an ``alone`` test the
  exclusive one; a gate lock in front keeps the others from starting while one waits. The
  ``alone`` tests form one group handed out last, when the other workers are on short tests.

Without xdist (``-n 0``, ``-p no:xdist``) none of this applies and tests run in file order.
"""

from __future__ import annotations

import fcntl
import os
from contextlib import contextmanager
from pathlib import Path

import pytest

# Modules whose tests assert an upper bound on wall time, or look at state that other tests'
# processes change: they run alone (see the module docstring).
ALONE_MODULES = {
    "test_expr_limits.py",          # a parse under 1 s, 10**12 configs within 2x of 4
    "test_interrupt_hang.py",       # the next request within 2 s of an Interrupt
    "test_reliability_faults.py",   # worker starts under 1.9 s and 5 s
    "test_sweep_speed.py",          # phases under 100 ms, a first run in [8, 30) s, busy waits
    "test_shapes.py",               # busy-wait kernels whose measured order picks the winner
    "test_timing.py",               # an IQR under 20 us, counts of timed runs
    "test_worker.py",               # every /dev/shm/ktune_inputs_* before and after; a 10 s bound
    "test_reliability_concurrency.py",  # 50 requests in one second, served far fewer
}

# The groups handed out first, longest first (seconds: the serial run on 2 cores, --durations,
# 2,072 s in all on a loaded machine).
FIRST = [
    "test_fresh_install.py",         # 490 s: a fresh venv, the README's install, every notebook
    "test_ui.py",                    # 435 s: the Galata browser tests
    "test_example_attention_wgmma.py",  # 108 s
    "test_example_gemm.py",          # 72 s
    "test_corpus.py",                # 46 published kernels, ~5 s each
    "test_examples.py",              # 44 s
]

# Modules whose every test is slow (marked here rather than test by test): the ``slow`` tier.
SLOW_MODULES = {
    "test_example_attention.py", "test_example_attention_wgmma.py", "test_example_gemm.py",
    "test_example_gemm_wgmma.py", "test_examples.py",  # notebooks in a fresh kernel, 11-74 s
}

ALONE = "alone"


def module_of(nodeid: str) -> str:
    """``tests/test_x.py::test_y[z]`` -> ``test_x.py``."""
    return nodeid.split("::", 1)[0].rsplit("/", 1)[-1]


def group_of(nodeid: str) -> str:
    """The work unit a test belongs to: its module, or the one group of the ``alone`` modules."""
    module = module_of(nodeid)
    return ALONE if module in ALONE_MODULES else module


def mark(items: list[pytest.Item]) -> None:
    """Mark the tests of :data:`ALONE_MODULES` ``alone`` and those of :data:`SLOW_MODULES`
    ``slow`` (in any run, so that ``-m "not slow"`` leaves them out)."""
    for item in items:
        module = module_of(item.nodeid)
        if module in ALONE_MODULES:
            item.add_marker(pytest.mark.alone)
        if module in SLOW_MODULES:
            item.add_marker(pytest.mark.slow)


def order(items: list[pytest.Item]) -> None:
    """On each worker: order the collection as the groups are handed out (:data:`FIRST` first,
    the ``alone`` group last, file order within a group)."""

    def rank(item: pytest.Item) -> int:
        group = group_of(item.nodeid)
        if group == ALONE:
            return len(FIRST) + 1
        return FIRST.index(group) if group in FIRST else len(FIRST)

    items.sort(key=rank)  # stable


def scheduler(config: pytest.Config, log):
    """xdist's scheduling by scope, with :func:`group_of` as the scope, in collection order.

    (xdist's own ``--dist loadgroup`` renames node ids, which pytest 9.2 no longer reads.)
    """
    from xdist.scheduler import LoadScopeScheduling

    class ByGroup(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid)

    config.option.loadscopereorder = False  # the order order() gave the collection
    return ByGroup(config, log)


class RunLock:
    """The lock every test of a distributed run takes: shared, or exclusive for ``alone``.

    Two ``flock`` files in the run's base temporary folder, which all workers share. An
    ``alone`` test takes the gate, then the run lock exclusively, and holds both while it runs;
    any other test passes the gate, then holds the run lock shared. So an ``alone`` test waits
    only for the tests already running, and none starts beside it.
    """

    def __init__(self, folder: Path):
        self._gate = os.open(folder / "ktune-tests.gate", os.O_RDWR | os.O_CREAT, 0o600)
        self._run = os.open(folder / "ktune-tests.lock", os.O_RDWR | os.O_CREAT, 0o600)

    @contextmanager
    def hold(self, alone: bool):
        fcntl.flock(self._gate, fcntl.LOCK_EX)
        try:
            fcntl.flock(self._run, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
            if not alone:
                fcntl.flock(self._gate, fcntl.LOCK_UN)
            try:
                yield
            finally:
                fcntl.flock(self._run, fcntl.LOCK_UN)
        finally:
            fcntl.flock(self._gate, fcntl.LOCK_UN)  # a second unlock is harmless
