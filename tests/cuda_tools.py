"""The CUDA toolkit the tests compile with: one lookup of nvcc, one marker for the tests needing it.

nvcc is found as the package finds it (``jupyter_ktune.toolchain.find_tool``: the CUDA
variables, PATH, /usr/local/cuda/bin, the nvidia-cuda-nvcc wheel), so a test compiles with the
compiler the static report uses. No GPU is needed for any of these.
"""

from __future__ import annotations

import pytest

from jupyter_ktune.toolchain import ToolNotFound, find_tool


def tool(name: str) -> str | None:
    """The path of a CUDA tool (``nvcc``, ``cuobjdump``, ...), or None where there is none."""
    try:
        return str(find_tool(name))  # type: ignore[arg-type]
    except ToolNotFound:
        return None


NVCC = tool("nvcc")
HAVE_NVCC = NVCC is not None
needs_nvcc = pytest.mark.skipif(not HAVE_NVCC, reason="nvcc not found (no CUDA toolkit)")
