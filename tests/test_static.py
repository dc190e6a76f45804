"""Static reports from real nvcc/ptxas/cuobjdump output (no GPU needed, nvcc needed).

Parser tests read recorded tool output in tests/fixtures/static/ (nvcc 13.0, cuobjdump 13.5) and
run everywhere; compile tests run nvcc on tests/fixtures/static/*.cu and skip without it.
"""

import json
import re
import stat
from pathlib import Path

import pytest
from cuda_tools import HAVE_NVCC, needs_nvcc

from jupyter_ktune import toolchain
from jupyter_ktune.backends.cuda.static import CompileError, compile_static
from jupyter_ktune.measure.static import (
    parse_diagnostics,
    parse_ptxas_verbose,
    parse_sass,
    sass_mix,
)
from jupyter_ktune.toolchain import ToolNotFound, find_tool, tool_version

FIXTURES = Path(__file__).parent / "fixtures" / "static"




# --- parsers on recorded output --------------------------------------------------------------

def test_ptxas_log_with_spills_and_device_function():
    res = parse_ptxas_verbose((FIXTURES / "ptxas_sm90_spills.txt").read_text())
    many = res["_Z8manyregsPfPKf"]
    assert (many.registers, many.spill_stores, many.spill_loads) == (32, 1572, 3516)
    assert many.stack_frame == 1576
    assert many.is_entry and many.arch == "sm_90" and many.cumulative_stack == 1576
    assert res["_Z7callsitPfPKf"].cumulative_stack == 64
    helper = res["_Z6helperfi"]  # __noinline__ device function: properties, no entry line
    assert not helper.is_entry and helper.registers == 0
    assert res["_Z8localarrPfPKfPKi"].stack_frame == 256


def test_ptxas_pre_cuda13_line_with_cmem_and_notes():
    # CUDA 11/12 logs list constant banks; CUDA 13 dropped them. Notes keep lines naming the kernel.
    log = ("ptxas info    : Compiling entry function '_Z1kPf' for 'sm_80'\n"
           "ptxas info    : Function properties for _Z1kPf\n"
           "    8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads\n"
           "ptxas info    : Used 40 registers, used 1 barriers, 2048 bytes smem, 368 bytes cmem[0],"
           " 8 bytes cmem[2]\n"
           "ptxas warning : Registers are spilled to local memory in function '_Z1kPf', 4 bytes"
           " spill stores, 4 bytes spill loads\n")
    k = parse_ptxas_verbose(log)["_Z1kPf"]
    assert (k.registers, k.barriers, k.smem, dict(k.cmem)) == (40, 1, 2048, {0: 368, 2: 8})
    assert k.notes and "spilled" in k.notes[0]


def test_nvcc_error_and_warning_lines():
    diags = parse_diagnostics((FIXTURES / "nvcc_errors.txt").read_text())
    assert [(d.file, d.line, d.severity) for d in diags] == [
        ("cell", 4, "error"), ("cell", 5, "error"), ("cell", 3, "warning")]
    assert diags[0].message == 'identifier "undeclared_thing" is undefined'
    assert diags[0].column == 20  # 'undeclared_thing' starts at column 20 of cell line 4
    assert diags[2].code == "177-D"
    assert diags[0].to_cell(line_offset=1).line == 5


def test_gcc_and_ptxas_diagnostics():
    log = ("i.cu:1:10: fatal error: nope.h: No such file or directory\n"
           "ptxas /tmp/x.ptx, line 42; error   : Unknown modifier '.instr'\n"
           "ptxas fatal   : Ptx assembly aborted due to errors\n")
    diags = parse_diagnostics(log)
    assert [(d.file, d.line, d.column, d.severity) for d in diags] == [
        ("i.cu", 1, 10, "error"), ("/tmp/x.ptx", 42, None, "error"), (None, None, None, "error")]


@pytest.mark.parametrize("dump", ["sass_hopper_cuobjdump.txt", "sass_hopper_nvdisasm.txt"])
def test_sass_mix_of_hopper_kernel(dump):
    mixes = parse_sass((FIXTURES / dump).read_text())
    mix = mixes["_Z6hopper4TMapPKfPfmm"]
    assert mix.opcodes["HGMMA"] == 1 and mix.opcodes["UTMALDG"] == 1 and mix.opcodes["UBLKCP"] == 1
    assert mix.uses_tensor_cores and mix.uses_wgmma and mix.uses_tma
    assert mix.categories["tma"] == 2 and mix.categories["barrier"] >= 4  # SYNCS mbarrier ops
    assert mix.global_store_bits == {32: 4} and mix.local_memory_traffic == 0
    assert "NOP" not in mix.opcodes  # alignment padding dropped
    assert mix.instructions == sum(mix.opcodes.values()) == 71


def test_cuobjdump_and_nvdisasm_agree():
    a = parse_sass((FIXTURES / "sass_hopper_cuobjdump.txt").read_text())
    b = parse_sass((FIXTURES / "sass_hopper_nvdisasm.txt").read_text())
    assert a == b


# --- toolchain -------------------------------------------------------------------------------

def test_ktune_cuda_home_wins(tmp_path, monkeypatch):
    fake = tmp_path / "bin" / "nvdisasm"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho 'Cuda compilation tools, release 99.1, V99.1.7'\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("KTUNE_CUDA_HOME", str(tmp_path))
    assert find_tool("nvdisasm") == fake
    assert tool_version("nvdisasm") == "99.1.7"


def test_missing_tool_says_how_to_install(monkeypatch, tmp_path):
    for var in ("KTUNE_CUDA_HOME", "CUDA_HOME", "CUDA_PATH"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(toolchain, "_DEFAULT_HOME", tmp_path)
    monkeypatch.setattr(toolchain, "_wheel_bin_dirs", list)
    monkeypatch.setattr(toolchain, "_triton_bin_dirs", list)
    with pytest.raises(ToolNotFound, match=r"^\[ktune\] cuobjdump not found") as info:
        find_tool("cuobjdump")
    assert "pip install nvidia-cuda-cuobjdump" in str(info.value)
    assert isinstance(info.value, RuntimeError)
    with pytest.raises(ValueError, match="unknown tool"):
        find_tool("gcc")


# --- real compiles ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def report():
    if not HAVE_NVCC:
        pytest.skip("nvcc not found (no CUDA toolkit)")
    return compile_static(FIXTURES / "kernels.cu", arch="sm_90", threads_per_block=256)


@needs_nvcc
def test_float4_loads_are_128_bit(report):
    k = report.kernel("vadd4")
    assert k.sass.global_load_bits == {128: 2} and k.sass.global_store_bits == {128: 1}
    assert not k.sass.uses_tensor_cores and k.sass.local_memory_traffic == 0
    assert k.demangled == "vadd4(float4 const*, float4 const*, float4*, int)"
    assert sass_mix(report.cubin)[k.name] == k.sass  # the stored cubin disassembles the same


@needs_nvcc
def test_runtime_indexed_array_goes_to_local_memory(report):
    k = report.kernel("local_array")
    assert k.stack_frame == 256 and k.local_memory == 256 and k.spill_stores == 0
    assert k.sass.opcodes.get("LDL", 0) > 0 and k.sass.opcodes.get("STL", 0) > 0


@needs_nvcc
def test_wmma_emits_hmma(report):
    k = report.kernel("wmma_16x16")
    assert k.sass.opcodes.get("HMMA", 0) >= 1
    assert k.sass.uses_tensor_cores and not k.sass.uses_wgmma


@needs_nvcc
def test_register_count_and_occupancy(report):
    k = report.kernel("many_regs")
    assert 64 < k.registers <= 255 and k.spill_stores == 0
    occ = report.occupancy("many_regs", 256)
    assert occ.limiter == "registers" and occ.active_blocks_per_sm < 8


@needs_nvcc
def test_template_kernel_smem_and_barrier(report):
    k = report.kernel("reverse_smem")
    assert k.demangled == "void reverse_smem<256>(float*)"
    assert (k.smem_static, k.barriers) == (1024, 1)
    assert k.sass.categories.get("barrier", 0) >= 1
    assert report.occupancy("reverse_smem", 256, dynamic_smem=100 * 1024).limiter == "shared_memory"


@needs_nvcc
def test_defines_reach_the_compiler_and_force_spills():
    rep = compile_static(FIXTURES / "kernels.cu", arch="sm_90",
                         defines={"MANY_THREADS": 1024, "MANY_MIN_BLOCKS": "2"})
    k = rep.kernel("many_regs")
    assert k.registers <= 32 and k.spill_stores > 0 and k.spill_loads > 0
    assert k.sass.local_memory_traffic > 0


@needs_nvcc
def test_sm90a_wgmma_and_tma():
    rep = compile_static(FIXTURES / "hopper.cu", arch="sm_90a")
    k = rep.kernel("hopper")
    assert k.sass.uses_wgmma and k.sass.uses_tma
    assert k.smem_static == 4104


@needs_nvcc
def test_report_renders_and_serialises(report):
    html = report._repr_html_()
    assert "LDG.128: 2" in html and "no tensor cores" in html and "100%" in html
    assert "<script" not in html and "<link" not in html
    data = json.loads(json.dumps(report.to_dict()))
    assert data["arch"] == "sm_90" and data["cubin_bytes"] == len(report.cubin) > 0
    assert re.fullmatch(r"\d+\.\d+(\.\d+)*", data["versions"]["nvcc"])
    assert "cubin=" not in repr(report)
    with pytest.raises(KeyError, match="kernels:"):
        report.kernel("nope")


@needs_nvcc
def test_compile_error_names_line_and_severity(tmp_path):
    src = tmp_path / "bad.cu"
    src.write_text('#line 2 "cell"\n'
                   "__global__ void k(float* o) {\n"     # cell line 2
                   "  int unused = 1;\n"                 # cell line 3: warning 177-D
                   "  o[threadIdx.x] = not_declared;\n"  # cell line 4: error
                   "}\n")
    with pytest.raises(CompileError, match=r"^\[ktune\] nvcc failed: cell\(4\)") as info:
        compile_static(src, arch="sm_90")
    err = info.value
    errors = [d for d in err.diagnostics if d.severity == "error"]
    assert [(d.file, d.line) for d in errors] == [("cell", 4)]
    assert "not_declared" in errors[0].message
    assert any(d.severity == "warning" and d.line == 3 for d in err.diagnostics)
    assert "not_declared" in err.log and isinstance(err, RuntimeError)


@needs_nvcc
@pytest.mark.parametrize(("kwargs", "error"), [
    ({"arch": "90"}, ValueError), ({"defines": {"1X": "2"}}, ValueError),
    ({"defines": ["A=1"]}, TypeError), ({"extra_flags": "-O3"}, TypeError),
])
def test_bad_arguments(kwargs, error):
    with pytest.raises(error, match=r"^\[ktune\]"):
        compile_static(FIXTURES / "kernels.cu", **kwargs)


@pytest.mark.parametrize("demangled", [
    "void scale<(int)256, (int)4>(const float *, float *, int)",   # cu++filt on the H200
    "void scale<256, 4>(float const*, float*, int)",               # binutils c++filt
    "void ns::scale(float*)",
    "scale",
])
def test_bare_name_strips_templates_arguments_and_namespaces(demangled):
    from jupyter_ktune.measure.static import _bare_name

    assert _bare_name(demangled) == "scale"
