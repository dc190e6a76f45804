"""``ktune``: the notebook's loop from a shell, for scripts and CI.

A kernel file is a ``%%kernel`` cell saved as a file: its first line is the magic line, written
as a comment (``// %%kernel scale --inputs inputs --reference reference --out y``), the rest is
the body. ``--setup FILE.py`` is executed first and provides the functions the magic line names,
like the notebook's earlier cells.

    ktune run kernel.cu --setup inputs.py [--config BLOCK=256] [--json out.json]
    ktune static kernel.cu [--config BLOCK=256]        # no GPU needed
    ktune device                                        # what the worker sees
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
    args = ap.parse_args(argv)
    try:
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


if __name__ == "__main__":
    sys.exit(main())
