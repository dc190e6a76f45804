"""``ktune compare``: two configs of one kernel from interleaved re-runs, as ``panel.compare``.

Prints the ratio median(B) / median(A) with its 95 % CI, the method (host time said as such),
and the static and per-line differences; ``--json`` writes :meth:`Comparison.to_dict`.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from jupyter_ktune.errors import KtuneError
from jupyter_ktune.measure.compare import Comparison
from jupyter_ktune.status import Status

EXAMPLES = """examples:
  ktune compare scale.cu --setup inputs.py --a BLOCK=128 --b BLOCK=256
  ktune compare matmul.py --setup inputs.py --a BLOCK_M=64 --b BLOCK_M=128 --rounds 20 \\
      --json compare.json"""


def add_parser(sub: Any, fmt: type[argparse.HelpFormatter], exit_codes: str) -> None:
    """Register the ``compare`` command."""
    text = ("compare two configs from interleaved re-runs: the ratio of their medians with a "
            "95%% CI, and what changed in the static report")
    p = sub.add_parser("compare", help=text, description=text[0].upper() + text[1:] + ".",
                       epilog=f"{EXAMPLES}\n\n{exit_codes}", formatter_class=fmt)
    p.add_argument("file", type=Path, help="a %%%%kernel cell saved as a file")
    p.add_argument("--setup", type=Path, metavar="FILE.py",
                   help="Python file defining inputs/reference")
    for side, what in (("a", "A, the baseline"), ("b", "B, compared with A")):
        p.add_argument(f"--{side}", action="append", default=[], metavar="NAME=VALUE",
                       help=f"a tunable's value in config {what} (repeat for several; "
                            "the others as for ktune run)")
    p.add_argument("--rounds", type=int, default=None,
                   help="interleaved rounds of each config (default 10)")
    p.add_argument("--json", type=Path, help="also write the comparison as JSON here")


def _values(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep:
            raise KtuneError(f"[ktune] {item}: write NAME=VALUE, e.g. BLOCK=128")
        out[name.strip()] = value.strip()
    return out


def describe(c: Comparison) -> str:
    """The comparison as text: the ratio line, the method, then what changed."""
    lines = [f"A: {', '.join(f'{k}={v}' for k, v in c.a.items())}",
             f"B: {', '.join(f'{k}={v}' for k, v in c.b.items())}", c.text()]
    if c.ratio is not None:
        lines.append(f"method: {c.method}")
    changed = {k: v for k, v in c.static_diff.items() if v[2] != 0}
    if changed:
        lines.append("static differences (A -> B):")
        lines += [f"  {k}: {a} -> {b} ({d:+g})" for k, (a, b, d) in changed.items()]
    elif c.static_diff:
        lines.append("static reports: no difference")
    else:
        lines.append(f"static reports: {c.static_note or 'none'}")
    lines.append(f"per-line stalls: {len(c.lines_diff)} lines differ" if c.lines_diff
                 else f"per-line stalls: {c.lines_note}")
    return "\n".join(lines)


def run(args: argparse.Namespace, load: Callable[[Path, Path | None], Any]) -> int:
    """``ktune compare``: 0 when a ratio came out; else the code of the first config's failure
    (3 cannot run here, 4 compile error, 1 otherwise); 2 on bad arguments."""
    from jupyter_ktune.api import choose_config
    from jupyter_ktune.backends import get_backend
    from jupyter_ktune.runner.client import get_worker
    from jupyter_ktune.tuning.compare import compare_configs

    try:
        spec = load(args.file, args.setup)
        get_backend(spec.backend).check(spec)
        worker = get_worker()
        worker.device(spec.backend)
        limits = worker.limits(spec)
        a = choose_config(spec, _values(args.a), limits)
        b = choose_config(spec, _values(args.b), limits)
        kw = {} if args.rounds is None else {"rounds": args.rounds}
        c = compare_configs(spec, worker, a, b, **kw)
    except (KtuneError, ValueError) as exc:
        print(str(exc).splitlines()[0] if str(exc) else type(exc).__name__, file=sys.stderr)
        return 2
    print(describe(c))
    if args.json:
        args.json.write_text(json.dumps(c.to_dict(), indent=1, default=str))
    if c.ratio is not None:
        return 0
    codes = {Status.CANNOT_RUN.value: 3, Status.COMPILE_ERROR.value: 4}
    return next((code for text, code in codes.items() if f" is {text}" in c.reason), 1)
