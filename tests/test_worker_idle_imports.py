"""A fresh worker imports its own request modules while it waits for the first request, and no
backend: a fresh notebook's first Triton cell paid them inside its first request (its "triton device
request", 0.13-0.18 s on an H100 host, bench/results/first_minute/2026-12-06-0934, 0cf38d4 in the
history). Seen from outside, in the worker's memory map: nothing is asked of it but a ping."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def _maps(pid: int) -> str:
    return Path(f"/proc/{pid}/maps").read_text()


def test_an_idle_worker_imports_its_modules_but_no_backend():
    from jupyter_ktune.runner.client import DeviceWorker

    with DeviceWorker() as w:
        assert w.request(("ping",), timeout=60) == ("ok", "pong")  # started, asked nothing
        time.sleep(5.0)  # idle: a cell's first request comes later than this on a 2-core host
        maps = _maps(w.pid)
        for backend_library in ("libtorch", "libtriton", "jaxlib", "cupy"):
            assert backend_library not in maps, f"an idle worker loaded {backend_library}"

        def imported_before() -> list[float]:
            import __main__  # the worker runs as ``python -m jupyter_ktune.runner.worker``

            return [t - time.monotonic() for t in __main__.IMPORTED_AT]

        ago = w.call(imported_before, timeout=30)
        assert ago and ago[0] < -1.0, f"the idle worker imported nothing ahead ({ago})"
