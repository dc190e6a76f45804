"""The ``%%kernel`` cell magic: a thin layer that parses the cell and shows the result.

All work happens in :mod:`jupyter_ktune.api` and the device worker; this module only knows
IPython. Cell errors are shown as a one-line message (IPython's UsageError), not a traceback.
Compiler messages, and cell errors that name a line (a Triton cell's Python syntax error), also
go to the cell editor as marks (:mod:`jupyter_ktune.editor`).
"""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, magics_class, no_var_expand

from jupyter_ktune.api import parse_cell, run_kernel
from jupyter_ktune.editor import show_editor_marks
from jupyter_ktune.errors import CellError, Diagnostic, KtuneError
from jupyter_ktune.ui.start import import_widgets_soon, panel_for

#: set when a ``%%kernel`` cell first starts in this kernel: the openings that
#: :mod:`jupyter_ktune.prepare` has not begun are then left to the cells themselves
CELL_STARTED = threading.Event()


def warm_worker(line: str, cell: str = "",
                namespace: Mapping[str, Any] | None = None) -> threading.Thread | None:
    """Have the device worker import the cell's backend and open the device on a thread, while
    this process parses the cell: the worker's torch, Triton and CUDA context took 7.5-8.3 s of
    a fresh notebook's first Triton cell (issue 33). A Triton cell's parse then asks the same
    worker for its ``@triton.autotune`` list (:mod:`.runner.describe`), which queues behind it,
    and the panel's own ``worker.device`` finds the answer ready. The backend is read from the
    magic line alone; a bad line is left to ``parse_cell``, which reports it. With the
    notebook's ``namespace``, a cold worker's input helper draws the cell's first set and runs
    its reference beside those imports (:mod:`.runner.first_set`)."""
    from jupyter_ktune.backends import backend_names
    from jupyter_ktune.runner.client import get_worker
    from jupyter_ktune.runner.describe import open_device
    from jupyter_ktune.runner.first_set import send_first_set
    from jupyter_ktune.runner.torch_warm import line_uses_torch
    from jupyter_ktune.session import quiet_prefetch

    CELL_STARTED.set()
    quiet_prefetch()  # earlier panels' neighbour compiles wait: this cell goes first
    import_widgets_soon()  # beside the parse's wait for the worker, not after it

    backend = line_backend(line)
    if backend not in backend_names():
        return None
    start_compile_processes(backend, cell, line)

    def opening() -> None:  # its parts are kept for the first result (describe.open_device)
        with contextlib.suppress(Exception):  # the cell's own run reports what went wrong
            worker = get_worker()
            if namespace is not None:  # a cold worker's helper draws the first set meanwhile
                send_first_set(worker, backend, line, namespace)
            open_device(worker, backend,  # a cell whose functions use torch: warm it now
                        torch_soon=namespace is not None and line_uses_torch(line, namespace))

    thread = threading.Thread(target=opening, name="ktune-warm-worker", daemon=True)
    thread.start()
    return thread


def line_backend(line: str) -> str:
    """The backend a magic line names (``--backend NAME``, ``-b NAME``), else the default;
    the name is not checked here."""
    from jupyter_ktune.backends import DEFAULT_BACKEND

    found = re.search(r"(?:--backend|-b)[= ]+([\w.-]+)", line)
    return found.group(1) if found else DEFAULT_BACKEND


def start_compile_processes(backend: str, cell: str, line: str = "") -> None:
    """Where a GPU is visible (the compile pool runs only there), start the pool's fork server
    with the backend's compiler imported, while the worker opens the device
    (:func:`~jupyter_ktune.tuning.pool.start_fork_server`); torch too where the cell, or the
    module its ``--from`` names, imports it (:func:`compiled_text`)."""
    from jupyter_ktune.backends.base import nvidia_gpu_visible
    from jupyter_ktune.tuning.pool import start_fork_server

    if nvidia_gpu_visible():
        with contextlib.suppress(Exception):  # a head start only: the pool spawns otherwise
            start_fork_server(backend, compiled_text(line, cell))


def compiled_text(line: str, cell: str) -> str:
    """The code a compile process of this cell imports: the cell, and the module its
    ``--from pkg.module:kernel`` names (read, not imported). fla's matmul cell is one line of
    directives, its module imports torch: without the module's text the fork server left
    torch out, and each of 15 pool processes imported it (2.6 s each on an H100 host,
    eec153a:bench/results/import_costs/2026-12-06-0402) beside the worker's first run."""
    from jupyter_ktune.from_package import module_file

    found = re.search(r"--from[= ]+([\w.]+):", line)
    if found is None:
        return cell
    try:
        return cell + "\n" + module_file(found.group(1)).read_text(encoding="utf-8",
                                                                     errors="replace")
    except (CellError, OSError):  # the parse reports a bad --from
        return cell


@magics_class
class KtuneMagics(Magics):
    """Registers ``%%kernel``."""

    @no_var_expand
    @cell_magic
    def kernel(self, line: str, cell: str) -> Any:
        """Compile, verify and time the kernel in this cell; returns its live panel.

        The panel has ``.result`` (the current RunResult), ``.history`` and ``.tune()``; with
        ``--no-panel``, or when the cell declares no tunables, the RunResult itself is returned.
        ``-o NAME`` (or ``--name NAME``) also stores what is returned in the notebook variable
        ``NAME``, as ``%%timeit -o`` does, so the next cell can read ``NAME.result``.

        ``%%kernel KERNEL --backend cuda --inputs FN --reference FN --out y [-o NAME]
        [--param P=v1,v2] [--config P=v] [--grid EXPR] [--block EXPR] [--smem EXPR]
        [--flops EXPR] [--bytes EXPR] [--warm-cache] [--budget-ms MS] [--timeout S]
        [--arch sm_90] [--rtol R] [--atol A] [--no-verify] [--static-only] [--no-panel]``.
        The body may declare the space with ``// ktune: BLOCK in [64, 128]; grid = cdiv(n, BLOCK)``.
        """
        try:
            warm_worker(line, cell, self.shell.user_ns)  # the worker opens the backend while
            # the cell is parsed, and its helper draws the first input set
            spec = parse_cell(line, cell, self.shell.user_ns)
            if spec.package_source:  # --from: the package's text, read-only, above the result
                from IPython.display import HTML, display

                from jupyter_ktune.ui.origin import origin_html

                display(HTML(origin_html(spec)))
            if spec.options.panel and spec.space.params:
                out = panel_for(spec)
                show_editor_marks(out.shown())  # compiler messages as marks in this cell
            else:
                out = run_kernel(spec)
                show_editor_marks(out)  # compiler messages as marks in this cell's editor
        except KtuneError as exc:
            if isinstance(exc, CellError) and exc.line is not None:  # marked like compiler errors
                show_editor_marks(SimpleNamespace(
                    backend="", diagnostics=[Diagnostic(exc.line, "error", exc.message)]))
            raise UsageError(str(exc)) from None
        if spec.options.result_name:
            self.shell.user_ns[spec.options.result_name] = out
        return out
