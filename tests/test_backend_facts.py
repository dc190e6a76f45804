"""A backend's facts reach the generic code through the protocol (``BackendBase``), never
through its name (issue 37).

``ktune_fake_cxx_backend`` is registered here in one line and edited nowhere else; each test
reads one fact the way the generic code does and checks the fake's value arrived, against the
plain fake backend, which keeps every default.
"""

from __future__ import annotations

import os
import sys
from concurrent.futures import Future

import cloudpickle
import numpy as np
import pytest

from jupyter_ktune.api import parse_cell
from jupyter_ktune.backends import get_backend
from jupyter_ktune.backends.base import DeviceInfo
from jupyter_ktune.capabilities import capabilities
from jupyter_ktune.errors import CannotRun, CellError, KtuneError
from jupyter_ktune.results import Status
from jupyter_ktune.space import Config, Param, Space

CELL = "def k(x, y):\n    y[:] = x\n"


@pytest.fixture(autouse=True)
def fakecxx(monkeypatch):
    """The one registry line."""
    monkeypatch.setenv("KTUNE_BACKEND_MODULES", os.environ.get("KTUNE_BACKEND_MODULES", "")
                       + ",fakecxx=ktune_fake_cxx_backend")


def test_the_cell_is_read_with_the_backends_comment_and_directives() -> None:
    spec = parse_cell("k --backend fakecxx", "// ktune: B in [1, 2]\n// ktune: include inc\n"
                      + CELL)
    assert spec.space.names == ("B",) and spec.includes[0][0] == "inc"
    line = " --param B=1,2 --require 'B > 0'"
    for name, comment in (("fakecxx", "//"), ("fake", "#")):  # magic-line statements
        assert parse_cell("k --backend " + name + line, CELL).space.constraints[0].comment \
            == comment
    with pytest.raises(CellError, match="CUDA C\\+\\+ directive") as info:
        parse_cell("k --backend fake", "# ktune: B in [1, 2]\n# ktune: include inc\n" + CELL)
    assert "fakecxx" in info.value.fix and "--backend fake " not in info.value.fix + " "


def test_from_reads_python_cells_only() -> None:
    with pytest.raises(CellError, match="cells are C\\+\\+") as info:
        parse_cell("k --backend fakecxx --from json:loads", "")
    assert "--backend fake" in info.value.fix and "fakecxx" not in info.value.fix


def test_compiler_controls_are_the_backends_own() -> None:
    parse_cell("k --backend fakecxx", "// ktune: maxnreg in [128]\n" + CELL)
    parse_cell("k --backend fake", "# ktune: maxnreg in [128]\n" + CELL)  # None: not checked
    with pytest.raises(CellError, match="name_prefix is a compiler control of CUDA C\\+\\+ and "
                                        "Triton; this cell is --backend fakecxx"):
        parse_cell("k --backend fakecxx", "// ktune: name_prefix in ['']\n" + CELL)
    with pytest.raises(CellError, match="of CUDA C\\+\\+ and Fake C\\+\\+ and Triton;"):
        parse_cell("k --backend pallas", "# ktune: maxnreg in [128]\n" + CELL)


def test_the_compile_pool_and_its_order_follow_the_facts() -> None:
    from jupyter_ktune.tuning.compile_order import compile_first
    from jupyter_ktune.tuning.pool import warm_up
    from jupyter_ktune.tuning.runners import compile_pool_size, precompiled

    assert precompiled("fakecxx") and precompiled("fake") is None
    assert compile_pool_size("fakecxx", None, 1) >= 1 and compile_pool_size("fake", None, 1) == 0
    configs = [Config({"B": b, "num_warps": 4}) for b in (128, 8192, 256, 4096)]
    assert compile_first("fakecxx", configs)[0]["B"] == 8192
    assert compile_first("fake", configs) is None
    sys.modules.pop("colorsys", None)
    warm_up("fakecxx")
    assert "colorsys" in sys.modules


def test_ktune_device_and_verification_ask_the_backend() -> None:
    from jupyter_ktune.runner.execute import _poisoned

    hopper = DeviceInfo(True, "GPU", compute_capability="8.0")
    row = capabilities("fakecxx", hopper)
    assert (row.static, row.profile) == ("yes (fake)", False)
    assert "a note from the fake" in row.notes
    plain = capabilities("fake", hopper)
    assert (plain.static, plain.profile) == ("none", True)
    spec = parse_cell("k --backend fakecxx", CELL)
    assert not _poisoned(spec, object()) and _poisoned(
        parse_cell("k --backend fake", CELL), object())
    assert get_backend("fakecxx").poisons_outputs is False


def _swept(backend: str):
    """A sweep's cell of ``backend`` whose static report the pool can build (``# static smem``),
    so a run is offered it to load (``load_prebuilt``)."""
    ns = {"inputs": lambda: dict(x=np.arange(8.0), y=np.empty(8)),
          "reference": lambda x, y: x}
    return parse_cell(f"k --backend {backend} --param B=1,2 --inputs inputs --reference reference"
                      " --out y", "# static smem: 64 * B\n" + CELL, ns)


def test_a_backend_that_declares_no_hook_gets_each_default(monkeypatch) -> None:
    from jupyter_ktune.backends.base import COMPILE_ONLY_ENV, LAUNCHER_AHEAD_ENV
    from jupyter_ktune.measure.static import SWEEP_STATIC_ENV
    from jupyter_ktune.runner import execute
    from jupyter_ktune.runner.profile import profile_variant
    from jupyter_ktune.tuning import pool_warm, runners

    # the pool's tasks run here mark this process a pool process: undone after the test (left
    # set, every later static report in this test process skipped its SASS mix)
    for name in (COMPILE_ONLY_ENV, SWEEP_STATIC_ENV, LAUNCHER_AHEAD_ENV):
        monkeypatch.setenv(name, "")

    spec = _swept("fakecxx")
    config = spec.space.config({"B": 1})
    backend = get_backend("fakecxx")
    assert not backend.shares_pool_hints and not backend.builds_launcher_ahead
    assert not backend.quick_launch() and backend.compile_phases == {}
    # the pool's tasks, as a sweep sends them (with hints: seed_pool_hints takes them)
    out, phases = cloudpickle.loads(runners.precompile(cloudpickle.dumps(
        (spec, config, False, {"read": "elsewhere"}))))
    assert not isinstance(out, KtuneError) and out.kernels["k"].smem_static == 64, out
    assert set(phases) == {"unpickle", "total"}
    assert backend.pool_hints(spec) is None and backend.preload(spec) is None
    assert cloudpickle.loads(pool_warm.pool_hints(cloudpickle.dumps(spec))) is None
    assert backend.launcher_ahead(spec, config) == runners.launcher_ahead(
        cloudpickle.dumps((spec, config))) == (False, 0.0)
    assert runners.preload_here(spec) >= 0
    # the worker: a report built ahead is offered, and the default says "compile it"
    built: Future = Future()
    built.set_result((out, None))
    assert execute._prebuilt(backend, spec, config, built) is None
    with pytest.raises(CannotRun, match="no scope profiler wired for --backend fakecxx"):
        profile_variant(spec, config)


def test_a_sweep_runs_on_the_defaults_and_exports_the_backends_own_format(
        tmp_path, stopped_pools) -> None:
    from jupyter_ktune.tuning import TuneOptions, pool_warm, tune

    spec = _swept("fakecxx")
    report = tune(spec, "exhaustive", store=tmp_path, workers=1,
                  options=TuneOptions(compile_workers=1, top_k=0))
    assert [e.result.status for e in report.evaluations] == [Status.OK] * 2, report.evaluations
    assert report.info["compile_workers"] == 1
    # no pool task the backend does not offer: no launcher built ahead, no hints read
    assert "launcher built" not in [kind for _at, kind, _c in report.info["timeline"]]
    assert not [k for k in pool_warm._hints if k[1] == spec.source_hash]
    assert report.export() == report.export("cpp") and "constexpr int KT_K_B" in report.export()


def _report(backend: str):
    from jupyter_ktune.tuning.report import Evaluation, TuneReport
    from jupyter_ktune.tuning.store import StoredResult

    row = StoredResult(Config({"B": 2}), Status.OK, times_ms=np.full(5, 0.01), kernel="k",
                       backend=backend, device="fake CPU device", created=1.7e9)
    return TuneReport("k", backend, "exhaustive", Space((Param("B", (1, 2)),)),
                      "fake CPU device", (Evaluation(row, 0.0),), valid_configs=2)


def test_an_export_without_a_format_writes_the_backends_first() -> None:
    from jupyter_ktune.tuning.shapes import ShapesReport

    assert _report("fakecxx").export() == _report("fakecxx").export("cpp")
    assert _report("fake").export() == _report("fake").export("kernel_tuner")  # the default
    shapes = ShapesReport(({"n": 8},), (_report("fakecxx"),))
    assert shapes.export() == shapes.export("cpp")
    with pytest.raises(ValueError, match="--backend fake has no default dispatch export "
                                         "\\(it offers kernel_tuner\\)"):
        ShapesReport(({"n": 8},), (_report("fake"),)).export()
    assert {n: get_backend(n).export_formats[0] for n in ("cuda", "triton", "pallas")} == {
        "cuda": "cpp", "triton": "triton", "pallas": "pallas"}
