"""The device worker: a separate process that owns the GPU, so a fault costs one variant only."""

from jupyter_ktune.runner.client import DeviceWorker as DeviceWorker
from jupyter_ktune.runner.client import get_worker as get_worker
