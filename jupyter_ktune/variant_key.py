"""Cache keys for what the worker keeps between requests: compiled variants, checked input sets.

A key must cover everything that changes what it caches. Keyed on the source alone, a cell rerun
with ``--out y`` corrected to ``--out out`` kept binding the old outputs (``KeyError: 'y'``)
until the worker restarted (issue 15). The worker (``runner.execute``) and backends that cache
built variants themselves (Pallas) take their keys from here.
"""

from __future__ import annotations

import dataclasses
import hashlib

from jupyter_ktune.problem_key import function_identity
from jupyter_ktune.space import Config
from jupyter_ktune.spec import KernelSpec

# Fields that change only what is measured or reported, never what is compiled or bound.
NOT_COMPILED = frozenset({"flops", "bytes", "initial", "options"})


def variant_key(spec: KernelSpec, config: Config) -> tuple[str, Config]:
    """Return the key of one compiled, bindable variant: every spec field but those measured only.

    A field added to KernelSpec later is in the key unless listed in ``NOT_COMPILED``; of the
    options only the target architecture counts.
    """
    parts = [spec.options.arch]
    for f in dataclasses.fields(spec):
        if f.name not in NOT_COMPILED:
            value = getattr(spec, f.name)
            parts.append(f"{f.name}={function_identity(value) if callable(value) else repr(value)}")
    digest = hashlib.sha256("\0".join(parts).encode(errors="surrogatepass")).hexdigest()
    return digest[:32], config
