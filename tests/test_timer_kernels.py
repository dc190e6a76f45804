"""The timers' own device kernels (L2 flush, empty kernel, the hold) compile for sm_90 here,
with no GPU: a typo in them would otherwise surface only on a GPU, as every timing failing.

The hold must read its gate with volatile loads (a cached load never sees the host's release and
every batch would wait out the timeout) and read the global timer (its timeout)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from cuda_tools import NVCC, needs_nvcc


def test_the_triton_timers_hold_compiles_with_a_volatile_gate_and_a_timeout(monkeypatch):
    pytest.importorskip("triton")
    monkeypatch.setenv("TRITON_DEFAULT_FP_FUSION", "1")  # as every ktune process sets it
    from jupyter_ktune.backends.triton.module import load_module
    from jupyter_ktune.backends.triton.static import aot_compile
    from jupyter_ktune.backends.triton.timer import TIMER_SOURCE

    mod = load_module(TIMER_SOURCE, "timer")
    hold = aot_compile(mod.ktune_hold, {"gate": "*i32", "timeouts": "*i32", "epoch": "i32"},
                       {"MAX_NS": 100_000_000}, {"gate", "timeouts"}, {"num_warps": 1}, "sm_90")
    ptx = hold.asm["ptx"]
    assert "ld.volatile.global" in ptx and "%globaltimer" in ptx and "atom." in ptx
    flush = aot_compile(mod.ktune_l2_flush, {"buf": "*i32", "n": "i32", "sink": "*i32"},
                        {"BLOCK": 4096}, {"buf", "sink"}, {"num_warps": 8}, "sm_90")
    assert "ld.global" in flush.asm["ptx"]


@needs_nvcc
def test_the_cuda_timers_kernels_compile_with_a_volatile_gate(tmp_path: Path):
    from jupyter_ktune.backends.cuda.timer import _FLUSH_SRC

    src = tmp_path / "timer.cu"
    src.write_text(_FLUSH_SRC)
    ptx = tmp_path / "timer.ptx"
    subprocess.run([NVCC, "-arch=sm_90", "--ptx", str(src), "-o", str(ptx)], check=True,
                   capture_output=True, text=True)
    text = ptx.read_text()
    for name in ("ktune_l2_flush", "ktune_empty", "ktune_hold"):
        assert f".entry {name}" in text, name
    hold = text[text.index(".entry ktune_hold"):]
    assert "ld.volatile.global" in hold and "%globaltimer" in hold
