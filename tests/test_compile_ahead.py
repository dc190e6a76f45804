"""The pool compiles a cell's configs once the cell runs, and Autotune takes those compiles.

In the notebook's order (cell, then Autotune) the press waited for compiles whose every input
was known when the cell ran: fla's softmax 0.30-0.55 s of a 6-config sweep, the 30-config
activation lists their 9-18 s slowest compile
(``0d9de0a^:bench/results/corpus_vs_autotune/2026-12-04-2007``, and
``5072c19^:bench/results/corpus_vs_autotune/2026-12-01-1046`` for the ptxas times).
"""

from __future__ import annotations

import concurrent.futures as cf
from types import SimpleNamespace

import pytest
from test_sass_later import StandInWorker, stand_in_session
from test_sweep_speed import LINE, SRC, counting_io

from jupyter_ktune.api import parse_cell
from jupyter_ktune.space import Config
from jupyter_ktune.tuning import compile_ahead, tune
from jupyter_ktune.tuning.pool import shared_pool, unpack_precompiled


class QueuedPool:
    """A pool whose tasks stay queued: what was sent, and whether it was cancelled."""

    def __init__(self) -> None:
        self.sent: list[cf.Future] = []

    def submit(self, fn, blob) -> cf.Future:
        self.sent.append(cf.Future())
        return self.sent[-1]


def spec_of(tmp_path, src: str = SRC):
    return parse_cell(LINE, src, counting_io(str(tmp_path / "calls.txt")))


def test_every_config_of_a_small_space_is_sent_once(tmp_path):
    pool, spec = QueuedPool(), spec_of(tmp_path)
    assert compile_ahead.send(pool, spec) == 16
    assert compile_ahead.send(pool, spec) == 0  # the cell run again, unedited: nothing new
    assert compile_ahead.pending(pool) == 16
    c = Config({"BLOCK": 4, "VEC": 2})
    taken = compile_ahead.take(pool, spec, c)
    assert taken is not None and taken in pool.sent
    assert compile_ahead.take(pool, spec, c) is None  # the sweep that took it owns it


def test_an_edited_cell_cancels_the_compiles_still_queued_for_the_old_one(tmp_path):
    pool, old = QueuedPool(), spec_of(tmp_path)
    compile_ahead.send(pool, old)
    new = spec_of(tmp_path, SRC.replace("y[:] = 2 * x", "y[:] = x + x"))
    assert compile_ahead.send(pool, new) == 16
    assert all(f.cancelled() for f in pool.sent[:16]) and not any(
        f.cancelled() for f in pool.sent[16:])
    c = Config({"BLOCK": 1, "VEC": 1})
    # a sweep of the old cell (another panel): the new one's compiles would queue before its own
    assert compile_ahead.take(pool, old, c) is None
    assert all(f.cancelled() for f in pool.sent[16:])
    assert compile_ahead.take(pool, new, c) is None


def test_a_large_space_is_not_compiled_ahead(tmp_path):
    many = ("# ktune: BLOCK in [1, 2, 4, 8, 16, 32, 64, 128, 256]; "
            "VEC in [1, 2, 4, 8, 16, 32, 64, 128]")
    src = many + "\n" + SRC.split("\n", 1)[1]
    pool = QueuedPool()
    assert compile_ahead.send(pool, spec_of(tmp_path, src)) == 0  # 72 configs: searched
    assert compile_ahead.AHEAD_UP_TO == 64


def test_a_failed_or_cancelled_compile_is_not_taken(tmp_path):
    pool, spec = QueuedPool(), spec_of(tmp_path)
    compile_ahead.send(pool, spec)
    a, b = Config({"BLOCK": 1, "VEC": 1}), Config({"BLOCK": 1, "VEC": 2})
    futures = dict(zip(compile_ahead.configs_ahead(spec), pool.sent, strict=True))
    futures[a].set_exception(cf.BrokenExecutor("a pool process died"))
    futures[b].cancel()
    assert compile_ahead.take(pool, spec, a) is None and compile_ahead.take(pool, spec, b) is None
    assert compile_ahead.send(pool, spec) == 0  # both were taken (dropped): not resent


@pytest.mark.usefixtures("stopped_pools")
def test_the_sweep_takes_the_compiles_sent_when_the_cell_ran(worker, tmp_path, monkeypatch):
    src = SRC.replace("import time\n", "import time\n# static smem: BLOCK * 200\n")
    spec = spec_of(tmp_path, src)
    pool = shared_pool(2, spec.backend)  # the sweep's own (the same key: compile_workers=2)
    assert compile_ahead.send(pool, spec) == 16
    cf.wait([f for _, (_, fs) in compile_ahead._sent.items() for f in fs.values()], timeout=120)
    static, _ = unpack_precompiled(compile_ahead._sent[pool][1][Config({"BLOCK": 8, "VEC": 1})])
    assert static.kernels["scale"].smem_static == 1600  # a real compile, in a pool process
    sent = []
    submit = pool.submit
    monkeypatch.setattr(pool, "submit", lambda fn, *a: sent.append(fn.__name__) or submit(fn, *a))
    report = tune(spec, "exhaustive", store=tmp_path / "s.sqlite", workers=[worker], top_k=0,
                  compile_workers=2)
    assert report.info["compiled_ahead"] == 16
    assert "precompile" not in sent, sent  # not one config compiled twice
    # the static reports taken are the ones the sweep acts on: BLOCK=8 is over the 1,000 B
    skipped = [e.result for e in report.evaluations if e.result.status.value != "ok"]
    assert sorted(r.config["VEC"] for r in skipped) == [1, 2, 4, 8]
    assert report.counts["ok"] == 12


def test_the_panel_sends_them_once_its_limits_are_known(monkeypatch):
    """``ui.start.panel_for``: the pool warmed, then the compiles sent on a thread of their own
    (listing a space takes up to 0.2 s, which the first result does not wait for), and the
    session told which configs the pool has."""
    import threading

    calls: list = []
    told: list = []
    done = threading.Event()
    listed = [Config({"VEC": 1}), Config({"VEC": 2})]

    def send(pool, spec, limits=None, configs=None, hints=None):
        calls.append((pool, limits, configs, threading.current_thread().name, hints))

    monkeypatch.setattr(compile_ahead, "configs_ahead", lambda spec, limits: listed)
    monkeypatch.setattr(compile_ahead, "send", send)
    monkeypatch.setattr(compile_ahead, "hints_before_ahead", lambda pool, spec: "the types")
    compile_ahead.send_soon(None, SimpleNamespace())  # no pool (no GPU here): nothing sent
    compile_ahead.send_soon("pool", SimpleNamespace(), {"N": 1},
                            then=lambda configs: (told.append(configs), done.set()))
    assert done.wait(10) and calls == [("pool", {"N": 1}, listed, "ktune-compile-ahead",
                                        "the types")]
    assert told == [listed]
    import inspect

    from jupyter_ktune.ui import start

    body = inspect.getsource(start.panel_for)
    assert body.index("warm_pool(spec, device)") < body.index("worker.limits(spec)") \
        < body.index("TuningSession(spec, worker, limits)") \
        < body.index("compile_ahead.send_soon(pool, spec, limits, then=told, launcher_of=first)") \
        < body.index("panel.shown()")
    assert "told = session.compiled_elsewhere if get_backend(spec.backend).pool_builds_cached" \
        in body


def test_only_a_backend_whose_pool_builds_the_worker_finds_leaves_them_to_the_pool():
    """Triton's pool fills the on-disk cache the worker's compile hits; the CUDA backend's nvcc
    build is kept per process, so a CUDA panel whose worker stopped prefetching would compile
    each slider step anew (nvcc 1.6-1.9 s) instead of finding it compiled."""
    from jupyter_ktune.backends import get_backend

    assert get_backend("triton").pool_builds_cached
    assert get_backend("cuda").precompile and not get_backend("cuda").pool_builds_cached


class CompileCounting(StandInWorker):
    """A stand-in worker that records the configs it is asked to prefetch."""

    def __init__(self) -> None:
        super().__init__()
        self.compiled: list[dict] = []

    def compile(self, spec, config, timeout=None):
        self.compiled.append(dict(config))


@pytest.mark.parametrize("elsewhere", [False, True])
def test_the_worker_does_not_prefetch_what_the_pool_compiles(elsewhere):
    """The worker's prefetch of a neighbour held every request behind its compile (ptxas 9-22 s
    for one config of fla's activations, bench/results/corpus_vs_autotune/2026-12-05-1506), an
    Autotune pressed meanwhile too; the pool compiles those configs already."""
    import time

    worker = CompileCounting()
    spec, session, config = stand_in_session(worker, prefetch=True)
    try:
        if elsewhere:
            session.compiled_elsewhere(spec.space.neighbours(config, session.limits))
        session.request(dict(config))
        assert session.wait_idle(10)
        time.sleep(0.5)  # the idle session prefetches what it may
        if elsewhere:
            assert worker.compiled == []
        else:  # without the pool's compiles the neighbours are prefetched, as before
            assert worker.compiled and all(c != dict(config) for c in worker.compiled)
        neighbour = spec.space.neighbours(config, session.limits)[0]
        session.request(dict(neighbour))
        assert session.wait_idle(10)
        # "precompiled" says what the worker compiled ahead, never what the pool was sent
        assert session.history[-1].precompiled is not elsewhere
    finally:
        session.close()
