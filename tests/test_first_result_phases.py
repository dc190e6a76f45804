"""A first result names its cold costs (issue 33): where a fresh panel's wait went, as data
(``RunResult.extra["phases_ms"]``) and in the card, instead of one unexplained wait."""

from __future__ import annotations

from test_panel import LINE, NS, SRC

from jupyter_ktune.api import parse_cell
from jupyter_ktune.render import run_result_html
from jupyter_ktune.ui.start import panel_for


def test_the_first_result_of_a_panel_names_its_phases():
    panel = panel_for(parse_cell(LINE, SRC, NS), replaces="phases-test")
    try:
        r = panel.result
        phases = r.extra["phases_ms"]
        # the worker's own phases, the device opening and the compile included
        assert {"device", "compile", "inputs", "verify"} <= set(phases), phases
        assert all(v >= 0 for v in phases.values())
        assert "Where the time went" in run_result_html(r)
    finally:
        panel.session.close()


def test_the_compile_pool_imports_no_torch_to_learn_argument_types():
    from jupyter_ktune.backends import get_backend

    assert "torch" not in get_backend("triton").compiler_modules


def test_only_the_session_asked_last_prefetches():
    """A Run All leaves earlier panels idle; their neighbour compiles held the next cell's
    requests back in the shared worker (issue 33). Once another session takes a request, an
    earlier one stops prefetching (its compile in flight ends; no further one starts)."""
    import threading
    import time

    from jupyter_ktune.results import RunResult, Status
    from jupyter_ktune.session import TuningSession

    release = threading.Event()

    class Recorder:
        def __init__(self) -> None:
            self.compiles: list[dict] = []

        def run(self, spec, config, violations=None):  # noqa: ANN001, ANN202 - the worker's surface
            return RunResult(spec.name, spec.backend, dict(config), Status.OK)

        def compile(self, spec, config):  # noqa: ANN001, ANN202
            self.compiles.append(dict(config))
            release.wait(10)  # the first prefetch is in flight while the other session asks

        def abandon(self, *args, **kwargs):  # noqa: ANN002, ANN003, ANN202 - closing a session
            pass

    spec = parse_cell(LINE, SRC, NS)
    worker, limits = Recorder(), {"SMEM_PER_BLOCK": 232448}
    first = TuningSession(spec, worker, limits)  # BLOCK=1 has two neighbours to prefetch
    second = TuningSession(spec, worker, limits, prefetch=False)
    try:
        first.request({"BLOCK": 1, "SWIZZLE": "none"})
        deadline = time.time() + 10
        while not worker.compiles and time.time() < deadline:
            time.sleep(0.01)
        assert len(worker.compiles) == 1, "the active session prefetches its neighbours"
        second.request({"BLOCK": 8, "SWIZZLE": "none"})
        second.wait_idle()
        release.set()
        time.sleep(1.5)  # the idle session wakes every 0.5 s to prefetch
        assert len(worker.compiles) == 1, worker.compiles
    finally:
        release.set()
        first.close()
        second.close()
