"""Two configs of one kernel side by side: the ratio from interleaved runs, and what changed.

No widgets and no worker here: the worker side (:mod:`jupyter_ktune.runner.interleave`) times
the two variants in alternating rounds, A B A B ..., each round the project's own timing
protocol (:func:`~jupyter_ktune.measure.timing.time_kernel`) on the same fresh input set, and
hands back :class:`InterleavedRuns`; :func:`summarize` turns those into a :class:`Comparison`
with the static reports' and the per-line stalls' differences.

The statistics:

* ``ratio`` is ``median(B) / median(A)`` over every run of the rounds (B the second config,
  the panel's current one; A the first, the pinned baseline): above 1, B is slower.
* ``ci`` is a 95 % percentile bootstrap of that ratio, two-level and paired: each resample
  draws rounds with replacement, the same round numbers for A and B (round i of A and of B ran
  back to back, so they share the machine's state of that moment), then runs with replacement
  within each round drawn. Drift between rounds (a clock, a neighbour) widens the interval, as
  it should; a drift inside a round is shared by A and B.

Two separate measurements are never compared here: only the interleaved rounds give a ratio.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from jupyter_ktune.render import fmt_time

#: bootstrap resamples of the ratio's CI (seeded: the same runs give the same interval)
RESAMPLES = 2000
#: what an interval says about B against A
SLOWER, FASTER, SAME = "slower", "faster", "not distinguishable"


@dataclass(frozen=True)
class InterleavedRuns:
    """What the worker measured: per round, every run's time of A and of B (ms).

    ``a_rounds[i]`` and ``b_rounds[i]`` ran back to back (A first), on one input set.
    ``timer`` names the clock; ``host_time`` says the times are host time, not GPU time (an
    interpreter, a CPU test backend). ``notes`` carry what a round's timing said about itself
    (HOST-BOUND, raced ...).
    """

    a_rounds: tuple[np.ndarray, ...]
    b_rounds: tuple[np.ndarray, ...]
    timer: str
    host_time: bool
    protocol: str = ""  # the first round's timing method, for the record
    notes: tuple[str, ...] = ()

    @property
    def rounds(self) -> int:
        """Rounds of A and B each."""
        return len(self.a_rounds)


def paired_ratio_ci(a_rounds: Sequence[np.ndarray], b_rounds: Sequence[np.ndarray],
                    confidence: float = 0.95, resamples: int = RESAMPLES,
                    seed: int = 0) -> tuple[float, float, float]:
    """``median(all B) / median(all A)`` and its paired two-level bootstrap percentile CI.

    Examples
    --------
    >>> a = [np.full(5, 1.0)] * 4
    >>> b = [np.full(5, 2.0)] * 4
    >>> paired_ratio_ci(a, b)
    (2.0, 2.0, 2.0)
    """
    if len(a_rounds) != len(b_rounds) or not a_rounds:
        raise ValueError("[ktune] paired_ratio_ci needs the same number (>= 1) of rounds of each")
    a = [np.asarray(x, dtype=float) for x in a_rounds]
    b = [np.asarray(x, dtype=float) for x in b_rounds]
    if any(x.size == 0 for x in a + b):
        raise ValueError("[ktune] paired_ratio_ci: a round without runs")
    ratio = float(np.median(np.concatenate(b)) / np.median(np.concatenate(a)))
    rng = np.random.default_rng(seed)
    n = len(a)
    out = np.empty(resamples)
    for k in range(resamples):
        picked = rng.integers(n, size=n)
        pa = np.concatenate([a[i][rng.integers(a[i].size, size=a[i].size)] for i in picked])
        pb = np.concatenate([b[i][rng.integers(b[i].size, size=b[i].size)] for i in picked])
        out[k] = np.median(pb) / np.median(pa)
    tail = (1 - confidence) / 2 * 100
    lo, hi = np.percentile(out, [tail, 100 - tail])
    return ratio, float(lo), float(hi)


# -- static reports -------------------------------------------------------------------------
_KERNEL_FIELDS = ("registers", "smem_static", "spill_stores", "spill_loads", "local_memory",
                  "stack_frame", "barriers")


def _kernels(report: Any) -> dict[str, Any]:
    return dict(getattr(report, "kernels", None) or {})


def _pairs(ka: Mapping[str, Any], kb: Mapping[str, Any]) -> list[tuple[str, Any, Any]]:
    """Kernels of A and B matched: the one kernel of each, else by name."""
    if len(ka) == 1 and len(kb) == 1:
        (name, a), (_n, b) = next(iter(ka.items())), next(iter(kb.items()))
        return [(name, a, b)]
    return [(name, ka[name], kb[name]) for name in ka if name in kb]


def _occupancy(report: Any, kernel: str) -> float | None:
    tpb = getattr(report, "threads_per_block", None)
    occ = getattr(report, "occupancy", None)
    if not tpb or not callable(occ):
        return None
    try:
        return float(occ(kernel, tpb).occupancy)
    except Exception:  # noqa: BLE001 - an unknown arch or kernel: no occupancy row
        return None


def _values(report: Any, name: str, kernel: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in _KERNEL_FIELDS:
        v = getattr(kernel, f, None)
        if isinstance(v, (int, float)):
            out[f] = v
    dyn = getattr(report, "dynamic_smem", None)
    if isinstance(dyn, int):
        out["dynamic_smem"] = dyn
    occ = _occupancy(report, name)
    if occ is not None:
        out["occupancy"] = occ
    sass = getattr(kernel, "sass", None)
    if sass is not None:
        out["sass.instructions"] = sass.instructions
        for cat, count in sorted(sass.categories.items()):
            out[f"sass.{cat}"] = count
    return out


def static_diff(a: Any, b: Any) -> tuple[dict[str, tuple[Any, Any, Any]], str]:
    """``name -> (a, b, b - a)`` for what both static reports have, and a note on what not.

    Names: ``registers``, ``smem_static``, ``dynamic_smem``, ``spill_stores``, ``spill_loads``,
    ``local_memory``, ``stack_frame``, ``barriers``, ``occupancy`` (0..1) and
    ``sass.<class>`` per SASS instruction class (``sass.instructions`` in all). A SASS class
    that only one side emitted counts 0 on the other (both have a SASS mix). With several
    kernels each name is prefixed ``kernel:``.
    """
    if a is None or b is None:
        which = "either" if a is None and b is None else ("A" if a is None else "B")
        return {}, f"no static report for {which}"
    pairs = _pairs(_kernels(a), _kernels(b))
    if not pairs:
        return {}, "the static reports share no kernel"
    out: dict[str, tuple[Any, Any, Any]] = {}
    notes = []
    for name, ka, kb in pairs:
        va, vb = _values(a, name, ka), _values(b, name, kb)
        sass_a = getattr(ka, "sass", None) is not None
        sass_b = getattr(kb, "sass", None) is not None
        if sass_a and sass_b:
            for k in set(va) | set(vb):
                if k.startswith("sass."):
                    va.setdefault(k, 0)
                    vb.setdefault(k, 0)
        elif sass_a or sass_b:
            notes.append(f"SASS mix only for {'A' if sass_a else 'B'}")
        prefix = f"{name}:" if len(pairs) > 1 else ""
        for k in va:
            if k in vb:
                out[prefix + k] = (va[k], vb[k], vb[k] - va[k])
    return out, "; ".join(notes)


# -- per-line stalls ------------------------------------------------------------------------
def _lines(bd: Any) -> Mapping[int, Mapping[str, Any]]:
    return {int(k): v for k, v in (getattr(bd, "lines", None) or {}).items()}


def lines_diff(a: Any, b: Any) -> tuple[dict[int, dict[str, Any]], str]:
    """Per cell line, ``{"samples": (a, b, b - a), "stalls": {reason: (a, b, b - a)}}``.

    Needs a cycle breakdown with per-line stall samples (ncu) for both; otherwise empty, with
    the reason. A line only one side sampled counts 0 on the other.
    """
    missing = [n for n, bd in (("A", a), ("B", b)) if not _lines(bd)]
    if missing:
        return {}, ("no per-line stall samples for " + " and ".join(missing) + " (the Cycle "
                    "breakdown of each config, where ncu works on a GPU, gives them)")
    la, lb = _lines(a), _lines(b)
    out: dict[int, dict[str, Any]] = {}
    for line in sorted(set(la) | set(lb)):
        da, db = la.get(line, {}), lb.get(line, {})
        sa, sb = int(da.get("samples", 0)), int(db.get("samples", 0))
        ra, rb = dict(da.get("stalls", {})), dict(db.get("stalls", {}))
        stalls = {r: (int(ra.get(r, 0)), int(rb.get(r, 0)), int(rb.get(r, 0)) - int(ra.get(r, 0)))
                  for r in sorted(set(ra) | set(rb))}
        out[line] = {"samples": (sa, sb, sb - sa), "stalls": stalls}
    return out, ""


# -- the result -----------------------------------------------------------------------------
@dataclass(frozen=True)
class Comparison:
    """Config B against config A of one kernel; what ``panel.compare`` and ``ktune compare``
    return.

    ``ratio`` is ``median(B) / median(A)`` from interleaved rounds (above 1: B slower) with its
    95 % ``ci``; ``None`` with a ``reason`` when they could not be timed. ``method`` says how,
    and that the times are host time where they are. ``a_times_ms``/``b_times_ms`` pool every
    interleaved run of each (the overlaid distributions).
    """

    a: Mapping[str, Any]
    b: Mapping[str, Any]
    ratio: float | None
    ci: tuple[float, float] | None
    method: str
    host_time: bool = False
    rounds: int = 0
    a_times_ms: np.ndarray = field(default_factory=lambda: np.empty(0), repr=False)
    b_times_ms: np.ndarray = field(default_factory=lambda: np.empty(0), repr=False)
    static_diff: Mapping[str, tuple[Any, Any, Any]] = field(default_factory=dict)
    static_note: str = ""
    lines_diff: Mapping[int, Mapping[str, Any]] = field(default_factory=dict)
    lines_note: str = ""
    reason: str = ""

    @property
    def same(self) -> bool:
        """Whether A and B are the same config (an A/A check: its CI should hold 1)."""
        return dict(self.a) == dict(self.b)

    @property
    def verdict(self) -> str:
        """``slower``, ``faster`` or ``not distinguishable`` (B against A, by the CI); '' when
        there is no ratio."""
        if self.ci is None:
            return ""
        lo, hi = self.ci
        return SLOWER if lo > 1 else FASTER if hi < 1 else SAME

    @property
    def medians_ms(self) -> tuple[float, float] | None:
        """Median of A's and of B's interleaved runs."""
        if not self.a_times_ms.size or not self.b_times_ms.size:
            return None
        return float(np.median(self.a_times_ms)), float(np.median(self.b_times_ms))

    def text(self) -> str:
        """One line: 'B/A = 1.98x [1.95, 2.01] 95% CI: B is slower (host time ...)'."""
        if self.ratio is None or self.ci is None:
            return f"no ratio: {self.reason or 'not timed'}"
        lo, hi = self.ci
        med = self.medians_ms
        meds = f" (medians {fmt_time(med[0])} vs {fmt_time(med[1])})" if med else ""
        clock = "; host time, not GPU time" if self.host_time else ""
        return (f"B/A = {self.ratio:.3f}x [{lo:.3f}, {hi:.3f}] 95% CI, {self.rounds} "
                f"interleaved rounds{meds}: B is {self.verdict}{clock}")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: ratio, ci, method, static_diff, lines_diff and the pooled runs."""
        return {"a": dict(self.a), "b": dict(self.b), "ratio": self.ratio,
                "ci": list(self.ci) if self.ci else None, "verdict": self.verdict,
                "method": self.method, "host_time": self.host_time, "rounds": self.rounds,
                "a_times_ms": self.a_times_ms.tolist(), "b_times_ms": self.b_times_ms.tolist(),
                "static_diff": {k: list(v) for k, v in self.static_diff.items()},
                "static_note": self.static_note,
                "lines_diff": {str(k): {"samples": list(v["samples"]),
                                        "stalls": {r: list(t) for r, t in v["stalls"].items()}}
                               for k, v in self.lines_diff.items()},
                "lines_note": self.lines_note, "reason": self.reason}

    def __repr__(self) -> str:
        return f"Comparison({dict(self.a)} -> {dict(self.b)}: {self.text()})"


def method_text(runs: InterleavedRuns, resamples: int = RESAMPLES) -> str:
    """How the ratio was obtained, in words; says host time where the clock is the host's."""
    clock = (f"HOST TIME, not GPU time ({runs.timer}): no GPU clock here, so the ratio compares "
             "host-timed calls" if runs.host_time else f"{runs.timer} GPU time")
    notes = "".join(f"; {n}" for n in runs.notes)
    return (f"{runs.rounds} interleaved rounds A B A B ... on one fresh input set, each round "
            f"the timing protocol ({runs.protocol or 'see the result card'}); ratio = "
            f"median(B) / median(A) over all runs; 95% CI: paired bootstrap over rounds, and "
            f"over runs within them, {resamples} resamples, seeded; {clock}{notes}")


def summarize(a: Mapping[str, Any], b: Mapping[str, Any], runs: InterleavedRuns | None,
              static_a: Any = None, static_b: Any = None, lines_a: Any = None,
              lines_b: Any = None, reason: str = "", seed: int = 0) -> Comparison:
    """The :class:`Comparison` of ``b`` against ``a`` from the worker's interleaved runs (None:
    not timed, say why in ``reason``), their static reports and breakdowns."""
    sd, snote = static_diff(static_a, static_b)
    ld, lnote = lines_diff(lines_a, lines_b)
    common = dict(a=dict(a), b=dict(b), static_diff=sd, static_note=snote, lines_diff=ld,
                  lines_note=lnote)
    if runs is None or not runs.rounds:
        return Comparison(ratio=None, ci=None, method="not timed", reason=reason or
                          "no interleaved runs", **common)
    ratio, lo, hi = paired_ratio_ci(runs.a_rounds, runs.b_rounds, seed=seed)
    return Comparison(ratio=ratio, ci=(lo, hi), method=method_text(runs),
                      host_time=runs.host_time, rounds=runs.rounds,
                      a_times_ms=np.concatenate(runs.a_rounds),
                      b_times_ms=np.concatenate(runs.b_rounds), reason=reason, **common)
