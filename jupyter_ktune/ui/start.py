"""Start a tuning session for a parsed kernel cell and return its live panel.

``%%kernel`` calls this for its own cell; ``jupyter_ktune.panel(spec)`` calls it for any spec,
e.g. a variant of a cell built in code with ``parse_cell`` (the fp8 build of an fp16 cell, a
cell at another problem size), so that variant gets the same sliders, Autotune button and
Bokeh views instead of a printed result. A new panel closes the session of the panel it
replaces: for ``%%kernel``, the last panel of that kernel name (re-running the cell); for a spec
built in code, the last panel of the same kernel and source, so that the fp8 variant's panel
leaves the fp16 cell's panel of the same kernel live.
"""

from __future__ import annotations

from typing import Any

from jupyter_ktune.spec import KernelSpec

_live: dict[Any, Any] = {}  # what a new panel replaces -> its live panel


def panel_for(spec: KernelSpec, replaces: Any = None) -> Any:
    """The live panel of ``spec``, its first result shown (it waits for that result).

    ``replaces`` keys the panel this one supersedes (default: the kernel's name, as a cell)."""
    from jupyter_ktune.api import choose_config
    from jupyter_ktune.backends import get_backend
    from jupyter_ktune.errors import CellError
    from jupyter_ktune.measure.ceilings import device_ceilings
    from jupyter_ktune.runner.client import get_worker
    from jupyter_ktune.session import TuningSession
    from jupyter_ktune.ui.app import KernelPanel

    if not spec.space.params:
        raise CellError(f"kernel {spec.name} declares no tunables, so it has no panel",
                        fix="Declare one (// ktune: BLOCK in [64, 128]) or call run_kernel.")
    get_backend(spec.backend).check(spec)
    worker = get_worker()
    device = worker.device(spec.backend)
    limits = worker.limits(spec)  # the inputs' values a require line names: read in the worker
    key = spec.name if replaces is None else replaces
    old = _live.pop(key, None)
    if old is not None:
        old.session.close()
    # BokehJS is not put in the notebook (1.3 MB per saved notebook): the jupyter server
    # extension serves bokeh's own copy and the labextension loads it (labextension/src/bokeh.ts)
    session = TuningSession(spec, worker, limits)
    panel = KernelPanel(session, choose_config(spec, None, limits),
                        device_ceilings(worker, device))
    panel.result  # noqa: B018 - wait for the first result so the output shows numbers
    _live[key] = panel
    return panel
