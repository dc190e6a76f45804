"""A failed variant labelled by its cause: compile error, out of resources, timeout, wrong
result, wrong architecture (issue 38).

Most causes are known where the failure happens (a CompileFailure, a launch check's
OutOfResources, the client's timeout, verification). Two arrive as text inside a generic one: the
compiler or the driver says the build does not fit the resources (ptxas: "Insufficient registers"
under a ``maxnreg`` or ``-maxrregcount`` cap, "uses too much shared data"; the driver: "too many
resources requested for launch"; Triton's launch: "out of resource: shared memory") or does not
fit the GPU (ptxas: an instruction "not supported on .target sm_90" that needs ``sm_90a``; the
driver: "no kernel image is available", "invalid device function"). :func:`by_cause` relabels
a compile or runtime error so, for a single run and for every sweep row alike; the reason keeps
the compiler's or driver's own words.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from jupyter_ktune.status import Status

_WRONG_ARCH = re.compile(
    r"no kernel image is available|NO_BINARY_FOR_GPU|NoKernelImageForDevice|"
    r"invalid device function|INVALID_DEVICE_FUNCTION|not supported on \.target|"
    r"requires? \.target|UNSUPPORTED_PTX_VERSION|unsupported PTX version|"
    r"PTX was compiled with an unsupported toolchain|device kernel image is invalid",
    re.IGNORECASE)
_OUT_OF_RESOURCES = re.compile(
    r"Insufficient registers|too much shared data|too many resources requested|"
    r"TOO_MANY_RESOURCES|out of resources?\b|OutOfResources",
    re.IGNORECASE)  # memory exhausted stays a runtime error in its own words (fault_confusion)
#: the statuses whose text may name a more precise cause
_GENERIC = (Status.COMPILE_ERROR, Status.RUNTIME_ERROR)


def cause(status: Status, *texts: str) -> Status:
    """``status``, or the cause its compiler's or driver's words name (wrong architecture, out
    of resources) when it is a compile or runtime error."""
    if status not in _GENERIC:
        return status
    text = "\n".join(t for t in texts if t)
    if _WRONG_ARCH.search(text):
        return Status.WRONG_ARCH
    if _OUT_OF_RESOURCES.search(text):
        return Status.OUT_OF_RESOURCES
    return status


def by_cause(result: Any) -> Any:
    """``result`` (a RunResult) with its status labelled by cause; itself when nothing
    changes."""
    status = cause(result.status, result.reason,
                   *(getattr(d, "message", "") for d in result.diagnostics))
    return result if status is result.status else dataclasses.replace(result, status=status)
