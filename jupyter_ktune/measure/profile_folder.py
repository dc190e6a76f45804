"""The temporary folder of one profile (an ncu report, a Proton or Mosaic GPU trace).

A trace can be tens of MB and was never removed (issue 34): every cycle breakdown left a
``ktune-ncu-*``, ``ktune-proton-*`` or ``ktune-mosaic-*`` folder in the temp directory. The
folder is now removed when the profile is done, whether it succeeded or not; its name carries
the process id, so a worker killed mid-profile (a timeout is SIGKILL) leaves one that the next
profile of that kind removes.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def profile_folder(kind: str) -> Iterator[Path]:
    """A fresh ``ktune-<kind>-<pid>-*`` folder, removed on leaving (also on an exception).

    Examples
    --------
    >>> with profile_folder("ncu") as folder:  # doctest: +SKIP
    ...     run_under_ncu(..., folder, ...)
    """
    remove_stale(kind)
    folder = Path(tempfile.mkdtemp(prefix=f"ktune-{kind}-{os.getpid()}-"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def remove_stale(kind: str) -> int:
    """Remove the ``kind`` folders of processes that are gone; returns how many."""
    removed = 0
    for path in Path(tempfile.gettempdir()).glob(f"ktune-{kind}-*-*"):
        pid = path.name[len(f"ktune-{kind}-"):].split("-")[0]
        if not pid.isdigit() or _alive(int(pid)):
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed += 1
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True
