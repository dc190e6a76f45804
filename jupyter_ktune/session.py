"""One tuning session per cell: the current config, newest-request-wins, history, prefetch.

The panel calls :meth:`TuningSession.request` on every control change. A single background
thread serves requests; when several arrive while a variant is being timed, only the newest is
served next (the others are dropped: a drag produces many), and a result that arrives for a
request that is no longer the newest is delivered as *stale*: it may fill the history but never
replaces what the panel shows as current. While idle the thread asks the worker to compile the
current config's neighbours (those the compile pool has not been sent, :meth:`compiled_elsewhere`),
so the next step of a drag finds its variant compiled, and fetches the static reports its
results came without (an interpreter's run returns before its sm_90 compile,
``RunOptions.static_later``) or disassembles the SASS mix a sweep's compile skipped, each
delivered again as *late*: the run itself is never held for them (after a sweep the winner's
run waited about a second for its disassembly, issue 33).

No widgets here: the UI subscribes with a callback, tests drive it directly.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from jupyter_ktune.errors import KtuneError
from jupyter_ktune.measure.sass import SASS_SKIPPED, with_sass
from jupyter_ktune.results import RunResult, Status
from jupyter_ktune.runner.client import DeviceWorker
from jupyter_ktune.runner.static_reports import report_if_done, with_report
from jupyter_ktune.space import Config
from jupyter_ktune.spec import KernelSpec


@dataclass(frozen=True)
class Delivery:
    """A result handed to subscribers: whether it is the newest request's, and how fast."""

    result: RunResult
    ticket: int
    current: bool
    requested_at: float
    served_at: float
    precompiled: bool
    #: the same request's result completed after its delivery (its static report, fetched once
    #: the run had returned without it): views replace that result and add no new point
    late: bool = False

    @property
    def latency_s(self) -> float:
        """Seconds from the control change to the result being delivered."""
        return self.served_at - self.requested_at


@dataclass
class _State:
    latest: int = 0
    wanted: tuple[int, Config, float, list[str] | None] | None = None
    compiled: set[Config] = field(default_factory=set)  # by this session's worker requests
    elsewhere: set[Config] = field(default_factory=set)  # sent to the compile pool
    closed: bool = False


_active: list[Any] = [None]  # the session that took the latest request (see _prefetch_one)


def quiet_prefetch() -> None:
    """Stop every session's prefetching until one takes a request: a new cell is starting and
    its requests should not wait behind an earlier panel's neighbour compiles."""
    _active[0] = None

class TuningSession:
    """Serve config requests for one kernel spec; newest wins.

    Parameters
    ----------
    spec
        The parsed cell.
    worker
        The device worker that compiles and runs variants.
    limits
        Device limits for ``require`` constraints (from the worker's DeviceInfo).
    prefetch
        Compile the neighbours of each served config while idle.

    Examples
    --------
    >>> s = TuningSession(spec, worker, limits)          # doctest: +SKIP
    >>> s.subscribe(lambda d: print(d.current, d.result))  # doctest: +SKIP
    >>> s.request({"BLOCK": 256})                         # doctest: +SKIP
    """

    def __init__(self, spec: KernelSpec, worker: DeviceWorker,
                 limits: Mapping[str, int] | None = None, prefetch: bool = True):
        self.spec, self.worker, self.limits = spec, worker, dict(limits or {})
        self._asked = spec.with_options(static_later=True)  # what the worker is sent
        # tickets whose results came before their static report or their SASS mix
        self._late: list[int] = []
        self.prefetch = prefetch
        #: cold costs paid for this session before its first request (the worker's start, the
        #: backend's imports, ms per phase): shown as phases of the first result (issue 33)
        self.cold_phases_ms: dict[str, float] = {}
        self.history: list[Delivery] = []
        self.current: Config | None = None
        self._subscribers: list[Callable[[Delivery], None]] = []
        self._state = _State()
        self._sass: dict[Config, Any] = {}  # config -> its static report with the SASS mix
        self._cv = threading.Condition()
        self._thread = threading.Thread(target=self._serve, name="ktune-session", daemon=True)
        self._thread.start()

    def subscribe(self, callback: Callable[[Delivery], None]) -> None:
        """Call ``callback(delivery)`` from the session thread for every result."""
        self._subscribers.append(callback)

    def request(self, values: Mapping[str, Any], violations: list[str] | None = None) -> int:
        """Ask for a config; returns its ticket. Only the newest pending request is served.

        ``violations``: what :meth:`violations` said of it, where the caller checked (the panel,
        once per move); the worker takes it instead of checking again. None: the worker checks.
        """
        config = self.spec.space.config(values)
        _active[0] = self  # the panel the user works in now: only it prefetches
        with self._cv:
            self._state.latest += 1
            self._state.wanted = (self._state.latest, config, time.perf_counter(), violations)
            self.current = config
            self._cv.notify()
            return self._state.latest

    def violations(self, values: Mapping[str, Any]) -> list[str]:
        """Why a config is not allowed on this device (empty when it is): the panel's one check
        per move. ``limits`` are the worker's (``DeviceWorker.limits``: its device's and the
        inputs' values the lines name), so the outcome is the worker's own (issue 34, 37)."""
        return self.spec.space.violations(self.spec.space.config(values), self.limits)

    def compiled_elsewhere(self, configs: Iterable[Config]) -> None:
        """Never prefetch ``configs`` in the worker: the compile pool has them
        (``tuning.compile_ahead``), and the worker's own compile of one (ptxas took 9-22 s for
        one config of fla's activations, bench/results/corpus_vs_autotune/2026-12-05-1506)
        held every request behind it, an Autotune pressed meanwhile too. A config the user
        then moves to loads the pool's binary from the compile cache; its delivery does not
        say ``precompiled``, which stays what the worker itself compiled ahead."""
        with self._cv:
            self._state.elsewhere.update(configs)

    def wait_idle(self, timeout: float = 60.0) -> bool:
        """Block until no request is pending or being served (tests, benchmarks).

        An Interrupt while waiting abandons the request being served (:meth:`abandon`)."""
        deadline = time.perf_counter() + timeout
        try:
            with self._cv:
                while self._state.wanted is not None or self._busy:
                    left = deadline - time.perf_counter()
                    if left <= 0:
                        return False
                    self._cv.wait(left)
        except BaseException:
            self.abandon()
            raise
        return True

    def wait_reports(self, timeout: float = 300.0) -> bool:
        """Block until the results delivered without their static report or SASS mix have it
        (``late`` deliveries; ``panel.result`` waits for them). False on timeout."""
        deadline = time.perf_counter() + timeout
        with self._cv:
            while self._late and not self._state.closed:
                left = deadline - time.perf_counter()
                if left <= 0:
                    return False
                self._cv.wait(min(left, 0.5))
        return True

    def abandon(self, for_good: bool = False) -> bool:
        """Give up the request the worker is serving for this session, replacing the worker
        rather than waiting for it (a hanging variant held the next request for its time
        limit, issue 34); its result is delivered as a crash saying so. ``for_good``: refuse
        the session's later requests too (it is closed)."""
        return self.worker.abandon({self._thread}, refuse_later=for_good)

    def close(self) -> None:
        """Stop the session thread (the worker stays: it is shared) and abandon its request."""
        with self._cv:
            self._state.closed = True
            self._cv.notify_all()
        self.abandon(for_good=True)

    # -- the session thread ------------------------------------------------------------------
    _busy = False

    def _take(self) -> tuple[int, Config, float, list[str] | None] | None:
        with self._cv:
            while self._state.wanted is None and not self._state.closed:
                self._busy = False
                self._cv.notify_all()
                if self._late and self._fill_late():  # a report the result came without
                    continue
                # prefetch at once: during a drag the next request comes within ~100 ms
                if self.prefetch and self._prefetch_one():
                    continue
                self._cv.wait(0.5)
            if self._state.closed:
                return None
            wanted, self._state.wanted = self._state.wanted, None
            self._busy = True
            return wanted

    def _serve(self) -> None:
        while True:
            wanted = self._take()
            if wanted is None:
                return
            ticket, config, t0, violations = wanted
            precompiled = config in self._state.compiled
            # the require lines are checked once per request (a config they forbid comes back
            # "not allowed", never run): by the panel, whose outcome the worker takes, else by
            # the worker, where the inputs' values are (issue 34, 37)
            result = self._sass_known(config, self._run(config, violations))
            cold, self.cold_phases_ms = self.cold_phases_ms, {}
            if cold:
                result = replace(result, phases_ms={**cold, **result.phases_ms})
            if result.status not in (Status.COMPILE_ERROR, Status.NOT_ALLOWED):
                self._state.compiled.add(config)
            with self._cv:
                current = ticket == self._state.latest
            d = Delivery(result, ticket, current, t0, time.perf_counter(), precompiled)
            self.history.append(d)
            if result.static_pending or _sass_skipped(result):
                self._late.append(ticket)
            self._notify(d)

    def _run(self, config: Config, violations: list[str] | None) -> RunResult:
        """The worker's run of ``config``; a request that raised (the worker's pipe closed under
        it, as when a closing session abandons it) is one crashed result, not the end of the
        session thread, which would leave the panel's later requests unanswered."""
        try:
            return self.worker.run(self._asked, config, violations=violations)
        except Exception as exc:  # noqa: BLE001 - reported on the result, the session goes on
            return RunResult(name=self.spec.name, backend=self.spec.backend, config=dict(config),
                             status=Status.CRASHED, reason=f"[ktune] the device worker's request "
                             f"failed ({type(exc).__name__}: {exc}); run it again")

    def _notify(self, d: Delivery) -> None:
        result = d.result
        for cb in list(self._subscribers):
            try:
                cb(d)
            except Exception as exc:  # noqa: BLE001 - a broken view must not stop serving
                self.history.append(replace(d, result=replace(
                    result, reason=f"{result.reason} [panel error: {exc}]")))

    def _sass_known(self, config: Config, result: RunResult) -> RunResult:
        """The result with the SASS mix its sweep-built report skipped, where this session
        disassembled that config before (no worker call); else the result as it came."""
        filled = self._sass.get(config) if _sass_skipped(result) else None
        return result if filled is None else replace(result, static=filled)

    def _with_sass(self, config: Config, result: RunResult) -> RunResult:
        """The result with the SASS mix its sweep-built static report skipped (``with_sass``,
        once per config): the config now runs alone, so its report is whole. Called while idle,
        after the result went out without it (a *late* delivery). The disassembler runs here,
        on the session thread, from the cubin the report carries, not in the device worker: a
        worker busy disassembling held an Autotune pressed meanwhile (issue 33)."""
        if not _sass_skipped(result):
            return result
        static = result.static
        filled = self._sass.get(config)
        if filled is None:
            try:
                filled = self._sass[config] = with_sass(static)
            except Exception:  # noqa: BLE001 - a detail of the report, never the run's failure
                return result  # the report keeps its note; the run itself is fine
        return replace(result, static=filled)

    def _fill_late(self) -> bool:
        """Ask the worker, without waiting, for the static report of the oldest result that came
        without it, or its SASS mix (lock held); once there, deliver that result again with it
        (``late``). Whether one was delivered."""
        ticket = self._late[0]
        d = next((h for h in reversed(self.history) if h.ticket == ticket), None)
        sass = d is not None and not d.result.static_pending
        self._cv.release()
        try:
            if sass:  # the SASS mix the sweep's compile skipped, disassembled now
                filled = self._with_sass(Config(d.result.config), d.result)
                got = (filled.static, None)  # the report whole, or with why it could not be
            else:
                got = None if d is None else self.worker.call(
                    report_if_done, self.spec.source_hash, self.spec.options.arch,
                    Config(d.result.config), timeout=30)
        except KtuneError:
            got = (None, None)  # the worker restarted: the report is gone with it
        finally:
            self._cv.acquire()
        if d is not None and got is None:
            return False  # still building: asked again while idle
        if d is not None:
            late = replace(d, result=with_report(d.result, *got), late=True)
            self.history[self.history.index(d)] = late
            self._cv.release()
            try:
                self._notify(late)  # the views have it before wait_reports returns
            finally:
                self._cv.acquire()
            if not sass and _sass_skipped(late.result):
                return True  # the report came from the sweep: its SASS mix next, while idle
        self._late.pop(0)
        self._cv.notify_all()
        return d is not None

    def _prefetch_one(self) -> bool:
        """Compile one not-yet-compiled allowed neighbour of the current config (lock held).

        Only the session asked last prefetches: the device worker is shared, and in a Run All
        each earlier panel's neighbour compiles held the next cell's requests back (the
        quickstart's Pallas cell waited about 45 s behind the Triton panel's, issue 33)."""
        if self.current is None or _active[0] is not self:
            return False
        for n in self.spec.space.neighbours(self.current, self.limits):
            if n not in self._state.compiled and n not in self._state.elsewhere:
                self._state.compiled.add(n)
                self._cv.release()
                try:
                    self.worker.compile(self._asked, n)
                except Exception:  # noqa: BLE001 - a head start only: a request reports it
                    self.prefetch = False  # the worker is failing or gone: stop guessing
                finally:
                    self._cv.acquire()
                return True
        return False


def _sass_skipped(result: RunResult) -> bool:
    """Whether the result's static report is a sweep's, its SASS mix not yet disassembled."""
    return getattr(result.static, "sass_error", "") == SASS_SKIPPED
