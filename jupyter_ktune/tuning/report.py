"""The sweep's result: every evaluation, the top candidates re-timed, and an honest verdict.

The winner is only called faster than the runner-up when the 95% bootstrap confidence interval of
the ratio of their medians (runner-up / winner, resampling the stored per-run times, seeded) lies
wholly above 1. Otherwise the report says the two are not distinguishable.

Host time under an interpreter (the Triton interpreter, Pallas interpret mode) runs the same
program whatever the GPU launch options say (:data:`LAUNCH_OPTIONS`): configs that differ only in
them are never ranked against each other (issue 16), and the verdict says so and why.
"""

from __future__ import annotations

import html
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from jupyter_ktune.render import counted
from jupyter_ktune.space import Config, Space
from jupyter_ktune.stats import bootstrap_medians
from jupyter_ktune.tuning.export import export as export_report
from jupyter_ktune.tuning.store import StoredResult
from jupyter_ktune.tuning.warm import RankingMove


def ratio_ci(winner_ms: np.ndarray, other_ms: np.ndarray, confidence: float = 0.95,
             resamples: int = 4000, seed: int = 0) -> tuple[float, float, float]:
    """Ratio of medians ``median(other) / median(winner)`` and its bootstrap percentile CI.

    Examples
    --------
    >>> r, lo, hi = ratio_ci(np.full(50, 1.0), np.full(50, 1.2))
    >>> round(r, 3), round(lo, 3), round(hi, 3)
    (1.2, 1.2, 1.2)
    """
    a = np.asarray(winner_ms, dtype=float)
    b = np.asarray(other_ms, dtype=float)
    if a.size == 0 or b.size == 0:
        raise ValueError("[ktune] ratio_ci needs runs of both variants")
    rng = np.random.default_rng(seed)
    ma = bootstrap_medians(a, resamples, rng)
    mb = bootstrap_medians(b, resamples, rng)
    ratios = mb / ma
    tail = (1 - confidence) / 2 * 100
    lo, hi = np.percentile(ratios, [tail, 100 - tail])
    return float(np.median(b) / np.median(a)), float(lo), float(hi)


#: GPU launch options (warps, pipeline stages, CTAs per cluster, register cap) as the backends
#: name them in a config: they change how a GPU runs a kernel, never what an interpreter runs.
LAUNCH_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg")
#: What an interpreter runs the same whatever its value: the launch options and the kernel's
#: symbol name (``name_prefix``, a compiler control).
INERT_UNDER_INTERPRETER = (*LAUNCH_OPTIONS, "name_prefix")


def interpreter_of(method: str) -> str | None:
    """Return the interpreter a timing method names (``"Triton interpreter"``), else None.

    Examples
    --------
    >>> interpreter_of("Triton interpreter, host time (not GPU time)")
    'Triton interpreter'
    >>> interpreter_of("CUDA events, L2 flushed") is None
    True
    """
    if "host time" in method and "interpret" in method.lower():
        return method.split(",")[0].strip()
    return None


def _without(config: Config, names: Sequence[str]) -> Config:
    return Config({k: v for k, v in config.items() if k not in names})


@dataclass(frozen=True)
class Verdict:
    """Winner against runner-up after the re-timing.

    Under an interpreter, ``inert`` names the launch options the candidates differ in and
    ``twins`` the candidates that differ from the winner only in them: no winner is declared
    among those, and the runner-up is the fastest candidate that runs a different program.
    """

    winner: Config
    runner_up: Config | None
    ratio: float | None = None  # runner-up median / winner median
    lo: float | None = None
    hi: float | None = None
    significant: bool = False
    interpreter: str = ""
    inert: tuple[str, ...] = ()
    twins: tuple[Config, ...] = ()

    @property
    def why(self) -> str:
        """Why configs that differ only in launch options were not ranked ('' when ranked)."""
        if not self.inert:
            return ""
        return (f"host time under the {self.interpreter}: {'/'.join(self.inert)} do not change "
                "what runs; no winner declared among configs that differ only in them")

    def text(self) -> str:
        """One sentence: faster by a% [lo, hi] 95% CI, not distinguishable, or not ranked."""
        w = _without(self.winner, self.inert).label() or "the winner's program"
        tail = f"; {self.why}" if self.why else ""
        if self.runner_up is None or self.ratio is None:
            if self.twins:
                same = ", ".join(c.label() for c in (self.winner, *self.twins))
                return f"no winner declared among {same}: {self.why}"
            return f"winner {w} (no runner-up to compare){tail}"
        r = _without(self.runner_up, self.inert).label()
        lo, hi = (self.lo or 1.0) - 1, (self.hi or 1.0) - 1
        pct = f"{(self.ratio - 1) * 100:.1f}% [{lo * 100:.1f}, {hi * 100:.1f}]"
        if self.significant:
            return f"winner {w}, faster than {r} by {pct} 95% CI{tail}"
        return (f"winner {w} and runner-up {r} are not distinguishable "
                f"(difference {pct} 95% CI includes 0){tail}")


def decide(final: Sequence[StoredResult], seed: int = 0) -> Verdict | None:
    """Order re-timed candidates by median and compare the winner with the runner-up.

    Under an interpreter the runner-up is the fastest candidate that differs from the winner in
    more than launch options; the ones that differ only in them are listed as its twins.
    """
    ok = sorted((r for r in final if r.ok), key=lambda r: (r.median_ms, r.config.key()))
    if not ok:
        return None
    interpreter = interpreter_of(ok[0].method) or ""
    inert: tuple[str, ...] = ()
    if interpreter:
        inert = tuple(n for n in INERT_UNDER_INTERPRETER
                      if len({r.config.get(n) for r in ok}) > 1)
    program = _without(ok[0].config, inert)
    twins = tuple(r.config for r in ok[1:] if inert and _without(r.config, inert) == program)
    rivals = [r for r in ok[1:] if r.config not in twins]
    kw: dict[str, Any] = {"interpreter": interpreter, "inert": inert, "twins": twins}
    if not rivals:
        return Verdict(ok[0].config, None, **kw)
    ratio, lo, hi = ratio_ci(ok[0].times_ms, rivals[0].times_ms, seed=seed)  # type: ignore[arg-type]
    return Verdict(ok[0].config, rivals[0].config, ratio, lo, hi, significant=lo > 1.0, **kw)


class StatusCounts(dict[str, int]):
    """``TuneReport.counts``: a plain dict; calling it as the old method is deprecated (2026-12)."""

    def __call__(self) -> StatusCounts:
        """Return the counts with a DeprecationWarning: write ``report.counts``."""
        warnings.warn("TuneReport.counts is an attribute now: write report.counts, not "
                      "report.counts()", DeprecationWarning, stacklevel=2)
        return self


@dataclass(frozen=True)
class Evaluation:
    """One config's sweep result with when it arrived (seconds since the sweep started)."""

    result: StoredResult
    at_s: float
    cached: bool = False


@dataclass(frozen=True)
class TuneReport:
    """What ``tune()`` returns: evaluations, the re-timed top-k and the verdict."""

    kernel: str
    backend: str
    strategy: str
    space: Space
    device: str
    evaluations: tuple[Evaluation, ...]
    final: tuple[StoredResult, ...] = ()
    verdict: Verdict | None = None
    elapsed_s: float = 0.0
    stopped: bool = False
    valid_configs: int = 0
    info: Mapping[str, Any] = field(default_factory=dict)
    warm: RankingMove | None = None  # how the ranking moved since the version it started from

    @property
    def best(self) -> StoredResult | None:
        """The winner's re-timed result (or the sweep's fastest when nothing was re-timed)."""
        if self.verdict is not None:
            for r in self.final:
                if r.config == self.verdict.winner:
                    return r
        ok = [e.result for e in self.evaluations if e.result.ok]
        return min(ok, key=lambda r: r.median_ms) if ok else None  # type: ignore[arg-type, return-value]

    @property
    def time_to_best_s(self) -> float | None:
        """Seconds from the start until the sweep's eventual winner had been measured."""
        best = self.best
        for e in self.evaluations:
            if best is not None and e.result.config == best.config:
                return e.at_s
        return None

    @property
    def ranked(self) -> list[StoredResult]:
        """Timed sweep results, fastest first."""
        ok = [e.result for e in self.evaluations if e.result.ok]
        return sorted(ok, key=lambda r: (r.median_ms, r.config.key()))

    @property
    def counts(self) -> StatusCounts:
        """How many evaluations ended in each status (cached ones included): ``{"ok": 12}``."""
        out = StatusCounts()
        for e in self.evaluations:
            out[e.result.status.value] = out.get(e.result.status.value, 0) + 1
        return out

    def summary(self) -> str:
        """Describe in a few lines: counts, time, best and the verdict."""
        cached = sum(e.cached for e in self.evaluations)
        lines = [f"{self.kernel} ({self.backend}) on {self.device}: {len(self.evaluations)} of "
                 f"{self.valid_configs} valid configs by '{self.strategy}' in "
                 f"{self.elapsed_s:.1f} s ({cached} from the store)"
                 + (" - stopped early" if self.stopped else ""),
                 "  " + ", ".join(f"{n} {s}" for s, n in sorted(self.counts.items()))]
        best = self.best
        if best is not None:
            lines.append(f"  best {best.config.label()}: {best.median_ms * 1e3:.2f} µs median "
                         f"({counted(best.times_ms.size, 'run')})")  # type: ignore[union-attr]
        if self.verdict is not None:
            lines.append("  " + self.verdict.text())
        if self.warm is not None:
            lines.append("  " + self.warm.text())
        return "\n".join(lines)

    def export(self, kind: str | None = None, **kw: Any) -> str:
        """Export the winner(s): ``"triton"``, ``"cpp"``, ``"pallas"`` or ``"kernel_tuner"``;
        None: the first format the backend offers (``BackendBase.export_formats``)."""
        return export_report(self, kind, **kw)

    def __repr__(self) -> str:
        return self.summary()

    def _repr_html_(self) -> str:
        rows = "".join(
            f"<tr><td>{i}</td><td><code>{html.escape(r.config.label())}</code></td>"
            f"<td>{r.median_ms * 1e3:.2f}</td><td>{r.times_ms.size}</td></tr>"  # type: ignore[union-attr]
            for i, r in enumerate(self.ranked[:10], 1))
        head = html.escape(self.summary()).replace("\n", "<br>")
        return (f"<div><p>{head}</p><table><tr><th>#</th><th>config</th><th>median µs</th>"
                f"<th>runs</th></tr>{rows}</table></div>")


@dataclass(frozen=True)
class Progress:
    """Handed to ``on_result`` after every evaluation (and once per re-timed candidate)."""

    done: int
    total: int
    elapsed_s: float
    eta_s: float | None
    best: StoredResult | None
    result: StoredResult
    cached: bool
    stage: str = "sweep"
    retimed: tuple[int, int] = (0, 0)  # in the "final" stage: (re-timed so far, of how many)

    def text(self) -> str:
        """``12/64 · ETA 0:41 · best BLOCK=256: 12.3 µs``."""
        s = int(self.eta_s or 0)
        eta = "" if self.eta_s is None else f" · ETA {s // 60}:{s % 60:02d}"
        best = "" if self.best is None else \
            f" · best {self.best.config.label()}: {self.best.median_ms * 1e3:.2f} µs"  # type: ignore[operator]
        stage = (f" · re-timing the top candidates {self.retimed[0]}/{self.retimed[1]}"
                 if self.stage == "final" else "")
        return f"{self.done}/{self.total}{eta}{best}{stage}"
