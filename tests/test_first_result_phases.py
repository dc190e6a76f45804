"""A first result names its cold costs (issue 33): where a fresh panel's wait went, as data
(``RunResult.extra["phases_ms"]``) and in the card, instead of one unexplained wait."""

from __future__ import annotations

from test_panel import LINE, NS, SRC

from jupyter_ktune.render import run_result_html
from jupyter_ktune.spec import parse_cell
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
    from jupyter_ktune.tune import pool

    assert "torch" not in pool._COMPILER_MODULES["triton"]  # noqa: SLF001
