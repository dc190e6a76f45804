"""A swept config's SASS mix is filled in when the config runs alone (issue 35 item 4).

A sweep's compile pool skips the disassembly (``SASS_SKIPPED``); the worker then runs the config
from that report. Before, the mix stayed "not disassembled during the sweep" after the user moved
onto the config; now the session reads it from the report's kept cubin once per config.
"""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path

from test_panel import LINE, NS, SRC

from jupyter_ktune import session as session_module
from jupyter_ktune.api import parse_cell
from jupyter_ktune.measure import sass
from jupyter_ktune.measure.sass import SASS_SKIPPED, parse_sass, with_sass
from jupyter_ktune.measure.static import KernelStatic, StaticReport
from jupyter_ktune.results import RunResult, Status
from jupyter_ktune.session import TuningSession
from jupyter_ktune.toolchain import ToolNotFound
from jupyter_ktune.tuning.runners import seed_static

HOPPER = "_Z6hopper4TMapPKfPfmm"
DUMP = Path(__file__).parent / "fixtures" / "static" / "sass_hopper_cuobjdump.txt"


def _swept_report(name: str = HOPPER) -> StaticReport:
    kernel = KernelStatic(name=name, demangled=name, registers=40, smem_static=0,
                          spill_stores=0, spill_loads=0, stack_frame=0, local_memory=0,
                          barriers=1)
    return StaticReport(arch="sm_90a", versions={}, kernels={name: kernel},
                        sass_error=SASS_SKIPPED, cubin=b"the kept cubin")


def test_with_sass_reads_the_kept_cubin(monkeypatch):
    seen = []
    monkeypatch.setattr(sass, "sass_mix",
                        lambda cubin: seen.append(cubin) or parse_sass(DUMP.read_text()))
    full = with_sass(_swept_report())
    assert seen == [b"the kept cubin"]
    assert full.sass_error == "" and full.kernels[HOPPER].sass.uses_wgmma
    assert with_sass(full) is full  # a whole report is left alone


def test_a_mix_read_later_names_its_disassembler(monkeypatch):
    """A sweep's report completed later says which tool read its mix, as one built with its
    mix does (``versions["disassembler"]``); a failed reading adds no tool."""
    monkeypatch.setattr(sass, "sass_mix", lambda cubin: parse_sass(DUMP.read_text()))
    monkeypatch.setattr(sass, "disassembler_version", lambda: "cuobjdump 13.0.85")
    swept = dataclasses.replace(_swept_report(), versions={"nvcc": "13.0.88"})
    assert with_sass(swept).versions == {"nvcc": "13.0.88", "disassembler": "cuobjdump 13.0.85"}
    assert swept.versions == {"nvcc": "13.0.88"}  # the swept report itself is not changed

    def broken(_cubin):
        raise RuntimeError("[ktune] cuobjdump -sass failed: bad cubin")
    monkeypatch.setattr(sass, "sass_mix", broken)
    assert with_sass(swept).versions == {"nvcc": "13.0.88"}


def test_with_sass_says_why_when_it_cannot_disassemble(monkeypatch):
    def missing(_cubin):
        raise ToolNotFound("[ktune] cuobjdump not found: pip install nvidia-cuda-cupti")
    monkeypatch.setattr(sass, "sass_mix", missing)
    report = with_sass(_swept_report())
    assert report.sass_error.startswith("[ktune] cuobjdump not found")
    assert report.kernels[HOPPER].sass is None


def test_a_swept_config_run_alone_no_longer_says_not_disassembled(worker):
    spec = parse_cell(LINE, SRC, NS)
    limits = {"SMEM_PER_BLOCK": 1000}
    config = spec.space.config({"BLOCK": 2, "SWIZZLE": "64B"})
    # what a sweep leaves in the worker: its compile pool's report, SASS skipped
    assert worker.call(seed_static, spec.source_hash, spec.options.arch, config,
                       _swept_report(spec.name))
    session = TuningSession(spec, worker, limits, prefetch=False)
    try:
        session.request(dict(config))
        assert session.wait_idle(60) and session.wait_reports(60)
        static = session.history[-1].result.static
        # filled here where a disassembler exists; elsewhere its own reason (no cuobjdump, or
        # this fixture's cubin is not a real one) replaces the sweep's note
        assert static is not None and static.sass_error != SASS_SKIPPED
        assert session._sass[config] is static  # once per config
    finally:
        session.close()


class StandInWorker:
    """A stand-in device worker: a run comes back at once with a sweep's report (SASS skipped);
    like the real one (``DeviceWorker.request``'s lock) it serves one request at a time."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.calls: list[str] = []

    def run(self, spec, config, timeout=None, violations=None):
        with self.lock:
            return RunResult(name=spec.name, backend=spec.backend, config=dict(config),
                             status=Status.OK, static=_swept_report())

    def call(self, fn, *args, timeout=60.0, **kwargs):
        with self.lock:
            self.calls.append(getattr(fn, "__name__", type(fn).__name__))
            return fn(*args, **kwargs)

    def device(self, backend="cuda"):
        with self.lock:
            return "the device"

    def compile(self, spec, config, timeout=None):
        return None

    def abandon(self, *args, **kwargs):
        return False


class _HeldDisassembly:
    """``with_sass`` held until the test lets it go."""

    def __init__(self) -> None:
        self.release, self.entered = threading.Event(), threading.Event()
        self.calls = 0

    def __call__(self, report):
        self.calls += 1
        self.entered.set()
        assert self.release.wait(30)
        return dataclasses.replace(report, sass_error="")


def stand_in_session(worker, prefetch: bool):
    """The test cell's session on a stand-in ``worker``, and the config both tests ask for."""
    spec = parse_cell(LINE, SRC, NS)
    session = TuningSession(spec, worker, {"SMEM_PER_BLOCK": 1000}, prefetch=prefetch)
    return spec, session, spec.space.config({"BLOCK": 2, "SWIZZLE": "64B"})


def test_the_run_is_delivered_before_its_disassembly(monkeypatch):
    """After a sweep the winner's run waited about a second for its SASS mix (issue 33): the run
    now goes out at once and the mix follows as a late delivery of the same request."""
    held = _HeldDisassembly()
    monkeypatch.setattr(session_module, "with_sass", held)
    _spec, session, config = stand_in_session(StandInWorker(), prefetch=False)
    try:
        session.request(dict(config))
        assert session.wait_idle(10)  # delivered while the disassembly is held
        first = session.history[-1]
        assert not first.late and first.result.static.sass_error == SASS_SKIPPED
        assert not session.wait_reports(0.3)  # panel.result waits for the mix
        held.release.set()
        assert session.wait_reports(10)
        late = session.history[-1]
        assert late.late and late.ticket == first.ticket
        assert late.result.static.sass_error == ""
        # the same config again: its mix is known, so no second disassembly and nothing late
        session.request(dict(config))
        assert session.wait_idle(10) and session.wait_reports(10)
        assert session.history[-1].result.static.sass_error == "" and not session.history[-1].late
        assert held.calls == 1
    finally:
        held.release.set()
        session.close()


def test_the_worker_is_free_while_the_session_disassembles(monkeypatch):
    """An Autotune pressed as the first result showed waited 1.9-3.1 s before its sweep began
    (bench/results/corpus_vs_autotune/2026-12-05-1506): the sweep's first requests queued
    behind the session's. The disassembly now runs on the session thread, not in the worker."""
    held = _HeldDisassembly()
    monkeypatch.setattr(session_module, "with_sass", held)
    worker = StandInWorker()
    _spec, session, config = stand_in_session(worker, prefetch=False)
    try:
        session.request(dict(config))
        assert session.wait_idle(10) and held.entered.wait(10)
        answered: list[str] = []
        asking = threading.Thread(target=lambda: answered.append(worker.device()), daemon=True)
        asking.start()
        asking.join(2)
        assert answered == ["the device"]  # a sweep's device question, answered at once
        assert worker.calls == []
    finally:
        held.release.set()
        session.close()


class _BrokenPipe(StandInWorker):
    """A stand-in worker whose pipe breaks under a prefetch compile and under one run."""

    def __init__(self) -> None:
        super().__init__()
        self.runs = 0

    def run(self, spec, config, timeout=None, violations=None):
        self.runs += 1
        if self.runs == 1:
            raise BrokenPipeError(32, "Broken pipe")
        return super().run(spec, config, timeout, violations)

    def compile(self, spec, config, timeout=None):
        raise BrokenPipeError(32, "Broken pipe")


def test_a_request_that_raises_costs_one_result_not_the_session():
    """A closed pipe under a panel's request (seen in CI: a closing session's abandon killed the
    worker under a prefetch compile) ended the session thread with a traceback, and every later
    slider move of that panel went unanswered."""
    spec, session, config = stand_in_session(_BrokenPipe(), prefetch=True)
    try:
        session.request(dict(config))
        assert session.wait_idle(10)
        crashed = session.history[-1].result
        assert crashed.status is Status.CRASHED and "BrokenPipeError" in crashed.reason
        session.request(dict(config))  # after a prefetch compile raised too
        assert session.wait_idle(10) and session.history[-1].result.status is Status.OK
        import time

        deadline = time.monotonic() + 10  # the idle session prefetches a neighbour: it raises
        while session.prefetch and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not session.prefetch
        session.request(dict(spec.space.config({"BLOCK": 4, "SWIZZLE": "64B"})))
        assert session.wait_idle(10) and session.history[-1].result.status is Status.OK
        assert session._thread.is_alive()
    finally:
        session.close()
