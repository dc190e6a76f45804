"""The result API a notebook reads (issue 14 item 4) and the honest interpreter verdict (issue 16
item 4): ``%%kernel -o NAME``, ``panel.result`` / ``.history`` / ``.tune()``, ``report.counts``;
host time under an interpreter never ranks configs that differ only in GPU launch options."""

from __future__ import annotations

import numpy as np
import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

from jupyter_ktune.api import parse_cell
from jupyter_ktune.results import RunResult, Status
from jupyter_ktune.space import Config
from jupyter_ktune.tuning.report import TuneReport, decide
from jupyter_ktune.tuning.store import StoredResult
from jupyter_ktune.ui.app import KernelPanel

SRC = """# ktune: BLOCK in [1, 2, 4]
import time
def scale(x, y, n):
    time.sleep(0.001 * BLOCK)
    y[:] = 2 * x
"""
NS = {"inputs": lambda: dict(x=np.random.rand(64), y=np.empty(64), n=64),
      "reference": lambda x, y, n: 2 * x}
LINE = "scale --backend fake --inputs inputs --reference reference --out y --budget-ms 5"
INTERPRETER = "Triton interpreter, host time (not GPU time)"


@pytest.fixture(scope="module")
def ip(worker):
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "jupyter_ktune")
    shell.user_ns.update(NS)
    return shell


@pytest.fixture()
def panel(ip):
    p = ip.run_cell_magic("kernel", LINE + " -o scale_panel", SRC)
    yield p
    p.session.close()


def test_dash_o_stores_the_panel_in_the_notebook_variable(ip, panel):
    assert ip.user_ns["scale_panel"] is panel and isinstance(panel, KernelPanel)
    assert panel.result.status is Status.OK


def test_dash_dash_name_stores_the_run_result_when_there_is_no_panel(ip):
    r = ip.run_cell_magic("kernel", LINE + " --no-panel --config BLOCK=2 --name r2", SRC)
    assert isinstance(r, RunResult) and ip.user_ns["r2"] is r
    assert r.config == {"BLOCK": 2} and r.status is Status.OK


def test_a_name_that_is_not_a_variable_is_a_one_line_error(ip):
    with pytest.raises(UsageError, match=r"cell line 1: -o/--name '2x' is not a Python variable"
                                         r".*Write -o NAME"):
        ip.run_cell_magic("kernel", LINE + " -o 2x", SRC)


def test_result_after_a_slider_change_is_the_shown_config(panel):
    panel.controls.widgets["BLOCK"].value = 4
    r = panel.result
    assert r.config == {"BLOCK": 4} == panel.controls.values
    assert r is panel.current and "BLOCK" in panel.card.value and "4" in panel.card.value


def test_history_grows_with_every_delivered_result_in_order(panel):
    first = panel.history
    assert [h.config for h in first] == [{"BLOCK": 1}]
    for b in (2, 4):
        panel.controls.widgets["BLOCK"].value = b
        panel.result  # noqa: B018 - served
    history = panel.history
    assert [h.config["BLOCK"] for h in history] == [1, 2, 4]
    assert history[-1] is panel.result and isinstance(history, tuple)
    assert len(first) == 1  # a copy: what a cell read earlier does not change under it


def test_tune_blocks_returns_the_report_and_shows_the_sweep(panel, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the default store is ./.ktune.sqlite
    before = len(panel.history)
    report = panel.tune("exhaustive", top_k=2)
    assert isinstance(report, TuneReport) and len(report.evaluations) == 3
    assert report.counts == {"ok": 3}
    assert report.best.config == {"BLOCK": 1}
    # three sweep results, two re-timed and the winner run live once more
    assert len(panel.history) - before == 3 + 2 + 1
    assert panel.result.config == {"BLOCK": 1} and (tmp_path / ".ktune.sqlite").exists()
    with pytest.raises(ValueError, match="budget must be a positive number"):
        panel.tune(budget=0)


def test_calling_counts_as_the_old_method_still_works_and_warns(panel, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    report = panel.tune("exhaustive", budget=2, top_k=0)
    with pytest.warns(DeprecationWarning, match="write report.counts"):
        assert report.counts() == {"ok": 2}


# -- the verdict under an interpreter ------------------------------------------------------------
def _stored(config, median_us, method=INTERPRETER, n=40, seed=0):
    rng = np.random.default_rng(seed)
    times = median_us * 1e-3 * (1 + 0.002 * rng.standard_normal(n))
    return StoredResult(Config(config), Status.OK, times_ms=times, method=method)


def test_interpreter_host_time_declares_no_winner_among_launch_options_only():
    final = [_stored({"BLOCK": 64, "num_warps": 8}, 100.0),
             _stored({"BLOCK": 64, "num_warps": 4}, 103.0, seed=1)]
    v = decide(final)
    assert v.runner_up is None and not v.significant
    assert v.twins == (Config({"BLOCK": 64, "num_warps": 4}),)
    text = v.text()
    assert "faster than" not in text and "winner BLOCK" not in text
    assert text.startswith("no winner declared among BLOCK=64 num_warps=8, BLOCK=64 num_warps=4")
    assert ("host time under the Triton interpreter: num_warps do not change what runs; no "
            "winner declared among configs that differ only in them") in text


def test_interpreter_compares_the_fastest_other_program_and_names_it_without_warps():
    final = [_stored({"BLOCK": 64, "num_warps": 8}, 100.0),
             _stored({"BLOCK": 64, "num_warps": 4}, 101.0, seed=1),
             _stored({"BLOCK": 128, "num_warps": 4}, 150.0, seed=2)]
    v = decide(final)
    assert v.runner_up == {"BLOCK": 128, "num_warps": 4} and v.significant
    text = v.text()
    assert text.startswith("winner BLOCK=64, faster than BLOCK=128 by 50.")
    assert "num_warps do not change what runs" in text


def test_device_time_still_ranks_launch_options():
    method = "CUDA events around the kernel, L2 flushed"
    final = [_stored({"BLOCK": 64, "num_warps": 8}, 100.0, method),
             _stored({"BLOCK": 64, "num_warps": 4}, 110.0, method, seed=1)]
    v = decide(final)
    assert v.significant and v.twins == () and v.inert == ()
    assert v.text().startswith("winner BLOCK=64 num_warps=8, faster than BLOCK=64 num_warps=4")


def test_cli_tune_counts_the_retiming_apart_from_the_sweep(tmp_path, capsys, cli_kernel):
    from jupyter_ktune.cli import main

    kernel, setup = cli_kernel(LINE, SRC)
    code = main(["tune", str(kernel), "--setup", str(setup), "--strategy", "exhaustive",
                 "--store", str(tmp_path / "s.sqlite"), "--workers", "1", "--top-k", "2"])
    err = capsys.readouterr().err.splitlines()
    assert code == 0
    steps = [line.split("]")[0] + "]" for line in err if line.startswith("[")]
    assert steps == ["[1/3]", "[2/3]", "[3/3]", "[re-timing 1/2]", "[re-timing 2/2]"]


def test_triton_interpreter_sweep_over_num_warps_declares_no_winner(tmp_path, monkeypatch):
    pytest.importorskip("triton")
    pytest.importorskip("torch")
    from jupyter_ktune.runner.client import DeviceWorker
    from jupyter_ktune.tuning import tune

    monkeypatch.setenv("KTUNE_FORCE_INTERPRET", "1")  # the same meaning on a GPU machine
    src = """# ktune: BLOCK in [128]; num_warps in [2, 4, 8]; grid = cdiv(n, BLOCK)
@triton.jit
def vadd(x, y, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=mask) + tl.load(y + offs, mask=mask), mask=mask)
"""
    ns = {"inputs": lambda: dict(x=np.random.rand(256).astype(np.float32),
                                 y=np.random.rand(256).astype(np.float32),
                                 out=np.empty(256, np.float32), n=256),
          "reference": lambda x, y, out, n: x + y}
    spec = parse_cell("vadd --backend triton --inputs inputs --reference reference --out out "
                      "--budget-ms 20", src, ns)
    with DeviceWorker() as w:
        report = tune(spec, "exhaustive", store=tmp_path, workers=[w], top_k=3,
                      compile_workers=0)
    assert report.counts == {"ok": 3}
    text = report.summary()
    assert "faster than" not in text and "not distinguishable" not in text
    assert "no winner declared among BLOCK=128 num_warps=" in text
    assert "host time under the Triton interpreter: num_warps do not change what runs" in text
