"""Worker lifecycle: a variant that crashes, hangs or faults costs that variant only."""

from __future__ import annotations

import os
import time

import numpy as np
import pytest

from jupyter_ktune.api import parse_cell
from jupyter_ktune.results import Status
from jupyter_ktune.runner.client import DeviceWorker, WorkerDied


def inputs():
    x = np.random.rand(1000)
    return dict(x=x, y=np.empty_like(x), n=1000)


def reference(x, y, n):
    return 2 * x


GOOD = """# ktune: BLOCK in [1, 2, 4]
def scale(x, y, n):
    y[:] = 2 * x
"""
WRONG = """def scale(x, y, n):
    y[: n // 2] = 2 * x[: n // 2]   # leaves half the output unwritten
"""
CRASH = """import os
def scale(x, y, n):
    os.abort()
"""
HANG = """def scale(x, y, n):
    while True:
        pass
"""
FATAL = """def scale(x, y, n):
    raise FatalFault("illegal memory access (simulated)")
"""
RAISES = """def scale(x, y, n):
    raise IndexError("index 1000 is out of bounds")
"""
NS = {"inputs": inputs, "reference": reference}
LINE = "scale --backend fake --inputs inputs --reference reference --out y --budget-ms 5"


def spec(src, line=LINE):
    return parse_cell(line, src, NS)


def test_good_variant_is_verified_and_timed_with_provenance(worker):
    s = spec(GOOD)
    r = worker.run(s, s.space.config(BLOCK=2))
    assert r.status is Status.OK, r.reason
    assert r.verification.passed and r.verification.max_abs_err == 0
    t = r.measurement.timing
    assert t.n >= 10 and t.median_ms > 0
    assert "host perf_counter (fake backend)" in t.method
    assert r.measurement.provenance.source_hash == s.source_hash
    assert r.config == {"BLOCK": 2}


def test_unwritten_output_is_caught_by_poison(worker):
    r = worker.run(spec(WRONG), spec(WRONG).space.default())
    assert r.status is Status.WRONG
    (check,) = r.verification.checks
    assert check.unwritten == 500 and check.first_bad_index == (500,)
    assert "never written" in r.reason


def test_python_exception_is_a_runtime_error_and_the_worker_lives(worker):
    pid = worker.pid
    r = worker.run(spec(RAISES), spec(RAISES).space.default())
    assert r.status is Status.RUNTIME_ERROR and "IndexError" in r.reason
    assert worker.pid == pid


def test_crash_costs_one_variant_then_the_next_request_works(worker):
    before = worker.restarts
    r = worker.run(spec(CRASH), spec(CRASH).space.default())
    assert r.status is Status.CRASHED
    assert "SIGABRT" in r.reason
    assert worker.restarts == before + 1
    ok = worker.run(spec(GOOD), spec(GOOD).space.default())
    assert ok.status is Status.OK


def test_hang_is_killed_at_the_timeout_then_the_next_request_works(worker):
    t0 = time.perf_counter()
    r = worker.run(spec(HANG, LINE + " --timeout 2"), spec(HANG).space.default())
    assert r.status is Status.TIMEOUT
    assert time.perf_counter() - t0 < 10
    assert "2 s" in r.reason
    ok = worker.run(spec(GOOD), spec(GOOD).space.default())
    assert ok.status is Status.OK


def test_fatal_device_error_restarts_the_worker_after_answering(worker):
    pid = worker.pid
    r = worker.run(spec(FATAL), spec(FATAL).space.default())
    assert r.status is Status.RUNTIME_ERROR
    assert "illegal memory access" in r.reason and "worker restarted" in r.reason
    assert worker.pid != pid
    ok = worker.run(spec(GOOD), spec(GOOD).space.default())
    assert ok.status is Status.OK


def test_constraint_violation_is_not_allowed_and_never_runs(worker):
    src = "# ktune: BLOCK in [1, 2, 4]; require BLOCK * 400 <= SMEM_PER_BLOCK\n" + CRASH
    s = spec(src)
    r = worker.run(s, s.space.config(BLOCK=4))
    assert r.status is Status.NOT_ALLOWED and "BLOCK * 400 <= SMEM_PER_BLOCK" in r.reason


def test_all_zero_inputs_are_refused(worker):
    ns = {"inputs": lambda: dict(x=np.zeros(10), y=np.zeros(10), n=10), "reference": reference}
    s = parse_cell(LINE, GOOD, ns)
    r = worker.run(s, s.space.default())
    assert r.status is Status.RUNTIME_ERROR and "all zeros" in r.reason


def test_inputs_are_made_in_the_worker_from_notebook_functions(worker):
    # a closure over a notebook variable travels with cloudpickle
    size = 77
    ns = {"inputs": lambda: dict(x=np.random.rand(size), y=np.empty(size), n=size),
          "reference": reference}
    s = parse_cell(LINE, GOOD, ns)
    assert worker.run(s, s.space.default()).verification.checks[0].size == 77


def test_call_runs_in_another_process_and_errors_come_back():
    with DeviceWorker() as w:
        assert w.call(os.getpid) != os.getpid()
        with pytest.raises(Exception, match="ZeroDivisionError"):
            w.call(lambda: 1 / 0)
        with pytest.raises(WorkerDied):
            w.call(lambda: os._exit(7))
        assert w.call(lambda: 41 + 1) == 42


def test_worker_never_imports_device_libraries_in_the_notebook_process(tmp_path):
    """A fresh process stands for the notebook (this test process has imported JAX for the
    in-process Pallas tests): running a variant there imports no device library."""
    import subprocess
    import sys

    script = tmp_path / "notebook.py"
    script.write_text(
        "import sys\n"
        "import numpy as np\n"
        "from jupyter_ktune.runner.client import DeviceWorker\n"
        "from jupyter_ktune.api import parse_cell\n"
        "def inputs():\n"
        "    x = np.random.rand(64).astype(np.float32)\n"
        "    return dict(x=x, y=np.empty_like(x), n=64)\n"
        "def reference(x, y, n):\n"
        "    return 2 * x\n"
        f"s = parse_cell({LINE!r}, {GOOD!r}, dict(inputs=inputs, reference=reference))\n"
        "with DeviceWorker() as w:\n"
        "    r = w.run(s, s.space.default())\n"
        "print(r.status.value, sorted(m for m in ('cupy', 'jax', 'torch', 'triton')\n"
        "                            if m in sys.modules))\n")
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "ok []", out.stdout


def test_compile_request_caches_without_running(worker):
    s = spec(CRASH)  # would abort the worker if it ran
    pid = worker.pid
    r = worker.compile(s, s.space.default())
    assert r.status is Status.OK and r.reason == "compiled (not run)"
    assert r.measurement is None and worker.pid == pid


def test_runtime_compile_error_keeps_its_cell_line_diagnostics(worker):
    bad = "# ktune: BLOCK in [1]\ndef scale(x, y, n)\n    pass\n"  # cell line 3: missing colon
    r = worker.run(spec(bad), spec(bad).space.default())
    assert r.status is Status.COMPILE_ERROR
    assert [d.line for d in r.diagnostics] == [3] and "cell line 3" in r.reason


def test_one_input_set_serves_several_new_variants_then_is_redrawn(worker, tmp_path):
    import glob

    from jupyter_ktune.runner.execute import REDRAW_EVERY
    log = tmp_path / "calls"

    def counted_inputs():
        import os
        with open(log, "a") as f:
            f.write(f"{os.getpid()}\n")
        x = np.random.rand(100)
        return dict(x=x, y=np.empty_like(x), n=100)

    src = "# ktune: BLOCK in range(1, 12)\n" + GOOD.split("\n", 1)[1]
    s = parse_cell(LINE, src, {"inputs": counted_inputs, "reference": reference})
    results = [worker.run(s, c) for c in list(s.space.configs())[:REDRAW_EVERY + 2]]
    assert all(r.status is Status.OK for r in results)
    import time
    deadline = time.monotonic() + 30
    while len(log.read_text().split()) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)   # the third set is being drawn ahead
    drawn = [int(p) for p in log.read_text().split()]
    # the first set is drawn by the worker; the second, used after REDRAW_EVERY variants, was
    # drawn ahead by the helper process, which then starts on the third
    assert len(drawn) == 3 and drawn[0] == worker.pid
    assert drawn[1] == drawn[2] != worker.pid
    worker.close()   # killed with the third set pending: its client unlinks that set
    assert not glob.glob(f"/dev/shm/ktune_inputs_{drawn[0]}_*")


def test_only_host_input_sets_are_drawn_ahead():
    from jupyter_ktune.runner import inputs_ahead

    host = dict(x=np.ones(4, np.float32), n=4, scale=np.float32(2), name="x")
    assert inputs_ahead.host_only(host)
    device_like = type("Tensor", (), {"__module__": "torch"})()
    assert not inputs_ahead.host_only(dict(host, x=device_like))   # would launch GPU work
    assert not inputs_ahead.host_only(dict(host, x=np.ones(8)[::2]))   # strided: drawn in place
    old = inputs_ahead.MAX_BYTES
    try:
        inputs_ahead.MAX_BYTES = 8
        assert not inputs_ahead.host_only(host)   # 16 bytes of arrays: too large to hold twice
    finally:
        inputs_ahead.MAX_BYTES = old


def test_a_set_drawn_ahead_arrives_whole_and_leaves_no_shared_memory():
    import glob

    from jupyter_ktune.runner.inputs_ahead import InputsAhead

    def make():
        import ml_dtypes
        rng = np.random.default_rng()
        return dict(a=rng.standard_normal((64, 32), dtype=np.float32).astype(ml_dtypes.bfloat16),
                    t=np.arange(12, dtype=np.int64).reshape(3, 4).T, n=7, s=np.float32(0.5))

    before = set(glob.glob("/dev/shm/ktune_inputs_*"))
    ahead = InputsAhead()
    try:
        ahead.start("k", make)
        drawn = ahead.take_set("k")
        got = drawn.args if drawn is not None else None
        assert got is not None and got["n"] == 7 and got["s"] == np.float32(0.5)
        assert got["a"].dtype.name == "bfloat16" and got["a"].shape == (64, 32)
        assert np.isfinite(got["a"].astype(np.float32)).all() and got["a"].any()
        assert (got["t"] == np.arange(12).reshape(3, 4).T).all()   # a transposed view: values kept
        assert got["t"].flags.f_contiguous and not got["t"].flags.c_contiguous   # and its order
        ahead.start("k", make)
        ahead.start("other", make)   # the set pending for "k" is dropped and its memory freed
        assert ahead.take_set("k") is None and ahead.take_set("other") is not None
        ahead.start("k", lambda: dict(x=1 / 0))
        assert ahead.take_set("k") is None   # a failing inputs function: drawn in place, it reports
    finally:
        ahead.close()
    assert set(glob.glob("/dev/shm/ktune_inputs_*")) <= before


def test_segments_of_a_killed_worker_are_removed_by_the_next():
    import subprocess
    from multiprocessing import shared_memory

    from jupyter_ktune.runner.set_segments import SEGMENT_PREFIX, remove_orphans

    dead = subprocess.Popen(["true"])
    dead.wait()   # a pid that no longer runs
    seg = shared_memory.SharedMemory(name=f"{SEGMENT_PREFIX}{dead.pid}_test", create=True, size=8)
    mine = shared_memory.SharedMemory(name=f"{SEGMENT_PREFIX}{os.getpid()}_test", create=True,
                                      size=8)
    try:
        assert remove_orphans() >= 1
        assert not os.path.exists(f"/dev/shm/{seg.name}")
        assert os.path.exists(f"/dev/shm/{mine.name}")   # a live worker's set stays
    finally:
        seg.close()
        mine.close()
        mine.unlink()


OUT_NAMED_OUT = """def scale(x, out, n):
    out[:] = 2 * x
"""


def out_inputs():
    x = np.random.rand(100)
    # random, not np.empty_like: fresh memory is often all zeros, and with "--out y" `out` is an
    # input, which the all-zeros check would then report before the missing 'y'
    return dict(x=x, out=np.random.rand(100), n=100)


def out_reference(x, out, n):
    return 2 * x


def test_a_corrected_out_is_used_by_the_same_worker(worker):
    """Issue 15: the compiled-variant cache once ignored --out, so the fix needed a restart."""
    ns = {"inputs": out_inputs, "reference": out_reference}
    line = "scale --backend fake --inputs inputs --reference reference --budget-ms 2 --out "
    wrong = parse_cell(line + "y", OUT_NAMED_OUT, ns)
    first = worker.run(wrong, wrong.space.default())
    assert first.status is not Status.OK and "'y'" in first.reason
    fixed = parse_cell(line + "out", OUT_NAMED_OUT, ns)
    second = worker.run(fixed, fixed.space.default())
    assert second.status is Status.OK, second.reason


def test_the_variant_key_covers_what_is_bound_but_not_what_is_measured():
    from jupyter_ktune.variant_key import variant_key

    s = spec(GOOD)
    c = s.space.default()
    assert variant_key(s, c) == variant_key(spec(GOOD), c)  # a rerun of the same cell
    assert variant_key(s, c) == variant_key(spec(GOOD, LINE + " --timeout 5"), c)
    for changed in (spec(GOOD, LINE.replace("--out y", "--out x")),
                    spec(GOOD, LINE + " --arch sm_80"),
                    spec(GOOD, LINE + " --block 32"),
                    parse_cell(LINE, GOOD, {**NS, "inputs": out_inputs})):
        assert variant_key(changed, c) != variant_key(s, c)
