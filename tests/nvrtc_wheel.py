"""NVRTC without a GPU: the ``nvidia-cuda-nvrtc`` wheel's library, called through ctypes.

The runtime path's compiler is NVRTC (through CuPy, on a GPU machine without nvcc); the test
extra installs its wheel so that what it compiles is checked here too.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import site
import sysconfig
from collections.abc import Sequence
from pathlib import Path


def load_nvrtc() -> ctypes.CDLL | None:
    """libnvrtc from the wheel (site-packages/nvidia/cu*/lib), else the system's, else None."""
    roots = {sysconfig.get_paths()["purelib"], *site.getsitepackages()}
    wheel_libs = sorted(str(p) for r in roots for p in Path(r).glob("nvidia/*/lib/libnvrtc.so.*")
                        if "builtins" not in p.name)
    for name in (*wheel_libs, "libnvrtc.so.13", "libnvrtc.so.12",
                 ctypes.util.find_library("nvrtc")):
        if name:
            try:
                return ctypes.CDLL(name)
            except OSError:
                continue
    return None


def nvrtc_compile(nvrtc: ctypes.CDLL, source: str, options: Sequence[str],
                  name: str = "cell.cu") -> tuple[bool, str]:
    """Compile ``source`` with ``options``: (whether it compiled, NVRTC's log)."""
    prog = ctypes.c_void_p()
    assert nvrtc.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), name.encode(), 0,
                                    None, None) == 0
    opts = [o.encode() for o in options]
    result = nvrtc.nvrtcCompileProgram(prog, len(opts), (ctypes.c_char_p * len(opts))(*opts))
    size = ctypes.c_size_t()
    nvrtc.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
    log = ctypes.create_string_buffer(size.value)
    nvrtc.nvrtcGetProgramLog(prog, log)
    nvrtc.nvrtcDestroyProgram(ctypes.byref(prog))
    return result == 0, log.value.decode(errors="replace")
