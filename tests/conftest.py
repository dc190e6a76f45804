"""Shared fixtures: the fake CPU backend registered for the worker, and a worker per module."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).parent
ROOT = TESTS.parent

# The worker is a separate interpreter: it finds the fake backend through the environment.
os.environ["KTUNE_BACKEND_MODULES"] = "fake=ktune_fake_backend"
os.environ["PYTHONPATH"] = os.pathsep.join(
    [str(TESTS), str(ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))])
sys.path.insert(0, str(TESTS))


@pytest.fixture(scope="module")
def worker():
    """One device worker for the module's tests; closed at the end."""
    from jupyter_ktune.runner.client import DeviceWorker

    with DeviceWorker() as w:
        yield w
