"""The direct launch of a compiled Triton kernel (backends/triton/direct_launch.py, issue 21).

On the CPU there is no driver to launch on, so a recording driver stands in for
``cuLaunchKernel``: these tests check what would be handed to it (each parameter's bytes, in
signature order, the constexprs left out, the two null scratch pointers; grid, block, shared
memory, stream), when the launcher refuses a kernel and why, and that the worker binds a run
quick only when the sweep said so (test_sweep_speed.py checks that such runs are not held for
Triton's launcher build). bench/direct_launch_check.py
(a one-off probe, removed; `git show 0553cc2:bench/direct_launch_check.py`) checked the same
launches on the H200 against Triton's own (bitwise outputs, device time).
"""

from __future__ import annotations

import ctypes
import struct
import subprocess
import sys
from types import SimpleNamespace as NS

import numpy as np
import pytest

from jupyter_ktune.backends.triton import direct_launch as dl


class RecordingDriver:
    """Stands in for CudaDriverCalls: keeps each launch's arguments and parameter bytes."""

    def __init__(self, param_sizes=None):
        self.launches, self._sizes = [], param_sizes

    def launch(self, function, grid, block, shared, stream, params):
        self.launches.append(dict(function=function, grid=grid, block=block, shared=shared,
                                  stream=stream, params=params))

    def param_sizes(self, function):
        return self._sizes


def param_bytes(launcher, params):
    """The bytes each kernel parameter points at, as the driver would copy them."""
    return [ctypes.string_at(params[i], size) for i, size in enumerate(launcher.sizes)]


class Tensor:
    def __init__(self, ptr):
        self.ptr = ptr

    def data_ptr(self):
        return self.ptr


SIG = ["*fp32", "i32", "constexpr", "fp32", "i1", "i64", "u16", "fp16", "bf16", "fp64", "*i8"]


def test_parameters_are_packed_in_signature_order_without_constexprs_and_with_null_scratch():
    drv = RecordingDriver()
    launcher = dl.DirectLauncher(SIG, drv)
    # 9 parameters (the constexpr is not one) and the global and profile scratch pointers
    assert launcher.sizes == [8, 4, 4, 1, 8, 2, 2, 2, 8, 8, 8, 8]
    launcher(3, 2, 1, 77, 1234, (4, 1, 49152), None, None, None,
             Tensor(0xABC0), -5, 64, 1.5, True, -(1 << 40), 65535, 0.333, 1.00390625, 2.5, None)
    (call,) = drv.launches
    assert call["function"] == 1234 and call["stream"] == 77
    assert call["grid"] == (3, 2, 1) and call["block"] == (128, 1, 1) and call["shared"] == 49152
    got = param_bytes(launcher, call["params"])
    assert got == [
        struct.pack("<Q", 0xABC0), struct.pack("<i", -5), struct.pack("<f", 1.5), b"\x01",
        struct.pack("<q", -(1 << 40)), struct.pack("<H", 65535),
        np.float16(0.333).tobytes(),                      # IEEE half, round to nearest
        struct.pack("<H", 0x3F80),                        # bf16: truncated, as Triton 3.6 packs
        struct.pack("<d", 2.5), struct.pack("<Q", 0),     # None pointer: null
        struct.pack("<Q", 0), struct.pack("<Q", 0)]       # scratch pointers: null


def test_a_second_call_overwrites_the_values_and_an_int_pointer_is_taken_as_an_address():
    drv = RecordingDriver()
    launcher = dl.DirectLauncher(["*fp32", "i32"], drv)
    launcher(1, 1, 1, 0, 1, (1, 1, 0), None, None, None, Tensor(16), 1)
    launcher(1, 1, 1, 0, 1, (1, 1, 0), None, None, None, 0x1000, 7)
    got = param_bytes(launcher, drv.launches[-1]["params"])
    assert got[:2] == [struct.pack("<Q", 0x1000), struct.pack("<i", 7)]


def test_an_empty_grid_launches_nothing_and_the_hooks_see_the_launch_metadata():
    drv, seen = RecordingDriver(), []
    launcher = dl.DirectLauncher(["i32"], drv)
    launcher(0, 4, 1, 0, 1, (4, 1, 0), "meta", seen.append, lambda m: seen.append(("exit", m)),
             3)
    assert drv.launches == [] and seen == ["meta", ("exit", "meta")]


@pytest.mark.parametrize("ty", [("i32", "i32"), "nvTmaDesc", "tensordesc<fp16[64, 64]>", "u128"])
def test_types_it_does_not_pack_leave_the_kernel_to_tritons_launcher(ty):
    with pytest.raises(dl.Unsupported):
        dl.DirectLauncher(["*fp32", ty], RecordingDriver())


def meta(**over):
    base = dict(num_ctas=1, launch_cooperative_grid=False, launch_pdl=False,
                global_scratch_size=0, profile_scratch_size=0, tensordesc_meta=None,
                shared=1024, num_warps=4, warp_size=32)
    return NS(**{**base, **over})


@pytest.mark.parametrize("over,why", [
    (dict(num_ctas=2), "cluster"), (dict(launch_pdl=True), "dependent"),
    (dict(launch_cooperative_grid=True), "cooperative"), (dict(global_scratch_size=64), "scratch"),
    (dict(profile_scratch_size=8), "profile"), (dict(tensordesc_meta=[{"swizzle": 3}]), "descr")])
def test_launches_it_cannot_make_with_cuLaunchKernel_are_refused_with_the_reason(over, why):
    assert why in dl.unsupported_metadata(meta(**over))
    assert dl.unsupported_metadata(meta()) is None


class Active:
    """Triton's active driver, as much of it as install() uses."""

    def __init__(self, max_threads=1024, max_shared=232448):
        self.loaded = 0
        self.utils = NS(get_device_properties=lambda d: {"max_shared_mem": max_shared},
                        load_binary=self._load)
        self.max_threads = max_threads

    def get_current_device(self):
        return 0

    def _load(self, name, binary, shared, device):
        self.loaded += 1
        return ("module", 4242, 40, 0, self.max_threads)


def compiled(signature=("*fp32", "i32", "constexpr"), **over):
    return NS(module=None, function=None, _run=None, name="k", kernel=b"cubin", hash="h",
              metadata_group={},
              metadata=meta(**over), src=NS(signature=dict(zip("abc", signature, strict=True))))


def test_install_loads_the_cubin_and_replaces_only_a_launcher_not_yet_built():
    pytest.importorskip("triton")
    kernel, active = compiled(), Active()
    assert dl.install(kernel, RecordingDriver([8, 4, 8, 8]), active) is None
    assert isinstance(kernel._run, dl.DirectLauncher)
    assert (kernel.module, kernel.function, kernel.n_regs, active.loaded) == ("module", 4242, 40, 1)
    assert dl.reinstate(kernel) and kernel._run is None and kernel.module is None
    built = compiled()
    built._run, built.module = object(), "triton's"
    assert dl.install(built, RecordingDriver([8, 4, 8, 8]), active) == \
        "already loaded with Triton's launcher"
    assert not dl.reinstate(built) and built.module == "triton's"


@pytest.mark.parametrize("sizes,active,why", [
    ([8, 4, 8], Active(), "parameter sizes"),        # the driver counts other parameters
    ([8, 8, 8, 8], Active(), "parameter sizes"),     # or other sizes: never launch on a guess
    (None, Active(), "parameter sizes"),             # a driver that cannot say
    ([8, 4, 8, 8], Active(max_threads=64), "threads"),
    ([8, 4, 8, 8], Active(max_shared=512), "shared memory")])
def test_install_refuses_when_the_function_does_not_match_what_it_would_pack(sizes, active, why):
    pytest.importorskip("triton")
    kernel = compiled()
    assert why in dl.install(kernel, RecordingDriver(sizes), active)
    assert kernel._run is None and kernel.module is None  # left to Triton's own path


class Jit:
    def __init__(self, kernel):
        self.kernel, self.warmups = kernel, 0

    def warmup(self, grid, **kwargs):
        self.warmups += 1
        return self.kernel


def test_prepare_installs_for_a_quick_launch_and_gives_the_kernel_back_after(monkeypatch):
    pytest.importorskip("triton")
    kernel, jit = compiled(), None
    jit = Jit(kernel)
    monkeypatch.setattr(dl, "_installed", set())
    assert dl.prepare(jit, (1,), {}, quick=False) == "" and jit.warmups == 0  # costs nothing
    real_install = dl.install
    monkeypatch.setattr(dl, "install", lambda k: real_install(
        k, RecordingDriver([8, 4, 8, 8]), Active()))
    assert dl.prepare(jit, (1,), {}, quick=True) == dl.DIRECT_NOTE
    assert isinstance(kernel._run, dl.DirectLauncher)
    assert dl.prepare(jit, (1,), {}, quick=False) == ""
    assert kernel._run is None and not dl._installed


_QUICK_AT_BIND: list[bool] = []


def _record_quick_binds():
    """Worker-side: note QUICK_LAUNCH each time a Triton variant is bound."""
    from jupyter_ktune.backends.base import QUICK_LAUNCH
    from jupyter_ktune.backends.triton import launch

    real = launch.TritonBound.__init__

    def record(self, *a, **k):
        _QUICK_AT_BIND.append(QUICK_LAUNCH.get())
        real(self, *a, **k)

    launch.TritonBound.__init__ = record


def _quick_at_bind():
    return list(_QUICK_AT_BIND)


def test_the_worker_binds_a_run_quick_only_when_the_sweep_said_so_once(worker):
    from jupyter_ktune import parse_cell
    from jupyter_ktune.space import Config
    from jupyter_ktune.tuning.runners import seed_static

    spec = parse_cell("copy --backend triton --inputs io --reference ref --out y --budget-ms 1",
                      COPY, {"io": io, "ref": lambda x, y, n: x})
    config = Config({"BLOCK": 32})
    worker.call(_record_quick_binds)
    worker.call(seed_static, spec.source_hash, spec.options.arch, config, None, None, True)
    assert worker.run(spec, config).status.value == "ok"
    # one-shot: the next run of the config binds as usual
    assert worker.run(spec, config).status.value == "ok"
    assert worker.call(_quick_at_bind) == [True, False]


COPY = """# ktune: BLOCK in [32, 64]; grid = (triton.cdiv(n, BLOCK),)
import triton
import triton.language as tl

@triton.jit
def copy(x, y, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y + offs, tl.load(x + offs, mask=offs < n), mask=offs < n)
"""


def io():
    x = np.random.rand(100).astype(np.float32)
    return dict(x=x, y=np.empty_like(x), n=100)


def test_whether_triton_builds_a_launcher_per_signature_is_read_without_importing_it():
    """A sweep asks in the notebook's process, before its first compile: the import of Triton
    there put 1.25 s on the first Autotune's path (issue 33). The answer from the source is the
    import's answer."""
    ask = ("import sys; from jupyter_ktune.backends.triton import direct_launch as d; "
           "{before}print(d.per_signature_launcher(), 'triton' in sys.modules)")
    read = subprocess.run([sys.executable, "-c", ask.format(before="")], capture_output=True,
                          text=True, check=True).stdout.split()
    imported = subprocess.run([sys.executable, "-c", ask.format(before="import triton; ")],
                              capture_output=True, text=True, check=True).stdout.split()
    assert read[1] == "False"  # not imported to answer
    assert read[0] == imported[0]


def test_a_triton_with_make_launcher_is_read_as_per_signature(tmp_path, monkeypatch):
    """Triton 3.6's driver module (the H200's) defines ``make_launcher``; newer ones do not."""
    import importlib.machinery

    driver = tmp_path / "triton" / "backends" / "nvidia" / "driver.py"
    driver.parent.mkdir(parents=True)
    found = importlib.machinery.ModuleSpec("triton", None, is_package=True)
    found.submodule_search_locations = [str(tmp_path / "triton")]
    monkeypatch.delitem(sys.modules, "triton", raising=False)
    monkeypatch.setattr(dl.importlib.util, "find_spec", lambda name: found)
    for text, expected in (("def make_launcher(constants, signature, ids):\n    pass\n", True),
                           ("class CudaLauncher:\n    def make_launcher(self): ...\n", False)):
        driver.write_text(text)
        dl.per_signature_launcher.cache_clear()
        assert dl.per_signature_launcher() is expected
    dl.per_signature_launcher.cache_clear()
