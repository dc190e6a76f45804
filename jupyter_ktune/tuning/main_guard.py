"""Is ``tune()`` called from a script's top level without ``if __name__ == "__main__":``?

The compile pool starts its processes with ``spawn``, and a spawned process imports the main
script again (as ``__mp_main__``). A script that calls ``tune()`` at its top level without the
guard then calls it once more in every pool process, where starting another pool fails, and the
sweep ended in ``BrokenProcessPool`` under a wall of tracebacks (issue 21). Such a sweep
compiles in its device worker instead (no pool), with one line saying why and how to get the
pool back.
"""

from __future__ import annotations

import ast
import functools
import multiprocessing
import sys
from types import FrameType

UNGUARDED = ("[ktune] {where}: tune() is called at the script's top level without "
             "`if __name__ == \"__main__\":`, which the compile pool's spawned processes would "
             "run again; compiling in the device worker instead. Put the call under the guard "
             "to compile on {cpus} CPUs ahead.")
IN_POOL = ("[ktune] {where}: tune() ran again while a compile-pool process imported the script; "
           "put the call under `if __name__ == \"__main__\":`.")


class UnguardedScriptWarning(UserWarning):
    """The sweep compiles without its pool because the script lacks the ``__main__`` guard."""


def _top_level_line(main_globals: dict, frame: FrameType | None) -> int | None:
    """Line of the main module's top-level statement on the stack (None: not at import time)."""
    line = None
    while frame is not None:
        if frame.f_globals is main_globals and frame.f_code.co_name == "<module>":
            line = frame.f_lineno
        frame = frame.f_back
    return line


@functools.lru_cache(maxsize=32)
def _guarded_lines(path: str) -> tuple[tuple[int, int], ...]:
    """Line ranges of ``if __name__ == "__main__":`` blocks in the script at ``path``."""
    try:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
    except (OSError, SyntaxError, ValueError):
        return ((1, sys.maxsize),)  # cannot tell: assume guarded, keep the pool
    out = []
    for node in tree.body:
        if isinstance(node, ast.If) and "__name__" in ast.unparse(node.test) \
                and "__main__" in ast.unparse(node.test):
            out.append((node.lineno, node.end_lineno or node.lineno))
    return tuple(out)


def unguarded_call(frame: FrameType | None = None) -> str | None:
    """Where (``script.py:12``) the main script calls ``tune()`` unguarded, else None.

    ``frame``: the caller's frame (default: this function's caller). A notebook, ``python -c``
    and a call from inside a function that the script calls under the guard are all fine.
    """
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if main is None or not path or hasattr(sys, "ps1"):
        return None
    line = _top_level_line(vars(main), frame if frame is not None else sys._getframe(1))
    if line is None or any(a <= line <= b for a, b in _guarded_lines(path)):
        return None
    return f"{path}:{line}"


def in_spawned_import(frame: FrameType | None = None) -> str | None:
    """Where, when this process is a spawned child importing the main script (``__mp_main__``)
    and the call comes from that import; else None."""
    main = sys.modules.get("__main__")
    if multiprocessing.parent_process() is None or getattr(main, "__name__", "") != "__mp_main__":
        return None
    line = _top_level_line(vars(main), frame if frame is not None else sys._getframe(1))
    return None if line is None else f"{getattr(main, '__file__', '?')}:{line}"
