"""The one Breakdown schema: named scopes per warp (or warpgroup), per block, per SM, in time.

Every source of a cycle breakdown lands here: ``KT_SCOPE`` buffers of CUDA C++ cells
(:mod:`jupyter_ktune.backends.cuda.profile`), Proton traces of Triton cells
(:mod:`~jupyter_ktune.backends.triton.profile`), Mosaic GPU profiler traces of Pallas cells
(:mod:`~jupyter_ktune.backends.pallas.profile`), and per-line stall samples from Nsight Compute
(:mod:`~jupyter_ktune.measure.profile_ncu`, the ``lines`` field).

Each event is one execution of one scope by one unit (warp or warpgroup) of one block:
``scope, unit, sm, block, start_cycles, end_cycles, start_ns, end_ns``. Cycles count from the
block's first recorded clock: ``%clock64`` is per SM (per TPC on the H200, 10.8 M cycles apart
across the chip), so cycles are only compared inside a block. Nanoseconds put every block on one
time axis: each block is anchored on ``%globaltimer`` (32 ns steps on the H200) and its cycles are
converted with the SM clock *measured* during the run (NVML, or fitted from the clock/globaltimer
pairs when NVML is missing); a breakdown never assumes 1 GHz, which is what Proton's and Mosaic's
own viewers do.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from jupyter_ktune.render import counted

Role = str  # "memory" | "compute" | "other"

_MEMORY = re.compile(r"load|store|copy|tma|cp_?async|gmem|smem|fetch|prefetch|write|read|"
                     r"issue_load|wait_load|epilogue", re.I)
_COMPUTE = re.compile(r"mma|wgmma|dot|compute|math|gemm|matmul|fma|softmax|exp|reduce|mul|add",
                      re.I)


def scope_role(name: str) -> Role:
    """Classify a scope by its name: ``memory`` (load, store, tma ...), ``compute`` (mma, dot ...).

    Used by the overlap summary; a name matching neither is ``other`` and counts for neither.
    """
    if _MEMORY.search(name):
        return "memory"
    if _COMPUTE.search(name):
        return "compute"
    return "other"


def cycles_to_ns(cycles: Any, sm_mhz: float | None) -> Any:
    """Convert SM cycles to ns with a measured clock in MHz (ValueError without one)."""
    if sm_mhz is None or not np.isfinite(sm_mhz) or sm_mhz <= 0:
        raise ValueError("[ktune] no measured SM clock: cycles cannot be converted to ns "
                         "(a breakdown never assumes 1 GHz)")
    return np.asarray(cycles, dtype=np.float64) * (1e3 / float(sm_mhz))


@dataclass(frozen=True)
class Event:
    """One scope execution, the row type that parsers produce."""

    scope: str
    unit: int
    sm: int
    block: int
    start_cycles: int
    end_cycles: int
    start_ns: float
    end_ns: float


@dataclass(frozen=True)
class Breakdown:
    """Scopes over time for one launch of one variant, plus per-line samples where available.

    Columns are NumPy arrays of equal length (one row per scope execution). ``unit`` is a warp
    index within the block, or a warpgroup index when ``unit_kind == "warpgroup"``. ``lines`` maps
    a cell line to ``{"samples": int, "stalls": {reason: int}}`` (the editor bundle's shape).
    ``notes`` say what was sampled, what was dropped, and what could not be done here.
    """

    kernel: str
    source: str
    unit_kind: str
    sm_clock_mhz: float | None
    clock_source: str
    scope: np.ndarray = field(repr=False)
    unit: np.ndarray = field(repr=False)
    sm: np.ndarray = field(repr=False)
    block: np.ndarray = field(repr=False)
    start_cycles: np.ndarray = field(repr=False)
    end_cycles: np.ndarray = field(repr=False)
    start_ns: np.ndarray = field(repr=False)
    end_ns: np.ndarray = field(repr=False)
    lines: Mapping[int, Mapping[str, Any]] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    trace_bytes: int = 0
    dropped: int = 0
    parse_ms: float = 0.0
    kernel_ns: float | None = None

    @classmethod
    def from_events(cls, events: Iterable[Event], **kw: Any) -> Breakdown:
        """Build from :class:`Event` rows (sorted by block, unit, start)."""
        rows = sorted(events, key=lambda e: (e.block, e.unit, e.start_cycles, -e.end_cycles))
        cols: dict[str, np.ndarray] = {
            "scope": np.array([e.scope for e in rows], dtype=object),
            "unit": np.array([e.unit for e in rows], dtype=np.int64),
            "sm": np.array([e.sm for e in rows], dtype=np.int64),
            "block": np.array([e.block for e in rows], dtype=np.int64),
            "start_cycles": np.array([e.start_cycles for e in rows], dtype=np.int64),
            "end_cycles": np.array([e.end_cycles for e in rows], dtype=np.int64),
            "start_ns": np.array([e.start_ns for e in rows], dtype=np.float64),
            "end_ns": np.array([e.end_ns for e in rows], dtype=np.float64),
        }
        return cls(**kw, **cols)

    @classmethod
    def lines_only(cls, kernel: str, lines: Mapping[int, Mapping[str, Any]], source: str,
                   **kw: Any) -> Breakdown:
        """A breakdown holding per-line samples only (ncu without scopes)."""
        kw.setdefault("unit_kind", "warp")
        kw.setdefault("sm_clock_mhz", None)
        kw.setdefault("clock_source", "")
        return cls.from_events((), kernel=kernel, source=source, lines=dict(lines), **kw)

    def with_lines(self, lines: Mapping[int, Mapping[str, Any]], note: str = "") -> Breakdown:
        """Return a copy carrying per-line samples (and a note saying where they came from)."""
        from dataclasses import replace

        return replace(self, lines=dict(lines), notes=self.notes + ((note,) if note else ()))

    def with_note(self, note: str) -> Breakdown:
        """Return a copy with one more note."""
        from dataclasses import replace

        return replace(self, notes=self.notes + (note,))

    # -- summaries -------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.scope)

    @property
    def duration_ns(self) -> np.ndarray:
        """Per-event duration in ns."""
        return self.end_ns - self.start_ns

    @property
    def scopes(self) -> list[str]:
        """Scope names in order of first appearance."""
        return list(dict.fromkeys(self.scope.tolist()))

    def scope_table(self) -> list[dict[str, Any]]:
        """Per scope: role, executions, cycles and ns (mean, median, p95), share of scope time."""
        total = float(self.duration_ns.sum()) or 1.0
        out = []
        for name in self.scopes:
            m = self.scope == name
            cyc = (self.end_cycles - self.start_cycles)[m]
            ns = self.duration_ns[m]
            out.append({"scope": name, "role": scope_role(name), "count": int(m.sum()),
                        "mean_cycles": float(cyc.mean()), "median_cycles": float(np.median(cyc)),
                        "mean_ns": float(ns.mean()), "median_ns": float(np.median(ns)),
                        "p95_ns": float(np.percentile(ns, 95)), "total_ns": float(ns.sum()),
                        "share": float(ns.sum()) / total})
        return out

    def unit_roles(self, group: int = 4) -> np.ndarray:
        """Label of each event's unit role: ``warpgroup g`` (warps grouped by ``group``)."""
        if self.unit_kind == "warpgroup":
            return np.array([f"warpgroup {u}" for u in self.unit], dtype=object)
        return np.array([f"warpgroup {u // group}" for u in self.unit], dtype=object)

    def time_per_role(self) -> dict[str, dict[str, float]]:
        """Mean ns per traced unit, per warp role and scope: ``{role: {scope: ns}}``."""
        roles = self.unit_roles()
        out: dict[str, dict[str, float]] = {}
        for role in dict.fromkeys(roles.tolist()):
            m = roles == role
            units = len({(b, u) for b, u in zip(self.block[m], self.unit[m], strict=True)}) or 1
            out[role] = {s: float(self.duration_ns[m & (self.scope == s)].sum()) / units
                         for s in self.scopes}
        return out

    def overlap(self, min_gap_ns: float = 100.0) -> dict[str, Any]:
        """XProf-style overlap and bubble summary over the traced blocks.

        Per block, the union of memory scopes and the union of compute scopes (over the block's
        traced units, on its own SM clock) split the block's span into overlapped, memory only,
        compute only, other-scope-only and idle time. Shares are of the summed block spans.
        ``gaps`` lists idle stretches of at least ``min_gap_ns`` (no traced scope active).
        """
        keys = ("overlap", "memory_only", "compute_only", "other_only", "idle")
        acc = dict.fromkeys(keys, 0.0)
        span_total, gaps = 0.0, []
        roles = np.array([scope_role(s) for s in self.scope], dtype=object)
        ns_per_cycle = (1e3 / self.sm_clock_mhz) if self.sm_clock_mhz else None
        for b in np.unique(self.block):
            m = self.block == b
            s, e = self.start_cycles[m], self.end_cycles[m]
            lo, hi = int(s.min()), int(e.max())
            if hi <= lo:
                continue
            edges = np.unique(np.concatenate([s, e]))
            mid = (edges[:-1] + edges[1:]) / 2
            width = np.diff(edges).astype(np.float64)
            r = roles[m]

            def covered(role: str | None, *, _s: np.ndarray = s, _e: np.ndarray = e,
                        _r: np.ndarray = r, _mid: np.ndarray = mid) -> np.ndarray:
                # sweep line: scopes [s, e) active at each midpoint = starts before - ends before
                sel = np.ones(len(_s), bool) if role is None else (_r == role)
                ss, ee = np.sort(_s[sel]), np.sort(_e[sel])
                return (np.searchsorted(ss, _mid, "right")
                        - np.searchsorted(ee, _mid, "right")) > 0

            mem, comp, other, any_ = (covered("memory"), covered("compute"),
                                      covered("other"), covered(None))
            acc["overlap"] += float(width[mem & comp].sum())
            acc["memory_only"] += float(width[mem & ~comp].sum())
            acc["compute_only"] += float(width[comp & ~mem].sum())
            acc["other_only"] += float(width[other & ~mem & ~comp].sum())
            acc["idle"] += float(width[~any_].sum())
            span_total += hi - lo
            if ns_per_cycle:
                t0 = float(self.start_ns[m].min()) - lo * ns_per_cycle
                for i in np.flatnonzero(~any_):
                    if width[i] * ns_per_cycle >= min_gap_ns:
                        gaps.append({"block": int(b), "start_ns": t0 + edges[i] * ns_per_cycle,
                                     "ns": width[i] * ns_per_cycle})
        span = span_total or 1.0
        out: dict[str, Any] = {k: v / span for k, v in acc.items()}
        out["span_cycles"] = span_total
        out["gaps"] = sorted(gaps, key=lambda g: -g["ns"])[:20]
        out["blocks"] = int(len(np.unique(self.block)))
        return out

    def sm_time_grid(self, bins: int = 60) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """SM x time activity: ``(sms, edges_ns, busy)``, busy = traced unit-ns per bin per SM.

        Divided by the bin width, a cell reads as the mean number of traced units inside a scope.
        """
        if not len(self):
            return np.zeros(0, int), np.zeros(bins + 1), np.zeros((0, bins))
        t0, t1 = float(self.start_ns.min()), float(self.end_ns.max())
        edges = np.linspace(t0, max(t1, t0 + 1.0), bins + 1)
        sms = np.unique(self.sm)
        busy = np.zeros((len(sms), bins))
        row = np.searchsorted(sms, self.sm)
        # overlap of every event with every bin (events x bins), summed per SM row
        lo = np.clip(edges[None, :-1], self.start_ns[:, None], self.end_ns[:, None])
        hi = np.clip(edges[None, 1:], self.start_ns[:, None], self.end_ns[:, None])
        np.add.at(busy, row, hi - lo)
        return sms, edges, busy / np.diff(edges)[None, :]

    def timeline(self, block: int | None = None) -> dict[str, np.ndarray]:
        """Events of one block (default: the traced block with the longest span), for a lane
        plot."""
        if not len(self):
            return {k: np.zeros(0) for k in ("scope", "unit", "start_ns", "end_ns")}
        if block is None:
            spans = {int(b): float(self.end_ns[self.block == b].max()
                                   - self.start_ns[self.block == b].min())
                     for b in np.unique(self.block)}
            block = max(spans, key=spans.__getitem__)
        m = self.block == block
        t0 = float(self.start_ns[m].min())
        return {"scope": self.scope[m], "unit": self.unit[m], "start_ns": self.start_ns[m] - t0,
                "end_ns": self.end_ns[m] - t0, "block": np.full(int(m.sum()), block)}

    def top_lines(self, n: int = 10) -> list[tuple[int, Mapping[str, Any]]]:
        """The ``n`` cell lines with the most samples."""
        return sorted(self.lines.items(), key=lambda kv: -int(kv[1].get("samples", 0)))[:n]

    # -- display ---------------------------------------------------------------------------
    def summary(self) -> str:
        """One line: source, events, blocks, clock, overlap and idle shares."""
        if not len(self):
            return (f"{self.source}: {len(self.lines)} cell lines with samples"
                    if self.lines else f"{self.source}: no scope events")
        ov = self.overlap()
        clk = f"{self.sm_clock_mhz:.0f} MHz" if self.sm_clock_mhz else "no clock"
        return (f"{self.source}: {counted(len(self), 'scope event')} from "
                f"{counted(ov['blocks'], 'block')}, "
                f"cycles -> ns at {clk} ({self.clock_source}); memory/compute overlap "
                f"{ov['overlap']:.0%}, idle {ov['idle']:.0%}")

    def _repr_html_(self) -> str:
        rows = "".join(
            f"<tr><td>{html.escape(r['scope'])}</td><td>{r['role']}</td><td>{r['count']}</td>"
            f"<td>{r['median_cycles']:.0f}</td><td>{r['median_ns']:.0f}</td>"
            f"<td>{r['share']:.0%}</td></tr>" for r in self.scope_table())
        lines = "".join(f"<tr><td>{ln}</td><td>{d.get('samples', 0)}</td><td>"
                        f"{html.escape(_top_stalls(d))}</td></tr>" for ln, d in self.top_lines(8))
        notes = "".join(f"<li>{html.escape(n)}</li>" for n in self.notes)
        parts = [f"<b>cycle breakdown of {html.escape(self.kernel)}</b>: "
                 f"{html.escape(self.summary())}"]
        if rows:
            parts.append("<table><tr><th>scope</th><th>role</th><th>runs</th>"
                         "<th>median cycles</th><th>median ns</th><th>share</th></tr>"
                         f"{rows}</table>")
        if lines:
            parts.append("<table><tr><th>cell line</th><th>samples</th><th>top stalls</th>"
                         f"</tr>{lines}</table>")
        if notes:
            parts.append(f"<ul>{notes}</ul>")
        return "<div class='ktune-breakdown'>" + "".join(parts) + "</div>"

    def to_dict(self) -> dict[str, Any]:
        """Plain-JSON form (for the store and the CLI)."""
        return {"kernel": self.kernel, "source": self.source, "unit_kind": self.unit_kind,
                "sm_clock_mhz": self.sm_clock_mhz, "clock_source": self.clock_source,
                "events": {k: getattr(self, k).tolist() for k in _COLUMNS},
                "lines": {str(k): dict(v) for k, v in self.lines.items()},
                "notes": list(self.notes), "trace_bytes": self.trace_bytes,
                "dropped": self.dropped, "parse_ms": self.parse_ms, "kernel_ns": self.kernel_ns}


_COLUMNS = ("scope", "unit", "sm", "block", "start_cycles", "end_cycles", "start_ns", "end_ns")


def _top_stalls(d: Mapping[str, Any], n: int = 3) -> str:
    stalls = sorted(dict(d.get("stalls", {})).items(), key=lambda kv: -kv[1])[:n]
    return ", ".join(f"{k} {v}" for k, v in stalls)


def pair_edges(edges: Sequence[tuple[int, bool, int]]) -> tuple[list[tuple[int, int, int]], int]:
    """Pair begin/end records of one unit: ``(tag, is_end, cycles)`` -> ``[(tag, start, end)]``.

    Nested and repeated scopes pair with the innermost open scope of the same tag. Returns the
    pairs and the number of edges left unpaired (an end whose begin was dropped, or the reverse).
    """
    open_: dict[int, list[int]] = {}
    out, unpaired = [], 0
    for tag, is_end, cyc in edges:
        if not is_end:
            open_.setdefault(tag, []).append(cyc)
        elif open_.get(tag):
            out.append((tag, open_[tag].pop(), cyc))
        else:
            unpaired += 1
    unpaired += sum(len(v) for v in open_.values())
    return out, unpaired
