"""The ``%%kernel`` cell magic: a thin layer that parses the cell and shows the result.

All work happens in :mod:`jupyter_ktune.api` and the device worker; this module only knows
IPython. Cell errors are shown as a one-line message (IPython's UsageError), not a traceback.
"""

from __future__ import annotations

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, magics_class, no_var_expand

from jupyter_ktune.api import run_kernel
from jupyter_ktune.errors import KtuneError
from jupyter_ktune.results import RunResult
from jupyter_ktune.spec import parse_cell


@magics_class
class KtuneMagics(Magics):
    """Registers ``%%kernel``."""

    @no_var_expand
    @cell_magic
    def kernel(self, line: str, cell: str) -> RunResult:
        """Compile, verify and time the kernel in this cell; returns a RunResult.

        ``%%kernel NAME --backend cuda --inputs FN --reference FN --out y [--param P=v1,v2]
        [--config P=v] [--grid EXPR] [--block EXPR] [--smem EXPR] [--flops EXPR] [--bytes EXPR]
        [--warm-cache] [--budget-ms MS] [--timeout S] [--arch sm_90] [--rtol R] [--atol A]
        [--no-verify] [--static-only]``. The body may declare the space with
        ``// ktune: BLOCK in [64, 128]; grid = cdiv(n, BLOCK)``.
        """
        try:
            spec = parse_cell(line, cell, self.shell.user_ns)
            return run_kernel(spec)
        except KtuneError as exc:
            raise UsageError(str(exc)) from None
