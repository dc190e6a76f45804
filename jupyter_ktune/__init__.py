"""jupyter-ktune: interactive, measured GPU kernel tuning in the notebook.

``%load_ext jupyter_ktune`` registers the ``%%kernel`` cell magic. The core (spec, runner,
backends, measure) imports no IPython, so scripts and tests use it directly.

The public surface is the names the README documents (``__all__``), and none of them is also a
subpackage: the sweeps live in :mod:`jupyter_ktune.tuning`, so ``jupyter_ktune.tune`` is the
function and ``import jupyter_ktune.tune`` fails instead of handing back the function.
Everything else (``Status``, ``KernelSpec``, the stores) is imported from its own module.
"""

import importlib as _importlib
import typing as _typing

if _typing.TYPE_CHECKING:
    from jupyter_ktune.api import parse_cell as parse_cell
    from jupyter_ktune.api import run_kernel as run_kernel
    from jupyter_ktune.backends.cuda.tensormap import tma as tma
    from jupyter_ktune.results import RunResult as RunResult
    from jupyter_ktune.spec import KernelSpec
    from jupyter_ktune.tuning import TuneReport as TuneReport
    from jupyter_ktune.tuning import tune as tune

__all__ = ["RunResult", "TuneReport", "panel", "parse_cell", "run_kernel", "tma", "tune"]

#: the public names and their modules, imported on first use (PEP 562): every process that
#: imports a module of the package runs this file first (the device worker, the input helper,
#: each compile-pool process), and importing the whole API here cost 0.37 s of each start
#: (``python -X importtime``, 2-core machine), 0.42 s on an H100 host
#: (bench/results/import_costs/2026-12-06-0549)
_LAZY = {"parse_cell": "jupyter_ktune.api", "run_kernel": "jupyter_ktune.api",
         "tma": "jupyter_ktune.backends.cuda.tensormap", "RunResult": "jupyter_ktune.results",
         "TuneReport": "jupyter_ktune.tuning", "tune": "jupyter_ktune.tuning"}


def __getattr__(name: str) -> _typing.Any:
    if name in _LAZY:
        value = getattr(_importlib.import_module(_LAZY[name]), name)
        globals()[name] = value  # once: later reads are plain attribute reads
        return value
    raise AttributeError(f"module 'jupyter_ktune' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))

try:
    from jupyter_ktune._version import __version__ as __version__
except ImportError:  # a source checkout that was never built
    __version__ = "0+unknown"


def panel(spec: "KernelSpec"):  # noqa: ANN201 - the panel type lives in the UI layer
    """The live tuning panel of ``spec``, as ``%%kernel`` shows its own cell's.

    For a spec built in code, e.g. ``parse_cell(line, cell_source.replace(...), namespace)``
    for a variant of a cell: the same sliders, Autotune and Bokeh views, first result shown.
    Needs the notebook stack (ipywidgets, bokeh, jupyter_bokeh); the core does not import it.
    """
    from jupyter_ktune.ui.start import panel_for

    # replaces its own last panel (the cell that built it, run again), not the kernel cell's
    return panel_for(spec, replaces=("spec", spec.name, spec.source_hash))


def load_ipython_extension(ipython):  # noqa: ANN001 - IPython's own signature
    """Register the ``%%kernel`` magic (``%load_ext jupyter_ktune``).

    The device worker is spawned first (it imports no backend yet), then the magic's modules
    are imported while it starts: spawned after them, a cell run right after ``%load_ext``
    (Run All) found it still starting, 0.15-0.18 s of the first result's "worker start" on a
    2-core machine, while the magic's imports took 0.2-0.3 s before the spawn."""
    from jupyter_ktune.runner.client import get_worker

    get_worker().start()
    from jupyter_ktune.magics import KtuneMagics

    ipython.register_magics(KtuneMagics)


def _jupyter_labextension_paths() -> list[dict[str, str]]:
    """Where JupyterLab finds the prebuilt labextension shipped in the wheel."""
    return [{"src": "labextension", "dest": "jupyter-ktune"}]


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    """Name the jupyter server extension (:mod:`jupyter_ktune.server`: BokehJS, editor grammars)."""
    return [{"module": "jupyter_ktune"}]


def _load_jupyter_server_extension(serverapp):  # noqa: ANN001 - jupyter_server's signature
    """Add the BokehJS and backends routes (jupyter_server calls this)."""
    from jupyter_ktune.server import load

    load(serverapp)
