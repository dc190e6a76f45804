"""The shared memory segments an input set drawn ahead crosses in (:mod:`.inputs_ahead`).

The helper copies each array of the set it drew into a segment of its own, named after the
worker that owns it (``SEGMENT_PREFIX`` + the worker's pid), and sends the names; the worker
takes the arrays over the segments' pages and unlinks the names. A worker killed with a set
pending leaves its segments behind: its client, or the next worker, finds them by the dead pid
and unlinks them (:func:`remove_orphans`); a worker about to exit unlinks its own
(:func:`unlink_own`).
"""

from __future__ import annotations

import contextlib
import glob
import mmap
import os
import re
import uuid
from multiprocessing import resource_tracker, shared_memory
from typing import Any

import numpy as np

SEGMENT_PREFIX = "ktune_inputs_"  # + the worker's pid: a dead worker's segments are found again
_SHM_DIR = "/dev/shm"  # where Linux keeps the named segments (:func:`mapped`)
#: Free space left in the segments' file system after a set is written there (:func:`room_for`).
ROOM_MARGIN = 16 << 20


class NoRoom(Exception):
    """The segments' file system cannot hold a set (a container's 64 MiB /dev/shm)."""


def room_for(nbytes: int) -> bool:
    """Whether ``nbytes`` of segments fit in /dev/shm now, :data:`ROOM_MARGIN` left over.

    A segment is a file in a tmpfs: creating it reserves nothing, and a write past the file
    system's size kills the writer with SIGBUS. Docker gives a container 64 MiB there unless
    told otherwise, less than one 4096^2 fp32 set; and the worker now keeps the set it runs
    mapped (:func:`mapped`) while the helper writes the next, so two sets live there at once.
    True where there is no /dev/shm to ask (``shared_memory`` finds its own place)."""
    try:
        fs = os.statvfs(_SHM_DIR)
    except OSError:
        return True
    return nbytes + ROOM_MARGIN <= fs.f_bavail * fs.f_frsize


def segment_prefix() -> str:
    """Return the segment name prefix: ``SEGMENT_PREFIX``, or ``$KTUNE_SHM_PREFIX``.

    A prefix of one's own (letters, digits, underscores) keeps one set of workers apart from the
    cleanup of all others: tests on a host where other test runs clean up dead workers' segments.
    """
    own = os.environ.get("KTUNE_SHM_PREFIX", "")
    return own if re.fullmatch(r"[A-Za-z0-9_]{1,64}", own) else SEGMENT_PREFIX


def share(args: dict[str, Any], owner: int) -> dict[str, Any]:
    """Put every array of ``args`` into a shared memory segment owned by the worker ``owner``;
    :class:`NoRoom` where /dev/shm cannot hold them all (nothing is written then)."""
    need = sum(max(v.nbytes, 1) + mmap.PAGESIZE for v in args.values() if isinstance(v, np.ndarray))
    if not room_for(need):
        raise NoRoom(f"{need >> 20} MiB of input set do not fit in {_SHM_DIR}")
    out: dict[str, Any] = {}
    for name, v in args.items():
        if isinstance(v, np.ndarray):
            seg = shared_memory.SharedMemory(
                name=f"{segment_prefix()}{owner}_{uuid.uuid4().hex[:16]}", create=True,
                size=max(v.nbytes, 1))
            # the worker (``owner``) owns it from here: it unlinks it once taken, or at
            # exit; if it was killed, its client or the next worker does (remove_orphans)
            resource_tracker.unregister(seg._name, "shared_memory")  # noqa: SLF001
            order = "C" if v.flags.c_contiguous else "F"
            np.ndarray(v.shape, v.dtype, buffer=seg.buf, order=order)[...] = v
            out[name] = ("shm", seg.name, v.shape, v.dtype, order)
            seg.close()
        else:
            out[name] = v
    return out


def take(drawn: dict[str, Any]) -> dict[str, Any]:
    """In the worker: each array over its segment's pages (:func:`mapped`), or a copy of
    them where the segment cannot be mapped so; the segment's name is unlinked either way."""
    args: dict[str, Any] = {}
    for name, v in drawn.items():
        if isinstance(v, tuple) and len(v) == 5 and v[0] == "shm":
            args[name] = mapped(*v[1:])
            if args[name] is None:
                seg = shared_memory.SharedMemory(name=v[1])
                try:
                    args[name] = np.ndarray(v[2], v[3], buffer=seg.buf,
                                            order=v[4]).copy(order="K")
                finally:
                    seg.close()
                    seg.unlink()  # also drops the registration that attaching made
        else:
            args[name] = v
    return args


def mapped(segment: str, shape: tuple[int, ...], dtype: Any, order: str) -> np.ndarray | None:
    """The segment's pages as the array itself, its name unlinked (None: not on Linux).

    Copied out instead, Kernel Tuner's vector add's set (160 MB with its reference) took 50-70
    ms of the worker's first run on this project's CPU machine, on that run's path, and as much
    again in fresh pages. On an H100 host, in turns against the copy (5 a side): the vector
    add's first result 2.27 -> 2.04 s from spawn, new lower in 4 of 5 pairs, its wait for the
    set 949 -> 854 ms (7df6452:bench/results/first_minute_ab/2026-12-07-1459, call 1; the same
    tree's two sides read 2.22 and 2.21 s in call 2, so the gain is under the spread). The worker
    still maps the pages in at the array's first read: in a sampled fla cell (call 3) the check for
    all-zero inputs, the first to read them, took 75 ms, against 40 ms after the copy's 41 ms in
    2026-12-07-1145's sampled cell on another host, so what is saved is the copy, not the pages.
    The mapping is private to the worker from here (the helper closed its own, and the name is
    gone): it lives as long as the array, and its pages are freed with it, so a killed worker
    leaves nothing behind either.
    """
    path = os.path.join(_SHM_DIR, segment)
    try:
        fd = os.open(path, os.O_RDWR)
    except OSError:
        return None
    try:
        size = os.fstat(fd).st_size
        pages = mmap.mmap(fd, size) if size else None
    finally:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(path)
    if pages is None:  # an empty array: its one-byte segment holds nothing
        return np.empty(shape, dtype, order=order)
    return np.ndarray(shape, dtype, buffer=pages, order=order)


def unlink_own() -> None:
    """Unlink the segments this worker owns (it is about to exit abruptly)."""
    for path in glob.glob(f"{_SHM_DIR}/{segment_prefix()}{os.getpid()}_*"):
        with contextlib.suppress(OSError):
            os.unlink(path)


def remove_orphans() -> int:
    """Unlink segments left by workers that were killed with a set pending; returns how many."""
    removed = 0
    prefix = segment_prefix()
    for path in glob.glob(f"{_SHM_DIR}/{prefix}*"):
        pid = os.path.basename(path)[len(prefix):].split("_")[0]
        try:
            os.kill(int(pid), 0)
            continue  # its worker is alive
        except ProcessLookupError:
            pass
        except (ValueError, PermissionError):
            continue
        try:
            os.unlink(path)
            removed += 1
        except OSError:
            pass
    return removed
