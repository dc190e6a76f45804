"""Under the interpreter a panel's first result does not wait for its static report (issue 33).

The report is Triton's compile for sm_90 in a child process (its interpreter start, triton's and
the cell's imports): seconds of the quickstart's Triton cell that the interpreter's run does not
need. The result comes without it, marked ``static_pending``; the session fetches the report
while idle and delivers the same result again, completed (``Delivery.late``), and the panel puts
it in place of the first. ``panel.result`` waits for it, as a script reading it expects.
"""

from __future__ import annotations

import sys
import time
from dataclasses import replace

import cloudpickle
import numpy as np

from jupyter_ktune.api import parse_cell
from jupyter_ktune.runner.client import get_worker
from jupyter_ktune.ui.start import panel_for

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the worker runs these by value

CELL = """# ktune: BLOCK in [32, 64]; grid = (triton.cdiv(n, BLOCK),)
@triton.jit
def later(x, y, n, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y + o, 3.0 * tl.load(x + o, mask=o < n), mask=o < n)
"""
DELAY_S = 6.0  # added to each sm_90 compile: the run must not wait for it
LINE = "later --backend triton --inputs inputs --reference reference --out y --budget-ms 5"


def inputs():  # noqa: ANN201
    x = np.random.rand(100).astype(np.float32)
    return dict(x=x, y=np.empty_like(x), n=100)


def reference(x, y, n):  # noqa: ANN001, ANN201
    return 3 * x


def slow_reports(seconds: float) -> None:
    """In the worker: every sm_90 compile of a Triton cell under the interpreter (a child
    process) takes ``seconds`` longer (0: as it was)."""
    from jupyter_ktune.backends.triton import static

    built = getattr(static, "ktune_test_built", static.run_in_subprocess)
    static.ktune_test_built = built
    if not seconds:
        static.run_in_subprocess = built
        return

    def slow(request, *a, **k):  # noqa: ANN001, ANN002, ANN003, ANN202
        time.sleep(seconds)
        return built(request, *a, **k)

    static.run_in_subprocess = slow


def test_the_first_result_comes_before_its_static_report_which_follows(triton_interpreter):
    worker = get_worker()
    worker.device("triton")
    worker.call(slow_reports, DELAY_S)
    try:
        panel = panel_for(parse_cell(LINE, CELL, {"inputs": inputs, "reference": reference}),
                          replaces="static-later-test")
        try:
            first = panel.shown()
            assert first.status.value == "ok", first.reason
            assert first.static_pending and first.static is None
            assert first.phases_ms["compile"] < DELAY_S * 1e3, first.phases_ms  # not waited for
            assert "Static report: compiling" in panel.card.value
            r = panel.result  # waits for the report
            assert not r.static_pending and r.static is not None, r.reason
            assert r.static.arch == "sm_90"
            assert r.measurement is first.measurement  # the same result, completed
            assert len(panel.history) == 1  # replaced, not added
            assert "Static report" in panel.card.value and "compiling" not in panel.card.value
            assert [d.late for d in panel.session.history] == [True]
        finally:
            panel.session.close()
    finally:
        worker.call(slow_reports, 0)


def test_the_cell_returns_before_the_report(triton_interpreter):
    """The ``%%kernel`` cell's output is the first result; the report follows into its card."""
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "jupyter_ktune")
    shell.user_ns.update(inputs=inputs, reference=reference)
    worker = get_worker()
    worker.device("triton")
    worker.call(slow_reports, DELAY_S)
    try:
        panel = shell.run_cell_magic("kernel", LINE, CELL.replace("3.0 *", "1.0 * 3.0 *"))
        try:
            assert panel.shown().static_pending  # the cell did not wait for the report
            assert panel.session.wait_reports(120) and panel.shown().static is not None
        finally:
            panel.session.close()
    finally:
        worker.call(slow_reports, 0)


def test_a_gpu_run_returns_before_its_sass_is_read_and_the_report_completes_it(monkeypatch):
    """On a GPU the run loads the report's own build; reading its SASS (0.1-0.4 s) is left to
    the report thread, and the result comes without it as under the interpreter. The report,
    fetched later, gets the launch's threads per block where it has none (a Triton report)."""
    import threading
    from dataclasses import dataclass

    import ktune_fake_backend as fake

    from jupyter_ktune.backends.base import DeviceInfo
    from jupyter_ktune.runner import execute, static_reports

    @dataclass(frozen=True)
    class Report:
        threads_per_block: int | None = None

    release = threading.Event()

    class OnGpu(fake.FakeBackend):
        def device(self):
            return DeviceInfo(True, "a GPU (fake)", compute_capability="9.0")

        def static_report(self, spec, config):
            assert release.wait(30), "the run never came back before its report"
            return Report()

    monkeypatch.setattr(execute, "get_backend", lambda name: OnGpu())
    spec = parse_cell("scale --backend fake --inputs inputs --reference reference --out y "
                      "--budget-ms 5", f"# {time.monotonic_ns()}\ndef scale(x, y, n):\n"
                      "    y[:] = 3 * x\n", {"inputs": inputs, "reference": reference})
    config = spec.space.config({})
    first = execute.run_variant(spec.with_options(static_later=True), config)
    release.set()
    assert first.status.value == "ok", first.reason
    assert first.static_pending and first.static is None
    deadline = time.monotonic() + 30
    while (got := static_reports.report_if_done(spec.source_hash, spec.options.arch,
                                                config)) is None:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    done = static_reports.with_report(replace(first, launch={"block": (8, 4, 1)}), *got)
    assert not done.static_pending and done.static == Report(threads_per_block=32)
