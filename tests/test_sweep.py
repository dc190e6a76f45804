"""The sweep engine on the fake CPU backend: store, resume, stop, precompile, winner, Dask."""

from __future__ import annotations

import os
import threading

import numpy as np
import pytest

from jupyter_ktune.api import parse_cell
from jupyter_ktune.results import Status
from jupyter_ktune.tuning import Store, TuneOptions, tune
from jupyter_ktune.tuning.sweep import Sweep


def inputs():
    x = np.random.rand(256)
    return dict(x=x, y=np.empty_like(x), n=256)


def reference(x, y, n):
    return 2 * x


# The "kernel" busy-waits for a time that depends on the config: BLOCK=4, VEC=2 is fastest by far,
# BLOCK=1 and VEC=8 breaks (wrong result), and BLOCK*VEC > 16 is not allowed.
SRC = """# ktune: BLOCK in [1, 2, 4, 8]; VEC in [1, 2, 4, 8]; require BLOCK * VEC <= 16
import time
def scale(x, y, n):
    cost = 1e-4 * (1 + abs(BLOCK - 4) + abs(VEC - 2)) ** 1.5
    t = time.perf_counter() + cost
    while time.perf_counter() < t:
        pass
    if BLOCK == 1 and VEC == 8:
        y[:] = 0
        return
    y[:] = 2 * x
"""
NS = {"inputs": inputs, "reference": reference}
LINE = "scale --backend fake --inputs inputs --reference reference --out y --budget-ms 4"


def make_spec(src=SRC):
    return parse_cell(LINE, src, NS)


def test_exhaustive_sweep_stores_everything_and_finds_the_winner(worker, tmp_path):
    spec = make_spec()
    seen = []
    report = tune(spec, "exhaustive", store=tmp_path, workers=[worker], on_result=seen.append,
                  options=TuneOptions(seed=1, top_k=3, final_budget_factor=3))
    valid = list(spec.space.configs({"SMEM_PER_BLOCK": 1000}))
    assert report.valid_configs == len(valid) == len(report.evaluations)
    assert report.best.config == {"BLOCK": 4, "VEC": 2}
    assert report.counts[Status.WRONG.value] == 1
    assert report.verdict is not None and report.verdict.winner == {"BLOCK": 4, "VEC": 2}
    # the runner-up busy-waits 2.8x as long (cost ~ (1 + distance) ** 1.5): a clear win, said so
    assert report.verdict.runner_up == {"BLOCK": 4, "VEC": 1}
    assert report.verdict.significant and report.verdict.lo > 1.5, report.verdict.text()
    assert "winner BLOCK=4" in report.verdict.text() and "faster than" in report.verdict.text()
    assert [p.done for p in seen if p.stage == "sweep"] == list(range(1, len(valid) + 1))
    assert seen[-1].stage == "final" and seen[-1].best is not None
    with Store(tmp_path) as store:
        (key,) = store.keys()
        assert key.source_hash == spec.source_hash and key.device == "fake CPU device"
        rows = store.results(key)
        assert len(rows) == len(valid)
        assert len(store.results(key, stage="final")) == 3
        wrong = [r for r in rows if r.status is Status.WRONG]
        assert wrong[0].reason and wrong[0].times_ms is not None


def test_a_second_sweep_resumes_from_the_store_and_retime_forces_timing(worker, tmp_path):
    spec = make_spec()
    first = tune(spec, "random", budget=5, store=tmp_path, workers=[worker], top_k=0)
    assert not any(e.cached for e in first.evaluations)
    again = tune(spec, "random", budget=8, store=tmp_path, workers=[worker], top_k=0)
    cached = [e for e in again.evaluations if e.cached]
    assert len(cached) == 5 and len(again.evaluations) == 8  # same seed: same first five
    forced = tune(spec, "random", budget=3, store=tmp_path, workers=[worker], top_k=0,
                  retime=True)
    assert not any(e.cached for e in forced.evaluations)


def test_an_edited_kernel_never_reuses_stored_timings(worker, tmp_path):
    tune(make_spec(), "exhaustive", budget=3, store=tmp_path, workers=[worker], top_k=0)
    edited = make_spec(SRC.replace("1e-4", "2e-4"))
    report = tune(edited, "exhaustive", budget=3, store=tmp_path, workers=[worker], top_k=0)
    assert not any(e.cached for e in report.evaluations)


def test_stop_ends_the_sweep_early_and_says_so(worker, tmp_path):
    spec = make_spec()
    holder = {}

    def on_result(p):
        if p.done == 3:
            holder["sweep"].stop()

    sweep = Sweep(spec, "exhaustive", store=tmp_path, workers=[worker], on_result=on_result)
    holder["sweep"] = sweep
    report = sweep.run()
    assert report.stopped and 3 <= len(report.evaluations) < report.valid_configs
    assert report.final == ()


def test_precompile_pool_and_two_workers(tmp_path):
    spec = make_spec()
    report = tune(spec, "greedy", budget=8, store=tmp_path, workers=2,
                  options=TuneOptions(compile_workers=2, top_k=2))
    assert len(report.evaluations) == 8 and report.info["compile_workers"] == 2
    assert report.info["device_slots"] == 2
    # the timeline: each config compiled before it was queued, run after, re-timed last
    from jupyter_ktune.tuning.timeline import config_label

    seen: dict[str, list[str]] = {}
    for _at, kind, label in report.info["timeline"]:
        seen.setdefault(label, []).append(kind)
    for e in report.evaluations:
        assert seen[config_label(e.result.config)][:4] == [
            "compile sent", "compile back", "run sent", "run back"]
    finals = [config_label(r.config) for r in report.final]
    assert len(finals) == 2 and all(seen[f][4:] == ["final sent", "final back"] for f in finals)
    waits = report.info["waits_s"]
    assert waits["compile"] > 0 and waits["run"] > 0 and waits["final"] > 0


def test_compile_pool_is_kept_for_the_next_sweep_unless_the_cache_dir_changes(tmp_path,
                                                                               monkeypatch):
    from jupyter_ktune.tuning import runners

    spec = make_spec()
    seen = []
    real = runners.shared_pool

    def spy(workers, backend):
        seen.append(real(workers, backend))
        return seen[-1]

    import sys

    monkeypatch.setattr(sys.modules["jupyter_ktune.tuning.sweep"], "shared_pool", spy)
    opts = TuneOptions(compile_workers=1, top_k=0, retime=True)
    for _ in range(2):
        tune(spec, "exhaustive", budget=2, store=tmp_path, options=opts)
    assert len(seen) == 2 and seen[0] is seen[1]  # the second sweep reused the first's processes
    assert seen[0].submit(abs, -3).result(timeout=60) == 3  # and it still works
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "other"))
    assert real(1, spec.backend) is not seen[0]  # a compile environment change: new processes
    runners.close_pools()
    assert real(1, spec.backend) is not seen[0]


def test_unknown_strategy_lists_the_known_ones(worker, tmp_path):
    with pytest.raises(ValueError, match="exhaustive.*greedy.*random.*tpe"):
        tune(make_spec(), "annealing", store=tmp_path, workers=[worker])


def test_the_ui_thread_can_stop_a_sweep_from_another_thread(worker, tmp_path):
    ev = threading.Event()
    ev.set()  # already stopped: nothing runs
    report = tune(make_spec(), "exhaustive", store=tmp_path, workers=[worker], stop=ev)
    assert report.stopped and report.evaluations == ()


@pytest.mark.slow
def test_dask_local_cluster_fans_out_into_the_same_store(tmp_path):
    distributed = pytest.importorskip("distributed")
    env = {k: os.environ[k] for k in ("KTUNE_BACKEND_MODULES", "PYTHONPATH")}
    with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                  dashboard_address=None, env=env) as cluster, \
            distributed.Client(cluster) as client:
        spec = make_spec()
        seen = []
        report = tune(spec, "exhaustive", store=tmp_path, client=client, on_result=seen.append,
                      top_k=2)
        pids = client.run(os.getpid)
    assert len(report.evaluations) == report.valid_configs and len(pids) == 2
    assert report.best.config == {"BLOCK": 4, "VEC": 2}
    with Store(tmp_path) as store:
        assert len(store.results(store.keys()[0])) == report.valid_configs


def test_panel_autotune_button_streams_results_and_selects_the_winner(worker, tmp_path):
    from jupyter_ktune.session import TuningSession
    from jupyter_ktune.ui.app import KernelPanel

    spec = make_spec()
    limits = {"SMEM_PER_BLOCK": 1000}
    session = TuningSession(spec, worker, limits, prefetch=False)
    try:
        panel = KernelPanel(session, spec.space.default(limits), ceilings=None)
        panel.result  # noqa: B018 - the first run is served
        bar = panel.autotune
        bar.store = tmp_path
        bar.strategy.value, bar.budget.value = "exhaustive", 6
        before = len(panel.latencies)
        bar.start_button.click()
        bar.thread.join(120)
        assert bar.report is not None and len(bar.report.evaluations) == 6
        assert bar.bar.value == 6 and bar.bar.max == 6
        assert "best" in bar.label.value and not bar.start_button.disabled
        assert len(panel.latencies) - before >= 6  # streamed into history and heatmap
        best = bar.report.best.config
        assert session.wait_idle(60)
        assert panel.current.config == dict(best)
    finally:
        session.close()


def test_cli_tune_prints_the_report_and_the_export(tmp_path, capsys, cli_kernel):
    from jupyter_ktune.cli import main

    kernel, setup = cli_kernel(LINE, SRC)
    code = main(["tune", str(kernel), "--setup", str(setup), "--strategy", "random",
                 "--budget", "4", "--store", str(tmp_path / "s.sqlite"), "--workers", "1",
                 "--export", "cpp", "--top-k", "2"])
    out = capsys.readouterr().out
    assert code == 0 and "4 of 13 valid configs by 'random'" in out
    assert "constexpr int KT_SCALE_BLOCK" in out


def test_the_pool_summary_adds_phases_and_finds_the_first_and_longest():
    from jupyter_ktune.tuning.pool import pool_summary

    got = pool_summary([(2.0, {"compile": 1.0, "total": 1.5}), (0.5, {"compile": 3.0,
                                                                       "total": 4.0}),
                        (9.0, {})])  # a failed task: no phases, left out
    assert got == {"n": 2, "sum_s": 5.5, "max_s": 4.0, "first_back_s": 0.5,
                   "phases_s": {"compile": 4.0}}
    assert pool_summary([]) == {}
