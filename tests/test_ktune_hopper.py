"""Compile jupyter_ktune/include/ktune_hopper.cuh for sm_90a and read the SASS it makes.

Each primitive is compiled into a kernel of its own, once with the call and once without it:
the SASS opcode the primitive stands for (``HGMMA``, ``UTMALDG``, ``UTMASTG``, ``SYNCS``,
``USETMAXREG``, ...) must be there with the call and absent without, so a primitive that
compiles to nothing (or to something else) fails. The WGMMA descriptor encoder is checked on
the host (g++) against a Python encoder written from the PTX ISA's "Matrix Descriptor Format".
No GPU is needed: nvcc and cuobjdump/nvdisasm only.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from cuda_tools import NVCC, needs_nvcc, tool
from nvrtc_wheel import load_nvrtc, nvrtc_compile

from jupyter_ktune.measure.sass import SassMix, disassemble, parse_sass

INCLUDE = Path(__file__).resolve().parents[1] / "jupyter_ktune" / "include"


HAS_DISASM = tool("cuobjdump") is not None or tool("nvdisasm") is not None
needs_sass = pytest.mark.skipif(NVCC is None or not HAS_DISASM,
                                reason="nvcc or a disassembler (nvidia-cuda-cuobjdump) missing")

SM90A = "-gencode=arch=compute_90a,code=sm_90a"

# One kernel per primitive. {CALL} is replaced by the call, or by nothing for the control.
KERNEL = r"""
#include <ktune_hopper.cuh>
extern "C" __global__ void __launch_bounds__(256, 1)
probe(const __grid_constant__ kt::TensorMap map, float* out, int flag) {
  __shared__ __align__(1024) unsigned short tile[64 * 64];
  __shared__ __align__(8) unsigned long long bar;
  float d[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) d[i] = out[i];
  const unsigned long long desc = kt::wgmma_desc_kmajor<128>(kt::smem_u32(tile));
  (void)desc; (void)bar;
  if (threadIdx.x < 128) {
    {CALL}
  }
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < 128; ++i) s += d[i];
  out[threadIdx.x] = s + tile[threadIdx.x];
}
"""

PRIMITIVES = {
    "wgmma m64n256k16": ("kt::wgmma_fence(); kt::wgmma_bf16<256>(d, desc, desc, flag);"
                         " kt::wgmma_commit(); kt::wgmma_wait<0>();",
                         "HGMMA.64x256x16.F32.BF16"),
    "wgmma m64n128k16": ("kt::wgmma_fence(); kt::wgmma_bf16<128>(reinterpret_cast<float(&)[64]>"
                         "(d), desc, desc, flag); kt::wgmma_commit(); kt::wgmma_wait<0>();",
                         "HGMMA.64x128x16.F32.BF16"),
    "wgmma m64n64k16 B k-by-n": ("kt::wgmma_fence(); kt::wgmma_bf16<64, 1>(reinterpret_cast"
                                 "<float(&)[32]>(d), desc, desc, 1); kt::wgmma_commit();"
                                 " kt::wgmma_wait<0>();", "HGMMA.64x64x16.F32.BF16"),
    "wgmma fp16 m64n176k16": ("kt::wgmma_fence(); kt::wgmma_ss<176, kt::WG_F16>(reinterpret_cast"
                              "<float(&)[88]>(d), desc, desc, flag); kt::wgmma_commit();"
                              " kt::wgmma_wait<0>();", "HGMMA.64x176x16.F32"),
    "wgmma fp16 m64n192k16 A in registers, B MN-major": (
        "{ unsigned a[4] = {kt::pack_f16x2(d[0], d[1]), kt::pack_f16x2(d[2], d[3]), 0u, 0u};"
        " kt::wgmma_fence_operand(a); kt::wgmma_fence(); kt::wgmma_rs<192, kt::WG_F16, 1>("
        "reinterpret_cast<float(&)[96]>(d), a, kt::wgmma_desc_mnmajor_sw128(kt::smem_u32(tile),"
        " 8192u), flag); kt::wgmma_commit(); kt::wgmma_wait<0>(); }", "HGMMA.64x192x16.F32"),
    "wgmma e4m3 m64n128k32 A in registers": (
        "{ unsigned a[4]; kt::wgmma_a_from_acc_e4m3(a, d, 1); kt::wgmma_fence_operand(a);"
        " kt::wgmma_fence(); kt::wgmma_rs<128, kt::WG_E4M3>(reinterpret_cast<float(&)[64]>(d),"
        " a, desc, flag); kt::wgmma_commit(); kt::wgmma_wait<0>(); }",
        "QGMMA.64x128x32.F32.E4M3.E4M3"),
    "named barrier sync": ("kt::named_barrier_sync(1, 256);", "BAR.SYNC"),
    "named barrier arrive": ("kt::named_barrier_arrive(2, 256);", "BAR.ARV"),
    "exp2 on the SFU": ("d[5] = kt::exp2_approx(d[5] * out[1]);", "MUFU.EX2"),
    "tma load": ("kt::tma_load_2d(tile, &map, &bar, 0, flag);", "UTMALDG.2D"),
    "tma load multicast": ("kt::tma_load_2d_multicast(tile, &map, &bar, 0, flag, 3);",
                           "UTMALDG.2D.MULTICAST"),
    "tma store": ("kt::tma_store_2d(&map, tile, 0, flag); kt::tma_store_commit();"
                  " kt::tma_store_wait<0>();", "UTMASTG.2D"),
    "tma prefetch": ("kt::tma_prefetch_desc(&map);", "UTMACCTL.PF"),
    "mbarrier init": ("kt::mbar_init(&bar, flag);", "SYNCS.EXCH.64"),
    "mbarrier expect_tx": ("kt::mbar_arrive_expect_tx(&bar, flag);", "SYNCS.ARRIVE.TRANS64"),
    "mbarrier arrive": ("kt::mbar_arrive(&bar);", "SYNCS.ARRIVE.TRANS64.A1T0"),
    "mbarrier wait": ("kt::mbar_wait(&bar, flag);", "SYNCS.PHASECHK.TRANS64.TRYWAIT"),
    "mbarrier remote arrive": ("kt::mbar_arrive_cluster(&bar, flag);",
                               "SYNCS.ARRIVE.TRANS64.RED.A1T0"),
    "setmaxnreg inc": ("kt::setmaxnreg_inc<232>();", "USETMAXREG.TRY_ALLOC"),
    "setmaxnreg dec": ("kt::setmaxnreg_dec<40>();", "USETMAXREG.DEALLOC"),
    "cluster barrier": ("kt::cluster_sync();", "UCGABAR_WAIT"),
    "fence.proxy.async": ("kt::fence_proxy_async();", "FENCE.VIEW.ASYNC.S"),
}


def _compile(tmp_path: Path, source: str, arch_flag: str = SM90A,
             name: str = "k") -> subprocess.CompletedProcess[str]:
    src = tmp_path / f"{name}.cu"
    src.write_text(source)
    cmd = [NVCC, "-cubin", arch_flag, "-std=c++17", f"-I{INCLUDE}", "-Xptxas", "-v",
           str(src), "-o", str(tmp_path / f"{name}.cubin")]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)


def _sass(tmp_path: Path, call: str, name: str) -> SassMix:
    built = _compile(tmp_path, KERNEL.replace("{CALL}", call), name=name)
    assert built.returncode == 0, built.stderr
    mixes = parse_sass(disassemble(tmp_path / f"{name}.cubin"))
    return mixes["probe"]


def _has(mix: SassMix, mnemonic: str) -> bool:
    return any(m == mnemonic or m.startswith(mnemonic + ".") for m in mix.mnemonics)


@pytest.fixture(scope="module")
def control(tmp_path_factory: pytest.TempPathFactory) -> SassMix:
    """The probe kernel without any call (compiled once)."""
    return _sass(tmp_path_factory.mktemp("control"), "", "without")


@needs_sass
@pytest.mark.parametrize("primitive", sorted(PRIMITIVES))
def test_primitive_emits_its_sass(tmp_path: Path, primitive: str, control: SassMix) -> None:
    """With the call the kernel's SASS holds the instruction; without it, it does not."""
    call, mnemonic = PRIMITIVES[primitive]
    with_call = _sass(tmp_path, call, "with")
    without = control
    assert _has(with_call, mnemonic), sorted(with_call.mnemonics)
    assert not _has(without, mnemonic), sorted(without.mnemonics)


@needs_nvcc
def test_wgmma_needs_sm90a(tmp_path: Path) -> None:
    """wgmma under plain sm_90 stops in ptxas; a TMA-only kernel builds for sm_90."""
    wgmma = KERNEL.replace("{CALL}", PRIMITIVES["wgmma m64n256k16"][0])
    built = _compile(tmp_path, wgmma, "-arch=sm_90", "wg")
    assert built.returncode != 0
    assert "wgmma" in built.stderr and "sm_90" in built.stderr
    tma = KERNEL.replace("{CALL}", PRIMITIVES["tma load"][0])
    assert _compile(tmp_path, tma, "-arch=sm_90", "tma").returncode == 0


@needs_nvcc
def test_wgmma_rejects_unsupported_n(tmp_path: Path) -> None:
    """An N without an instantiation stops with ktune's message."""
    bad = KERNEL.replace("{CALL}", "kt::wgmma_bf16<96>(reinterpret_cast<float(&)[48]>(d), "
                                   "desc, desc, 1);")
    built = _compile(tmp_path, bad, name="bad")
    assert built.returncode != 0
    assert "N must be 64, 128, 176, 192 or 256" in built.stderr


@needs_nvcc
def test_no_spills_with_128_accumulators(tmp_path: Path) -> None:
    """m64n256 keeps its 128 accumulators in registers (no local memory)."""
    built = _compile(tmp_path, KERNEL.replace("{CALL}", PRIMITIVES["wgmma m64n256k16"][0]))
    assert built.returncode == 0, built.stderr
    assert "0 bytes spill stores, 0 bytes spill loads" in built.stdout + built.stderr


# ---------------------------------------------------------------------------
# The descriptor bits, on the host
# ---------------------------------------------------------------------------

SWIZZLE_CODE = {0: 0, 128: 1, 64: 2, 32: 3}  # PTX ISA: bits 62-63 of the descriptor


def ptx_descriptor(addr: int, lbo: int, sbo: int, swizzle: int, base: int = 0) -> int:
    """The 64-bit WGMMA matrix descriptor, field by field as the PTX ISA lists them."""
    fields = [((addr & 0x3FFFF) >> 4, 0, 14), (lbo >> 4, 16, 14), (sbo >> 4, 32, 14),
              (base, 49, 3), (SWIZZLE_CODE[swizzle], 62, 2)]
    out = 0
    for value, shift, width in fields:
        out |= (value & ((1 << width) - 1)) << shift
    return out


DESC_CASES = [(a, lbo, sbo, s) for a in (0, 1024, 0x1F3F0, 0x3FFF0, 0x40400)
              for lbo, sbo in ((16, 1024), (0, 512), (4096, 256), (0x3FFF0, 0x3FFF0))
              for s in (0, 32, 64, 128)]

HOST = r"""
#include <ktune_hopper.cuh>
#include <cstdio>
static_assert(kt::wgmma_desc_kmajor<128>(0u) == ((1ull << 62) | (64ull << 32) | (1ull << 16)),
              "kmajor 128B");
// MN-major SW128 (a row-major V tile as P * V's B): LBO = the 64-column panel stride,
// SBO = 8 rows of 128 bytes
// e4m3 P fragments put column 16h + 8a + 2q + e at k = 16h + 4q + 2a + e
static_assert(kt::wgmma_e4m3_k_of(0) == 0 && kt::wgmma_e4m3_k_of(1) == 1 &&
                  kt::wgmma_e4m3_k_of(8) == 2 && kt::wgmma_e4m3_k_of(9) == 3 &&
                  kt::wgmma_e4m3_k_of(2) == 4 && kt::wgmma_e4m3_k_of(27) == 23,
              "e4m3 k order");
static_assert(kt::wgmma_desc_mnmajor_sw128(2048u, 16384u) ==
                  ((1ull << 62) | (64ull << 32) | (1024ull << 16) | 128ull),
              "mnmajor 128B");
template <int S> void one(unsigned a, unsigned l, unsigned s) {
  std::printf("%u %u %u %d %llu\n", a, l, s, S, kt::wgmma_desc<S>(a, l, s));
}
int main() {
  const unsigned cases[][4] = {CASES};
  for (const auto& c : cases) {
    if (c[3] == 0) one<0>(c[0], c[1], c[2]);
    if (c[3] == 32) one<32>(c[0], c[1], c[2]);
    if (c[3] == 64) one<64>(c[0], c[1], c[2]);
    if (c[3] == 128) one<128>(c[0], c[1], c[2]);
  }
  for (unsigned a = 0; a < 4; ++a)
    std::printf("kmajor %u %llu %llu %llu\n", a * 1024u, kt::wgmma_desc_kmajor<32>(a * 1024u),
                kt::wgmma_desc_kmajor<64>(a * 1024u), kt::wgmma_desc_kmajor<128>(a * 1024u));
  std::printf("tensormap %zu %zu\n", sizeof(kt::TensorMap), alignof(kt::TensorMap));
  return 0;
}
"""


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not found on PATH")
def test_descriptor_bits_match_ptx_layout(tmp_path: Path) -> None:
    """kt::wgmma_desc puts every field where the PTX ISA says, under a plain host compiler."""
    cases = ", ".join("{{{}, {}, {}, {}}}".format(*c) for c in DESC_CASES)
    (tmp_path / "h.cpp").write_text(HOST.replace("{CASES}", "{" + cases + "}"))
    built = subprocess.run(["g++", "-std=c++14", "-Wall", "-Werror", f"-I{INCLUDE}", "h.cpp",
                            "-o", "h"], cwd=tmp_path, capture_output=True, text=True, check=False)
    assert built.returncode == 0, built.stderr
    lines = subprocess.run([str(tmp_path / "h")], capture_output=True, text=True,
                           check=True).stdout.splitlines()
    rows = [ln.split() for ln in lines]
    descs = [list(map(int, r)) for r in rows if r[0].isdigit()]
    assert len(descs) == len(DESC_CASES)
    for a, lbo, sbo, s, got in descs:
        assert got == ptx_descriptor(a, lbo, sbo, s), (a, lbo, sbo, s, hex(got))
    kmajor = [r for r in rows if r[0] == "kmajor"]
    for r in kmajor:
        a = int(r[1])
        for swz, got in zip((32, 64, 128), map(int, r[2:]), strict=True):
            assert got == ptx_descriptor(a, 16, 8 * swz, swz)
    assert ["tensormap", "128", "64"] in rows


# ---------------------------------------------------------------------------
# NVRTC (the runtime path of a cell)
# ---------------------------------------------------------------------------


def test_compiles_under_nvrtc_for_sm90a() -> None:
    """NVRTC (no system headers) compiles the whole header's use for sm_90a."""
    nvrtc = load_nvrtc()
    if nvrtc is None:
        pytest.skip("libnvrtc not found: pip install nvidia-cuda-nvrtc")
    calls = " ".join(c for c, _ in PRIMITIVES.values())
    ok, log = nvrtc_compile(nvrtc, KERNEL.replace("{CALL}", calls),
                            ["--gpu-architecture=sm_90a", "-std=c++17", f"-I{INCLUDE}"])
    assert ok, log
