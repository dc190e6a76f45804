"""The compiler flags a CUDA C++ config asks for: ``nvcc_flags`` and ``maxnreg`` tunables.

``nvcc_flags in [[], ["--use_fast_math"], ["-maxrregcount=128"]]`` passes each value's flags to
nvcc as written (the static report's build, which is also the run's wherever nvcc is found:
:mod:`.archcubin`), and ``maxnreg in [128, 168]`` passes ``-maxrregcount=N``. Without nvcc the
run is NVRTC's build, whose options are spelled differently and are fewer:
:func:`nvrtc_flags` maps each flag NVRTC has, and refuses one it does not have with one line
naming the cell line of the tunable.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from jupyter_ktune.compiler_controls import controls
from jupyter_ktune.errors import CellError
from jupyter_ktune.spec import KernelSpec

#: nvcc spellings (one dash or two, ``=`` or a separate value) -> NVRTC's option name
_NVRTC_NAMES = {
    "use_fast_math": "--use_fast_math", "maxrregcount": "--maxrregcount", "ftz": "--ftz",
    "prec-div": "--prec-div", "prec-sqrt": "--prec-sqrt", "fmad": "--fmad",
    "extra-device-vectorization": "--extra-device-vectorization", "restrict": "--restrict",
    "Xptxas": "--ptxas-options", "ptxas-options": "--ptxas-options", "lineinfo": "-lineinfo",
    "G": "--device-debug", "device-debug": "--device-debug", "dopt": "--dopt",
    "std": "--std",
}
_TAKES_VALUE = {"maxrregcount", "ftz", "prec-div", "prec-sqrt", "fmad", "Xptxas",
                "ptxas-options", "dopt", "std"}
_FLAG = re.compile(r"^--?(?P<name>[A-Za-z][\w-]*)(?:=(?P<value>.*))?$")


def nvcc_flags(spec: KernelSpec, config: Mapping[str, Any]) -> tuple[str, ...]:
    """The extra nvcc flags of ``config``: its ``nvcc_flags`` value, then ``-maxrregcount``
    for a ``maxnreg`` tunable."""
    chosen = controls(spec, config)
    flags = tuple(chosen.get("nvcc_flags", ()))
    if "maxnreg" in chosen:
        flags += (f"-maxrregcount={chosen['maxnreg']}",)
    return flags


def nvrtc_flags(spec: KernelSpec, config: Mapping[str, Any]) -> tuple[str, ...]:
    """:func:`nvcc_flags` as NVRTC options: ``-D``/``-U``/``-I`` as they are, the options NVRTC
    shares with nvcc in its spelling; a CellError on the tunable's line for any other."""
    flags = list(nvcc_flags(spec, config))
    out: list[str] = []
    while flags:
        flag = flags.pop(0)
        if re.match(r"^-[DUI]\S", flag):
            out.append(flag)
            continue
        m = _FLAG.match(flag)
        name = m.group("name") if m else ""
        if name not in _NVRTC_NAMES:
            what = "nvcc_flags" if "nvcc_flags" in spec.space.names else "maxnreg"
            raise CellError(f"nvcc flag {flag} has no NVRTC option, and NVRTC builds the run "
                            "here (nvcc is not found)", line=spec.space.param(what).line,
                            fix="Install nvcc (the lab extra's nvidia-cuda-nvcc wheel) or "
                                "remove the flag.")
        value = m.group("value")
        if value is None and name in _TAKES_VALUE and flags:
            value = flags.pop(0)  # "-Xptxas", "-v" and "--maxrregcount", "128"
        nvrtc = _NVRTC_NAMES[name]
        out.append(nvrtc if value is None else f"{nvrtc}={value}")
    return tuple(out)
