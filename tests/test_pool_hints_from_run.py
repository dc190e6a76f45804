"""The argument types a Triton cell's compiles share come from the input set a run drew.

On the H200, fla's Autotune waited 3.69 s for its first result: eight compile-pool processes each
called the cell's ``inputs()`` (two 4096^2 fp16 operands) only to read the argument types,
5.6 s summed, and the worker's first run drew its set twice, once for the run and once for its
build's types (eec153a:bench/results/first_minute/2026-12-06-0056). Here one set serves: the
worker's build takes the run's set (``user_code.any_inputs``), the panel asks the worker for those
types after the first result (``pool_warm.learn_from_worker``), and the compiles sent ahead or
by the sweep carry them, the arrays as stand-ins that pickle without their data.
"""

from __future__ import annotations

import concurrent.futures as cf
import os
import threading
import time

import cloudpickle
import numpy as np
import pytest

from jupyter_ktune.api import parse_cell
from jupyter_ktune.space import Config
from jupyter_ktune.tuning import compile_ahead, pool_warm
from jupyter_ktune.user_code import any_inputs, call_inputs

ADD = ("# ktune: BLOCK in [256, 512]; grid = (cdiv(n, BLOCK),)\n@triton.jit\n"
       "def add(x, y, n, BLOCK: tl.constexpr):\n"
       "    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
       "    tl.store(y + o, tl.load(x + o, mask=o < n), mask=o < n)\n")


def logged_inputs(log: str, n: int = 4096, dtype: str = "float32", pause_s: float = 0.3) -> dict:
    """An inputs function (and a reference) that write the drawing process's pid to ``log``."""
    namespace = {"np": np}
    exec(f"def inputs():\n"
         f"    import os, time\n"
         f"    with open({log!r}, 'a') as f:\n"
         f"        f.write(f'{{os.getpid()}}\\n')\n"
         f"    time.sleep({pause_s})\n"
         f"    x = np.random.rand({n}).astype(np.{dtype})\n"
         f"    return dict(x=x, y=np.empty_like(x), n={n})\n"
         f"def reference(x, n, **_):\n"
         f"    return x\n", namespace)
    return namespace


def drawn_by(log: str) -> list[int]:
    return [int(line) for line in open(log).read().split()] if os.path.exists(log) else []


def triton_spec(namespace: dict):
    pytest.importorskip("triton")
    pytest.importorskip("torch")
    return parse_cell("add --backend triton --inputs inputs --reference reference --out y",
                      ADD, namespace)


def test_a_first_run_draws_one_set_in_the_worker_and_its_types_come_back(tmp_path):
    """The run's set and its build's types were two draws at once in the worker (its static
    report's thread called ``inputs()`` too); the helper that draws the next set ahead is
    another process and stays."""
    from jupyter_ktune.runner.client import DeviceWorker

    log = str(tmp_path / "drawn.txt")
    spec = triton_spec(logged_inputs(log))
    with DeviceWorker() as worker:
        result = worker.run(spec, Config({"BLOCK": 256}))
        assert result.status.value == "ok", result.reason
        assert result.static is not None  # the types were read: the sm_90 report is built
        blob = worker.call(pool_warm.known_hints, spec)
        pid = worker.pid
    assert drawn_by(log).count(pid) == 1, drawn_by(log)
    types, aligned, given = cloudpickle.loads(blob)
    assert types == {"x": "*fp32", "y": "*fp32", "n": "i32"} and {"x", "y"} <= aligned
    assert given["n"] == 4096 and given["x"].shape == (4096,) and given["x"].dtype == np.float32


def test_the_hints_travel_without_the_arrays_data():
    """Handed to each compile, the types' input set travelled whole: 96 MB per compile for a
    4096^2 product. The stand-ins keep dtype, shape and strides (what a compile reads)."""
    from jupyter_ktune.backends.triton.argument_types import UnfilledArray, light

    a = np.random.rand(2048, 2048).astype(np.float16)
    given = {"a": a, "at": a.T, "n": 2048, "flag": None}
    blob = cloudpickle.dumps(light(({}, set(), given)))
    assert len(blob) < 2000, len(blob)
    back = cloudpickle.loads(blob)[2]
    for name in ("a", "at"):
        assert isinstance(back[name], UnfilledArray)
        assert (back[name].shape, back[name].dtype, back[name].strides) == \
            (given[name].shape, given[name].dtype, given[name].strides)
    assert back["n"] == 2048 and back["flag"] is None
    torch = pytest.importorskip("torch")
    t = torch.zeros(64, 32, dtype=torch.bfloat16).t()
    moved = cloudpickle.loads(cloudpickle.dumps(light(({}, set(), {"t": t}))))[2]["t"]
    assert moved.device.type == "meta" and moved.dtype == torch.bfloat16
    assert tuple(moved.shape) == (32, 64) and moved.stride() == t.stride()


def test_a_pool_compile_given_the_hints_draws_no_inputs(tmp_path):
    """A real sm_90 compile in a pool process, seeded with the worker's (light) hints: it
    compiles, and its process never calls ``inputs()``; without them it draws one set."""
    from jupyter_ktune.backends.triton.backend import TritonBackend
    from jupyter_ktune.backends.triton.cell import check_cell
    from jupyter_ktune.tuning.pool import unpack_precompiled
    from jupyter_ktune.tuning.runners import precompile

    log = str(tmp_path / "drawn.txt")
    spec = triton_spec(logged_inputs(log, pause_s=0.0))
    hints = TritonBackend()._argument_types(spec, check_cell(spec), object(), {})
    assert drawn_by(log) == [os.getpid()]  # the hints: read here, from one set
    ctx = __import__("multiprocessing").get_context("spawn")
    with cf.ProcessPoolExecutor(1, mp_context=ctx) as pool:
        seeded = pool.submit(precompile, cloudpickle.dumps(
            (spec, Config({"BLOCK": 256}), False, hints)))
        seeded.result(timeout=300)
        static, _phases = unpack_precompiled(seeded)
        assert static.kernels["add"].registers > 0, static
        assert drawn_by(log) == [os.getpid()]
    with cf.ProcessPoolExecutor(1, mp_context=ctx) as pool:  # a process that has none kept
        pool.submit(precompile, cloudpickle.dumps(
            (spec, Config({"BLOCK": 512}), False, None))).result(timeout=300)
    assert len(drawn_by(log)) == 2  # without hints, the pool process drew its own


class Pool:
    """Counts the tasks sent; each stays queued until ``finish``."""

    def __init__(self) -> None:
        self.sent: list[cf.Future] = []

    def submit(self, fn, *args) -> cf.Future:
        self.sent.append(cf.Future())
        return self.sent[-1]


def _sent(pool: Pool, n: int, timeout_s: float = 10.0) -> bool:
    """Whether ``pool`` got ``n`` tasks (``pool.submit_soon`` submits them on a thread), and
    no more after a moment."""
    deadline = time.monotonic() + timeout_s
    while len(pool.sent) < n and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.05)
    return len(pool.sent) == n


def fake_spec(n: int):
    namespace: dict = {}
    exec(f"def inputs():\n    return dict(n={n})\n", namespace)
    return parse_cell("k --backend fake --inputs inputs", "# ktune: B in [1, 2]\n"
                      "def k(x, y):\n    y[:] = x\n", namespace)


def test_hints_learnt_from_the_worker_answer_at_once_and_are_kept():
    spec = fake_spec(4096)
    worker_hints = cloudpickle.dumps(({"x": "*fp16"}, set(), {"n": 4096}))
    pool = Pool()
    sent = pool_warm.hints_for(pool, spec)  # the pool task: still running
    assert _sent(pool, 1) and pool_warm.read_hints(sent) is None
    pool_warm.learn_hints(spec, worker_hints)
    assert pool_warm.read_hints(sent) == ({"x": "*fp16"}, set(), {"n": 4096})
    pool.sent[0].set_result(cloudpickle.dumps(({"x": "*fp32"}, set(), {})))  # late: ignored
    again = pool_warm.hints_for(pool, spec)
    assert _sent(pool, 1) and pool_warm.read_hints(again)[0] == {"x": "*fp16"}

    other = fake_spec(8192)  # a failed pool task is replaced by the worker's
    failed = pool_warm.hints_for(pool, other)
    assert _sent(pool, 2)
    pool.sent[-1].set_exception(RuntimeError("pool shut down"))
    assert pool_warm.read_hints(failed) is None
    pool_warm.learn_hints(other, worker_hints)
    assert pool_warm.read_hints(pool_warm.hints_for(pool, other))[0] == {"x": "*fp16"}
    pool_warm.learn_hints(fake_spec(1), None)  # none known (no GPU build): nothing kept
    assert pool_warm.read_hints(pool_warm.hints_for(pool, fake_spec(1))) is None


def test_compiles_wait_for_hints_on_their_way():
    """The sweep's first compile waits up to HINTS_WAIT_S for them, the later ones not; the
    compiles sent ahead wait too (fake backend: it shares no hints, so it never waits)."""
    from jupyter_ktune.tuning.sweep import Sweep

    coming: cf.Future = cf.Future()
    threading.Timer(0.3, coming.set_result, [cloudpickle.dumps("the types")]).start()
    sweep = Sweep.__new__(Sweep)
    sweep._hints, sweep._hints_wait_s = coming, pool_warm.HINTS_WAIT_S
    t0 = time.perf_counter()
    assert sweep._read_hints() == "the types" and time.perf_counter() - t0 < 1.5
    late: cf.Future = cf.Future()
    sweep._hints = late  # the wait is spent: the next compiles go without
    t0 = time.perf_counter()
    assert sweep._read_hints() is None and sweep._read_hints() is None
    assert time.perf_counter() - t0 < 0.1
    assert compile_ahead.hints_before_ahead(Pool(), fake_spec(3)) is None


def test_a_config_the_sweep_compiled_itself_is_not_sent_ahead_after():
    """A press while the compiles ahead still wait for hints: the sweep sends its own, and
    the send that follows skips them (they would have been compiled twice)."""
    pool, spec = Pool(), fake_spec(5)
    assert compile_ahead.take(pool, spec, Config({"B": 1})) is None
    sent = compile_ahead.send(pool, spec, configs=[Config({"B": 1}), Config({"B": 2})],
                              hints="the types")
    assert sent == 1 and len(pool.sent) == 1


def test_overlapping_calls_of_one_inputs_function_share_one_draw():
    calls: list[int] = []

    def inputs():
        calls.append(1)
        time.sleep(0.3)
        return {"x": np.random.rand(8)}

    got: list = []
    threads = [threading.Thread(target=lambda: got.append(call_inputs(inputs, keep=True)))
               for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1 and got[0] is got[1]
    assert any_inputs(inputs) is got[0]  # kept: the types reader draws nothing
    assert call_inputs(inputs) is not got[0] and len(calls) == 2  # a later run: a fresh draw

    def broken():
        time.sleep(0.2)
        raise ValueError("no such file")

    errors: list = []

    def call() -> None:
        try:
            call_inputs(broken)
        except Exception as exc:  # noqa: BLE001
            errors.append(str(exc))
    threads = [threading.Thread(target=call) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(errors) == 2 and all("no such file" in e for e in errors)


def test_the_panel_asks_the_worker_once_its_first_result_is_shown():
    """``ui.start.panel_for`` (a GPU's pool only: none on this machine, so read in its code):
    the types are asked for after the first result, never before it (the run draws the set)."""
    import inspect

    from jupyter_ktune.ui import start

    body = inspect.getsource(start.panel_for)
    assert body.index("panel.shown()") < body.index("learn_from_worker(worker, spec)")
