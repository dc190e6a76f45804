"""What the panel shows, without a browser: scaled units, refusals with numbers, host-time
wording, the static snapshot, the panel MIME bundle, and cell errors marked in the editor."""

from __future__ import annotations

import json

import numpy as np
import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output
from test_panel import (
    LINE,
    NS,
    SRC,
    panel,  # noqa: F401 - the live panel fixture
)

from jupyter_ktune.api import parse_cell
from jupyter_ktune.editor import MIME_TYPE as EDITOR_MIME
from jupyter_ktune.render import fmt_time, noise_note, run_result_html
from jupyter_ktune.results import Measurement, Provenance, RunResult, Status, Timing
from jupyter_ktune.session import TuningSession
from jupyter_ktune.ui.app import KernelPanel
from jupyter_ktune.ui.panels import central
from jupyter_ktune.ui.refusal import fmt_number, refusal_reasons
from jupyter_ktune.ui.snapshot import MIME_TYPE, snapshot_html
from jupyter_ktune.ui.swizzle_map import BANK_COLOURS
from jupyter_ktune.ui.units import scaled, time_unit


@pytest.mark.parametrize(("values", "unit"), [
    ([110.79], "ms"), ([0.073, 0.08], "µs"), ([1200.0], "s"), ([5e-5], "ns"), ([], "µs"),
    ([float("nan"), None, 2.5], "ms")])
def test_time_unit_keeps_the_largest_value_between_1_and_1000(values, unit):
    assert time_unit(values)[0] == unit


def test_scaled_values_and_single_times_read_in_their_unit():
    assert scaled([110.79411, None], 1.0)[0] == pytest.approx(110.79411)
    assert np.isnan(scaled([110.0, None], 1.0)[1])
    assert fmt_time(110.79411) == "110.794 ms"
    assert fmt_time(1200.0) == "1.200 s"
    assert fmt_time(0.0731) == "73.10 µs"


def test_a_refusal_quotes_both_sides_of_the_broken_line():
    spec = parse_cell(LINE, SRC, NS)
    reasons = refusal_reasons(spec.space, spec.space.config({"BLOCK": 4}), {"SMEM_PER_BLOCK": 1000})
    assert reasons == ["require BLOCK * 300 <= SMEM_PER_BLOCK: 1,200 > 1,000"]
    assert refusal_reasons(spec.space, spec.space.config({"BLOCK": 2}),
                           {"SMEM_PER_BLOCK": 1000}) == []
    assert fmt_number(245760) == "245,760" and fmt_number(0.12345) == "0.1235"


def _host_result(times_ms) -> RunResult:
    t = Timing(times_ms=np.asarray(times_ms, dtype=float), method="Triton interpreter, host time "
               "(not GPU time)")
    m = Measurement(t, Provenance("CPU", t.method, "abc"), flops=1e6, bytes=8e6)
    return RunResult(name="k", backend="triton", config={"BLOCK": 64}, status=Status.OK,
                     measurement=m, device="CPU")


def test_a_host_time_card_has_no_gpu_vocabulary_and_says_when_it_is_noisy():
    noisy = _host_result([30.0, 60.0, 110.0, 140.0, 180.0, 100.0, 90.0, 170.0, 40.0, 120.0])
    html = run_result_html(noisy)
    for gpu_word in ("Raw events", "Event floor", "Achieved", "GB/s", "via NVML", "SM clock"):
        assert gpu_word not in html
    assert "Host time" in html and "not GPU time" in html
    assert noise_note(noisy.measurement.timing).startswith("noisy: the IQR is")
    tight = _host_result([100.0, 100.5, 99.8, 100.2, 100.1, 99.9, 100.3, 100.0, 99.7, 100.4])
    assert noise_note(tight.measurement.timing) == ""


def test_the_histogram_leaves_out_a_far_outlier_and_counts_it():
    times = np.r_[np.full(99, 0.073), 8.0]
    kept, slow = central(times)
    assert slow == 1 and kept.max() == pytest.approx(0.073)


def test_32_banks_get_32_distinct_colours():
    assert len(set(BANK_COLOURS)) == 32


def test_the_bundle_carries_the_panel_mime_the_widget_and_the_current_snapshot(panel):  # noqa: F811
    panel.controls.widgets["SWIZZLE"].value = "64B"
    panel.session.wait_idle()
    bundle = panel._repr_mimebundle_()
    widget = bundle["application/vnd.jupyter.widget-view+json"]
    assert bundle[MIME_TYPE] == {"version": 1, "model_id": widget["model_id"]}
    assert "BLOCK=1 SWIZZLE=64B" in bundle["text/html"] and "<svg" in bundle["text/html"]
    assert "bokehjs" not in json.dumps(bundle).lower()
    assert len(json.dumps(bundle)) < 40_000  # three panels stay far below 300 KB
    # the hidden snapshot widget the labextension copies into the saved output follows along
    panel.controls.widgets["SWIZZLE"].value = "32B"
    panel.session.wait_idle()
    import time
    time.sleep(0.7)  # SNAPSHOT_EVERY_S
    assert "BLOCK=1 SWIZZLE=32B" in panel.snapshot.value


def test_the_snapshot_before_any_result_says_so():
    assert "no result yet" in snapshot_html(None, [])


def test_no_swizzle_tunable_no_swizzle_map(worker):
    src = SRC.replace("SWIZZLE in [none, 32B, 64B, 128B]", "UNROLL in [1, 2]")
    spec = parse_cell(LINE, src, NS)
    session = TuningSession(spec, worker, {"SMEM_PER_BLOCK": 1000}, prefetch=False)
    p = KernelPanel(session, spec.space.default({"SMEM_PER_BLOCK": 1000}), ceilings=None)
    p.result  # noqa: B018
    assert p.tabs.titles == ["Timing", "Heatmap", "Roofline", "Report", "Breakdown", "Compare"]
    assert "Swizzle" not in p.tabs.plots
    session.close()


def test_a_triton_syntax_error_is_marked_on_its_cell_line():
    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "jupyter_ktune")
    ip.user_ns.update(NS)
    body = ("# ktune: BLOCK in [64, 128]\n@triton.jit\ndef broken(x, y, n, BLOCK: tl.constexpr):\n"
            "    offs = tl.arange(0, BLOCK\n    tl.store(y + offs, x)\n")
    with capture_output() as out, pytest.raises(UsageError, match="cell line 5"):
        ip.run_cell_magic("kernel", "broken --backend triton --inputs inputs "
                          "--reference reference --out y", body)
    marks = [o.data[EDITOR_MIME] for o in out.outputs if EDITOR_MIME in o.data]
    assert len(marks) == 1
    assert marks[0]["diagnostics"][0]["line"] == 5
    assert "never closed" in marks[0]["diagnostics"][0]["message"]


def test_a_saved_panel_replays_its_results_without_running_anything(panel, tmp_path):  # noqa: F811
    from jupyter_ktune.ui.replay import load_panel, save_panel

    panel.controls.widgets["SWIZZLE"].value = "64B"
    panel.session.wait_idle()
    path = save_panel(panel, tmp_path / "run.panel.json")
    replay = load_panel(path)
    assert replay.current.config == {"BLOCK": 1, "SWIZZLE": "64B"}
    assert replay.current.median_ms == panel.current.median_ms  # the saved numbers
    replay.controls.widgets["SWIZZLE"].value = "none"
    assert replay.result.median_ms == panel.history[0].median_ms
    replay.controls.widgets["SWIZZLE"].value = "128B"  # never measured
    assert replay.result.status is Status.CANNOT_RUN and "not measured" in replay.result.reason
    assert len(replay.timing.hist.data["i"]) == len(panel.history) + 4


def test_the_distribution_axis_follows_each_variant():
    from jupyter_ktune.ui.panels import TimingPanel

    tp = TimingPanel()
    for times in ([100.0, 110.0, 120.0, 130.0, 105.0], [3.0, 3.5, 4.0, 3.2, 3.1]):
        tp.show_current(_host_result(times))
        f, left, right = tp.figures[0], tp.dist.data["left"], tp.dist.data["right"]
        assert f.x_range.start <= min(left) and max(right) <= f.x_range.end
        assert f.x_range.end < 2 * max(right)  # not the previous variant's span
    assert tp.figures[0].xaxis.axis_label == "run time (ms)"


def test_the_server_extension_serves_the_installed_bokehjs():
    import bokeh

    import jupyter_ktune
    from jupyter_ktune.server import STATIC_PATH, bokehjs_dir

    assert jupyter_ktune._jupyter_server_extension_points() == [{"module": "jupyter_ktune"}]
    js = (bokehjs_dir() / "bokeh.min.js").read_text()
    assert bokeh.__version__ in js  # the JS matches the Python package, whatever its version
    assert STATIC_PATH == "ktune/static/bokeh"  # labextension/src/bokeh.ts loads this route


def test_dock_is_the_panel_roots_synced_flag_and_the_button_follows_it(panel):  # noqa: F811
    assert panel.root.get_state()["docked"] is False  # synced: the labextension reads it
    assert panel.root.get_state()["dock_title"] == "ktune: scale"
    assert panel.dock_button.description == "Dock"
    panel.dock()
    assert panel.root.docked and panel.dock_button.description == "Undock"
    panel.root.set_state({"docked": False})  # the frontend, when the user closes the dock
    assert panel.dock_button.description == "Dock"
    panel.dock_button.click()
    assert panel.root.docked
    panel.dock(False)
    assert not panel.root.docked
