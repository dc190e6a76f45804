"""ktune: the notebook's loop from a shell, for scripts and CI.

A kernel file is a %%kernel cell saved as a file: its first line is the magic line, written as
a comment ("// %%kernel scale --inputs inputs --reference reference --out y"), the rest is the
body. --setup FILE.py runs first and defines the functions the magic line names (inputs,
reference), like the notebook's earlier cells.

The exit code says what happened (0 only when what was asked for was done); see EXIT CODES.
"""

from __future__ import annotations

import argparse
import enum
import json
import re
import runpy
import sys
from pathlib import Path
from typing import Any

from jupyter_ktune import cli_compare
from jupyter_ktune.api import parse_cell
from jupyter_ktune.errors import KtuneError
from jupyter_ktune.results import RunResult, Status
from jupyter_ktune.spec import KernelSpec

_MAGIC = re.compile(r"^\s*(?://|#)?\s*%%kernel\s+(?P<line>.*)$")
_NEEDS_SETUP = "pass --setup FILE.py"  # the fix _NoSetup's functions name when they are called


class Exit(enum.IntEnum):
    """The exit codes of ``ktune``; :data:`EXIT_CODES` says each in words."""

    DONE = 0
    FAILED = 1
    USAGE = 2
    CANNOT_RUN = 3
    COMPILE_ERROR = 4


EXIT_CODES = """exit codes:
  0  done: the kernel ran and was verified (run), the static report was made (static),
     the table was printed (device), a winner was found (tune), a ratio with its CI
     came out (compare)
  1  the kernel failed: wrong result, runtime error, timeout, crash, out of resources,
     wrong architecture
  2  usage error: bad arguments, a missing file, a bad cell, a config its require lines refuse
  3  cannot run here: no device (or runtime) for this backend on this machine
  4  compile error"""

_STATUS_EXIT = {Status.OK: Exit.DONE, Status.CANNOT_RUN: Exit.CANNOT_RUN,
                Status.COMPILE_ERROR: Exit.COMPILE_ERROR, Status.NOT_ALLOWED: Exit.USAGE}

_EXAMPLES = {
    "run": """examples:
  ktune run scale.cu --setup inputs.py
  ktune run scale.cu --setup inputs.py --config BLOCK=256 --json result.json
  ktune run matmul.py --setup inputs.py --config BLOCK_M=64 --config num_warps=4""",
    "static": """examples:
  ktune static scale.cu                     # no GPU and no --setup needed for CUDA C++
  ktune static scale.cu --config BLOCK=512
  ktune static matmul.py --setup inputs.py  # Triton takes argument types from inputs()""",
    "device": """examples:
  ktune device""",
    "tune": """examples:
  ktune tune scale.cu --setup inputs.py
  ktune tune matmul.py --setup inputs.py --strategy greedy --budget 48 --export triton
  ktune tune scale.cu --setup inputs.py --store runs.sqlite --out best.h --export cpp""",
}


_OVERVIEW = """examples (ktune COMMAND --help says more):
  ktune run scale.cu --setup inputs.py --json result.json
  ktune static scale.cu
  ktune device
  ktune tune scale.cu --setup inputs.py --strategy greedy --budget 48 --export cpp
  ktune compare scale.cu --setup inputs.py --a BLOCK=128 --b BLOCK=256"""


class _NoSetup(dict):
    """Namespace for ``ktune static`` without ``--setup``: any named function exists, unused."""

    def __contains__(self, key: object) -> bool:
        return True

    def __missing__(self, key: str) -> Any:
        def unavailable(*args: Any, **kwargs: Any) -> Any:
            raise KtuneError(f"[ktune] {key} is not defined: {_NEEDS_SETUP}")
        return unavailable


def _read(path: Path, what: str) -> str:
    try:
        return path.read_text()
    except FileNotFoundError:
        raise KtuneError(f"[ktune] {path}: no such file. Give the path of {what}.") from None
    except (IsADirectoryError, PermissionError, UnicodeDecodeError) as exc:
        raise KtuneError(f"[ktune] {path}: cannot read it ({type(exc).__name__}). Give the "
                         f"path of {what}.") from None


def _setup_namespace(setup: Path) -> dict[str, Any]:
    _read(setup, "a Python file that defines inputs and reference")
    try:
        return runpy.run_path(str(setup))
    except Exception as exc:  # noqa: BLE001 - the user's file: say where it failed, in one line
        raise KtuneError(f"[ktune] --setup {setup} failed: {type(exc).__name__}: {exc}. "
                         "Fix that file (it runs like a notebook cell before the kernel).") \
            from None


def load_kernel_file(path: Path, setup: Path | None, extra_line: str = "") -> KernelSpec:
    """Parse a saved ``%%kernel`` cell; ``setup`` provides the namespace (inputs, reference)."""
    text = _read(path, "a %%kernel cell saved as a file (its first line the magic line)")
    first, _, body = text.partition("\n")
    m = _MAGIC.match(first)
    if m is None:
        raise KtuneError(f"[ktune] {path}: line 1 must be the magic line, e.g. "
                         "'// %%kernel scale --inputs inputs --reference reference --out y'")
    namespace: dict[str, Any] = _setup_namespace(setup) if setup else _NoSetup()
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


def _parser() -> argparse.ArgumentParser:
    fmt = argparse.RawDescriptionHelpFormatter
    ap = argparse.ArgumentParser(prog="ktune", description="\n\n".join(__doc__.split("\n\n")[:2]),
                                 epilog=f"{_OVERVIEW}\n\n{EXIT_CODES}",
                                 formatter_class=fmt)
    sub = ap.add_subparsers(dest="cmd", required=True, metavar="COMMAND")
    helps = {"run": "compile, verify against the reference and time one variant",
             "static": "the compiler's static report (registers, shared memory, spills, "
                       "occupancy, SASS mix); no GPU needed"}
    for name, text in helps.items():
        p = sub.add_parser(name, help=text, description=text[0].upper() + text[1:] + ".",
                           epilog=f"{_EXAMPLES[name]}\n\n{EXIT_CODES}", formatter_class=fmt)
        p.add_argument("file", type=Path, help="a %%%%kernel cell saved as a file")
        p.add_argument("--setup", type=Path, metavar="FILE.py",
                       help="Python file defining inputs/reference")
        p.add_argument("--config", action="append", default=[], metavar="NAME=VALUE",
                       help="a tunable's value (repeat for several)")
        p.add_argument("--json", type=Path, help="also write the result as JSON here")
    text = "a table of every backend and what it can do on this machine"
    sub.add_parser("device", help=text, description=text[0].upper() + text[1:] + ".",
                   epilog=f"{_EXAMPLES['device']}\n\n{EXIT_CODES}", formatter_class=fmt)
    _tune_parser(sub, fmt)
    cli_compare.add_parser(sub, fmt, EXIT_CODES)
    return ap


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``ktune`` command; returns the process exit code (see :class:`Exit`)."""
    args = _parser().parse_args(argv)  # a usage error exits 2 here, as argparse does
    try:
        if args.cmd == "tune":
            return _tune(args)
        if args.cmd == "device":
            return _device()
        if args.cmd == "compare":
            return cli_compare.run(args, load_kernel_file)
        extra = _config_args(args.config) + (" --static-only" if args.cmd == "static" else "")
        spec = load_kernel_file(args.file, args.setup, extra)
        from jupyter_ktune.api import run_kernel

        result = run_kernel(spec)
    except KtuneError as exc:
        print(str(exc).splitlines()[0] if str(exc) else type(exc).__name__, file=sys.stderr)
        return Exit.USAGE
    if args.json:
        args.json.write_text(json.dumps(_result_json(result), indent=1, default=str))
    return _static_out(result) if args.cmd == "static" else _run_out(result)


def _static_text(result: RunResult) -> str:
    from jupyter_ktune.measure.static import StaticReport
    from jupyter_ktune.measure.static_text import report_text

    static = result.static
    return report_text(static) if isinstance(static, StaticReport) else repr(static)


def _run_out(result: RunResult) -> int:
    print(repr(result))
    if result.static is not None:
        print(_static_text(result))
    return _STATUS_EXIT.get(result.status, Exit.FAILED)


def _static_out(result: RunResult) -> int:
    """``ktune static``: the report, or one line saying why there is none."""
    if result.static is not None:
        print(_static_text(result))
        return Exit.DONE
    if result.status is Status.COMPILE_ERROR:
        print(result.reason, file=sys.stderr)
        return Exit.COMPILE_ERROR
    if _NEEDS_SETUP in result.reason:
        print(f"[ktune] the {result.backend} static report needs the kernel's argument types "
              f"from inputs(): {_NEEDS_SETUP} (the file that defines inputs)", file=sys.stderr)
        return Exit.USAGE
    print(f"[ktune] no static report for --backend {result.backend} here: {result.reason}",
          file=sys.stderr)
    return Exit.CANNOT_RUN


def _device() -> int:
    from jupyter_ktune.backends import backend_names
    from jupyter_ktune.capabilities import capabilities, table
    from jupyter_ktune.runner.client import get_worker

    worker = get_worker()
    print(table([capabilities(name, worker.device(name)) for name in backend_names()]))
    return Exit.DONE


def _tune_parser(sub: Any, fmt: type[argparse.HelpFormatter]) -> None:
    from jupyter_ktune.tuning.export import EXPORTERS
    from jupyter_ktune.tuning.search import DEFAULT_STRATEGY, STRATEGIES

    text = "sweep the kernel's space, re-time the best and say whether the winner is faster"
    p = sub.add_parser("tune", help=text, description=text[0].upper() + text[1:] + ".",
                       epilog=f"{_EXAMPLES['tune']}\n\n{EXIT_CODES}", formatter_class=fmt)
    p.add_argument("file", type=Path, help="a %%%%kernel cell saved as a file")
    p.add_argument("--setup", type=Path, metavar="FILE.py",
                   help="Python file defining inputs/reference")
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
    from jupyter_ktune.tuning import TuneOptions, tune

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
    if report.best is None:  # say why nothing won: the same status everywhere names the cause
        seen = {e.result.status for e in report.evaluations}
        return _STATUS_EXIT.get(seen.pop(), Exit.FAILED) if len(seen) == 1 else Exit.FAILED
    if args.export:
        text = report.export(args.export)
        if args.out:
            args.out.write_text(text)
        else:
            print(text)
    return Exit.DONE


if __name__ == "__main__":
    sys.exit(main())
