"""A notebook's backends are opened when its kernel starts, before any cell runs (issue 33).

The labextension sends the notebook's ``%%kernel`` cells in a silent request at kernel start
(``labextension/src/prepare.ts``); ``jupyter_ktune.prepare`` starts the worker and opens exactly
the backends those cells name, so a first cell run a few seconds later does not pay torch's
import on its clock."""

from __future__ import annotations

import json
import sys
import threading
import time

import pytest

from jupyter_ktune import magics
from jupyter_ktune import prepare as prepare_module
from jupyter_ktune.prepare import prepare, prepare_json
from jupyter_ktune.runner import client, describe
from jupyter_ktune.runner.client import DeviceWorker

CELLS = [
    "%%kernel add --backend triton\n@triton.jit\ndef add(x): pass\n",
    "x = 1  # not a kernel cell",
    "%%kernel add2 -b triton --out y\n@triton.jit\ndef add2(x): pass\n",  # triton again
    "%%kernel scale --out y\n__global__ void scale() {}\n",  # the default backend
    "%%kernel typo --backend tritn\n",  # the cell reports it when it runs
    "%%kernelish --backend pallas\n",  # another magic
    "\n%%kernel mul --backend=pallas\ndef mul(x_ref, o_ref): pass\n",
]


@pytest.fixture
def opened(monkeypatch):
    """The openings recorded instead of run: (backend, the body given to the compile
    processes) per opening, in order; ``CELL_STARTED`` clear, nothing prepared before."""
    calls: list[tuple[str, str]] = []
    bodies: dict[str, str] = {}
    monkeypatch.setattr(magics, "start_compile_processes",
                        lambda backend, cell, line="": bodies.__setitem__(backend, cell))
    monkeypatch.setattr(describe, "open_device",
                        lambda worker, backend: calls.append((backend, bodies[backend])))
    monkeypatch.setattr(client, "get_worker", lambda: None)
    monkeypatch.setattr(magics, "CELL_STARTED", threading.Event())
    monkeypatch.setattr(prepare_module, "prepared", [])
    return calls


def _prepared(cells: list[str]) -> list[str]:
    """:func:`prepare`, then its opening thread joined."""
    asked = prepare(cells)
    if prepare_module.opening is not None:
        prepare_module.opening.join(10)
    return asked


def test_each_backend_the_cells_name_is_opened_once_in_order(opened):
    assert _prepared(CELLS) == ["triton", "cuda", "pallas"]
    assert [b for b, _ in opened] == ["triton", "cuda", "pallas"]
    assert opened[0][1].startswith("@triton.jit")  # the body: the fork server's preload reads it
    assert prepare_module.prepared == ["triton", "cuda", "pallas"]
    assert _prepared(CELLS) == [] and len(opened) == 3  # a second request (a reload) opens none


def test_the_compile_processes_get_the_magic_line_too(opened, monkeypatch):
    """A ``--from`` cell's module, named on its magic line, decides whether the fork server
    imports torch (``magics.compiled_text``): the line goes with the body."""
    lines: list[str] = []
    monkeypatch.setattr(magics, "start_compile_processes",
                        lambda backend, cell, line="": lines.append(line))
    _prepared(["%%kernel k --backend triton --from fla.ops.utils.matmul:matmul_kernel\n"
               "# ktune: grid = (1,)\n"])
    assert lines == ["%%kernel k --backend triton --from fla.ops.utils.matmul:matmul_kernel"]


def test_a_cell_that_starts_leaves_the_later_openings_to_the_cells(opened, monkeypatch):
    """Run All pressed at once: the first cell starts while the first backend opens; the worker
    serves one request at a time, so no later backend is queued ahead of the cells' requests."""
    def first_opening(worker, backend):
        opened.append((backend, ""))
        magics.CELL_STARTED.set()  # the first %%kernel cell starts meanwhile
    monkeypatch.setattr(describe, "open_device", first_opening)
    assert _prepared(CELLS) == ["triton", "cuda", "pallas"]
    assert [b for b, _ in opened] == ["triton"]
    assert prepare_module.prepared == ["triton"]


def test_the_labextension_s_literal_reads_back_as_the_cells(opened):
    """The labextension writes the cells as ``JSON.stringify(JSON.stringify(cells))``, a string
    literal that Python reads as the same JSON text (quotes, backslashes, newlines, non-ASCII)."""
    cells = ['%%kernel q --backend triton\ns = "a\\\\b\\"c"\n# µs, \u2028 line sep\n']
    code = f"prepare_json({json.dumps(json.dumps(cells, ensure_ascii=False), ensure_ascii=False)})"
    assert eval(code, {"prepare_json": prepare_json}) == ["triton"]  # noqa: S307 - our literal
    prepare_module.opening.join(10)
    assert opened == [("triton", cells[0].partition("\n")[2])]
    with pytest.raises(TypeError, match="JSON list"):
        prepare_json('"one cell"')


def test_a_fresh_worker_imports_the_backend_before_any_cell_runs(monkeypatch, tmp_path):
    """With the real ``warm_worker``: the process's worker starts and imports triton on its
    own thread, while nothing else asks it anything."""
    monkeypatch.setenv("KTUNE_FORCE_INTERPRET", "1")
    monkeypatch.setattr(prepare_module, "prepared", [])
    monkeypatch.setattr(magics, "CELL_STARTED", threading.Event())
    with DeviceWorker() as w:
        monkeypatch.setattr(client, "_default", w)
        assert prepare(CELLS[:2]) == ["triton"]
        deadline = time.monotonic() + 120
        while not w.call(lambda: "triton" in sys.modules):
            assert time.monotonic() < deadline, "the worker never imported triton"
            time.sleep(0.2)
        assert not w.call(lambda: "jax" in sys.modules)  # only what the cells name


def test_a_kernel_cell_s_start_is_what_stops_them(monkeypatch):
    """The magic's start (``warm_worker``) marks that a cell runs, whatever its backend."""
    started = threading.Event()
    monkeypatch.setattr(magics, "CELL_STARTED", started)
    assert magics.warm_worker("typo --backend tritn") is None  # the cell will report the name
    assert started.is_set()
