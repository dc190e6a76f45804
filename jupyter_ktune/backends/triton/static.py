"""Triton ahead of time: argument types, an sm_90 compile without a GPU, and the static report.

``triton.compile(ASTSource(fn, signature, constexprs, attrs), target=GPUTarget("cuda", 90, 32))``
runs Triton's whole pipeline (TTIR -> TTGIR -> LLVM -> PTX -> ptxas cubin) with no device, in
Triton 3.6 and 3.9 alike. Registers and local memory come from ``cuobjdump -res-usage`` on that
cubin (the ``n_regs`` of a CompiledKernel is only filled in when a driver loads it), shared memory
from the kernel's metadata, and the SASS mix from :func:`jupyter_ktune.measure.sass.sass_mix`.

Compile errors (:class:`triton.compiler.errors.CompilationError`) carry the AST node of the
failing statement, with a line number relative to the ``def`` of the function whose source they
hold; :func:`compile_diagnostics` maps them to cell lines, innermost helper first.
"""

from __future__ import annotations

import os
import pickle
import re
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from jupyter_ktune.backends.triton.given import not_an_argument
from jupyter_ktune.backends.triton.interpreter import asks_for_target, install_target_driver
from jupyter_ktune.backends.triton.jit_warm import (
    COMPILE_ONLY_ENV,
    WarmUnavailable,
    arch_number,
    warm_compile,
)
from jupyter_ktune.errors import CellError, CompileFailure, Diagnostic
from jupyter_ktune.toolchain import ToolNotFound, find_tool

# NumPy / ml_dtypes / torch dtype names -> Triton's type names in a signature.
TRITON_TYPES: dict[str, str] = {
    "float32": "fp32", "float16": "fp16", "bfloat16": "bf16", "float64": "fp64",
    "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64", "uint8": "u8",
    "uint16": "u16", "uint32": "u32", "uint64": "u64", "bool": "i1",
    "float8_e4m3fn": "fp8e4nv", "float8_e5m2": "fp8e5",
}
_RES = re.compile(r"Function (?P<name>\S+):\s*\n\s*REG:(?P<reg>\d+) STACK:(?P<stack>\d+) "
                  r"SHARED:(?P<shared>\d+) LOCAL:(?P<local>\d+)")


def dtype_name(value: Any) -> str:
    """``float32``, ``bfloat16`` ... for a NumPy array or a torch tensor."""
    return str(value.dtype).removeprefix("torch.")


def arg_type(name: str, value: Any) -> str:
    """Triton signature type of one kernel argument, as the JIT would infer it.

    Arrays and tensors become pointers (``*bf16``), Python ints ``i32`` (``i64`` beyond its range),
    floats ``fp32``, NumPy scalars their own type.
    """
    if hasattr(value, "dtype") and getattr(value, "ndim", 0) > 0:
        t = TRITON_TYPES.get(dtype_name(value))
        if t is None:
            raise CellError(f"input {name} has dtype {dtype_name(value)}, which Triton "
                            "kernels cannot take", line=1,
                            fix=f"Return it as one of {', '.join(TRITON_TYPES)}.")
        return "*" + t
    if isinstance(value, bool | np.bool_):
        return "i1"
    if isinstance(value, int):
        return "i32" if -(2**31) <= value < 2**31 else "i64"
    if isinstance(value, float):
        return "fp32"
    if isinstance(value, np.generic):
        return TRITON_TYPES.get(value.dtype.name, "fp32")
    raise not_an_argument(name, value)


def divisible(value: Any) -> bool:
    """Whether the JIT would mark the argument 16-divisible (aligned pointers, ints % 16 == 0)."""
    if hasattr(value, "dtype") and getattr(value, "ndim", 0) > 0:
        return True  # NumPy and torch allocations are at least 16-byte aligned
    return isinstance(value, int | np.integer) and not isinstance(value, bool) and value % 16 == 0


@dataclass(frozen=True)
class AotKernel:
    """What the static report needs from Triton's CompiledKernel (picklable, version-neutral)."""

    name: str
    shared: int
    num_warps: int
    asm: Mapping[str, Any]
    triton_version: str


@dataclass(frozen=True)
class AotRequest:
    """An ahead-of-time compile of one kernel of a cell module file."""

    module_path: str
    kernel: str
    types: Mapping[str, str]
    constexprs: Mapping[str, Any]
    aligned: frozenset[str]
    options: Mapping[str, int]
    arch: str
    def_lines: Mapping[str, int]
    #: The launch's keyword arguments (arrays as ArrayPlaceholder), built like the worker's
    #: (:func:`..launch.call_arguments`): then the compile goes through the JIT's own path and
    #: lands in Triton's cache under the key the worker's first launch looks up.
    launch: Mapping[str, Any] | None = None

    def _kernel(self) -> Any:
        """The cell's kernel object, from its module (imported once per process)."""
        import importlib.util

        name = Path(self.module_path).stem
        module = sys.modules.get(name)
        if module is None:
            spec = importlib.util.spec_from_file_location(name, self.module_path)
            module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
            sys.modules[name] = module
            if asks_for_target(Path(self.module_path).read_text()):  # no GPU in this child
                install_target_driver(self.arch)
            spec.loader.exec_module(module)  # type: ignore[union-attr]
        return getattr(module, self.kernel)

    def launcher_ahead(self) -> tuple[bool, float]:
        """Build this kernel's host launcher without compiling it (:mod:`.launcher_ahead`)."""
        from jupyter_ktune.backends.triton.launcher_ahead import build_ahead

        if self.launch is None:
            return False, 0.0
        return build_ahead(self._kernel(), self.launch, self.arch)

    def run(self) -> AotKernel | CompileFailure:
        """Compile here; in a process that imported triton for its interpreter, use
        :func:`run_in_subprocess` instead (the interpreter swaps triton.language's own jit
        helpers such as ``tl.cdiv`` for interpreted ones, which the compiler cannot lower).
        """
        import triton

        fn = self._kernel()
        try:
            if self.launch is None:
                raise WarmUnavailable("no launch arguments")
            ck = warm_compile(fn, self.launch, self.arch)
        except WarmUnavailable:
            try:
                ck = aot_compile(fn, self.types, self.constexprs, set(self.aligned),
                                 self.options, self.arch)
            except Exception as exc:  # noqa: BLE001 - any compile error is the cell's
                return failure(exc, self.def_lines)
        except Exception as exc:  # noqa: BLE001 - any compile error is the cell's
            return failure(exc, self.def_lines)
        return AotKernel(ck.metadata.name, int(ck.metadata.shared), int(ck.metadata.num_warps),
                         {k: ck.asm[k] for k in ("ptx", "cubin")}, triton.__version__)


def run_in_subprocess(request: AotRequest, timeout_s: float = 600) -> AotKernel | CompileFailure:
    """Run ``request`` in a fresh interpreter without ``TRITON_INTERPRET``."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run([sys.executable, "-m", __name__], input=pickle.dumps(request),
                          capture_output=True, timeout=timeout_s, env=env, check=False)
    if proc.returncode != 0:
        log = proc.stderr.decode(errors="replace")
        last = next((ln for ln in reversed(log.splitlines()) if ln.strip()), "no output")
        return CompileFailure("triton (AOT)", log, [Diagnostic(None, "error", last.strip())])
    return pickle.loads(proc.stdout)  # noqa: S301 - our own child's reply


def aot_compile(fn: Any, types: Mapping[str, str], constexprs: Mapping[str, Any],
                aligned: set[str], options: Mapping[str, int], arch: str) -> Any:
    """Compile ``fn`` for ``arch`` (``sm_90``) with no GPU; returns Triton's CompiledKernel.

    ``types`` maps every runtime parameter to its Triton type, ``constexprs`` every constexpr
    parameter to its value, ``aligned`` names the 16-divisible arguments.
    """
    import inspect

    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from triton.runtime.jit import JITFunction

    while not inspect.isfunction(getattr(fn, "fn", None)):  # @autotune / @heuristics / libs'
        fn = fn.fn
    if not isinstance(fn, JITFunction):  # the interpreter wraps the function; compile the source
        fn = JITFunction(fn.fn)
    constexprs = {**{p: None for p, t in types.items() if t == "constexpr"}, **constexprs}
    signature = {p: ("constexpr" if p in constexprs else types[p]) for p in fn.arg_names}
    attrs = {(i,): [["tt.divisibility", 16]] for i, p in enumerate(fn.arg_names) if p in aligned}
    src = ASTSource(fn, signature, dict(constexprs), attrs)
    return triton.compile(src, target=GPUTarget("cuda", arch_number(arch), 32),
                          options=dict(options))


def compile_diagnostics(exc: BaseException, def_lines: Mapping[str, int]) -> list[Diagnostic]:
    """Cell-line diagnostics for a Triton CompilationError chain, innermost error first.

    ``def_lines`` maps each function of the cell to the cell line of its ``def``.
    """
    from triton.compiler.errors import CompilationError

    chain, seen = [], set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, CompilationError):
            chain.append(cur)
        cur = cur.__cause__ or cur.__context__
    out = []
    for i, err in enumerate(reversed(chain)):
        m = re.search(r"^def\s+(\w+)", err.src or "", re.M)
        node_line = getattr(err.node, "lineno", None)
        line = None
        if m and m[1] in def_lines and node_line is not None:
            line = def_lines[m[1]] + node_line - 1
        text = (err.error_message or "").strip() or _root_cause(err)
        out.append(Diagnostic(line=line, severity="error" if i == 0 else "note",
                              message=text if i == 0 else f"called from here: {text}",
                              column=getattr(err.node, "col_offset", None)))
    return out


def _root_cause(err: BaseException) -> str:
    cur = err
    while cur.__cause__ is not None:
        cur = cur.__cause__
    return f"{type(cur).__name__}: {cur}".splitlines()[0] if cur is not err else "compile error"


def resource_usage(cubin: bytes) -> dict[str, dict[str, int]]:
    """Read per-function REG/STACK/SHARED/LOCAL from ``cuobjdump -res-usage`` (the cubin's)."""
    with tempfile.TemporaryDirectory(prefix="ktune-triton-") as tmp:
        path = Path(tmp) / "kernel.cubin"
        path.write_bytes(cubin)
        proc = subprocess.run([str(find_tool("cuobjdump")), "-res-usage", str(path)],
                              capture_output=True, text=True, timeout=120, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"[ktune] cuobjdump -res-usage failed: {proc.stderr.strip()}")
    return {m["name"]: {k: int(m[k]) for k in ("reg", "stack", "shared", "local")}
            for m in _RES.finditer(proc.stdout)}


def static_report(compiled: AotKernel, arch: str, threads_per_block: int) -> Any:
    """Build a :class:`~jupyter_ktune.measure.static.StaticReport` from a CompiledKernel."""
    from jupyter_ktune.measure.static import (
        SASS_SKIPPED,
        KernelStatic,
        StaticReport,
        in_sweep_pool,
        sass_mix,
    )

    cubin = compiled.asm["cubin"]
    name = compiled.name
    versions = {"triton": compiled.triton_version, "ptxas": "bundled with triton"}
    mixes, sass_error = {}, ""
    try:
        usage = resource_usage(cubin).get(name, {})
        if in_sweep_pool():
            sass_error = SASS_SKIPPED
        else:
            mixes = sass_mix(cubin)
            versions["disassembler"] = "cuobjdump"
    except (ToolNotFound, RuntimeError, subprocess.TimeoutExpired) as exc:
        usage, sass_error = {}, str(exc)
    local = usage.get("local", 0)
    spills = _ptxas_spills(compiled.asm.get("ptx", ""), arch) if local else (0, 0)
    kernel = KernelStatic(
        name=name, demangled=name, registers=usage.get("reg", 0),
        smem_static=compiled.shared + usage.get("shared", 0),
        spill_stores=spills[0], spill_loads=spills[1], stack_frame=usage.get("stack", 0),
        local_memory=local, barriers=0, sass=mixes.get(name))
    return StaticReport(arch=arch, versions=versions, kernels={name: kernel},
                        threads_per_block=threads_per_block, sass_error=sass_error, cubin=cubin)


def _ptxas_spills(ptx: str, arch: str) -> tuple[int, int]:
    """Spill store/load bytes from ``ptxas -v`` on Triton's PTX (only run when LOCAL > 0)."""
    from jupyter_ktune.measure.static import parse_ptxas_verbose

    try:
        ptxas = str(find_tool("ptxas"))
    except ToolNotFound:
        return (0, 0)
    with tempfile.TemporaryDirectory(prefix="ktune-triton-") as tmp:
        src = Path(tmp) / "k.ptx"
        src.write_text(ptx)
        proc = subprocess.run([ptxas, "-v", f"--gpu-name={arch}a" if arch == "sm_90" else
                               f"--gpu-name={arch}", str(src), "-o", str(Path(tmp) / "k.cubin")],
                              capture_output=True, text=True, timeout=300, check=False)
    res = next(iter(parse_ptxas_verbose(proc.stdout + proc.stderr).values()), None)
    return (res.spill_stores, res.spill_loads) if res else (0, 0)


def failure(exc: BaseException, def_lines: Mapping[str, int]) -> CompileFailure:
    """A CompileFailure for a Triton compile error, with cell-line diagnostics."""
    diagnostics = compile_diagnostics(exc, def_lines)
    if not diagnostics:  # not a CompilationError: its own first line, never an empty summary
        lines = [ln for ln in str(exc).splitlines() if ln.strip()]
        # ptxas's own verdict rather than "Internal Triton PTX codegen error" (maxnreg too low)
        text = next((ln.strip() for ln in lines if re.match(r"^ptxas\S* (fatal|error)", ln)),
                    lines[0] if lines else "")
        diagnostics = [Diagnostic(None, "error", f"{type(exc).__name__}: {text}".strip(": "))]
    return CompileFailure("triton", str(exc), diagnostics)


if __name__ == "__main__":  # the AOT child: a pickled AotRequest in, the result out
    os.environ[COMPILE_ONLY_ENV] = "1"  # it compiles and never launches (no GPU here)
    # the reply keeps stdout to itself: Triton prints a failed ptxas run's log there (maxnreg
    # too low: "Insufficient registers"), which made the parent read "invalid load key"
    _reply = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    _request = pickle.loads(sys.stdin.buffer.read())  # noqa: S301 - from our own parent
    _result = _request.run()
    _reply.write(pickle.dumps(_result))
    _reply.flush()
