"""Compile a cell's configs in the compile pool's idle time, before Autotune is pressed.

Once a cell runs, its panel's pool (:mod:`.pool_warm`) sits idle until the press, and the press
then waits for compiles whose inputs were all known when the cell ran: the kernel, its argument
types and the configs of its space. In the notebook's order on the H200 (cell, then Autotune)
fla's softmax spent 0.30-0.55 s of its 6-config sweep waiting for the pool's first compiles,
and the 30-config activation lists waited for their slowest compile, ptxas 9-18 s for one
config (``0d9de0a^:bench/results/corpus_vs_autotune/2026-12-04-2007``; the ptxas times in
``5072c19^:bench/results/corpus_vs_autotune/2026-12-01-1046``). Here the panel
sends those compiles when its cell first runs (:func:`send`), and the sweep takes each one
(:func:`take`) instead of sending it again; one not back yet is simply waited for, as a
compile the sweep sent itself would be.

Only a space the default Autotune sweeps whole is compiled ahead: at most :data:`AHEAD_UP_TO`
valid configs, the panel's default budget, so every compile sent is one the press uses. A
larger space is searched, and which of its configs a search asks for is not known before it
runs. The pool runs these at a lower CPU priority than the device worker (``pool.POOL_NICENESS``),
and a cell run again, or a sweep of another kernel, cancels those still queued (:func:`take`):
the last cell run has the pool's idle time.
"""

from __future__ import annotations

import concurrent.futures as cf
import logging
import os
import threading
import weakref
from collections.abc import Callable, Mapping
from typing import Any

import cloudpickle

from jupyter_ktune.problem_key import inputs_key
from jupyter_ktune.space import Config
from jupyter_ktune.spec import KernelSpec

#: The most valid configs a space may have to be compiled ahead: the Autotune box's default
#: budget (``ui.autotune``: ``min(n, 64)``), so a press with the defaults sweeps them all.
AHEAD_UP_TO = 64
AHEAD_ENV = "KTUNE_COMPILE_AHEAD"  # "0": compile nothing ahead

_lock = threading.Lock()
TAKEN: Any = cf.Future()  # in place of a compile a sweep took (:func:`take`)
TAKEN.cancel()
#: pool -> (the compile identity of the cell whose configs it compiles, config -> future); weak,
#: so a pool shut down and replaced (``pool.shared_pool``) takes its futures with it
_sent: weakref.WeakKeyDictionary[Any, tuple[tuple, dict[Config, cf.Future]]] = \
    weakref.WeakKeyDictionary()


def compile_identity(spec: KernelSpec) -> tuple:
    """What a config's compile reads besides the config: the source and launch geometry
    (``source_hash``), the inputs function (the argument types), the target, the declared
    types and tensor-descriptor blocks. Two specs alike in these compile a config alike: the
    sweep's spec is the panel's, so its compiles are taken; an edited cell is another."""
    return (spec.backend, spec.source_hash, inputs_key(spec.inputs), spec.options.arch,
            repr(sorted(spec.types.items())), repr(sorted(spec.block_shapes.items())),
            repr(sorted(spec.output_shapes.items())), spec.symbol_prefix)


def configs_ahead(spec: KernelSpec, limits: Mapping[str, Any] | None = None) -> list[Config]:
    """The configs to compile ahead, in the order an exhaustive sweep hands them to the pool
    (``compile_order``: the costliest first, interleaved with the cheapest); none for a space
    of more than :data:`AHEAD_UP_TO` valid configs."""
    from jupyter_ktune.tuning.compile_order import compile_first
    from jupyter_ktune.tuning.search import LIST_UP_TO, make_strategy

    if spec.space.size > LIST_UP_TO:  # walked lazily by every strategy, never listed
        return []
    strategy = make_strategy("exhaustive", spec.space, limits)
    valid = list(strategy.valid)
    if not valid or len(valid) > AHEAD_UP_TO:
        return []
    return compile_first(spec.backend, valid) or valid


def send(pool: cf.ProcessPoolExecutor, spec: KernelSpec,
         limits: Mapping[str, Any] | None = None, configs: list[Config] | None = None,
         hints: Any = None) -> int:
    """Send the compiles of ``spec``'s configs (:func:`configs_ahead`) to ``pool`` now;
    returns how many were sent. Those already sent for the same compile identity, or taken by
    a sweep, are not sent again; those of another cell still queued are cancelled. ``hints``:
    the pool hints (``pool_warm``: the argument types), so no process calls ``inputs()``;
    None: each reads its own. ``configs``: :func:`configs_ahead`'s, where the caller listed
    them already."""
    from jupyter_ktune.tuning.runners import precompile

    identity = compile_identity(spec)
    configs = configs_ahead(spec, limits) if configs is None else configs
    with _lock:
        held = _sent.get(pool)
        if held is None or held[0] != identity:
            _cancel(held)
            held = _sent[pool] = (identity, {})
        futures, sent = held[1], 0
        for c in configs:
            f = futures.get(c)
            if f is TAKEN or f is not None and not (f.cancelled() or (f.done() and f.exception())):
                continue
            # ahead=False: the compile builds the launcher too (Triton's cache holds it after
            # the cell's first run, so this is a cache hit), no sweep's launcher task to wait on
            futures[c] = pool.submit(precompile, cloudpickle.dumps((spec, c, False, hints)))
            sent += 1
    return sent


def send_soon(pool: cf.ProcessPoolExecutor | None, spec: KernelSpec,
              limits: Mapping[str, Any] | None = None,
              then: Callable[[list[Config]], None] | None = None,
              launcher_of: Config | None = None) -> None:
    """:func:`send` on a thread of its own: listing a space's valid configs takes up to 0.2 s
    (``space.COUNT_EXACTLY``), which the cell's first result should not wait for. Once sent,
    ``then(configs)`` (the panel's session: ``TuningSession.compiled_elsewhere``, so the
    device worker does not compile them again). They are sent once the pool hints are known
    (:func:`hints_before_ahead`). ``launcher_of``: the config whose run launched before its
    host launcher was built (a panel's first, on Triton 3.6): that launcher is built first,
    so the panel's next runs find it. Off with ``KTUNE_COMPILE_AHEAD=0`` (to compare, or to
    keep the CPUs for something else)."""
    if pool is None or os.environ.get(AHEAD_ENV, "1") == "0":
        return

    def go() -> None:
        from jupyter_ktune.backends import get_backend
        from jupyter_ktune.tuning.runners import launcher_ahead

        try:
            configs = configs_ahead(spec, limits)
            backend = get_backend(spec.backend) if launcher_of is not None else None
            launcher = backend is not None and backend.builds_launcher_ahead \
                and backend.quick_launch()  # the first run launched without it (worker.py)
            hints = hints_before_ahead(pool, spec) if configs or launcher else None
            if launcher:
                pool.submit(launcher_ahead, cloudpickle.dumps((spec, launcher_of, hints)))
            send(pool, spec, limits, configs, hints)
            if then is not None and configs:
                then(configs)
        except Exception:  # noqa: BLE001 - a head start only: the sweep compiles as before
            logging.getLogger(__name__).debug("no compiles sent ahead", exc_info=True)

    threading.Thread(target=go, name="ktune-compile-ahead", daemon=True).start()


def take(pool: Any, spec: KernelSpec, config: Config) -> cf.Future | None:
    """The compile of ``config`` sent ahead for ``spec`` on ``pool``, once (the sweep that
    takes it owns it); None where none was sent, or it was cancelled or failed to run (the
    sweep then sends its own). A sweep of another cell cancels the compiles still queued for
    the one sent ahead at its first call, before it sends its own: they would hold the pool's
    processes ahead of them."""
    identity = compile_identity(spec)
    with _lock:
        held = _sent.get(pool)
        if held is not None and held[0] != identity:
            _cancel(_sent.pop(pool))  # another cell's, queued ahead of this sweep's compiles
            held = None
        if held is None:  # the sweep compiles it: a send still waiting for hints skips it
            held = _sent[pool] = (identity, {})
        f = held[1].get(config)
        held[1][config] = TAKEN  # the cell run again unedited does not send it again
    if f is None or f.cancelled() or (f.done() and f.exception() is not None):
        return None
    return f


#: How long the compiles sent ahead wait for the pool hints (the device worker's, after the
#: cell's first result, or the pool task's): without them each of 8 processes drew fla's
#: 4096^2 operands itself, beside the worker's first run (5.6 s summed on the H200,
#: eec153a:bench/results/first_minute/2026-12-06-0056). Past it they go without, as before.
AHEAD_HINTS_WAIT_S = 20.0


def hints_before_ahead(pool: cf.ProcessPoolExecutor, spec: KernelSpec) -> Any:
    """The pool hints of ``spec`` for its compiles ahead, waited for up to
    :data:`AHEAD_HINTS_WAIT_S`; None where its backend shares none, or they did not come."""
    from jupyter_ktune.backends import get_backend
    from jupyter_ktune.tuning.pool_warm import hints_for, read_hints

    if not get_backend(spec.backend).shares_pool_hints:
        return None
    return read_hints(hints_for(pool, spec), AHEAD_HINTS_WAIT_S)


def pending(pool: Any) -> int:
    """How many compiles sent ahead on ``pool`` are not back yet."""
    with _lock:
        held = _sent.get(pool)
        return 0 if held is None else sum(not f.done() for f in held[1].values())  # TAKEN: done


def _cancel(held: tuple[tuple, dict[Config, cf.Future]] | None) -> None:
    for f in (held[1].values() if held is not None else ()):
        f.cancel()  # a queued one; one already compiling finishes and is dropped
