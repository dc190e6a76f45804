"""The compile pool's order in an exhaustive sweep (issue 21): the costliest compile first,
interleaved with the cheapest, on the autotune list of a kernel from an installed package."""

from __future__ import annotations

import pytest

from jupyter_ktune.space import Config
from jupyter_ktune.tuning.compile_order import compile_first, interleaved, triton_compile_cost


def test_interleaving_alternates_costliest_and_cheapest_and_keeps_every_config():
    configs = [Config({"B": b}) for b in (1, 2, 3, 4, 5)]
    cost = {c: float(c["B"]) for c in configs}
    order = interleaved(configs, cost)
    assert [c["B"] for c in order] == [5, 1, 4, 2, 3]
    assert sorted(order, key=lambda c: c["B"]) == configs


def test_the_cost_is_tile_elements_per_thread():
    assert triton_compile_cost(Config({"B": 8192, "num_warps": 1, "num_stages": 3})) == 256
    assert triton_compile_cost(Config({"B": 512, "num_warps": 16})) == 1
    assert triton_compile_cost(Config({"BLOCK_M": 128, "BLOCK_N": 64, "EVEN": True})) == 64


def test_fla_sigmoid_hands_its_slowest_compile_to_the_pool_first():
    """fla's activation autotune list, read from the installed package: B=8192 with one warp
    (ptxas 9-18 s on the H200) was the 25th of 30 in declaration order."""
    pytest.importorskip("fla")
    from corpus.entries import BY_ID

    from jupyter_ktune.api import parse_cell

    entry = BY_ID["fla-sigmoid"]
    line, body, _ = entry.cell()
    spec = parse_cell(line, body, {"inputs": entry.inputs, "reference": entry.reference})
    configs = list(spec.space.configs())
    order = compile_first("triton", configs)
    assert order is not None and len(order) == len(configs) == 30
    assert configs.index(order[0]) > 20  # it was late
    assert (order[0]["B"], order[0]["num_warps"]) == (8192, 1)
    assert order[1]["B"] == 512 and order[1]["num_warps"] == 32  # then the cheapest
    assert compile_first("cuda", configs) is None  # other backends keep their order


def test_the_compile_pool_runs_nicer_than_the_sweep():
    """Pool processes (and the ptxas/nvcc they start) yield the CPU to the device worker."""
    import os

    from jupyter_ktune.tuning.runners import POOL_NICENESS, make_pool

    pool = make_pool(1)
    try:
        assert pool.submit(os.nice, 0).result(timeout=120) >= min(os.nice(0) + POOL_NICENESS, 19)
    finally:
        pool.shutdown()


def _triton_key_hashed() -> int:
    """In a pool process: whether Triton's installation hash is already computed (lru_cache)."""
    try:
        from triton.runtime.cache import triton_key
    except ImportError:
        from triton.compiler.compiler import triton_key
    return triton_key.cache_info().currsize


def test_the_pools_warm_up_hashes_triton_before_the_first_compile():
    """triton_key (0.33 s of hashing per process) is paid at pool start, not by a compile:
    a short sweep gives each config a fresh process, so each compile paid it."""
    pytest.importorskip("triton")
    from jupyter_ktune.tuning.runners import make_pool, submit_soon

    pool = make_pool(1, "triton")  # the warm-up task runs first on the pool's one process
    try:  # asked for after it, in the pool's order (make_pool asks without waiting)
        assert submit_soon(pool, _triton_key_hashed).result(timeout=300) == 1
    finally:
        pool.shutdown()
