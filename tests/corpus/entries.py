"""The corpus table: every entry, by backend (see harness.Entry for the fields)."""

from __future__ import annotations

from corpus.entries_cuda import CUDA
from corpus.entries_cuda_torchao import TORCHAO_CUDA
from corpus.entries_jax import JAX_PALLAS
from corpus.entries_pallas import PALLAS
from corpus.entries_triton import TRITON
from corpus.entries_unsloth import TORCHAO, UNSLOTH

ENTRIES = [*TRITON, *UNSLOTH, *TORCHAO, *PALLAS, *JAX_PALLAS, *CUDA, *TORCHAO_CUDA]
BY_ID = {e.id: e for e in ENTRIES}
assert len(BY_ID) == len(ENTRIES), "corpus ids must be unique"
