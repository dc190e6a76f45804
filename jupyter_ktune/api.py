"""The core entry points scripts, the CLI and the magic share: parse a cell, run one variant.

Parsing is here, not in :mod:`jupyter_ktune.spec`, because it calls the cell's backend (its
expansion, which may ask the device worker): the model imports no backend and no runner.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jupyter_ktune.backends import DEFAULT_BACKEND, Registered, get_backend
from jupyter_ktune.compiler_controls import check_controls
from jupyter_ktune.launch_geometry import check_constant
from jupyter_ktune.results import RunResult
from jupyter_ktune.runner.client import DeviceWorker, get_worker
from jupyter_ktune.runner.describe import describe_in_worker
from jupyter_ktune.space import Config
from jupyter_ktune.spec import KernelSpec, check_initial, read_cell


def parse_cell(line: str, body: str, namespace: Mapping[str, Any] | None = None) -> KernelSpec:
    r"""Parse a ``%%kernel`` magic line and cell body into a :class:`KernelSpec`: the model's
    reading (:func:`~jupyter_ktune.spec.read_cell`), the compiler controls and constant launch
    sizes, then the backend's expansion (a Triton kernel's helpers and ``@triton.autotune``
    list), then the ``--config`` values.

    Examples
    --------
    >>> spec = parse_cell("scale --backend cuda", "// ktune: BLOCK in [64, 128]\n__global__ ...")
    >>> spec.space.names
    ('BLOCK',)
    """
    namespace = {} if namespace is None else namespace
    backends = Registered()
    spec = read_cell(line, body, namespace, backends, DEFAULT_BACKEND)
    # name_prefix, nvcc_flags, maxnreg: where they work, their values
    check_controls(spec, backends)
    for what in ("grid", "block", "smem"):  # a constant mistake (--block 0) is refused now
        check_constant(what, getattr(spec, what))
    spec = get_backend(spec.backend).expand(spec, namespace, describe_in_worker)
    check_initial(spec)
    return spec


def choose_config(spec: KernelSpec, values: Mapping[str, Any] | None = None,
                  limits: Mapping[str, int] | None = None) -> Config:
    """Choose the config to run.

    The values given (checked), else the cell's ``--config``, else the first config that
    satisfies the constraints on this device; tunables the values leave out are completed with
    the first values that satisfy the constraints with them (:meth:`Space.complete`).
    """
    given = dict(spec.initial)
    given.update(values or {})
    if given:
        return spec.space.complete(given, limits)
    return spec.space.default(limits)


def run_kernel(spec: KernelSpec, config: Mapping[str, Any] | None = None, *,
               worker: DeviceWorker | None = None) -> RunResult:
    """Compile, verify and time one variant of ``spec`` in the device worker.

    Host-side checks run first (a missing kernel or grid is a
    :class:`~jupyter_ktune.errors.CellError` raised here, with the cell line); everything that
    happens on the device comes back as a :class:`RunResult` whose status says how it went.

    Examples
    --------
    >>> spec = parse_cell("scale --inputs inputs --reference ref --out y",
    ...                   SRC, globals())  # doctest: +SKIP
    >>> run_kernel(spec, {"BLOCK": 256}).median_ms  # doctest: +SKIP
    """
    get_backend(spec.backend).check(spec)
    worker = worker or get_worker()
    worker.device(spec.backend)  # the backend picks its mode before any spec is unpickled there
    limits = worker.limits(spec) if not (config or spec.initial) else None
    return worker.run(spec, choose_config(spec, config, limits))
