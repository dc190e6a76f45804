"""The worker's static reports: one per variant and arch, built in a thread beside the run.

A report is built once and reused by later requests of the same variant (one nvcc run per
variant), or seeded from a sweep's compile pool (:func:`seed_static`). A report that failed
because of the inputs (a Triton cell's argument types come from them: a list where an array
belongs, an inputs function that raises) is the run's error to report, not the report's: it is
not kept, so the next run, on fixed inputs, builds the report again (issue 34: the first bad
input's failure was appended to every later result of the same cell).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from typing import Any

from jupyter_ktune.backends.base import Backend
from jupyter_ktune.errors import CellError, CompileFailure
from jupyter_ktune.results import RunResult, Status
from jupyter_ktune.space import Config
from jupyter_ktune.spec import KernelSpec

_pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="ktune-static")
_reports: dict[tuple[str, str, Config], Future] = {}


def _build(backend: Backend, spec: KernelSpec,
           config: Config) -> tuple[Any, CompileFailure | CellError | None]:
    try:
        return backend.static_report(spec, config), None
    except (CompileFailure, CellError) as exc:
        return None, exc
    except Exception as exc:  # noqa: BLE001 - a missing tool (no nvcc here) must not cost the run
        return None, CompileFailure(backend.name, f"static report unavailable: {exc}", [])


def _failed_on_inputs(future: Future) -> bool:
    return future.done() and isinstance(future.result()[1], CellError)


def report_future(backend: Backend, spec: KernelSpec, config: Config) -> Future:
    """The future ``(report, failure)`` of the variant's static report: the one kept, else one
    started now. ``failure`` is a CompileFailure, or a CellError the run reports itself."""
    key = (spec.source_hash, spec.options.arch, config)
    future = _reports.get(key)
    if future is None or _failed_on_inputs(future):
        future = _reports[key] = _pool.submit(_build, backend, spec, config)
    return future


def build_ahead(spec: KernelSpec, config: Config) -> bool:
    """Start the report of the config a panel is about to run, on a GPU, where the report is
    the very build the run loads: it builds while the notebook makes the panel (0.36-0.40 s of
    widgets and figures before fla's first run on an H100 host; its build 0.4-1.0 s, which the
    run waited for, c65966b:bench/results/first_minute_ab/2026-12-06-0934). Not under the
    interpreter, whose report is a compile for sm_90 the run does not need
    (:func:`report_later`). Whether a build started.

    The worker asks for it only where the cell's first set was drawn at its start
    (:mod:`.first_set`): a Triton build reads its argument types from an input set, and
    without that one it would draw a set in its thread ahead of the run's own draw. In a
    notebook opened before it ran (no first set), fla's first result was 0.19 s later with the
    tree that built ahead regardless (2.49 s against 2.29 s from the cell's start, median of 3,
    c65966b:bench/results/first_minute_ab/2026-12-06-0945), though that tree also drew the next
    set beside the run's reference there, which may be the cause; five runs a side of the tree
    after it on a quieter host found its opened cell at 1.36 s
    (c65966b:bench/results/first_minute_ab/2026-12-06-1235)."""
    from jupyter_ktune.backends import get_backend

    backend = get_backend(spec.backend)
    if backend.device().compute_capability is None:
        return False
    report_future(backend, spec, config)
    return True


def report_if_done(source_hash: str, arch: str, config: Config) -> tuple[Any, Any] | None:
    """Worker-side, for a result returned before its report (``RunOptions.static_later``):
    ``(report, failure)`` once built (``(None, None)`` when none was started), None while it
    builds. Never waits: the session asks again while it is idle."""
    future = _reports.get((source_hash, arch, config))
    if future is None:
        return None, None
    return future.result() if future.done() else None


def with_block(static: Any, launch: Mapping[str, Any]) -> Any:
    """``static`` with the launch's threads per block where the report has none (a Triton
    report knows its warps only from the config): the occupancy the report shows needs it."""
    block = launch.get("block")
    if static is not None and block and getattr(static, "threads_per_block", 0) is None:
        return replace(static, threads_per_block=math.prod(block))
    return static


def with_report(result: RunResult, static: Any, failure: Any) -> RunResult:
    """A result returned before its report, completed with it: a failure's messages are kept
    as the run keeps them (its diagnostics, and why there is no report in the reason)."""
    static = with_block(static, result.launch)
    if isinstance(failure, CompileFailure):
        why = str(failure) if failure.diagnostics else failure.log
        return replace(result, static=static, static_pending=False,
                       diagnostics=result.diagnostics or tuple(failure.diagnostics),
                       reason=f"{result.reason}; {why}" if result.reason else why)
    return replace(result, static=static, static_pending=False)


def seed_static(source_hash: str, arch: str, config: Config, static: Any) -> bool:
    """Take a static report compiled ahead (by a sweep's pool) so the run does not recompile it.

    Returns False when this worker already has (or is building) one for the variant.
    """
    key = (source_hash, arch, config)
    if key in _reports:
        return False
    done: Future = Future()
    done.set_result((static, None))
    _reports[key] = done
    return True


def report_later(spec: KernelSpec, static: Future, status: Status) -> bool:
    """Whether a run returns before its static report (``RunOptions.static_later``): when the
    run itself went through and the report is still building. Under the interpreter the report
    is a compile for sm_90 in a child process (seconds of the quickstart's Triton cell); on a GPU
    the run loaded the report's own build, and what is left is reading its SASS (cuobjdump and
    its count: the "static report" phase, up to 0.27 s, of fla's first results on an H100, run
    2026-12-05-1839). The run needs neither; a run that failed waits for it, to tell a compile
    error from its symptom."""
    return (spec.options.static_later and not static.done()
            and status in (Status.OK, Status.WRONG))
