"""Compiler controls as tunables (issue 38 item 2): name_prefix, nvcc_flags, maxnreg.

Parsed, labelled, keyed and stored like any tunable; never a macro or constexpr; applied by nvcc
for sm_90 (no GPU needed) and by NVRTC's option names; a sweep stores list values apart and
labels every failure by its cause. Triton's side is in test_compiler_controls_triton.py.
"""

from __future__ import annotations

import json
import pickle
import sys
from pathlib import Path

import numpy as np
import pytest
from cuda_tools import needs_nvcc

from jupyter_ktune.api import parse_cell
from jupyter_ktune.compiler_controls import rename_cxx, rename_python, with_name_prefix
from jupyter_ktune.errors import CellError
from jupyter_ktune.space import Config

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from compiler_controls import HEAVY_BODY  # noqa: E402 - the cell the GPU bench runs

FLAGS = '[[], ["--use_fast_math"], ["-maxrregcount=128"]]'

HEAVY = """// ktune: BLOCK in [128]; name_prefix in ["", "cutlass_"]
// ktune: nvcc_flags in [[], ["-maxrregcount=32"]]
// ktune: grid = cdiv(n, BLOCK); block = BLOCK
""" + HEAVY_BODY  # 24 live values, each read 8 times: more than 32 registers


# -- the language ------------------------------------------------------------------------------
def test_list_values_and_the_empty_string_parse_label_and_key_apart():
    spec = parse_cell("k --backend cuda",
                      f'// ktune: name_prefix in ["", "cutlass_"]; nvcc_flags in {FLAGS}\n'
                      "__global__ void k(float* y) {}\n")
    assert spec.space.param("name_prefix").values == ("", "cutlass_")
    assert spec.space.param("nvcc_flags").values == ((), ("--use_fast_math",),
                                                     ("-maxrregcount=128",))
    configs = list(spec.space.configs())
    assert len(configs) == 6 and len({c.key() for c in configs}) == 6
    a = spec.space.config(nvcc_flags=[])
    b = spec.space.config(nvcc_flags=["--use_fast_math"])
    assert a != b and a.key() != b.key()
    assert '"nvcc_flags":[]' in a.key() and '"nvcc_flags":["--use_fast_math"]' in b.key()
    assert b.label() == 'name_prefix="" nvcc_flags=[--use_fast_math]'
    # the store's JSON key and the sweep's pickles give back the same (hashable) config
    for back in (Config(json.loads(b.key())), pickle.loads(pickle.dumps(b))):
        assert back == b and hash(back) == hash(b) and back["nvcc_flags"] == ("--use_fast_math",)
    # --config and the magic line's --param take them too
    assert spec.space.config({"nvcc_flags": '["-maxrregcount=128"]'})["nvcc_flags"] == \
        ("-maxrregcount=128",)
    line = parse_cell('k --backend cuda --param \'nvcc_flags=[],["-O3"]\'',
                      "__global__ void k(float* y) {}\n")
    assert line.space.param("nvcc_flags").values == ((), ("-O3",))


def test_reserved_names_never_reach_the_kernel():
    from jupyter_ktune.backends.cuda.source import macro_defines, parse_signature

    spec = parse_cell("k --backend cuda", f'// ktune: BLOCK in [64]; name_prefix in ["cutlass_"]'
                      f"; nvcc_flags in {FLAGS}; maxnreg in [128]\n"
                      "__global__ void k(float* y) {}\n")
    c = spec.space.default()
    assert set(spec.space.py_env(c)) == {"BLOCK", "maxnreg"}  # maxnreg: Triton's launch option
    defines = macro_defines(spec, parse_signature(spec), spec.space.cxx_env(c))
    assert set(defines) == {"BLOCK", "KTUNE"}


@pytest.mark.parametrize("line,body,match", [
    ("k --backend triton", f"# ktune: nvcc_flags in {FLAGS}\n", "compiler control of CUDA C"),
    ("k --backend pallas", '# ktune: name_prefix in ["", "cutlass_"]\n', "CUDA C\\+\\+ and Triton"),
    ("k --backend cuda", '// ktune: name_prefix in ["", "9x"]\n', "cannot begin a C/Python name"),
    ("k --backend cuda", '// ktune: nvcc_flags in [[], ["-arch=sm_80"]]\n', "the cell's build"),
    ("k --backend cuda", '// ktune: nvcc_flags in ["-O3"]\n', "a list of flags"),
    ("k --backend cuda", "// ktune: maxnreg in [0, 128]\n", "not a register count"),
])
def test_a_control_where_it_does_not_work_is_refused_on_its_line(line, body, match):
    with pytest.raises(CellError, match=match) as err:
        parse_cell(line, body + "def k(x): pass\n")
    assert err.value.line == 2


def test_renaming_follows_the_kernel_and_nothing_else():
    cxx = ('// heavy\n__global__ void heavy(float* x) { printf("heavy"); o.heavy(); '
           "p->heavy(); ns::heavy(); heavy_2(); }\ntemplate __global__ void heavy<1>(float*);\n")
    assert rename_cxx(cxx, "heavy", "cutlass_heavy") == cxx.replace(
        "void heavy", "void cutlass_heavy")
    py = ('@triton.jit\ndef add(x):  # add\n    s = "add"\n    tl.add(x)\nk = add\n')
    assert rename_python(py, "add", "cutlass_add") == py.replace("def add", "def cutlass_add") \
        .replace("k = add", "k = cutlass_add")
    spec = parse_cell("heavy --backend cuda", HEAVY)
    c = spec.space.config(name_prefix="cutlass_")
    renamed = with_name_prefix(spec, c, rename=rename_cxx)
    assert renamed.name == "cutlass_heavy" and "void cutlass_heavy(" in renamed.source
    # applied once, however often asked
    assert with_name_prefix(renamed, c, rename=rename_cxx) is renamed
    assert with_name_prefix(spec, spec.space.config(name_prefix=""), rename=rename_cxx) is spec


def test_a_pipeline_renames_every_stage():
    body = ("// ktune: BLOCK in [128]; name_prefix in [\"cutlass_\"]\n"
            "// ktune: pipeline = [part(grid=4, block=BLOCK), total(grid=1, block=BLOCK)]\n"
            "__global__ void part(float* p) {}\n__global__ void total(float* p) {}\n")
    spec = parse_cell("part --backend cuda", body)
    renamed = with_name_prefix(spec, spec.space.default(), rename=rename_cxx)
    assert "cutlass_part(grid" in renamed.pipeline[0] and "cutlass_total(" in renamed.pipeline[0]
    assert "void cutlass_total(" in renamed.source


# -- CUDA C++: nvcc for sm_90, no GPU ----------------------------------------------------------


@needs_nvcc
def test_nvcc_builds_the_renamed_symbol_and_the_flags_change_the_report():
    from jupyter_ktune.backends.cuda.archcubin import kernel_symbol
    from jupyter_ktune.backends.cuda.backend import BACKEND
    from jupyter_ktune.backends.cuda.source import name_expression, parse_signature

    spec = parse_cell("heavy --backend cuda", HEAVY)
    reports = {}
    for c in spec.space.configs():
        rep = BACKEND.static_report(spec, c)
        (k,) = rep.kernels.values()
        reports[(c["name_prefix"], c["nvcc_flags"])] = k
        one = with_name_prefix(spec, c, rename=rename_cxx)
        expr = name_expression(one, parse_signature(one), spec.space.cxx_env(c))
        assert kernel_symbol(rep.kernels, one, expr) == k.name  # the run finds what was built
    assert reports[("", ())].demangled.startswith("void heavy<128>")
    assert reports[("cutlass_", ())].demangled.startswith("void cutlass_heavy<128>")
    assert "cutlass_heavy" in reports[("cutlass_", ())].name
    free, capped = reports[("", ())], reports[("", ("-maxrregcount=32",))]
    assert free.registers > 32 >= capped.registers, (free.registers, capped.registers)
    assert capped.spill_stores > 0  # what the cap costs is in the report too


@needs_nvcc
def test_maxnreg_is_maxrregcount_for_nvcc():
    from jupyter_ktune.backends.cuda.backend import BACKEND

    src = HEAVY.replace('name_prefix in ["", "cutlass_"]', "maxnreg in [32, 255]").replace(
        '// ktune: nvcc_flags in [[], ["-maxrregcount=32"]]\n', "")
    spec = parse_cell("heavy --backend cuda", src)
    regs = {c["maxnreg"]: next(iter(BACKEND.static_report(spec, c).kernels.values())).registers
            for c in spec.space.configs()}
    assert regs[32] <= 32 < regs[255]


def test_nvrtc_takes_the_flags_in_its_own_spelling_or_refuses_on_the_tunable_line():
    from jupyter_ktune.backends.cuda.flags import nvcc_flags, nvrtc_flags

    body = ('// ktune: nvcc_flags in [[], ["-use_fast_math", "-maxrregcount=64", "-Xptxas", '
            '"-O2", "-DX=1"], ["-rdc=true"]]; maxnreg in [128]\n__global__ void k(float* y) {}\n')
    spec = parse_cell("k --backend cuda", body)
    flags = spec.space.param("nvcc_flags").values
    assert nvcc_flags(spec, spec.space.config(nvcc_flags=flags[0])) == ("-maxrregcount=128",)
    assert nvrtc_flags(spec, spec.space.config(nvcc_flags=flags[1])) == (
        "--use_fast_math", "--maxrregcount=64", "--ptxas-options=-O2", "-DX=1",
        "--maxrregcount=128")
    with pytest.raises(CellError, match="nvcc flag -rdc=true has no NVRTC option") as err:
        nvrtc_flags(spec, spec.space.config(nvcc_flags=flags[2]))
    assert err.value.line == 2


# -- the store and the sweep keep list values apart --------------------------------------------
FAKE = """# ktune: BLOCK in [1, 2]; nvcc_flags in [[], ["--use_fast_math"]]
def scale(x, y, n):
    if BLOCK == 2:
        raise RuntimeError("CUDA_ERROR_NO_BINARY_FOR_GPU: no kernel image is available")
    y[:] = 2 * x
"""


def _fake_inputs():
    x = np.random.rand(64)
    return dict(x=x, y=np.empty_like(x), n=64)


def test_a_sweep_stores_list_valued_configs_apart_labels_failures_and_resumes(worker, tmp_path):
    from jupyter_ktune.tuning import Store, TuneOptions, tune

    spec = parse_cell("scale --backend fake --inputs inputs --reference reference --out y "
                      "--budget-ms 2", FAKE, {"inputs": _fake_inputs,
                                              "reference": lambda x, y, n: 2 * x})
    opts = TuneOptions(seed=1, top_k=2, final_budget_factor=1)
    first = tune(spec, "exhaustive", store=tmp_path, workers=[worker], options=opts)
    assert len(first.evaluations) == 4
    with Store(tmp_path) as store:
        (key,) = store.keys()
        rows = store.results(key)
    assert sorted(r.config.key() for r in rows) == sorted(c.key() for c in spec.space.configs())
    assert {r.config["nvcc_flags"] for r in rows} == {(), ("--use_fast_math",)}
    from jupyter_ktune.results import Status

    # every row says why it failed: the driver's words name the cause
    assert {r.config["BLOCK"]: r.status for r in rows} == {1: Status.OK, 2: Status.WRONG_ARCH}
    again = tune(spec, "exhaustive", store=tmp_path, workers=[worker], options=opts)
    assert all(e.cached for e in again.evaluations), [e.cached for e in again.evaluations]


# -- every failure labelled by its cause -------------------------------------------------------
@pytest.mark.parametrize("status,text,want", [
    ("compile error", "ptxas fatal   : (C7602) Insufficient registers (40) to compile "
                      "instruction", "out of resources"),
    ("compile error", "ptxas error   : Entry function 'k' uses too much shared data "
                      "(0x40000 bytes, 0xc000 max)", "out of resources"),
    ("compile error", "ptxas error   : Instruction 'wgmma.fence' not supported on .target "
                      "'sm_90'", "wrong architecture"),
    ("runtime error", "CUDADriverError: CUDA_ERROR_NO_BINARY_FOR_GPU: no kernel image is "
                      "available for execution on the device", "wrong architecture"),
    ("runtime error", "too many resources requested for launch", "out of resources"),
    ("compile error", "cell(4): error: identifier \"undefined_name\" is undefined",
     "compile error"),
    ("wrong result", "max abs err 3 (out of resources in the text does not matter)",
     "wrong result"),
    ("timed out", "no kernel image is available", "timed out"),
])
def test_a_failure_is_labelled_by_its_cause(status, text, want):
    from jupyter_ktune.failure_cause import by_cause
    from jupyter_ktune.results import RunResult, Status

    r = RunResult(name="k", backend="cuda", config={}, status=Status(status), reason=text)
    assert by_cause(r).status is Status(want)


def test_memory_exhaustion_keeps_its_own_words_and_status():
    from jupyter_ktune.failure_cause import cause
    from jupyter_ktune.results import Status

    assert cause(Status.RUNTIME_ERROR, "torch.OutOfMemoryError: CUDA out of memory") is \
        Status.RUNTIME_ERROR  # bench/fault_confusion.py's "out of memory" class
    assert cause(Status.RUNTIME_ERROR, "OutOfResources: out of resource: shared memory, "
                 "Required: 262144, Hardware limit: 232448") is Status.OUT_OF_RESOURCES


def test_exports_say_what_the_compiler_was_told_and_pass_no_control_as_a_constant():
    from jupyter_ktune.results import Status
    from jupyter_ktune.tuning.report import Evaluation, TuneReport
    from jupyter_ktune.tuning.store import StoredResult

    spec = parse_cell("k --backend cuda", f'// ktune: BLOCK in [64]; name_prefix in ["cutlass_"]'
                      f"; nvcc_flags in {FLAGS}; maxnreg in [128]\n"
                      "__global__ void k(float* y) {}\n")
    best = StoredResult(spec.space.config(nvcc_flags=["--use_fast_math"]), Status.OK,
                        times_ms=np.full(5, 0.01), kernel="k", backend="cuda", device="H200")
    report = TuneReport("k", "cuda", "exhaustive", spec.space, "H200", (Evaluation(best, 0),),
                        final=(best,), verdict=None, valid_configs=3)
    header = report.export("cpp")
    assert "constexpr int KT_K_BLOCK = 64;" in header
    assert "KT_K_nvcc_flags" not in header and "KT_K_name_prefix" not in header
    assert "// kernel named cutlass_k" in header and "// compiled with --use_fast_math" in header
    assert "// compiled with -maxrregcount=128" in header
    triton = report.export("triton", k=1)
    assert "triton.Config({'BLOCK': 64}, maxnreg=128)" in triton, triton
    assert "kernel named cutlass_k" in triton


@needs_nvcc
def test_nvrtc_compiles_the_renamed_kernel_with_the_mapped_flags():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from nvrtc_wheel import load_nvrtc, nvrtc_compile

    from jupyter_ktune.backends.cuda.flags import nvrtc_flags
    from jupyter_ktune.backends.cuda.nvrtc import nvrtc_options
    from jupyter_ktune.backends.cuda.source import parse_signature, static_source

    nvrtc = load_nvrtc()
    if nvrtc is None:
        pytest.skip("libnvrtc not found: pip install nvidia-cuda-nvrtc")
    src = HEAVY.replace('[[], ["-maxrregcount=32"]]',
                        '[["-use_fast_math", "-maxrregcount=32", "-Xptxas", "-O2"]]')
    spec = parse_cell("heavy --backend cuda", src)
    config = spec.space.config(name_prefix="cutlass_")
    one = with_name_prefix(spec, config, rename=rename_cxx)
    sig = parse_signature(one)
    cxx = spec.space.cxx_env(config)
    base = ["--gpu-architecture=sm_90", *nvrtc_options(one, sig, cxx)]
    mapped = nvrtc_flags(one, config)
    assert mapped == ("--use_fast_math", "--maxrregcount=32", "--ptxas-options=-O2")
    ok, log = nvrtc_compile(nvrtc, static_source(one, sig, cxx), [*base, *mapped])
    assert ok, log
    # a host-compiler flag NVRTC has no option for: refused on the tunable's line, as NVRTC
    # itself would refuse it (with no cell line)
    ok, log = nvrtc_compile(nvrtc, static_source(one, sig, cxx), [*base, "--compiler-options=-O3"])
    assert not ok and "unrecognized option" in log
    host = parse_cell("heavy --backend cuda", src.replace('"-O2"]]', '"-O2"], ["-Xcompiler=-O3"]]'))
    with pytest.raises(CellError, match="-Xcompiler=-O3 has no NVRTC option"):
        nvrtc_flags(host, host.space.config(nvcc_flags=["-Xcompiler=-O3"]))


def test_the_panel_controls_show_and_return_list_values():
    pytest.importorskip("ipywidgets")
    from jupyter_ktune.ui.controls import control_for

    spec = parse_cell("k --backend cuda", f'// ktune: name_prefix in ["", "cutlass_"]; '
                      f"nvcc_flags in {FLAGS}\n__global__ void k(float* y) {{}}\n")
    flags = control_for(spec.space.param("nvcc_flags"), ())
    assert [label for label, _ in flags.options] == ["[]", "[--use_fast_math]",
                                                     "[-maxrregcount=128]"]
    flags.value = ("--use_fast_math",)
    assert flags.label == "[--use_fast_math]"
    assert control_for(spec.space.param("name_prefix"), "").label == '""'


def test_tpe_proposes_list_values_without_optuna_warnings():
    import warnings

    pytest.importorskip("optuna")
    from jupyter_ktune.tuning.search import make_strategy

    spec = parse_cell("k --backend cuda", f'// ktune: B in [1, 2, 4]; name_prefix in ["", '
                      f'"cutlass_"]; nvcc_flags in {FLAGS}\n__global__ void k(float* y) {{}}\n')
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # optuna warns of a tuple among its choices
        tpe = make_strategy("tpe", spec.space, seed=0)
        seen = []
        while (c := tpe.ask()) is not None and len(seen) < 18:
            seen.append(c)
            tpe.tell(c, 1.0 + len(seen) % 5)
        resumed = make_strategy("tpe", spec.space, seed=0)
        resumed.tell(seen[0], 1.0)  # a stored result from an earlier sweep
    assert len(set(seen)) == 18 and all(c in list(spec.space.configs()) for c in seen)


def test_interpreter_host_times_never_rank_configs_that_differ_only_in_name_prefix():
    from jupyter_ktune.results import Status
    from jupyter_ktune.tunable_values import value_text
    from jupyter_ktune.tuning.report import decide
    from jupyter_ktune.tuning.store import StoredResult

    host = "Triton interpreter, host time (not GPU time)"
    rows = [StoredResult(Config({"BLOCK": 64, "name_prefix": p}), Status.OK,
                         times_ms=np.full(20, ms) + np.arange(20) * 1e-4, method=host)
            for p, ms in (("cutlass_", 1.0), ("", 2.0))]
    verdict = decide(rows)
    assert verdict.runner_up is None and "name_prefix" in verdict.inert
    assert "no winner declared" in verdict.text()
    assert value_text(["--use_fast_math"]) == "[--use_fast_math]"  # a saved panel's JSON list


@needs_nvcc
def test_an_instruction_the_target_lacks_is_the_wrong_architecture(worker):
    from jupyter_ktune.api import run_kernel
    from jupyter_ktune.results import Status

    body = ("// ktune: BLOCK in [128]; grid = 1; block = BLOCK\n"
            "__global__ void fence(float* y) {\n"
            '  asm volatile("wgmma.fence.sync.aligned;\\n" ::: "memory");  // sm_90a only\n'
            "  y[threadIdx.x] = 1.f;\n}\n")
    r = run_kernel(parse_cell("fence --backend cuda --static-only", body), {}, worker=worker)
    assert r.status is Status.WRONG_ARCH, (r.status, r.reason)
    assert "sm_90" in r.reason
    ok = run_kernel(parse_cell("fence --backend cuda --static-only --arch sm_90a", body), {},
                    worker=worker)
    assert ok.status is Status.CANNOT_RUN and ok.static is not None, ok.reason
