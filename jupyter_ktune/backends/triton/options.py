"""Which launch options this Triton has: a tunable naming one it lacks is refused on its line.

``maxnreg`` (the register cap, a compiler control of issue 38) is a field of Triton's
``CUDAOptions`` in 3.6 and 3.9 alike, passed at launch (``kernel[grid](..., maxnreg=128)``) and to
the ahead-of-time compile (``triton.compile(..., options={"maxnreg": 128})``); it becomes the PTX
``.maxnreg`` directive. An older Triton without it gets one line instead of an error at launch.
"""

from __future__ import annotations

from jupyter_ktune.errors import CellError
from jupyter_ktune.spec import KernelSpec


def triton_version() -> str:
    """The installed Triton's version."""
    import triton

    return triton.__version__


def supported_options() -> set[str]:
    """The option names Triton's CUDA backend parses (``num_warps``, ``maxnreg`` ...)."""
    from triton.backends.nvidia.compiler import CUDAOptions

    return set(CUDAOptions.__dataclass_fields__)


def check_launch_options(spec: KernelSpec, launch_options: tuple[str, ...]) -> None:
    """Refuse a launch-option tunable this Triton does not have, on the tunable's line."""
    missing = [k for k in launch_options if k in spec.space.names
               and k not in supported_options()]
    if missing:
        k = missing[0]
        raise CellError(f"this Triton ({triton_version()}) has no launch option {k}",
                        line=spec.space.param(k).line, fix="Remove the tunable.")
