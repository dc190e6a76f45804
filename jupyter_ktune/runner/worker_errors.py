"""How a device worker's request fails: it died, it was abandoned, it timed out; the words
for a worker process's exit."""

from __future__ import annotations

import signal

from jupyter_ktune.errors import KtuneError


class WorkerDied(KtuneError):
    """The worker exited while serving a request."""


class RequestAbandoned(WorkerDied):
    """The request was abandoned (:meth:`DeviceWorker.abandon`): its worker was replaced."""


class WorkerTimeout(KtuneError):
    """The worker did not answer within the request's timeout and was killed."""


def exit_text(code: int | None) -> str:
    """A process's exit as a message says it: ``exit code 1``, ``killed by SIGKILL``."""
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"
