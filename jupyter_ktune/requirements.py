"""Optional dependencies: what each one is for, and the one command that adds it.

A backend whose runtime is missing does not fail as a compile error on cell line 1 (the import
in the cell's prelude): the variant "cannot run here", and the reason names what is missing and
the exact command that adds it, e.g. ``cannot run here · [ktune] the Triton backend needs
triton, which is not installed. Add it: python -m pip install triton``. The backends call
:func:`missing_dependency` (or :func:`require`, or :func:`missing_reason` for a DeviceInfo)
where they import their runtime, so every message comes from this one table (issue 16).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType

from jupyter_ktune.errors import PREFIX, CannotRun


@dataclass(frozen=True)
class Requirement:
    """One optional module: its import name, what needs it, and the command that installs it."""

    module: str
    needed_for: str
    command: str
    note: str = ""


# torch: PyPI's Linux wheel is a multi-GB CUDA build, right for a GPU machine; a machine without
# a GPU wants PyTorch's CPU build, which the README's install command gets first.
REQUIREMENTS: dict[str, Requirement] = {r.module: r for r in (
    Requirement("triton", "the Triton backend", "python -m pip install triton",
                "Triton publishes Linux wheels only"),
    Requirement("torch", "the Triton backend (its interpreter and its GPU launches)",
                "python -m pip install torch",
                "without a GPU, install PyTorch's CPU build instead, as the README's install "
                "command does"),
    Requirement("jax", "the Pallas backend", "python -m pip install jax",
                'on an NVIDIA GPU: python -m pip install "jax[cuda13]"'),
    Requirement("cupy", "CUDA C++ on a GPU",
                'python -m pip install "jupyter_ktune[cuda]"'),
    Requirement("ml_dtypes", "bfloat16 and fp8 inputs", "python -m pip install ml_dtypes"),
    Requirement("optuna", "the TPE strategy", 'python -m pip install "jupyter_ktune[sweep]"'),
    Requirement("dask", "sweeps on a Dask cluster", 'python -m pip install "jupyter_ktune[sweep]"'),
    Requirement("ncu_report", "reading Nsight Compute reports", "python -m pip install ncu-report"),
)}


def install_hint(module: str) -> str:
    """Return the sentence that says how to add ``module`` (a plain pip command if unknown).

    Examples
    --------
    >>> install_hint("triton")
    'Add it: python -m pip install triton (Triton publishes Linux wheels only).'
    """
    top = module.partition(".")[0]
    req = REQUIREMENTS.get(top)
    if req is None:
        return f"Add it: python -m pip install {top}."
    return f"Add it: {req.command}" + (f" ({req.note})." if req.note else ".")


def missing_reason(module: str, needed_for: str | None = None) -> str:
    """Return why a variant cannot run when ``module`` is missing: what needs it and the fix.

    This is a DeviceInfo's ``reason``; the status "cannot run here" is shown beside it.

    Parameters
    ----------
    module
        Import name of the missing module (``"triton"``, ``"torch"``, ``"jax"``, ``"cupy"``);
        a submodule (``"jax.experimental"``) names its package.
    needed_for
        What needs it, when the table's wording does not fit the caller.

    Examples
    --------
    >>> missing_reason("jax")  # doctest: +NORMALIZE_WHITESPACE
    'the Pallas backend needs jax, which is not installed.
    Add it: python -m pip install jax (on an NVIDIA GPU: python -m pip install "jax[cuda13]").'
    """
    top = module.partition(".")[0]
    req = REQUIREMENTS.get(top)
    what = needed_for or (req.needed_for if req else "this cell")
    return f"{what} needs {top}, which is not installed. {install_hint(top)}"


def missing_dependency(module: str, needed_for: str | None = None) -> CannotRun:
    """Return the error a backend raises for a missing module: "cannot run here", and why.

    ``execute.run_variant`` turns a CannotRun from ``compile`` into the "cannot run here" status
    with this message as the reason (see :func:`missing_reason` for the parameters).

    Examples
    --------
    >>> raise missing_dependency("triton")  # doctest: +SKIP
    CannotRun: [ktune] the Triton backend needs triton, which is not installed. Add it: ...
    """
    return CannotRun(f"{PREFIX} {missing_reason(module, needed_for)}")


def missing_from(exc: BaseException) -> CannotRun | None:
    """Turn ``ModuleNotFoundError: No module named 'triton'`` into :func:`missing_dependency`.

    Returns None for any other exception and for a module this table does not know (a typo in
    the cell's own imports stays the cell's error, on its line).
    """
    if not isinstance(exc, ModuleNotFoundError) or not exc.name:
        return None
    top = exc.name.partition(".")[0]
    return missing_dependency(top) if top in REQUIREMENTS else None


def require(module: str, needed_for: str | None = None) -> ModuleType:
    """Import ``module`` or raise :func:`missing_dependency` (a CannotRun, not a compile error).

    Examples
    --------
    >>> require("numpy").__name__
    'numpy'
    """
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name and module.startswith(exc.name.partition(".")[0]):
            raise missing_dependency(module, needed_for) from None
        raise
