"""Compile jupyter_ktune/include/ktune.cuh for real and check it against Python.

* host: a program calling every helper, built by nvcc (``-x cu``, the
  ``__host__ __device__`` path) and by g++ (the plain-host path), prints its
  values; each one must equal jupyter_ktune.swizzle's.
* device: ``nvcc -cubin -arch=sm_90`` of a kernel using every helper, and a
  bad swizzle mode must fail to compile with ktune's message.
* NVRTC: the header must pull in no other file (NVRTC has no host standard
  headers); checked by grep, by nvcc's dependency list, and, where libnvrtc
  can be loaded, by NVRTC itself.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from cuda_tools import NVCC, needs_nvcc
from nvrtc_wheel import load_nvrtc, nvrtc_compile

from jupyter_ktune.backends.cuda.source import include_dir
from jupyter_ktune.swizzle import grouped_tile, swizzle_index, swizzle_offset

INCLUDE = include_dir()  # the installed package's, as the CUDA backend passes it
HEADER = INCLUDE / "ktune.cuh"



MODES = (0, 32, 64, 128)
ELEM_BYTES = (1, 2, 4, 8, 16)
GRIDS = [(m, n, g) for m in (1, 3, 4, 7) for n in (1, 2, 5) for g in (0, 1, 2, 3, 8)]
CDIV = [(a, b) for a in (0, 1, 7, 64, 65, 1000) for b in (1, 3, 64)]
POW2 = (-4, 0, 1, 2, 3, 6, 64, 96, 128, 1 << 30)

HOST_PROGRAM = r"""
#include <ktune.cuh>
#include <cstdio>

// Constant evaluation: the helpers must be usable as constexpr.
static_assert(kt::swizzle<128>(128) == 144, "swizzle not constexpr");
static_assert(kt::cdiv(65, 64) == 2, "cdiv not constexpr");
static_assert(kt::is_pow2(64) && !kt::is_pow2(96), "is_pow2 not constexpr");
static_assert(kt::swizzle_span<64>() == 512, "swizzle_span");

struct alignas(16) Vec16 { int v[4]; };

template <int B, typename T>
void dump_index() {
  for (unsigned r = 0; r < 16; ++r)
    for (unsigned c = 0; c < 128 / sizeof(T); ++c)
      std::printf("idx %d %u %u %u %u\n", B, (unsigned)sizeof(T), r, c,
                  kt::swizzle_index<B, T>(r, c, 128 / (unsigned)sizeof(T)));
}

template <int B>
void dump_mode() {
  for (unsigned o = 0; o < 4096; ++o) std::printf("swz %d %u %u\n", B, o, kt::swizzle<B>(o));
  dump_index<B, char>();
  dump_index<B, short>();
  dump_index<B, float>();
  dump_index<B, double>();
  dump_index<B, Vec16>();
}

int main() {
  dump_mode<0>();
  dump_mode<32>();
  dump_mode<64>();
  dump_mode<128>();
  const int grids[][3] = {GRIDS};
  for (const auto& g : grids)
    for (int pid = 0; pid < g[0] * g[1]; ++pid) {
      int m = -1, n = -1;
      kt::grouped_tile(pid, g[0], g[1], g[2], &m, &n);
      std::printf("tile %d %d %d %d %d %d\n", g[0], g[1], g[2], pid, m, n);
    }
  const int cdivs[][2] = {CDIV};
  for (const auto& c : cdivs) std::printf("cdiv %d %d %d\n", c[0], c[1], kt::cdiv(c[0], c[1]));
  const int pows[] = {POW2};
  for (int x : pows) std::printf("pow2 %d %d\n", x, (int)kt::is_pow2(x));
  return 0;
}
"""

DEVICE_KERNEL = r"""
#include <ktune.cuh>

extern "C" __global__ void ktune_all(const float* __restrict__ a, float* out,
                                     int num_pid_m, int num_pid_n) {
  __shared__ __align__(1024) float tile[32 * 32];
  int pid_m, pid_n;
  kt::grouped_tile(blockIdx.x, num_pid_m, num_pid_n, 8, &pid_m, &pid_n);
  const unsigned r = threadIdx.x / 32, c = threadIdx.x % 32;
  tile[kt::swizzle_index<128, float>(r, c, 32)] = a[threadIdx.x];
  __syncthreads();
  const unsigned byte = kt::swizzle<64>(threadIdx.x * 4u) ^ kt::swizzle<32>(threadIdx.x)
                        ^ kt::swizzle<0>(threadIdx.x);
  const int tiles = kt::cdiv(num_pid_m, 4) + (kt::is_pow2(num_pid_n) ? 1 : 0);
  out[blockIdx.x * blockDim.x + threadIdx.x] =
      tile[kt::swizzle_index<128, float>(c, r, 32)] + byte + tiles + pid_m * num_pid_n + pid_n
      + kt::swizzle_span<128>();
}

KT_DEVICE_INLINE float twice(float x) { return 2.0f * x; }
extern "C" __global__ void ktune_inline(float* x) { x[threadIdx.x] = twice(x[threadIdx.x]); }
"""


def _host_source() -> str:
    def rows(items: list[tuple[int, ...]] | tuple[int, ...]) -> str:
        return ", ".join(
            "{" + ", ".join(map(str, i)) + "}" if isinstance(i, tuple) else str(i) for i in items
        )

    return (
        HOST_PROGRAM.replace("{GRIDS}", "{" + rows(GRIDS) + "}")
        .replace("{CDIV}", "{" + rows(CDIV) + "}")
        .replace("{POW2}", "{" + rows(POW2) + "}")
    )


def _run(cmd: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=120, check=False)


def _build_and_run(compiler: str, tmp_path: Path) -> list[str]:
    src = tmp_path / "host.cu"
    src.write_text(_host_source())
    exe = tmp_path / "host"
    if compiler == "nvcc":
        cmd = [NVCC, "-std=c++17", "-x", "cu", f"-I{INCLUDE}", str(src), "-o", str(exe)]
    else:
        cmd = [
            compiler,
            "-std=c++14",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-x",
            "c++",
            f"-I{INCLUDE}",
            str(src),
            "-o",
            str(exe),
        ]
    built = _run(cmd, tmp_path)
    assert built.returncode == 0, built.stderr
    ran = _run([str(exe)], tmp_path)
    assert ran.returncode == 0, ran.stderr
    return ran.stdout.splitlines()


def _check_host_values(lines: list[str]) -> None:
    seen = {"swz": 0, "idx": 0, "tile": 0, "cdiv": 0, "pow2": 0}
    for line in lines:
        kind, *fields = line.split()
        v = list(map(int, fields))
        seen[kind] += 1
        if kind == "swz":
            assert v[2] == swizzle_offset(v[1], v[0]), line
        elif kind == "idx":
            mode, size, r, c = v[:4]
            assert v[4] == swizzle_index(r, c, 128 // size, size, mode), line
        elif kind == "tile":
            num_pid_m, num_pid_n, group_m, pid = v[:4]
            assert (v[4], v[5]) == grouped_tile(pid, num_pid_m, num_pid_n, group_m), line
        elif kind == "cdiv":
            assert v[2] == -(-v[0] // v[1]), line
        else:
            assert v[1] == int(v[0] > 0 and (v[0] & (v[0] - 1)) == 0), line
    index_lines = len(MODES) * 16 * sum(128 // s for s in ELEM_BYTES)
    tile_lines = sum(m * n for m, n, _ in GRIDS)
    assert seen == {
        "swz": 4 * 4096,
        "idx": index_lines,
        "tile": tile_lines,
        "cdiv": len(CDIV),
        "pow2": len(POW2),
    }


@needs_nvcc
def test_host_values_match_python_nvcc(tmp_path: Path) -> None:
    """The host pass of nvcc computes exactly what jupyter_ktune.swizzle does."""
    _check_host_values(_build_and_run("nvcc", tmp_path))


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not found on PATH")
def test_host_values_match_python_plain_cxx(tmp_path: Path) -> None:
    """Without CUDA, KT_HD falls back to ``inline`` and the values match."""
    # No CUDA at all: KT_HD must fall back to plain `inline`.
    _check_host_values(_build_and_run("g++", tmp_path))


@needs_nvcc
def test_device_cubin_sm90(tmp_path: Path) -> None:
    """A kernel using every helper compiles for sm_90."""
    (tmp_path / "k.cu").write_text(DEVICE_KERNEL)
    built = _run([NVCC, "-cubin", "-arch=sm_90", f"-I{INCLUDE}", "k.cu", "-o", "k.cubin"], tmp_path)
    assert built.returncode == 0, built.stderr
    assert (tmp_path / "k.cubin").stat().st_size > 0


@needs_nvcc
@pytest.mark.parametrize(
    ("code", "message"),
    [
        ("kt::swizzle<48>(0u)", "swizzle BYTES must be 0 (none), 32, 64 or 128"),
        ("kt::swizzle_index<128, char[3]>(0u, 0u, 8u)", "element of 1, 2, 4, 8 or 16 bytes"),
    ],
)
def test_bad_template_arguments_fail_with_message(tmp_path: Path, code: str, message: str) -> None:
    """Bad template arguments stop compilation with ktune's message."""
    (tmp_path / "bad.cu").write_text(
        f"#include <ktune.cuh>\n__global__ void k(unsigned* o) {{ *o = {code}; }}\n"
    )
    built = _run(
        [NVCC, "-cubin", "-arch=sm_90", f"-I{INCLUDE}", "bad.cu", "-o", "bad.cubin"], tmp_path
    )
    assert built.returncode != 0
    assert message in built.stderr


def test_header_includes_nothing() -> None:
    """NVRTC has no <cstdint>, <cstdio>, ...: the header includes no file."""
    includes = [ln for ln in HEADER.read_text().splitlines() if re.match(r"\s*#\s*include\b", ln)]
    assert includes == []


@needs_nvcc
def test_header_adds_no_dependencies(tmp_path: Path) -> None:
    """Including the header makes nvcc read no file besides it."""

    # nvcc -M lists every file a translation unit reads; with the header the
    # list must grow by ktune.cuh alone, on the device and the host pass.
    def deps(source: str) -> set[str]:
        (tmp_path / "d.cu").write_text(source)
        out = _run([NVCC, "-M", "-arch=sm_90", f"-I{INCLUDE}", "d.cu"], tmp_path)
        assert out.returncode == 0, out.stderr
        return set(out.stdout.replace("\\\n", " ").split()[1:])

    assert deps("#include <ktune.cuh>\n") - deps("\n") == {str(HEADER)}


def test_compiles_under_nvrtc() -> None:
    """NVRTC, as CuPy RawModule uses it, compiles the kernel."""
    nvrtc = load_nvrtc()
    if nvrtc is None:
        pytest.skip(
            "libnvrtc not found: pip install nvidia-cuda-nvrtc "
            "(or put CUDA's lib64 on LD_LIBRARY_PATH)"
        )
    ok, log = nvrtc_compile(nvrtc, DEVICE_KERNEL, ["--gpu-architecture=sm_90", f"-I{INCLUDE}"])
    assert ok, log
