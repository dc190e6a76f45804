"""Cycle breakdowns of one variant, inside the worker: the backend's scopes, or ncu's lines.

The scopes come from the backend (``profile_scopes`` of the protocol in
:mod:`jupyter_ktune.backends.base`); the per-line view runs this module as a driver under ncu
(:mod:`jupyter_ktune.measure.profile_ncu` knows ncu and its report, this module knows how to
compile and launch a variant). Both raise with the reason when this backend or machine cannot
produce a breakdown; the worker answers that as an error.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from jupyter_ktune.backends import get_backend
from jupyter_ktune.errors import CannotRun
from jupyter_ktune.measure import profile_ncu
from jupyter_ktune.measure.breakdown import Breakdown
from jupyter_ktune.measure.profile_folder import profile_folder
from jupyter_ktune.runner.execute import checked_inputs
from jupyter_ktune.space import Config
from jupyter_ktune.spec import KernelSpec


def profile_variant(spec: KernelSpec, config: Config, lines: bool = False) -> Breakdown:
    """Cycle breakdown of one variant (worker side): its scopes, or with ``lines`` ncu's samples.

    Pallas has scopes only on Mosaic GPU (Hopper); its other lowerings raise CannotRun saying so.
    """
    backend = get_backend(spec.backend)
    device = backend.device()
    if not device.available:
        raise CannotRun(f"[ktune] no cycle breakdown here: {device.reason}")
    if lines:
        why = profile_ncu.ncu_status()
        if why:
            return Breakdown.lines_only(spec.name, {}, "ncu", notes=(why,))
        return profile_lines(spec, config)
    return backend.profile_scopes(spec, config, lambda: checked_inputs(spec, config))


@contextlib.contextmanager
def _job(spec: KernelSpec, config: Config) -> Iterator[tuple[Path, list[str]]]:
    """A folder holding the pickled variant (removed afterwards, ncu's report with it), and
    the driver command that launches it."""
    import cloudpickle

    with profile_folder("ncu") as folder:
        job = folder / "job.pkl"
        job.write_bytes(cloudpickle.dumps((spec, dict(config))))
        yield folder, [sys.executable, "-m", __name__, str(job)]


def profile_lines(spec: KernelSpec, config: Config, timeout: float = 120.0) -> Breakdown:
    """Run the variant under ncu in a subprocess and return its per-line samples (worker side)."""
    with _job(spec, config) as (folder, argv):
        rep = profile_ncu.run_under_ncu(spec.name, argv, profile_ncu.line_sampling_args(),
                                        folder, timeout)
        named = folder / "cell_file.txt"
        cell_file = named.read_text().strip() if named.exists() else None
        return profile_ncu.read_report(rep, spec.name, profile_ncu.cell_file_filter(cell_file))


def ncu_metrics(spec: KernelSpec, config: Any,
                metrics: tuple[str, ...] = profile_ncu.SHARED_METRICS,
                timeout: float = 120.0) -> dict[str, float | None]:
    """Named ncu metrics of the variant's first launch (worker side); None where ncu had none."""
    why = profile_ncu.ncu_status()
    if why:
        raise RuntimeError(f"[ktune] {why}")
    with _job(spec, config) as (folder, argv):
        rep = profile_ncu.run_under_ncu(spec.name, argv, ["--metrics", ",".join(metrics)],
                                        folder, timeout)
        return profile_ncu.report_metrics(rep, spec.name, metrics)


def drive(job: str) -> None:
    """Inside ncu: compile the variant, bind fresh inputs, launch once and wait.

    Writes the backend's ``line_file`` beside the job, for the report reader's file filter.
    """
    import cloudpickle

    spec, config = cloudpickle.loads(Path(job).read_bytes())
    backend = get_backend(spec.backend)
    variant = backend.compile(spec, Config(config))
    bound = variant.bind(spec.inputs())
    bound.launch()
    bound.read_outputs()
    name = backend.line_file(variant)
    if name:
        Path(job).with_name("cell_file.txt").write_text(name)


if __name__ == "__main__":
    drive(sys.argv[1])
