"""KT_SCOPE in ktune.cuh: compiled out without KT_PROFILE, compiled in with it, same tags."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from cuda_tools import NVCC, needs_nvcc

from jupyter_ktune.backends.cuda.profile import ScopeSampling, fnv31, scope_names, uses_scopes
from jupyter_ktune.backends.cuda.source import include_dir

FIX = Path(__file__).parent / "fixtures" / "breakdown"
INCLUDE = include_dir()  # the installed package's, as the CUDA backend passes it
INSTANTIATE = "template __global__ void gemm<64, 64, 32>(const float*, const float*, float*, " \
              "int, int, int);\n"
_SCOPE_LINE = re.compile(r"^\s*KT_(?:SCOPE|PROFILE_KERNEL)\(.*\);\s*$", re.M)


def _sass(tmp_path: Path, name: str, source: str, *flags: str) -> list[str]:
    from jupyter_ktune.toolchain import find_tool

    src = tmp_path / f"{name}.cu"
    src.write_text(source + INSTANTIATE)
    cubin = tmp_path / f"{name}.cubin"
    subprocess.run([NVCC, "-arch=sm_90", "-cubin", "-std=c++17", f"-I{INCLUDE}", *flags,
                    "-o", str(cubin), str(src)], check=True, capture_output=True, text=True)
    out = subprocess.run([str(find_tool("cuobjdump")), "-sass", str(cubin)], check=True,
                         capture_output=True, text=True).stdout
    # instructions only: addresses and encodings do not depend on the file's name
    return [ln.split(";")[0].split("*/", 1)[-1].strip() for ln in out.splitlines()
            if re.search(r"/\*[0-9a-f]{4}\*/", ln)]


@needs_nvcc
def test_scopes_compile_out_without_kt_profile(tmp_path: Path) -> None:
    scoped = (FIX / "gemm_scoped.cu").read_text()
    plain = _SCOPE_LINE.sub("", scoped)
    assert "KT_" not in plain and "KT_SCOPE" in scoped
    a = _sass(tmp_path, "plain", plain)
    b = _sass(tmp_path, "scoped", scoped)
    assert a and a == b
    on = _sass(tmp_path, "profiled", scoped, "-DKT_PROFILE", "-DKT_PROFILE_EVENTS=32")
    assert on != a and any("CLOCK" in i or "GLOBALTIMER" in i for i in on)


@needs_nvcc
def test_device_tags_equal_the_python_hash(tmp_path: Path) -> None:
    checks = "".join(f'static_assert(kt::prof::fnv("{n}") == {fnv31(n)}u, "{n}");\n'
                     for n in ("load", "mma", "store", "tma_wait", "x"))
    src = tmp_path / "tags.cu"
    src.write_text("#include <ktune.cuh>\n" + checks)
    subprocess.run([NVCC, "-std=c++17", f"-I{INCLUDE}", "-c", str(src), "-o",
                    str(tmp_path / "tags.o")], check=True, capture_output=True, text=True)


def test_scope_names_and_sampling_from_the_launch() -> None:
    src = (FIX / "gemm_scoped.cu").read_text()
    assert sorted(scope_names(src).values()) == ["load", "mma", "store"]
    assert uses_scopes(src) and not uses_scopes(_SCOPE_LINE.sub("", src))
    s = ScopeSampling.for_launch(blocks=1024, warps_per_block=8, max_blocks=64, warps=4)
    assert (s.block_stride, s.max_blocks, s.warp_stride, s.warps) == (16, 64, 2, 4)
    assert s.buffer_words * 4 <= 10 << 20  # the trace budget: 10 MB per run
    assert s.defines()["KT_PROFILE"] == "1"
    small = ScopeSampling.for_launch(blocks=3, warps_per_block=1)
    assert (small.block_stride, small.max_blocks, small.warps) == (1, 3, 1)
