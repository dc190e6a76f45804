"""The compatibility corpus (issue 18): published kernels, read from installed packages, run on CPU.

Each entry is reported on its own. Kernels in ``KNOWN_FAILING`` must still fail the way the
survey recorded (docs/corpus.md lists the root causes); every other installed kernel must pass.
When a fix makes a known failure pass, this test fails until its id is removed from the list,
so the list only shrinks. Entries whose package is not installed are skipped
(``pip install -r tests/corpus/requirements.txt``).
"""

from __future__ import annotations

import os

import pytest
from corpus import run_corpus
from corpus.entries import BY_ID, ENTRIES
from corpus.harness import run_entry
from corpus.source import NotInstalled, module_file, version


@pytest.fixture(scope="module", autouse=True)
def _corpus_environment():
    """CPATH and the forced interpreter for this module's worker only (autouse runs first)."""
    saved = dict(os.environ)
    run_corpus.prepare_environment()
    yield
    os.environ.clear()
    os.environ.update(saved)


# id -> words of the recorded failure ("status: reason"), from the survey of docs/corpus.md
KNOWN_FAILING = {
    "tokamax-glu": "'TypedInt' object has no attribute 'shape'",
    "cute-sgemm-1": "template type ProblemShape of gemm_device is the type of parameter "
                    "shape_MNK, passed by value",
    # torchao 0.18's int8 GEMM uses tl.make_block_ptr, which Triton 3.9 removed
    "torchao-int-mm": "Block pointers have been removed",
}


def _installed(entry) -> bool:
    try:
        version(entry.dist)
        return True
    except NotInstalled:
        return False


def test_the_corpus_is_large_and_wide_enough():
    assert len(ENTRIES) >= 46
    assert len({e.dist for e in ENTRIES}) >= 9  # with issue 36's jax, unsloth, torchao
    assert set(KNOWN_FAILING) <= set(BY_ID)


def test_a_cell_holds_the_package_source_verbatim_and_counts_edits():
    entry = BY_ID["flag-gems-rms-norm"]
    if not _installed(entry):
        pytest.skip(f"{entry.dist} not installed")
    shipped = module_file("flag_gems.ops.rms_norm").read_text()
    _, body, changed = entry.cell()
    kernel = body[body.index("def rms_norm_kernel("):]
    assert kernel.rstrip() in shipped  # byte for byte what the wheel ships
    assert "@libentry()" in shipped and "@libentry()" not in body
    assert changed == 1  # the one edit: the @libentry() line


@pytest.mark.slow
@pytest.mark.parametrize("entry_id", [e.id for e in ENTRIES])
def test_corpus_kernel(entry_id, worker):
    entry = BY_ID[entry_id]
    if not _installed(entry):
        pytest.skip(f"{entry.dist} not installed (pip install -r tests/corpus/requirements.txt)")
    out = run_entry(entry, worker)
    said = f"{out.status}: {out.reason}"
    if entry_id in KNOWN_FAILING:
        assert not out.passed, f"{entry_id} passes now: remove it from KNOWN_FAILING"
        assert KNOWN_FAILING[entry_id] in said, f"{entry_id} fails differently: {said}"
    else:
        assert out.passed, f"{entry_id}: {said}\n{out.error}"


def test_a_device_runs_outcomes_fill_the_h200_column():
    """``--h200 out.json`` (a ``--device --json`` run) fills the table's last column."""
    from corpus.harness import Outcome

    cpu = [Outcome("jax-gpu-softmax", "pass", "verified"), Outcome("jax-tpu-matmul", "pass",
                                                                   "verified")]
    gpu = [Outcome("jax-gpu-softmax", "pass", "verified"),
           Outcome("jax-tpu-matmul", "compile error", "[ktune] needs a TPU")]
    table = run_corpus.markdown(cpu, gpu).splitlines()
    assert table[0].endswith("| verified on the H200 |")
    assert table[2].endswith("| pass: verified |")
    assert table[3].endswith("| **compile error**: needs a TPU |")
    assert run_corpus.markdown(cpu).splitlines()[2].endswith("| same |  |")


@pytest.mark.parametrize("entry_id", ["torchao-cuda-pad-token-groups",
                                      "torchao-cuda-unpad-token-groups",
                                      "torchao-cuda-padded-offsets"])
def test_a_cuda_kernel_with_host_headers_also_builds_as_the_nvrtc_fallback(entry_id):
    """The second build of issue 36: the cell nvcc builds (the run's build wherever nvcc is)
    also compiles as the NVRTC fallback builds it, <cstdio> and <cuda_runtime.h> included."""
    from corpus.entries_cuda_torchao import nvrtc_log

    entry = BY_ID[entry_id]
    if not _installed(entry):
        pytest.skip(f"{entry.dist} not installed (pip install -r tests/corpus/requirements.txt)")
    try:
        ok, log = nvrtc_log(entry)
    except LookupError as exc:
        pytest.skip(str(exc))
    assert ok, log
