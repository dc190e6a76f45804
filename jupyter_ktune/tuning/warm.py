"""Warm start after an edit: the previous version's ranking as the search order (issue 21).

The store's key includes the source hash and the problem (inputs, reference, tolerances), so an
edited kernel or a changed problem never reuses a stored timing (DESIGN.md, issue 34). A one-line
edit rarely reorders the whole space, though: the configs that were
fastest before are the likeliest to be fastest now. So a sweep of a kernel whose name and space
match an earlier version in the store tries that version's best configs first (as a search
order only; each is timed afresh), and the report says how the ranking moved.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jupyter_ktune.render import counted
from jupyter_ktune.space import Config, Space


def space_signature(space: Space) -> str:
    """Identify a space by its parameters, values and constraints (not by the kernel's code)."""
    h = hashlib.sha256()
    for p in space.params:
        h.update(f"{p.name}={list(p.values)!r};".encode())
    for c in space.constraints:
        h.update(f"require {c.expr.strip()};".encode())
    return h.hexdigest()[:16]


@dataclass(frozen=True)
class WarmStart:
    """Where a sweep's first configs came from, and how the ranking moved since."""

    source_hash: str  # the earlier version's
    order: tuple[Config, ...]  # its best configs, fastest first: the sweep tried these first
    old_ms: tuple[float, ...] = ()
    # the same kernel, measured on another problem (inputs, reference, tolerances: issue 34)
    other_problem: bool = False

    def moved(self, new: Mapping[Config, float | None]) -> RankingMove:
        """Compare the old ranking with this sweep's medians (``new``: config -> ms or None)."""
        both = [(c, o) for c, o in zip(self.order, self.old_ms, strict=False)
                if new.get(c) is not None]
        ranked_new = sorted((ms, c.key(), c) for c, ms in new.items() if ms is not None)
        position = {c: i for i, (_ms, _k, c) in enumerate(ranked_new, 1)}
        old_best = self.order[0] if self.order else None
        rho = spearman([o for _c, o in both], [new[c] for c, _o in both])  # type: ignore[misc]
        return RankingMove(old_best, position.get(old_best) if old_best else None, rho, len(both),
                           self.source_hash, self.other_problem)


@dataclass(frozen=True)
class RankingMove:
    """``old best BLOCK=4 is now #3; Spearman rank correlation 0.82 over 8 configs``."""

    old_best: Config | None
    old_best_now: int | None  # its rank in this sweep (1 = still the best), None: not timed
    spearman: float | None
    compared: int
    source_hash: str
    other_problem: bool = False

    def text(self) -> str:
        """One line for the report; it says the order came from earlier results, never reused."""
        origin = (f"version {self.source_hash}" if not self.other_problem else
                  "this kernel's results on other inputs, reference or tolerances (every config "
                  "timed again)")
        if self.old_best is None:
            return f"warm start from {origin}: nothing to compare"
        now = (f"is now #{self.old_best_now}" if self.old_best_now is not None
               else "failed or was not timed now")
        rho = ("" if self.spearman is None else
               f"; Spearman rank correlation {self.spearman:.2f} over the "
               f"{counted(self.compared, 'config')} "
               "timed in both")
        return (f"warm start from {origin}: its best "
                f"{self.old_best.label()} {now}{rho}")


def spearman(a: Sequence[float], b: Sequence[float]) -> float | None:
    """Spearman's rank correlation of two equally long samples (ties get their mean rank)."""
    if len(a) != len(b) or len(a) < 3:
        return None

    def ranks(x: Sequence[float]) -> list[float]:
        order = sorted(range(len(x)), key=lambda i: x[i])
        r = [0.0] * len(x)
        i = 0
        while i < len(order):
            j = i
            while j + 1 < len(order) and x[order[j + 1]] == x[order[i]]:
                j += 1
            for k in range(i, j + 1):
                r[order[k]] = (i + j) / 2 + 1
            i = j + 1
        return r

    ra, rb = ranks(a), ranks(b)
    ma, mb = sum(ra) / len(ra), sum(rb) / len(rb)
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb, strict=True))
    va = sum((x - ma) ** 2 for x in ra) ** 0.5
    vb = sum((y - mb) ** 2 for y in rb) ** 0.5
    return cov / (va * vb) if va and vb else None


def start_from_earlier(store: Any, name: str, key: Any, strategy: Any, k: int) -> WarmStart | None:
    """Put the best ``k`` configs of this kernel's latest earlier version (same name and space
    in ``store``, another source hash) first in ``strategy``'s order; None when there is none
    or ``k`` < 1."""
    if k < 1:
        return None
    for earlier in store.earlier_versions(name, key.space, key.device, exclude=key.source_hash,
                                          exclude_problem=key.problem):
        top = store.top(earlier, k)
        if top:
            strategy.first = [r.config for r in top]
            return WarmStart(earlier.source_hash, tuple(r.config for r in top),
                             tuple(r.median_ms for r in top),  # type: ignore[arg-type]
                             other_problem=earlier.source_hash == key.source_hash)
    return None
