"""Autotuning sweeps: strategies, the results store, the sweep engine, exports.

``jupyter_ktune.tune(spec, ...)`` is the entry point; see :func:`jupyter_ktune.tuning.sweep.tune`.
"""

from jupyter_ktune.tuning.report import TuneReport as TuneReport
from jupyter_ktune.tuning.search import DEFAULT_STRATEGY as DEFAULT_STRATEGY
from jupyter_ktune.tuning.search import STRATEGIES as STRATEGIES
from jupyter_ktune.tuning.store import Store as Store
from jupyter_ktune.tuning.store import StoreKey as StoreKey
from jupyter_ktune.tuning.sweep import Progress as Progress
from jupyter_ktune.tuning.sweep import Sweep as Sweep
from jupyter_ktune.tuning.sweep import TuneOptions as TuneOptions
from jupyter_ktune.tuning.sweep import tune as tune
