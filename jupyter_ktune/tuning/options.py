"""Less common sweep settings, one object (STYLE habit 10): :class:`TuneOptions`."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TuneOptions:
    """Less common sweep settings (STYLE habit 10: an options object, not 20 parameters).

    Parameters
    ----------
    seed
        Seeds the strategy and the bootstrap.
    top_k
        How many of the fastest configs are re-timed at the end.
    final_budget_factor
        The re-timing's time budget per variant, as a multiple of the cell's ``--budget-ms``.
    retime
        Time configs again even when the store has them.
    compile_workers
        Processes of the precompile pool; None: the CPU count less one per device worker, or
        no pool for backends without a precompile step (see ``precompiled``).
    stop
        An event that stops the sweep when set (as :meth:`Sweep.stop`).
    race
        Race configs: one whose median's confidence interval is clearly above the best so far
        stops being timed (``TimingPlan.race_ms``); the top ``top_k`` are re-timed in full.
    warm_start
        After an edit (same kernel name and space, another source hash in the store), try the
        previous version's best ``warm_start`` configs first (0: off); the report says how the
        ranking moved (:mod:`jupyter_ktune.tuning.warm`).
    shape
        The problem shape this sweep tunes (set by ``tune(shapes=...)``): part of the store key.
    """

    seed: int = 0
    top_k: int = 3
    final_budget_factor: float = 5.0
    retime: bool = False
    compile_workers: int | None = None
    stop: threading.Event | None = None
    race: bool = True
    warm_start: int = 8
    shape: tuple[tuple[str, Any], ...] = ()
