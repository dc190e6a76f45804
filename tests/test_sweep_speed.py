"""Where a sweep's time goes (issue 21): the reference once per input set and ahead, racing,
strategies that walk a huge space lazily."""

from __future__ import annotations

import math
import os
import time

import numpy as np
import pytest

from jupyter_ktune.api import parse_cell
from jupyter_ktune.measure.timing import TimingPlan, time_kernel
from jupyter_ktune.space import Constraint, Param, Space
from jupyter_ktune.tuning import search, tune

# 16 configs; the kernel is a plain copy with a config-dependent busy wait
SRC = """# ktune: BLOCK in [1, 2, 4, 8]; VEC in [1, 2, 4, 8]
import time
def scale(x, y, n):
    t = time.perf_counter() + 2e-5 * (1 + abs(BLOCK - 4) + abs(VEC - 2)) ** 2
    while time.perf_counter() < t:
        pass
    y[:] = 2 * x
"""
LINE = "scale --backend fake --inputs inputs --reference reference --out y --budget-ms 3"


def counting_io(log, slow_s=0.0):
    """An inputs function and a reference that append a line to ``log`` per call (from any
    process); the reference holds a list comprehension, whose nested code object once made the
    worker's input-set key change on every request (so the reference ran per config)."""

    def inputs():
        with open(log, "a") as f:
            f.write("inputs\n")
        x = np.random.rand(256)
        return dict(x=x, y=np.empty_like(x), n=256)

    def reference(x, y, n):
        with open(log, "a") as f:
            f.write("reference\n")
        time.sleep(slow_s)
        return np.concatenate([2 * part for part in (x[:128], x[128:])])

    return {"inputs": inputs, "reference": reference}


def calls(log):
    lines = open(log).read().split() if os.path.exists(log) else []
    return lines.count("inputs"), lines.count("reference")


def test_the_reference_runs_once_per_input_set_over_a_sweep(worker, tmp_path):
    log = str(tmp_path / "calls.txt")
    spec = parse_cell(LINE, SRC, counting_io(log))
    report = tune(spec, "exhaustive", store=tmp_path / "s.sqlite", workers=[worker], top_k=0)
    assert len(report.evaluations) == 16 and report.best is not None
    n_inputs, n_ref = calls(log)
    # sets used: ceil(16 / REDRAW_EVERY) = 2, plus the one being drawn ahead
    assert n_ref == n_inputs and 1 <= n_inputs <= 3, (n_inputs, n_ref)


def test_a_slow_reference_is_not_inside_any_configs_run(worker, tmp_path):
    log = str(tmp_path / "calls.txt")
    spec = parse_cell(LINE + " --budget-ms 2", SRC, counting_io(log, slow_s=0.4))
    report = tune(spec, "exhaustive", budget=10, store=tmp_path / "s.sqlite",
                  workers=[worker], top_k=0)
    assert report.info["prepare_ms"]["reference"] >= 400  # paid once, in a request of its own
    for e in report.evaluations:
        phases = e.result.extra["phases_ms"]
        assert phases["reference"] < 100, phases
        assert sum(phases.values()) < 300, phases  # nor in inputs/verify: nothing waits for it
    n_inputs, n_ref = calls(log)
    assert n_ref == n_inputs <= 3


class ScriptedTimer:
    """A fake device whose kernel takes ``ms`` (with a seeded jitter): times under control."""

    name = "scripted (test)"
    l2_flush_bytes = 0

    def __init__(self, ms, jitter=0.01, seed=0):
        self.ms, self.jitter, self.rng, self.now = ms, jitter, np.random.default_rng(seed), 0.0

    def launch(self):
        self.now = self.ms * (1 + self.jitter * self.rng.standard_normal())

    def empty_launch(self):
        self.now = 0.001

    def synchronize(self): pass
    def new_event(self): return []
    def record(self, e): e.append(self.now)
    def elapsed_ms(self, s, e): return e[0]
    def flush_l2(self): pass
    def graph_ms(self, launch, n): return None
    def kernel_clock(self): return "scripted"


def runs(ms, race_ms):
    timer = ScriptedTimer(ms)
    plan = TimingPlan(budget_ms=1e6, rel_precision=1e-9, min_runs=10, max_runs=400,
                      race_ms=race_ms)
    return time_kernel(timer.launch, timer, plan)


def test_racing_stops_a_clearly_slower_config_early_and_times_a_close_one_in_full():
    slow, close, alone = runs(1.5, race_ms=1.0), runs(1.01, race_ms=1.0), runs(1.5, None)
    assert alone.n == 400 and close.n == 400   # the cap: the precision asked for is never met
    assert slow.n <= 400 / 4 and "raced: stopped after" in slow.method
    assert "raced" not in close.method and "raced" not in alone.method
    assert slow.median_ms == pytest.approx(1.5, rel=0.02)  # still its own time, just coarser


def test_a_sweep_races_its_configs_against_the_best_so_far(worker, tmp_path):
    spec = parse_cell(LINE.replace("--budget-ms 3", "--budget-ms 40"), SRC,
                      counting_io(str(tmp_path / "c.txt")))
    report = tune(spec, "exhaustive", store=tmp_path / "s.sqlite", workers=[worker], top_k=0)
    raced = [e.result for e in report.evaluations if "raced" in (e.result.method or "")]
    worst = max((e.result for e in report.evaluations), key=lambda r: r.median_ms)
    assert raced and worst in raced
    assert report.best not in raced and report.best.config == {"BLOCK": 4, "VEC": 2}


def huge_space():
    """12 parameters of 10 values: 10**12 configs, a constraint that allows about half."""
    params = tuple(Param(f"P{i}", tuple(range(1, 11))) for i in range(12))
    return Space(params, (Constraint("P0 + P1 <= 12"),))


@pytest.mark.parametrize("name", sorted(search.STRATEGIES))
def test_strategies_start_on_a_space_of_a_trillion_configs_in_under_a_second(name):
    if name == "tpe":
        pytest.importorskip("optuna")
    space = huge_space()
    assert space.size == 10 ** 12
    t0 = time.perf_counter()
    s = search.make_strategy(name, space)
    asked = [s.ask() for _ in range(5)]
    for c in asked:
        s.tell(c, float(sum(c.values())))
    asked.append(s.ask())
    assert time.perf_counter() - t0 < 1.0
    assert all(c is not None and not space.violations(c) for c in asked)
    assert len(set(asked)) == 6 and not s.count.exact
    assert math.isclose(s.n_valid, 0.66 * 10 ** 12, rel_tol=0.1)  # 66 of 100 (P0, P1) pairs


def test_a_reference_written_with_a_device_array_api_stays_in_the_worker():
    import types

    from jupyter_ktune.runner.device_modules import uses_device_arrays

    fake_torch = types.ModuleType("torch")
    ns = {"torch": fake_torch, "np": np}
    exec("def on_device(x, y, n):\n    return torch.matmul(x, x)\n"
         "def in_comprehension(x, y, n):\n    return [torch.abs(v) for v in x]\n"
         "def on_host(x, y, n):\n    return np.stack([2 * v for v in x])\n", ns)
    assert uses_device_arrays(ns["on_device"]) and uses_device_arrays(ns["in_comprehension"])
    assert not uses_device_arrays(ns["on_host"])


def test_an_edited_kernel_starts_from_the_previous_versions_best_configs(worker, tmp_path):
    ns, store = counting_io(str(tmp_path / "c.txt")), tmp_path / "s.sqlite"
    cold = tune(parse_cell(LINE, SRC, ns), "random", store=store, workers=[worker], top_k=0,
                seed=3)
    assert cold.warm is None
    old_top = [r.config for r in cold.ranked[:4]]
    edited = SRC.replace("y[:] = 2 * x", "y[:] = x + x  # a one-line edit")
    warm = tune(parse_cell(LINE, edited, ns), "random", budget=6, store=store,
                workers=[worker], top_k=0, seed=3)
    assert not any(e.cached for e in warm.evaluations)  # timed afresh, never reused
    assert [e.result.config for e in warm.evaluations[:4]] == old_top
    assert warm.warm is not None and warm.warm.old_best == old_top[0]
    assert f"its best {old_top[0].label()} is now #" in warm.summary()
    off = tune(parse_cell(LINE, edited.replace("x + x", "x * 2"), ns), "random", budget=4,
               store=store, workers=[worker], top_k=0, seed=3, warm_start=0)
    assert off.warm is None


def test_spearman_rank_correlation_and_the_move_text():
    from jupyter_ktune.space import Config
    from jupyter_ktune.tuning.warm import WarmStart, spearman

    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    cs = [Config({"B": b}) for b in (1, 2, 3, 4)]
    moved = WarmStart("abc", tuple(cs), (1.0, 2.0, 3.0, 4.0)).moved(
        {cs[0]: 3.5, cs[1]: 1.0, cs[2]: 2.0, cs[3]: 4.0})
    assert moved.old_best_now == 3 and moved.compared == 4
    assert "its best B=1 is now #3" in moved.text() and "Spearman" in moved.text()


def test_a_config_whose_static_shared_memory_exceeds_the_device_is_never_launched(tmp_path):
    from jupyter_ktune.results import Status
    from jupyter_ktune.tuning.static_limits import static_excess

    src = SRC.replace("import time\n", "import time\n# static smem: BLOCK * 200\n")
    spec = parse_cell(LINE, src, counting_io(str(tmp_path / "c.txt")))
    report = tune(spec, "exhaustive", store=tmp_path / "s.sqlite", top_k=0, compile_workers=2)
    skipped = [e.result for e in report.evaluations if e.result.status is Status.OUT_OF_RESOURCES]
    assert sorted(r.config["VEC"] for r in skipped) == [1, 2, 4, 8]
    assert all(r.config["BLOCK"] == 8 and r.times_ms is None for r in skipped)
    assert skipped[0].reason == "[ktune] static: 1,600 B shared memory > 1,000 B per block"
    assert report.counts[Status.OK.value] == 12
    from types import SimpleNamespace as NS
    regs = NS(kernels={"k": NS(smem_static=0, registers=255)}, threads_per_block=512)
    assert static_excess(regs, {"REGS_PER_SM": 65536}) == \
        "static: 255 registers x 512 threads = 130,560 > 65,536 registers per SM"
    assert static_excess(regs, {"REGS_PER_SM": 65536 * 2}) is None


def stuck_launcher_build(blob):
    """A pool task standing for a launcher build that hangs (gcc stuck, a full disk)."""
    time.sleep(40)
    return False, 40.0


COPY = """# ktune: BLOCK in [32, 64]; grid = (triton.cdiv(n, BLOCK),)
import triton
import triton.language as tl

@triton.jit
def copy(x, y, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y + offs, tl.load(x + offs, mask=offs < n), mask=offs < n)
"""


@pytest.mark.parametrize("quick", [False, True], ids=["held", "quick launch"])
def test_a_stuck_launcher_build_holds_the_first_run_only_until_its_wait_runs_out(
        tmp_path, monkeypatch, stopped_pools, quick):
    """A worker that needs the launcher waits for its build (at most LAUNCHER_WAIT_S); one
    that can launch without it (Triton 3.6: backends/triton/direct_launch.py) is not held, and
    its runs go out marked quick."""
    from jupyter_ktune.backends.triton.backend import TritonBackend
    from jupyter_ktune.tuning import runners, sweep

    def io():
        x = np.random.rand(100).astype(np.float32)
        return dict(x=x, y=np.empty_like(x), n=100)

    sent, real_on = [], runners.LocalRunner._on

    def on(w, spec, config, static, race_ms, quick=False):
        sent.append(quick)
        return real_on(w, spec, config, static, race_ms, quick)

    monkeypatch.setattr(runners.LocalRunner, "_on", staticmethod(on))
    monkeypatch.setattr(TritonBackend, "quick_launch", lambda self: quick)
    monkeypatch.setattr(sweep, "launcher_ahead", stuck_launcher_build)
    monkeypatch.setattr(sweep, "LAUNCHER_WAIT_S", 8.0)
    spec = parse_cell("copy --backend triton --inputs io --reference ref --out y --budget-ms 2",
                      COPY, {"io": io, "ref": lambda x, y, n: x})
    report = tune(spec, "exhaustive", store=tmp_path / "s.sqlite", top_k=0, compile_workers=3)
    assert [e.result.status.value for e in report.evaluations] == ["ok", "ok"]
    first_run = min(at for at, kind, _ in report.info["timeline"] if kind == "run sent")
    if quick:  # sent as soon as compiled, before the build is done: quick
        back = min(at for at, kind, _ in report.info["timeline"] if kind == "compile back")
        assert first_run - back < 2.0 and sent == [True, True], report.info["timeline"]
    else:  # held for the wait (8 s of sweep time), not for the stuck task (40 s)
        assert 8.0 <= first_run < 30.0 and sent == [False, False], report.info["timeline"]
    assert report.info["launcher_ahead"] is None  # and says the launcher was not built ahead


def test_the_pool_compiles_while_the_first_inputs_and_reference_are_drawn(tmp_path):
    """The first input set and its reference (a slow one here: 4 s) are drawn while the pool
    compiles the first configs, and no run is sent before they are ready (issue 21: on Kernel
    Tuner's convolution they held back the first compile by 6 s)."""
    log = str(tmp_path / "calls.txt")
    spec = parse_cell(LINE, SRC, counting_io(log, slow_s=4.0))
    report = tune(spec, "exhaustive", store=tmp_path / "s.sqlite", top_k=0, compile_workers=2)
    rows = report.info["timeline"]
    first = {kind: min(at for at, k, _ in rows if k == kind) for kind in
             ("compile sent", "compile back", "inputs ready", "run sent")}
    assert first["compile sent"] < 1.0, rows
    assert first["compile back"] < first["inputs ready"], rows  # compiled while drawn
    assert first["inputs ready"] >= 4.0 and first["run sent"] >= first["inputs ready"], rows
    n_inputs, n_ref = calls(log)
    assert len(report.evaluations) == 16 and n_ref == n_inputs <= 3
