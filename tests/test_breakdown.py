"""Breakdown parsers and views against traces recorded on the H200 (tests/fixtures/breakdown/).

Fixtures (bench/breakdown_overhead.py wrote them; bench/results/breakdown-h200/ has the run):
kt_scope_gemm.npz (the first 8 traced blocks of the tiled GEMM's KT_SCOPE buffer at 2048^3),
proton_gemm.chrome_trace (60 events of the Triton GEMM under Proton), mosaic_trace.json (a
132-block plgpu.kernel with load/compute/store scopes), gemm_small.ncu-rep (the GEMM at 256^3
under ncu with SourceCounters and WarpStateStats).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from jupyter_ktune.backends.cuda.profile import (
    ScopeSampling,
    fitted_clock_mhz,
    parse_scope_buffer,
    scope_names,
)
from jupyter_ktune.backends.pallas.profile import parse_mosaic_trace
from jupyter_ktune.backends.triton.profile import parse_proton_trace
from jupyter_ktune.editor import MIME_TYPE, editor_bundle
from jupyter_ktune.measure.breakdown import Breakdown, Event, cycles_to_ns, pair_edges, scope_role

FIX = Path(__file__).parent / "fixtures" / "breakdown"


@pytest.fixture(scope="module")
def kt() -> Breakdown:
    z = np.load(FIX / "kt_scope_gemm.npz")
    s = ScopeSampling(*(int(v) for v in z["sampling"]))
    names = scope_names((FIX / "gemm_scoped.cu").read_text())
    return parse_scope_buffer(z["words"], s, names, float(z["sm_mhz"]), "gemm<64, 64, 32>")


def test_kt_scope_buffer_parses_into_scopes_per_warp_and_block(kt: Breakdown) -> None:
    assert kt.source == "KT_SCOPE" and kt.sm_clock_mhz == 1980.0
    assert len(kt) == 4096 and set(kt.scopes) == {"load", "mma"}
    assert len(np.unique(kt.block)) == 8 and set(np.unique(kt.unit)) == {0, 2, 4, 6}
    assert (kt.end_cycles > kt.start_cycles).all()
    table = {r["scope"]: r for r in kt.scope_table()}
    # the GEMM's global loads wait on DRAM: longer than the shared-memory FMA loop
    assert table["load"]["median_cycles"] > table["mma"]["median_cycles"] > 1000
    # ns use the measured clock: cycles / 1.98 GHz, never cycles as ns
    r = table["mma"]
    assert r["median_ns"] == pytest.approx(r["median_cycles"] / 1.98, rel=1e-6)
    assert any("dropped" in n for n in kt.notes)  # 64 iterations x 4 records > 256 slots


def test_clock_fitted_from_globaltimer_agrees_with_nvml_and_replaces_it() -> None:
    z = np.load(FIX / "kt_scope_gemm.npz")
    s = ScopeSampling(*(int(v) for v in z["sampling"]))
    fit = fitted_clock_mhz(z["words"], s)
    assert fit == pytest.approx(1980, rel=0.02)
    bd = parse_scope_buffer(z["words"], s, {}, None, "gemm")
    assert bd.sm_clock_mhz == pytest.approx(fit) and "fitted" in bd.clock_source
    assert bd.scopes[0].startswith("tag 0x")  # names unknown: tags shown, not invented


def test_no_clock_is_an_error_never_one_gigahertz() -> None:
    with pytest.raises(ValueError, match="1 GHz"):
        cycles_to_ns([100], None)
    with pytest.raises(ValueError, match="1 GHz"):
        parse_proton_trace(FIX / "proton_gemm.chrome_trace", None)


def test_blocks_sit_on_one_globaltimer_axis(kt: Breakdown) -> None:
    starts = [kt.start_ns[kt.block == b].min() for b in np.unique(kt.block)]
    assert min(starts) >= 0 and max(starts) < 50_000  # all blocks of one 685 us launch
    # inside a block, warps share the SM clock: barrier-separated scopes line up
    t = kt.timeline()
    assert set(t["scope"]) == {"load", "mma"} and t["start_ns"].min() == 0


def test_overlap_summary_of_a_synchronous_gemm(kt: Breakdown) -> None:
    ov = kt.overlap()
    parts = ("overlap", "memory_only", "compute_only", "other_only", "idle")
    assert sum(ov[p] for p in parts) == pytest.approx(1.0)
    # __syncthreads between the load and the mma phases: they never overlap
    assert ov["overlap"] < 0.01 and ov["memory_only"] > 0.4 and ov["compute_only"] > 0.3
    assert ov["blocks"] == 8


def test_overlap_and_gaps_on_a_hand_made_trace() -> None:
    ev = [Event("load", 0, 0, 0, 0, 100, 0, 50), Event("mma", 4, 0, 0, 50, 150, 25, 75),
          Event("store", 0, 0, 0, 1150, 1200, 575, 600)]
    bd = Breakdown.from_events(ev, kernel="k", source="test", unit_kind="warp",
                               sm_clock_mhz=2000.0, clock_source="test")
    ov = bd.overlap(min_gap_ns=100)
    assert ov["overlap"] == pytest.approx(50 / 1200)
    assert ov["idle"] == pytest.approx(1000 / 1200)
    assert ov["gaps"][0]["ns"] == pytest.approx(500.0)
    assert bd.time_per_role() == {"warpgroup 0": pytest.approx({"load": 50, "mma": 0,
                                                                "store": 25}),
                                  "warpgroup 1": pytest.approx({"load": 0, "mma": 50,
                                                                "store": 0})}
    assert [scope_role(s) for s in ("tma_wait", "wgmma", "epilogue", "init")] == \
        ["memory", "compute", "memory", "other"]


def test_pairing_handles_nesting_and_dropped_edges() -> None:
    pairs, left = pair_edges([(1, False, 0), (1, False, 5), (1, True, 7), (1, True, 9),
                              (2, True, 10), (3, False, 11)])
    assert pairs == [(1, 5, 7), (1, 0, 9)] and left == 2


def test_proton_trace_cycles_come_back_out_of_its_one_gigahertz_axis() -> None:
    bd = parse_proton_trace(FIX / "proton_gemm.chrome_trace", 1980.0, "matmul")
    raw = [e for e in json.loads((FIX / "proton_gemm.chrome_trace").read_text())["traceEvents"]
           if e.get("ph") == "X"]
    assert len(bd) == len(raw) == 60 and set(bd.scopes) == {"mma_loop", "store"}
    first = raw[0]
    row = np.flatnonzero((bd.scope == first["name"]) & (bd.start_cycles == 0))
    cyc = bd.end_cycles - bd.start_cycles
    assert round(first["dur"] * 1000) in set(cyc[row].tolist())  # 1 GHz "us" -> cycles
    assert bd.scope_table()[0]["median_ns"] == pytest.approx(
        bd.scope_table()[0]["median_cycles"] / 1.98)


def test_mosaic_trace_cycles_and_smids() -> None:
    bd = parse_mosaic_trace(FIX / "mosaic_trace.json", 1980.0)
    assert bd.unit_kind == "warpgroup" and len(bd) == 132 * 4
    assert set(bd.scopes) == {"Init", "load", "compute", "store"}
    assert len(np.unique(bd.sm)) == 132  # one block per SM; pid is 1 + SM id
    med = {r["scope"]: r["median_cycles"] for r in bd.scope_table()}
    assert 50 < med["load"] < 1000 and med["compute"] < med["load"]


def test_ncu_report_gives_samples_and_stalls_per_cell_line() -> None:
    pytest.importorskip("ncu_report")
    from jupyter_ktune.measure.profile_ncu import cell_file_filter, lines_for_editor, read_report

    bd = read_report(FIX / "gemm_small.ncu-rep", "gemm", cell_file_filter("cell"))
    src = (FIX / "gemm_scoped.cu").read_text().splitlines()
    assert bd.kernel.startswith("gemm") and bd.kernel_ns and bd.kernel_ns > 1000
    top = [ln for ln, _ in bd.top_lines(2)]
    # the two hottest lines are the global loads of A and B, stalled on memory (long scoreboard)
    assert all("? a[" in src[ln - 1] or "? b[" in src[ln - 1] for ln in top)
    assert next(iter(bd.lines[top[0]]["stalls"])) == "long_scoreboard"
    bundle = editor_bundle(type("R", (), {"backend": "cuda", "diagnostics": ()})(),
                           lines_for_editor(bd))
    assert bundle is not None and bundle[MIME_TYPE]["lines"][str(top[0])]["samples"] > 100


def test_ncu_command_collects_lines_by_default_or_the_named_metrics(monkeypatch) -> None:
    from jupyter_ktune.measure import profile_ncu
    from jupyter_ktune.runner.profile import ncu_metrics

    lines = profile_ncu.ncu_command("ncu", "out", "gemm", ["python", "x.py"])
    assert lines[:3] == ["ncu", "--clock-control", "none"] and "regex:^gemm" in lines
    assert lines.count("--section") == 2 and lines[-2:] == ["python", "x.py"]
    metrics = profile_ncu.ncu_command("ncu", "out", "gemm", ["python"],
                                      what=["--metrics", ",".join(profile_ncu.SHARED_METRICS)])
    assert "--section" not in metrics and any("bank_conflicts" in a for a in metrics)
    monkeypatch.setattr(profile_ncu, "find_ncu", lambda: None)
    with pytest.raises(RuntimeError, match="ncu.*not installed"):
        ncu_metrics(None, {})


def test_views_draw_every_source_and_serialise(kt: Breakdown) -> None:
    from bokeh.embed import json_item

    from jupyter_ktune.ui.breakdown import BreakdownViews

    v = BreakdownViews()
    v.show(kt)
    assert len(v.stack.data["role"]) == 2 * 2  # two warpgroups x two scopes
    assert len(v.lanes.data["unit"]) == int((kt.block == kt.timeline()["block"][0]).sum())
    assert v.heat.data["busy"] and max(v.heat.data["busy"]) > 0
    assert sum(v.overlap.data["share"]) == pytest.approx(1.0)
    v.show_lines({20: {"samples": 10, "stalls": {"long_scoreboard": 8}}})
    assert v.lines.data["reason"] == ["long_scoreboard", "other"]
    for path in ("mosaic_trace.json", "proton_gemm.chrome_trace"):
        parse = parse_mosaic_trace if path.startswith("mosaic") else parse_proton_trace
        v.show(parse(FIX / path, 1980.0))
    json.dumps(json_item(v.layout))
    assert "cycle breakdown" in kt._repr_html_() and kt.to_dict()["events"]["scope"]


def test_panel_button_reports_why_without_scopes_or_ncu(worker) -> None:
    from jupyter_ktune.api import parse_cell
    from jupyter_ktune.session import TuningSession
    from jupyter_ktune.ui.app import KernelPanel

    src = "# ktune: BLOCK in [1, 2]\ndef scale(x, y, n):\n    y[:] = 2 * x\n"
    ns = {"inputs": lambda: dict(x=np.random.rand(64), y=np.empty(64), n=64),
          "reference": lambda x, y, n: 2 * x}
    spec = parse_cell("scale --backend fake --inputs inputs --reference reference --out y "
                      "--budget-ms 5", src, ns)
    panel = KernelPanel(TuningSession(spec, worker, {}, prefetch=False), spec.space.config({}))
    assert panel.result is not None and panel.breakdown.button.description == "Cycle breakdown"
    panel.breakdown.start().join(60)
    text = panel.breakdown.status.value
    assert "no scope profiler wired for --backend fake" in text
    # no ncu on this machine: the per-line view says so instead of failing
    assert panel.breakdown.last is not None and not panel.breakdown.last.lines
    assert "ncu" in " ".join(panel.breakdown.last.notes)
    assert len(panel.breakdown.timings) == 1
    panel.session.close()
