"""A Triton result says whether FP fusion was on: the choice changes its numbers and its error,
and Triton 3.10 turns the default off (``backends.triton.module.fp_fusion``)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from jupyter_ktune.backends.triton.module import fp_fusion


def fake_triton(default: bool, force_off: bool = False) -> SimpleNamespace:
    language = SimpleNamespace(default_fp_fusion=default, force_disable_fp_fusion=force_off)
    return SimpleNamespace(knobs=SimpleNamespace(language=language))


def test_ktunes_own_default_reads_plainly_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRITON_DEFAULT_FP_FUSION", "1")
    assert fp_fusion(fake_triton(True)) == "on"


def test_a_user_choice_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRITON_DEFAULT_FP_FUSION", "0")
    assert fp_fusion(fake_triton(False)) == "off (TRITON_DEFAULT_FP_FUSION)"
    assert fp_fusion(fake_triton(True, force_off=True)) == "off (TRITON_FORCE_DISABLE_FP_FUSION)"


def test_a_triton_without_the_switch() -> None:
    assert fp_fusion(SimpleNamespace()) == "on (this Triton has no switch)"


def test_the_installed_tritons_knobs(monkeypatch: pytest.MonkeyPatch) -> None:
    """The real knobs (Triton 3.9 here, 3.6 on the GPU host) read the environment each time."""
    triton = pytest.importorskip("triton")
    monkeypatch.delenv("TRITON_FORCE_DISABLE_FP_FUSION", raising=False)
    monkeypatch.setenv("TRITON_DEFAULT_FP_FUSION", "1")
    assert fp_fusion(triton) == "on"
    monkeypatch.setenv("TRITON_DEFAULT_FP_FUSION", "0")
    assert fp_fusion(triton) == "off (TRITON_DEFAULT_FP_FUSION)"
    monkeypatch.setenv("TRITON_DEFAULT_FP_FUSION", "1")
    monkeypatch.setenv("TRITON_FORCE_DISABLE_FP_FUSION", "1")
    assert fp_fusion(triton) == "off (TRITON_FORCE_DISABLE_FP_FUSION)"


def test_a_gpu_workers_toolchain_carries_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """The Triton backend's device opening on a GPU (torch and Triton faked: this machine has
    none) puts the choice in the toolchain, which the result's provenance shows and the store
    keys its rows by."""
    import jupyter_ktune.backends.triton.backend as tb
    from jupyter_ktune.backends.base import COMPILE_ONLY_ENV

    props = SimpleNamespace(name="NVIDIA H200", major=9, minor=0, multi_processor_count=132)
    cuda = SimpleNamespace(get_device_properties=lambda _: props, current_device=lambda: 0)
    torch = SimpleNamespace(__version__="2.11.0", cuda=cuda, version=SimpleNamespace(cuda="13.0"))
    triton = SimpleNamespace(__version__="3.6.0", **vars(fake_triton(True)))
    monkeypatch.setattr(tb, "choose_mode", lambda: False)
    monkeypatch.setattr(tb.context_ahead, "start_in_worker", lambda: None)
    monkeypatch.setattr(tb.utils_ahead, "start_in_worker", lambda: None)
    monkeypatch.setattr(tb, "warm_cache_key", lambda: None)
    monkeypatch.setattr(tb.Opening, "imports", lambda self, *names: (torch, triton))
    monkeypatch.setattr("jupyter_ktune.measure.clocks.driver_version", lambda: "580")
    monkeypatch.setenv(COMPILE_ONLY_ENV, "1")  # no timer, no torch warm-up
    monkeypatch.setenv("TRITON_DEFAULT_FP_FUSION", "1")
    info = tb.TritonBackend()._device
    assert info.compute_capability == "9.0"
    assert info.toolchain["fp fusion"] == "on"
