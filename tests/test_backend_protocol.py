"""Every registered backend implements the protocol of jupyter_ktune/backends/base.py.

The check is by name and parameter list, on the backend objects the registry hands out (the
fake one included), so a backend that drops a method or renames a parameter fails here, not
in the worker on a GPU. The optional profiling half is checked where a backend offers it, and
exercised end to end (host side) through the fake.
"""

from __future__ import annotations

import inspect
from types import SimpleNamespace

import numpy as np
import pytest

from jupyter_ktune.backends import backend_names, get_backend
from jupyter_ktune.backends.base import Backend, BackendBase, ScopeProfiler
from jupyter_ktune.errors import CannotRun

REQUIRED = ("check", "device", "static_report", "compile", "timer", "is_fatal")
OPTIONAL = ("profile_scopes", "line_file")


def _params(fn) -> list[str]:
    return [p for p in inspect.signature(fn).parameters if p != "self"]


def test_the_registry_lists_the_three_backends_and_the_fake() -> None:
    assert {"cuda", "triton", "pallas", "fake"} <= set(backend_names())


@pytest.mark.parametrize("name", ["cuda", "triton", "pallas", "fake"])
def test_backend_has_every_required_method_with_the_protocol_parameters(name: str) -> None:
    backend = get_backend(name)
    assert backend.name == name
    for method in REQUIRED:
        assert callable(getattr(backend, method, None)), f"{name} lacks {method}"
        assert _params(getattr(backend, method)) == _params(getattr(Backend, method)), method
    for method in OPTIONAL:
        if hasattr(backend, method):
            assert _params(getattr(backend, method)) == _params(getattr(ScopeProfiler, method))


@pytest.mark.parametrize("name", ["cuda", "triton", "pallas", "fake"])
def test_a_backends_hooks_take_the_parameters_backendbase_declares(name: str) -> None:
    """The generic code calls a hook as ``BackendBase`` declares it (``preload(spec)``,
    ``load_prebuilt(spec, config, report)``...), whichever backend overrides it."""
    backend = get_backend(name)
    hooks = [n for n, v in vars(BackendBase).items() if callable(v) and not n.startswith("_")]
    assert {"preload", "pool_hints", "launcher_ahead", "load_prebuilt"} <= set(hooks)
    for hook in hooks:
        assert _params(getattr(backend, hook)) == _params(getattr(BackendBase, hook)), hook


@pytest.mark.parametrize("name", ["cuda", "triton", "pallas"])
def test_builtin_backends_offer_the_profiling_half(name: str) -> None:
    backend = get_backend(name)
    assert all(callable(getattr(backend, m, None)) for m in OPTIONAL)


def _fake_spec(src: str):
    from jupyter_ktune.api import parse_cell

    ns = {"inputs": lambda: dict(x=np.random.rand(8), y=np.empty(8)),
          "reference": lambda x, y: 2 * x}
    return parse_cell("scale --backend fake --inputs inputs --reference reference --out y", src,
                      ns)


def test_profile_variant_uses_the_backends_profile_scopes(monkeypatch) -> None:
    import ktune_fake_backend as fake

    from jupyter_ktune.runner import profile

    spec = _fake_spec("# scope: load\n# scope: store\ndef scale(x, y):\n    y[:] = 2 * x\n")
    monkeypatch.setattr(profile, "get_backend", lambda name: fake.ProfilingFakeBackend())
    bd = profile.profile_variant(spec, spec.space.config({}))
    assert list(bd.scope) == ["load", "store"] and bd.source == "fake"


def test_profile_variant_without_profile_scopes_says_which_backends_have_one() -> None:
    from jupyter_ktune.runner.profile import profile_variant

    spec = _fake_spec("def scale(x, y):\n    y[:] = 2 * x\n")
    with pytest.raises(CannotRun, match="no scope profiler wired for --backend fake"):
        profile_variant(spec, spec.space.config({}))


def test_a_run_takes_the_variant_from_a_seeded_report_where_the_backend_loads_it(
        monkeypatch) -> None:
    """Issue 21: a report a sweep's pool built ahead (``seed_static``) gives the variant through
    the backend's ``load_prebuilt`` (the CUDA backend loads its cubin), and the run verifies and
    times that variant; without a seeded report the backend compiles as before."""
    import ktune_fake_backend as fake

    from jupyter_ktune.runner import execute

    class Prebuilt(fake.FakeBackend):
        compiled: list = []
        loaded: list = []

        def compile(self, spec, config):
            Prebuilt.compiled.append(dict(config))
            return super().compile(spec, config)

        def load_prebuilt(self, spec, config, report):
            Prebuilt.loaded.append((dict(config), report.tag))
            return fake.Variant(spec, config)

    monkeypatch.setattr(execute, "get_backend", lambda name: Prebuilt())
    spec = _fake_spec("# ktune: K in [1, 2]\ndef scale(x, y):\n    y[:] = 2 * x\n")
    seeded, plain = spec.space.config({"K": 1}), spec.space.config({"K": 2})
    report = SimpleNamespace(tag="from the pool", kernels={}, threads_per_block=128)
    assert execute.seed_static(spec.source_hash, spec.options.arch, seeded, report)
    assert execute.run_variant(spec, seeded).status.value == "ok"
    assert Prebuilt.loaded == [({"K": 1}, "from the pool")] and Prebuilt.compiled == []
    assert execute.run_variant(spec, plain).status.value == "ok"
    assert Prebuilt.compiled == [{"K": 2}]
