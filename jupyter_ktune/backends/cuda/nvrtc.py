"""NVRTC's build of a cell, for a machine without nvcc: given what nvcc's build has.

The run loads nvcc's cubin wherever nvcc is found (:mod:`.archcubin`): one build per cell, the
one the static report describes. Without nvcc the worker builds with NVRTC (through CuPy),
which has no host headers: no ``M_PI`` or ``INFINITY`` (nvcc's build gets them from the host's
``<math.h>`` through ``cuda_runtime.h``), no ``<cmath>`` or ``<cstdint>``. So NVRTC gets

* ``-include ktune_nvrtc.h``: the macros nvcc's build has without any ``#include``;
* ``-I`` the folder of standard-header stand-ins (``include/nvrtc``: ``<cmath>`` is libcu++'s
  ``<cuda/std/cmath>``, its names also as ``std::``);
* ``-I`` the toolkit's own headers (cooperative groups, ``<cuda_bf16.h>``, ``<cuda/std/...>``)
  from a CUDA install or the ``nvidia-*`` wheels.

tests/test_cuda_one_build.py compiles a set of published idioms both ways and requires both.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from jupyter_ktune.backends.cuda.includes import include_dirs, package_folders
from jupyter_ktune.backends.cuda.source import KernelSignature, include_dir, macro_defines
from jupyter_ktune.spec import KernelSpec

PRELUDE = "ktune_nvrtc.h"


def toolkit_include_dirs() -> list[Path]:
    """The CUDA headers NVRTC does not carry built in: a toolkit's ``include`` (and its
    ``include/cccl``, where CUDA 13 keeps libcu++), or the ``nvidia-cuda-runtime`` and
    ``nvidia-cuda-cccl`` wheels' folders; those that exist, each once."""
    roots = [Path(os.environ[v]) / "include" for v in ("CUDA_HOME", "CUDA_PATH")
             if os.environ.get(v)]
    roots.append(Path("/usr/local/cuda/include"))
    roots += [folder / cu / "include" for folder in package_folders("nvidia")
              for cu in ("cu13", "cu12")]
    out: list[Path] = []
    for root in roots:
        for folder in (root, root / "cccl"):
            if folder.is_dir() and folder.resolve() not in {p.resolve() for p in out}:
                out.append(folder)
    return out


def nvrtc_options(spec: KernelSpec, sig: KernelSignature, cxx: dict[str, int],
                  extra: Mapping[str, Any] | None = None) -> tuple[str, ...]:
    """NVRTC flags: line info, C++17, the prelude, ``ktune.cuh``, the standard-header
    stand-ins, the cell's include folders, the toolkit's headers, macros."""
    defines = {**macro_defines(spec, sig, cxx), **(extra or {})}
    return ("-lineinfo", "-std=c++17", f"-I{include_dir()}", f"--pre-include={PRELUDE}",
            f"-I{include_dir() / 'nvrtc'}", *(f"-I{d}" for d in include_dirs(spec)),
            *(f"-I{d}" for d in toolkit_include_dirs()),
            *(f"-D{k}={v}" for k, v in defines.items()))
