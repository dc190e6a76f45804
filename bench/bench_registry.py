"""The benchmarks ``bench/run.py`` knows: each one's script, default arguments, cap and question.

``python3 bench/run.py --list`` prints them; bench/README.md quotes the result of each one's
default arguments.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Bench:
    """One benchmark: its script under bench/, default arguments (``{out}`` is its result
    folder), default cap in seconds, and the question it answers."""

    script: str
    args: str
    cap_s: float
    question: str


#: name -> benchmark; the name is also the folder under bench/results/. Default arguments are
#: the ones whose result bench/README.md quotes; pass others with ``--args NAME='...'``.
REGISTRY: dict[str, Bench] = {
    "timing_vs_ncu": Bench(
        "timing_vs_ncu.py", "--out {out}", 240,
        "Is the CUDA backend's median within 3% of ncu, and does a faulting variant recover in "
        "< 5 s?"),
    "events_vs_cupti": Bench(
        "events_vs_cupti.py", "", 120,
        "Does CUPTI kernel tracing slow the kernel it times? (needs cupti-python)"),
    "triton_vs_do_bench": Bench(
        "triton_vs_do_bench.py", "4096 --json {out}/triton_gpu_check.json", 120,
        "Does the Triton backend's median agree with triton.testing.do_bench?"),
    "pallas_vs_profiler": Bench(
        "pallas_vs_profiler.py", "--size 4096", 150,
        "Does the Pallas backend's median agree with jax's Mosaic GPU profiler.measure?"),
    "panel_latency": Bench(
        "panel_latency.py", "--out {out}", 150,
        "How long from a slider change to the panel's data updated, and does drag prefetch hit?"),
    "notebook_headless": Bench(
        "notebook_headless.py", "examples/quickstart.ipynb --out {out}", 120,
        "Does the quickstart notebook run top to bottom on the GPU, and what does it show?"),
    "breakdown_overhead": Bench(
        "breakdown_overhead.py", "{out}", 200,
        "What does a cycle breakdown cost: GPU time overhead, trace size, run-to-drawn latency?"),
    "breakdown_through_worker": Bench(
        "breakdown_through_worker.py", "--out {out}", 80,
        "Does every profile request (scopes, ncu per line, Mosaic GPU) work through the worker?"),
    "sweep_vs_autotune": Bench(
        "sweep_vs_autotune.py",
        "--size 4096 --budget-ms 10 --warm --store {out}/mm.sqlite "
        "--out {out}/sweep_vs_autotune.json",
        170, "Is ktune's sweep >= 3x faster to the best config than triton.autotune, same winner?"),
    "search_efficiency": Bench(
        "search_efficiency.py",
        "--budget-ms 5 --record {out}/eff.sqlite --spaces attn_fwd scale --seeds 20 "
        "--out {out}/search_efficiency_record_only.json", 220,
        "How many evaluations does each strategy need to come within 3% of the best?"),
    "sweep_vs_kernel_tuner": Bench(
        "sweep_vs_kernel_tuner.py", "--store {out}/kt.sqlite --out {out}/kernel_tuner_compare.json",
        130, "Do ktune and Kernel Tuner pick the same winner for one CUDA kernel, in what time?"),
    "convolution_vs_kernel_tuner": Bench(
        "convolution_vs_kernel_tuner.py", "--out {out}", 300,
        "On Kernel Tuner's own convolution (from its PyPI sdist), is a sweep >= 2x faster than "
        "Kernel Tuner's brute force over the same space, with the same winner?"),
    "first_minute": Bench(
        "first_minute.py", "--out {out}", 560,
        "From a fresh process, nothing set apart: how soon is a notebook's first kernel cell "
        "verified, how soon does Autotune give its first result, and how does the sweep compare "
        "with triton.autotune and Kernel Tuner over the kernel's own space?"),
    "first_minute_ab": Bench(
        "first_minute_ab.py", "--base /tmp/base --kernel fla-matmul --reps 3", 300,
        "On one host, in turns, each from a fresh process: how much sooner is a notebook's first "
        "cell verified, and Autotune's first result there, with this tree than with the one "
        "before (--base: its checkout)?"),
    "first_result_floor": Bench(
        "first_result_floor.py", "--kernel fla-matmul --reps 3", 90,
        "What does a fresh process pay for a kernel's first number with no tool at all (fla's "
        "matmul: torch, Triton, the JIT's compile and launch of its first config; --kernel "
        "kt-vector-add: CuPy and NVRTC): the bound under a first-minute target?"),
    "import_costs": Bench(
        "import_costs.py", "--reps 3 --out {out}", 200,
        "What does each fixed cost under a first result (torch's, triton's, cupy's, jax's "
        "import, the CUDA context, Triton's driver utilities) take alone, in a fresh process?"),
    "corpus_vs_autotune": Bench(
        "corpus_vs_autotune.py", "--out {out}", 540,
        "On kernels that carry their own autotune list, each from a fresh process with nothing "
        "set apart, is a sweep >= 1.5x faster than triton.autotune (>= 3x in the notebook's "
        "order), with as good a winner?"),
    "launch_overhead": Bench(
        "launch_overhead.py", "fla-chunk-cumsum --out {out}", 120,
        "What does each call of one timed run (flush, events, the kernel) cost the host, "
        "beside its GPU time, for a microsecond kernel?"),
    "warmup_rule": Bench(
        "warmup_rule.py", "--out {out}", 150,
        "When the SM clock already reads at its maximum, does a 1 ms warm-up give the same "
        "median as the full 25 ms?"),
    "warm_start": Bench(
        "warm_start.py", "--backend triton --budget-ms 10 --out {out}", 300,
        "After a one-line edit, does a warm-started sweep reach within 3% of its best in <= 20% "
        "of a cold sweep's wall time?"),
    "store_queries": Bench(
        "store_queries.py", "--out {out}", 400,
        "At 1M rows, do best-of and the panel's history take <= 50 ms? (CPU)"),
    "gemm_vs_cublas": Bench(
        "gemm_vs_cublas.py", "8192 --rounds 30 --json {out}/gemm_interleaved.json", 170,
        "Is the Triton GEMM of examples/gemm.ipynb within 95% of cuBLAS?"),
    "attention_vs_sdpa": Bench(
        "attention_vs_sdpa.py", "--contexts 1024 4096 --json {out}/attention_vs_sdpa.json", 240,
        "How close is the Triton FlashAttention forward to torch SDPA (cuDNN, flash)?"),
    "swizzle_bank_conflicts": Bench(
        "swizzle_bank_conflicts.py", "--out {out} --n 8192", 120,
        "Does each swizzle mode remove the bank conflicts the model predicts, and what does it "
        "save?"),
    "fault_injection": Bench(
        "fault_injection.py", "--timeout 5 --out {out}", 240,
        "Is every planted fault (crash, hang, wrong kernel, slow reference, Interrupt) given the "
        "right reason, with no result lost, across a sweep, a kill -9 and a resume?"),
    "gemm_wgmma_vs_cublas": Bench(
        "gemm_wgmma_vs_cublas.py", "8192 --rounds 15 --json {out}/gemm_wgmma_vs_cublas.json", 300,
        "Does the CUDA C++ WGMMA + TMA GEMM verify, and reach >= 90% of cuBLAS at 8192^3 bf16?"),
    "attention_wgmma_vs_cudnn": Bench(
        "attention_wgmma_vs_cudnn.py", "--json {out}/attention_wgmma_vs_cudnn.json", 560,
        "Does the CUDA C++ WGMMA + TMA attention verify, and meet cuDNN (fp16, Z=4, H=32)?"),
    "cuda_idioms": Bench(
        "cuda_idioms.py", "--out {out}", 120,
        "Do __constant__ memory, a two-stage pipeline and a __half template run and verify?"),
    "corpus": Bench(
        "../tests/corpus/run_corpus.py", "--device --json {out}/corpus.json --markdown", 300,
        "Do the published kernels of the compatibility corpus verify on the device, and how fast?"),
    "panel_gpu_snapshot": Bench(
        "panel_gpu_snapshot.py", "--out {out}", 200,
        "What does the live panel show for a GPU run (saved for the docs screenshot)?"),
    "sweep_profile": Bench(
        "sweep_profile.py", "fla-softmax matmul cuda-copy --out {out}", 300,
        "Which functions hold a sweep's per-config time, in the worker and in the sweep?"),
    "verdicts_fp32": Bench(
        "verdicts_fp32.py", "--out {out}", 200,
        "Do correct fp32 GEMMs (K up to 8192) and a 17x17 convolution pass by default, and an "
        "off-by-one fail?"),
}
