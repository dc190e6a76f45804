"""Calling the cell's own functions (``--inputs``, ``--reference``): their failures are theirs.

An exception raised inside the user's inputs function reached the notebook as 20 lines of
traceback through ktune's internals (issue 34), and a reference's own ``KeyError`` read as
``[ktune] KeyError: 'oops'``, as if the kernel had failed. Here such an exception becomes one
:class:`~jupyter_ktune.errors.CellError` on the magic line (where ``--inputs`` and
``--reference`` are given) that names the function, the exception, and where in the user's own
code it was raised: the frames of ktune, of the standard library and of site-packages are left
out, so the line points at the user's cell, not at ours.
"""

from __future__ import annotations

import inspect
import os
import sysconfig
import threading
import traceback
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from jupyter_ktune.errors import CellError, KtuneError

_PACKAGE = str(Path(__file__).resolve().parent)
_LIBRARIES = tuple({str(Path(p).resolve()) for p in (
    sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["purelib"],
    sysconfig.get_paths()["platlib"]) if p})

#: what each role's function is for, in the fix of its failure
_ROLES = {
    "inputs": ("--inputs", "it runs in the worker before every input set"),
    "reference": ("--reference", "it computes the expected outputs from the inputs"),
}


def _ours(filename: str) -> bool:
    try:
        path = str(Path(filename).resolve())
    except (OSError, ValueError):
        return False
    return path.startswith(_PACKAGE + os.sep) or path.startswith(_LIBRARIES)


def user_frame(exc: BaseException) -> str:
    """``"in helper, line 23"``: the innermost frame of the user's own code in ``exc``'s
    traceback ('' when there is none, e.g. an error raised by NumPy called directly)."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if not _ours(f.filename)]
    if not frames:
        return ""
    f = frames[-1]
    # a notebook cell's file (ipykernel's /tmp/ipykernel_<pid>/<hash>.py) names nothing useful
    cell = f.filename.startswith("<") or "ipykernel_" in f.filename
    where = "" if cell else f" of {Path(f.filename).name}"
    return f"in {f.name}, line {f.lineno}{where}"


def name_of(fn: Any) -> str:
    """The function's name as the user wrote it (its repr for a callable object)."""
    return getattr(fn, "__name__", None) or repr(fn)


def failure(role: str, fn: Any, exc: BaseException) -> CellError:
    """The one-line CellError for ``exc`` raised inside the user's ``role`` function."""
    flag, what = _ROLES[role]
    where = user_frame(exc)
    detail = str(exc).strip().splitlines()
    text = f"{type(exc).__name__}: {detail[0]}" if detail else type(exc).__name__
    return CellError(f"{flag} {name_of(fn)}() raised {text}" + (f" ({where})" if where else ""),
                     line=1, fix=f"Fix {name_of(fn)} ({what}); run it in a cell to see the "
                     "whole traceback.")


def call_user(role: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call the user's ``role`` function (``"inputs"`` or ``"reference"``); any exception it
    raises becomes :func:`failure`'s one-line CellError. A call whose arguments do not fit the
    function's signature is said so, with the names it was given."""
    try:
        inspect.signature(fn).bind(*args, **kwargs)
    except TypeError as exc:
        flag, _ = _ROLES[role]
        given = ", ".join(kwargs) or "no arguments"
        raise CellError(f"{flag} {name_of(fn)} cannot be called with {given} ({exc})", line=1,
                        fix="Give it the kernel's argument names, or **kwargs.") from None
    except ValueError:  # no signature (a builtin): the call itself says
        pass
    try:
        return fn(*args, **kwargs)
    except KtuneError:
        raise
    except Exception as exc:  # noqa: BLE001 - the user's function: one line, never a traceback
        raise failure(role, fn, exc) from None


_drawing: dict[str, Future] = {}  # inputs key -> the call of that inputs function in flight
_kept: dict[str, Any] = {}  # inputs key -> the set the last keeping call drew (one set only)
_drawing_lock = threading.Lock()


def call_inputs(fn: Callable[[], Any], keep: bool = False) -> Any:
    """``call_user("inputs", fn)``, one call for the callers that overlap it: a caller that
    finds a call of the same inputs function in flight (another thread's; keyed as every cache
    of it is, :func:`~jupyter_ktune.problem_key.inputs_key`) takes that call's set, or its
    error. A call that starts after one ended draws afresh, so every input set a run checks a
    variant on is a fresh draw. ``keep``: remember the set for :func:`any_inputs` (the device
    worker's runs, which keep their set anyway: it costs no memory there)."""
    from jupyter_ktune.problem_key import inputs_key

    key = inputs_key(fn)
    with _drawing_lock:
        flight = _drawing.get(key)
        mine = flight is None
        if mine:
            flight = _drawing[key] = Future()
    if not mine:
        return flight.result()
    try:
        value = call_user("inputs", fn)
    except BaseException as exc:
        flight.set_exception(exc)
        raise
    else:
        flight.set_result(value)
        if keep:
            keep_inputs(fn, value)
        return value
    finally:
        with _drawing_lock:
            _drawing.pop(key, None)


def keep_inputs(fn: Callable[[], Any], value: Any) -> None:
    """Remember ``value`` as ``fn``'s set for :func:`any_inputs`: a keeping call's, or one drawn
    by the input helper, which a build beside the run would otherwise draw again to read its
    types (1.0 s instead of 0.2 s of fla's first compile on an H100 host,
    ``git show 3f99cc8:bench/results/first_minute_ab/2026-12-06-0928/raw_output.txt``)."""
    from jupyter_ktune.problem_key import inputs_key

    with _drawing_lock:
        _kept.clear()
        _kept[inputs_key(fn)] = value


def any_inputs(fn: Callable[[], Any]) -> Any:
    """An input set of ``fn`` for what reads only the set's types and scalars (the Triton
    build's argument types): the one being drawn, or the last one kept, or a fresh draw.

    A variant's first run drew its set while its build, in a thread beside it (or its static
    report after it, on a CPU machine), called ``inputs()`` again for the argument types: a
    second draw of fla's 4096^2 fp16 operands on the first result's path (0.7-1 s on the H200,
    eec153a:bench/results/first_minute/2026-12-06-0056)."""
    from jupyter_ktune.problem_key import inputs_key

    kept = _kept.get(inputs_key(fn))
    return kept if kept is not None else call_inputs(fn)
