"""The device worker: a separate process that owns the GPU, so a fault costs one variant only."""

import typing as _typing

if _typing.TYPE_CHECKING:
    from jupyter_ktune.runner.client import DeviceWorker as DeviceWorker
    from jupyter_ktune.runner.client import get_worker as get_worker


def __getattr__(name: str) -> _typing.Any:
    """``DeviceWorker`` and ``get_worker``, from :mod:`.client` on first use: the worker and its
    input helper import modules of this package and need neither (nor what the client imports)."""
    if name in ("DeviceWorker", "get_worker"):
        from jupyter_ktune.runner import client

        return getattr(client, name)
    raise AttributeError(f"module 'jupyter_ktune.runner' has no attribute {name!r}")
