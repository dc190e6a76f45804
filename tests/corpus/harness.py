"""One corpus entry: where its kernel lives, what we add around it, and how it fared.

A cell is assembled as a user would paste it: the ``%%kernel`` line and ``# ktune:``
directives (ours), setup lines such as ``using namespace cutlass;`` (ours, counted apart),
the kernel with the helpers and imports it needs, copied verbatim from the installed
package, and, for Pallas, the factory the cell contract asks for (ours). ``patches`` are
edits to the copied source that today's ktune needs; their size is the "lines changed"
column of docs/corpus.md, with 0 as the target.
"""

from __future__ import annotations

import difflib
import re
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from corpus import source

PASS = "pass"


@dataclass(frozen=True)
class Entry:
    """A published kernel and the ktune-side setup written by us."""

    id: str
    backend: str  # triton | pallas | cuda
    dist: str  # the PyPI distribution that ships it
    ref: str  # "package.module:function", or "top/path/file.h:function" for CUDA
    construct: str  # what it exercises (a docs column)
    inputs: Callable[..., Mapping[str, Any]]
    reference: Callable[..., Any]
    line: str  # magic-line flags after --backend, e.g. "--out y"
    directives: str = ""  # "# ktune: ..." lines, ours
    take: tuple[str, ...] = ()  # more names copied verbatim (helpers, config lists, imports)
    setup: str = ""  # our lines between the directives and the copied source
    wrapper: str = ""  # our code after the copied source (the Pallas factory)
    patches: tuple[tuple[str, str], ...] = ()  # (old, new) edits of the copied source

    @property
    def kernel(self) -> str:
        """The launched symbol (the magic line's kernel name)."""
        return self.ref.rpartition(":")[2]

    @property
    def name(self) -> str:
        """The name on the magic line: the kernel, or the Pallas factory when there is one."""
        return self.id.replace("-", "_") if self.wrapper else self.kernel

    def copied(self) -> str:
        """The package's source for this kernel, as shipped."""
        where, _, kernel = self.ref.rpartition(":")
        if "/" in where:
            return source.cuda_segments(source.resource_file(where), (*self.take, kernel))
        return source.python_segments(source.module_file(where), (*self.take, kernel))

    def cell(self) -> tuple[str, str, int]:
        """(magic line without ``%%kernel``, body, lines changed in the copied source)."""
        original = self.copied()
        edited = original
        for old, new in self.patches:
            if old not in edited:
                raise LookupError(f"{self.id}: patch target not in the package source: {old!r}")
            edited = edited.replace(old, new)
        ops = difflib.SequenceMatcher(None, original.splitlines(), edited.splitlines())
        changed = sum(max(i2 - i1, j2 - j1) for tag, i1, i2, j1, j2 in ops.get_opcodes()
                      if tag != "equal")
        setup = self.setup
        if self.backend == "cuda" and source.IMPORTS in self.take and setup:
            head, _, tail = edited.partition("\n\n")  # C++ setup goes after the #includes
            edited, setup = f"{head}\n{setup}\n\n{tail}", ""
        parts = [p.strip("\n") for p in (self.directives, setup, edited, self.wrapper)]
        body = "\n".join(p for p in parts if p) + "\n"
        return f"{self.name} --backend {self.backend} {self.line}", body, changed

    def ours(self) -> int:
        """Lines written by us: magic line, directives, setup and wrapper."""
        return 1 + sum(len([ln for ln in p.splitlines() if ln.strip()])
                       for p in (self.directives, self.setup, self.wrapper))


@dataclass
class Outcome:
    """What one entry did: ``status`` is ``pass`` or the failure's kind."""

    id: str
    status: str
    reason: str = ""
    error: str = ""
    changed: int = 0
    ours: int = 0
    version: str = ""
    as_written: str = ""  # status and reason before the workarounds below
    workarounds: list[str] = field(default_factory=list)  # directive lines we had to add
    detail: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return self.status == PASS


def _first_line(text: str) -> str:
    return next((ln.strip() for ln in str(text).splitlines() if ln.strip()), "")


def _judge(entry: Entry, result: Any) -> tuple[str, str, str]:
    """(status, reason, error) of a RunResult: verified, or statically compiled for CUDA."""
    from jupyter_ktune.results import Status

    diags = "; ".join(str(getattr(d, "message", d)) for d in result.diagnostics)
    error = (result.reason + ("\n" + diags if diags else "")).strip()
    if result.status is Status.OK:
        ok = result.verification is None or result.verification.passed
        return (PASS, "verified", "") if ok else ("wrong result", "not verified", error)
    if (result.status is Status.CANNOT_RUN and entry.backend == "cuda"
            and result.static is not None and result.static.kernels):
        return PASS, "sm_90 static compile (no GPU here)", ""
    return result.status.value, _first_line(result.reason) or _first_line(diags), error


_NO_VALUE = re.compile(r"constexpr parameter (\w+) of \w+ has no value")


def _one_value_tunable(out: Outcome, entry: Entry) -> str | None:
    """Today's workaround for a constexpr that ``inputs()`` gives: a one-value tunable."""
    m = _NO_VALUE.search(out.reason)
    if m is None:
        return None
    value = entry.inputs().get(m.group(1))
    if value is None:
        return None
    return f"# ktune: {m.group(1)} in [{int(value)}]"


def _run_once(entry: Entry, line: str, body: str, worker: Any, out: Outcome) -> None:
    from jupyter_ktune.api import parse_cell, run_kernel
    from jupyter_ktune.errors import KtuneError

    namespace = {"inputs": entry.inputs, "reference": entry.reference}
    try:
        result = run_kernel(parse_cell(line, body, namespace), worker=worker)
    except KtuneError as exc:  # a one-line cell error: what the user would see
        out.status, out.reason, out.error = "cell error", _first_line(exc), str(exc)
        return
    except Exception as exc:  # noqa: BLE001 - an internal error is a finding, not a crash
        out.status, out.reason = "internal error", f"{type(exc).__name__}: {_first_line(exc)}"
        out.error = "".join(traceback.format_exception(exc))[-3000:]
        return
    out.status, out.reason, out.error = _judge(entry, result)
    out.detail = {"config": dict(result.config), "device": result.device,
                  "median_ms": result.median_ms,
                  "method": result.measurement.timing.method if result.measurement else ""}


def run_entry(entry: Entry, worker: Any, workarounds: bool = True) -> Outcome:
    """Build the cell from the installed package and run it through ``run_kernel``.

    With ``workarounds``, a constexpr that today needs a one-value tunable gets one (a
    directive, never an edit of the kernel) and the cell is run again, so one missing feature
    does not hide the next failure; ``as_written`` keeps the first answer.
    """
    try:
        version = source.version(entry.dist)
        line, body, changed = entry.cell()
    except source.NotInstalled as exc:
        return Outcome(entry.id, "not installed", f"pip install {entry.dist}", str(exc))
    out = Outcome(entry.id, "", changed=changed, ours=entry.ours(), version=version)
    for _ in range(16):
        _run_once(entry, line, body, worker, out)
        out.as_written = out.as_written or f"{out.status}: {out.reason}"
        if not workarounds:
            return out
        if "'triton' in '" in out.reason and "triton.cdiv(" in body:  # directives know cdiv
            out.workarounds.append("grid: triton.cdiv -> cdiv")
            body = body.replace("grid = (triton.cdiv(", "grid = (cdiv(")
            continue
        extra = _one_value_tunable(out, entry)
        if extra is None:
            return out
        out.workarounds.append(extra)
        body = extra + "\n" + body
    return out
