"""Shared fixtures, and the rule that the tests test the installed package.

A test run imports ``jupyter_ktune`` from an installed wheel (``pip install ".[test]"``), never
from the checkout: a file missing from the wheel (``include/ktune.cuh``, the labextension) or a
dependency missing from ``pyproject.toml`` must fail a test, not be found in the source tree. So
the checkout is kept off every import path: this process's (``python -m pytest`` puts the working
directory first) and the child interpreters' (the device worker starts with ``python -m``, which
puts *its* working directory first, so the tests run from a scratch directory). Only ``tests/``
itself goes on both paths, for the fake backend module.

``KTUNE_TEST_SOURCE=1`` tests the checkout's source instead (a developer's editable install, or
none): the checkout goes first on both paths. Either way the run stops at once, with one line,
when the package imported is not the one this mode promises; the header says which one it is.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import run_plan

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
SOURCE = os.environ.get("KTUNE_TEST_SOURCE") == "1"


def _is_checkout(entry: str) -> bool:
    try:
        return Path(entry or os.getcwd()).resolve() == ROOT  # "" is the working directory
    except OSError:
        return False


def _path_without_checkout(entries: list[str]) -> list[str]:
    return [str(TESTS), *([str(ROOT)] if SOURCE else []),
            *(p for p in entries if p and not _is_checkout(p) and p != str(TESTS))]


# Before any test module imports jupyter_ktune (collection imports them after this file).
sys.path[:] = _path_without_checkout(sys.path)
# The worker is a separate interpreter: it finds the fake backend through the environment.
# Session-wide on purpose (every test sees the same), unlike a test module's own settings.
os.environ["KTUNE_BACKEND_MODULES"] = "fake=ktune_fake_backend"
os.environ["PYTHONPATH"] = os.pathsep.join(
    _path_without_checkout(os.environ.get("PYTHONPATH", "").split(os.pathsep)))


def package_origin() -> tuple[Path, Path | None]:
    """Return where ``jupyter_ktune`` was imported from, and its source tree.

    The tree is the checkout, or the project an editable install points at; None for a wheel.
    """
    import jupyter_ktune

    package = Path(jupyter_ktune.__file__).resolve().parent
    tree = package.parent
    if ROOT in package.parents or (tree / "pyproject.toml").is_file():
        return package, tree
    return package, None


def pytest_configure(config: pytest.Config) -> None:
    """Stop before collecting anything when the package under test is the wrong one."""
    package, tree = package_origin()
    if SOURCE and tree != ROOT:
        raise pytest.UsageError(
            f"KTUNE_TEST_SOURCE=1 tests this checkout ({ROOT}), but jupyter_ktune is imported "
            f"from {package}: unset KTUNE_TEST_SOURCE to test that installed package")
    if not SOURCE and tree is not None:
        raise pytest.UsageError(
            f"jupyter_ktune is imported from the source tree {tree}, not from an installed "
            f'wheel: install one with pip install ".[test]" (not -e), or set '
            f"KTUNE_TEST_SOURCE=1 to test the source tree on purpose")


def pytest_report_header(config: pytest.Config) -> str:
    """Say which package the run tests."""
    package, tree = package_origin()
    return f"jupyter_ktune: {package} ({'KTUNE_TEST_SOURCE=1' if tree else 'installed wheel'})"


@pytest.fixture(scope="session", autouse=True)
def scratch_working_directory(tmp_path_factory):
    """Run every test from an empty directory, not the checkout.

    Child interpreters started with ``-m`` or ``-c`` put their working directory first on their
    path, and the checkout must not be it. (Default stores, ``./.ktune.sqlite``, land there too.)
    """
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(tmp_path_factory.mktemp("cwd"))
        yield


@pytest.fixture(autouse=True)
def no_pool_marks_left():
    """Fail the test that leaves this process marked a compile-pool process. A pool task run
    in the test process (``runners.precompile``) sets these; left set, every later static
    report in the same xdist worker skipped its SASS mix and 16 unrelated tests failed."""
    from jupyter_ktune.backends.base import COMPILE_ONLY_ENV, LAUNCHER_AHEAD_ENV
    from jupyter_ktune.measure.static import SWEEP_STATIC_ENV

    names = (COMPILE_ONLY_ENV, SWEEP_STATIC_ENV, LAUNCHER_AHEAD_ENV)
    before = {name: os.environ.get(name) for name in names}
    yield
    left = {name: os.environ.get(name) for name in names if os.environ.get(name) != before[name]}
    for name in left:  # put back, so only this test fails
        if before[name] is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before[name]
    assert not left, (f"the test left {left} in os.environ: this process now acts as a "
                      "compile-pool process (use monkeypatch.setenv around pool tasks)")


@pytest.fixture(scope="module")
def triton_interpreter():
    """Set ``KTUNE_FORCE_INTERPRET=1`` for one module's tests, restored when the module ends.

    The workers and notebook kernels they start inherit it: the Triton interpreter on a GPU
    machine too, so the tests mean the same thing everywhere.
    """
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KTUNE_FORCE_INTERPRET", "1")
        yield


@pytest.fixture(scope="module")
def worker():
    """One device worker for the module's tests; closed at the end."""
    from jupyter_ktune.runner.client import DeviceWorker

    with DeviceWorker() as w:
        yield w


@pytest.fixture
def stopped_pools():
    """After the test, terminate every compile-pool process (one may be in a task standing for
    a stuck build) and close the pools, so no sleeping process is left for the next tests."""
    yield
    from jupyter_ktune.tuning import pool as pools

    for p in list(pools._pools.values()):
        for proc in list(getattr(p, "_processes", {}).values()):
            proc.terminate()
    pools.close_pools()


@pytest.fixture
def cli_kernel(tmp_path):
    """Write a saved ``%%kernel`` cell and its ``--setup`` file for the ``ktune`` command:
    ``cli_kernel(line, src) -> (kernel_path, setup_path)`` (x -> 2x over 64 floats)."""

    def write(line: str, src: str):
        kernel = tmp_path / "k.py"
        kernel.write_text(f"# %%kernel {line}\n{src}")
        setup = tmp_path / "setup.py"
        setup.write_text("import numpy as np\n"
                         "def inputs():\n    x = np.random.rand(64)\n"
                         "    return dict(x=x, y=np.empty_like(x), n=64)\n"
                         "def reference(x, y, n):\n    return 2 * x\n")
        return kernel, setup

    return write


# A distributed run (pytest-xdist's -n, set in pyproject's addopts): tests/run_plan.py says why.
WORKER = os.environ.get("PYTEST_XDIST_WORKER")
_run_lock: run_plan.RunLock | None = None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the ``alone`` and ``slow`` modules; on a worker, put the longest groups first and the
    ``alone`` ones last."""
    run_plan.mark(items)
    if WORKER is not None:
        run_plan.order(items)


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist, which -p no:xdist leaves out
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """``--dist loadscope`` (pyproject's addopts): one work unit per module, ``alone`` ones
    together."""
    if config.getvalue("dist") == "loadscope":
        return run_plan.scheduler(config, log)
    return None


def pytest_sessionstart(session: pytest.Session) -> None:
    """Open the run lock, in the folder every worker's temporary folder lies in."""
    global _run_lock
    if WORKER is not None:
        _run_lock = run_plan.RunLock(session.config._tmp_path_factory.getbasetemp().parent)


@pytest.hookimpl(wrapper=True, tryfirst=True)  # outside pytest-timeout: waiting is not the test
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    """Hold the run lock through the test's setup, call and teardown."""
    if _run_lock is None:
        return (yield)
    with _run_lock.hold(alone=item.get_closest_marker(run_plan.ALONE) is not None):
        return (yield)


@pytest.fixture
def fresh_ahead(monkeypatch):
    """The timer's subprocess and Triton's key handoff as a fresh device worker has them: nothing
    started, no key's pipe opened, the handoff's switch unset (tests/test_timer_ahead.py,
    tests/test_key_ahead.py); afterwards, a pipe no test read is closed and a started subprocess
    killed."""
    import os

    from jupyter_ktune.backends.triton import key_ahead, timer_ahead

    pipe: list = []
    monkeypatch.setattr(key_ahead, "_pipe", pipe)
    monkeypatch.setattr(timer_ahead, "_started", [])
    monkeypatch.setattr(timer_ahead, "_started_at", [])
    monkeypatch.delenv(key_ahead.SWITCH_ENV, raising=False)
    yield monkeypatch
    for read, _start, _pid in pipe:
        os.close(read)
    for proc in timer_ahead._started:
        if hasattr(proc, "kill"):  # not a stand-in for Popen's
            proc.kill()
            proc.wait()
