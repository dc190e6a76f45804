"""``ktune``: the notebook's loop from a shell, for scripts and CI.

A kernel file is a ``%%kernel`` cell saved as a file: its first line is the magic line, written
as a comment (``// %%kernel scale --inputs inputs --reference reference --out y``), the rest is
the body. ``--setup FILE.py`` is executed first and provides the functions the magic line names,
like the notebook's earlier cells.

    ktune run kernel.cu --setup inputs.py [--config BLOCK=256] [--json out.json]
    ktune static kernel.cu [--config BLOCK=256]        # no GPU needed
    ktune device                                        # what the worker sees
    ktune tune kernel.cu --setup inputs.py --strategy greedy --budget 64 --export triton
"""

from __future__ import annotations

import argparse
import json
import re
import runpy
import sys
from pathlib import Path
from typing import Any

from jupyter_ktune.errors import KtuneError
from jupyter_ktune.results import RunResult
from jupyter_ktune.spec import KernelSpec, parse_cell

_MAGIC = re.compile(r"^\s*(?://|#)?\s*%%kernel\s+(?P<line>.*)$")


class _NoSetup(dict):
    """Namespace for ``ktune static`` without ``--setup``: any named function exists, unused."""

    def __contains__(self, key: object) -> bool:
        return True

    def __missing__(self, key: str) -> Any:
        def unavailable(*args: Any, **kwargs: Any) -> Any:
            raise KtuneError(f"[ktune] {key} is not defined: pass --setup FILE.py")
        return unavailable


def load_kernel_file(path: Path, setup: Path | None, extra_line: str = "") -> KernelSpec:
    """Parse a saved ``%%kernel`` cell; ``setup`` provides the namespace (inputs, reference)."""
    text = path.read_text()
    first, _, body = text.partition("\n")
    m = _MAGIC.match(first)
    if m is None:
        raise KtuneError(f"[ktune] {path}: line 1 must be the magic line, e.g. "
                         "'// %%kernel scale --inputs inputs --reference reference --out y'")
    namespace: dict[str, Any] = runpy.run_path(str(setup)) if setup else _NoSetup()
    return parse_cell(f"{m.group('line')} {extra_line}".strip(), body, namespace)


def _config_args(items: list[str]) -> str:
    return " ".join(f"--config {c}" for c in items)


def _result_json(r: RunResult) -> dict[str, Any]:
    out: dict[str, Any] = {"name": r.name, "backend": r.backend, "config": dict(r.config),
                           "status": r.status.value, "reason": r.reason, "device": r.device,
                           "launch": {k: list(v) if isinstance(v, tuple) else v
                                      for k, v in r.launch.items()},
                           "diagnostics": [d.to_dict() for d in r.diagnostics]}
    if r.measurement is not None:
        out["measurement"] = r.measurement.to_dict()
    if r.static is not None and hasattr(r.static, "to_dict"):
        out["static"] = r.static.to_dict()
    return out


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``ktune`` command; returns the process exit code."""
    ap = argparse.ArgumentParser(prog="ktune", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("run", "static"):
        p = sub.add_parser(name)
        p.add_argument("file", type=Path)
        p.add_argument("--setup", type=Path, help="Python file defining inputs/reference")
        p.add_argument("--config", action="append", default=[], help="NAME=value")
        p.add_argument("--json", type=Path, help="also write the result as JSON here")
    sub.add_parser("device")
    _tune_parser(sub)
    args = ap.parse_args(argv)
    try:
        if args.cmd == "tune":
            return _tune(args)
        if args.cmd == "device":
            from jupyter_ktune.runner.client import get_worker

            print(get_worker().device("cuda"))
            return 0
        extra = _config_args(args.config) + (" --static-only" if args.cmd == "static" else "")
        spec = load_kernel_file(args.file, args.setup, extra)
        from jupyter_ktune.api import run_kernel

        result = run_kernel(spec)
    except KtuneError as exc:
        print(exc, file=sys.stderr)
        return 2
    print(repr(result))
    if result.static is not None:
        for k in result.static.kernels.values():
            print(f"  {k.demangled}: {k.registers} registers, {k.smem_static} B smem, "
                  f"spills {k.spill_stores}/{k.spill_loads} B, stack {k.stack_frame} B")
    if args.json:
        args.json.write_text(json.dumps(_result_json(result), indent=1, default=str))
    return 1 if result.status.failed else 0


def _tune_parser(sub: Any) -> None:
    from jupyter_ktune.tune.export import EXPORTERS
    from jupyter_ktune.tune.search import DEFAULT_STRATEGY, STRATEGIES

    p = sub.add_parser("tune", help="sweep the kernel's space (issue 7)")
    p.add_argument("file", type=Path)
    p.add_argument("--setup", type=Path, help="Python file defining inputs/reference")
    p.add_argument("--strategy", default=DEFAULT_STRATEGY, choices=sorted(STRATEGIES))
    p.add_argument("--budget", type=int, help="configs to evaluate (default: all)")
    p.add_argument("--store", type=Path, help="SQLite store (default ./.ktune.sqlite)")
    p.add_argument("--workers", type=int, help="device workers (default: one per GPU)")
    p.add_argument("--scheduler", help="a Dask scheduler address to fan out to")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--top-k", type=int, default=3, help="re-time this many at the end")
    p.add_argument("--retime", action="store_true", help="time again what the store has")
    p.add_argument("--export", choices=sorted(EXPORTERS), help="print the winner as this")
    p.add_argument("--out", type=Path, help="write the export here instead of stdout")
    p.add_argument("--quiet", action="store_true", help="no per-config progress lines")


def _tune(args: argparse.Namespace) -> int:
    from jupyter_ktune.tune import TuneOptions, tune

    spec = load_kernel_file(args.file, args.setup)

    def progress(p: Any) -> None:
        if not args.quiet:  # the re-timing counts its own steps, not the sweep's last one again
            step = (f"re-timing {p.retimed[0]}/{p.retimed[1]}" if p.stage == "final"
                    else f"{p.done}/{p.total}")
            print(f"[{step}] {p.result.config.label()}: {p.result.status.value}"
                  + (f" {p.result.median_ms * 1e3:.2f} us" if p.result.median_ms else "")
                  + (" (stored)" if p.cached else ""), file=sys.stderr)

    opts = TuneOptions(seed=args.seed, top_k=args.top_k, retime=args.retime)
    report = tune(spec, args.strategy, args.budget, args.store, args.workers, args.scheduler,
                  progress, options=opts)
    print(report.summary())
    if args.export:
        text = report.export(args.export)
        if args.out:
            args.out.write_text(text)
        else:
            print(text)
    return 0 if report.best is not None else 1


if __name__ == "__main__":
    sys.exit(main())
