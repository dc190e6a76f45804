"""Per-source-line stall samples from Nsight Compute: run a driver under ncu, read the report.

The worker starts ``ncu`` on a tiny driver (:mod:`jupyter_ktune.runner.profile` run as ``python
-m``) that compiles the variant with its backend, binds fresh inputs and launches it; ncu profiles
the first launch of the kernel with the ``SourceCounters`` and ``WarpStateStats`` sections and
``--clock-control none`` (the clocks of a shared GPU are never locked). The report is read with
``ncu_report`` (the Nsight Compute install's ``extras/python``, or the ``ncu-report`` wheel, which
reads reports without a GPU): per SASS PC, the warp-state samples and their stall reasons, mapped
to source lines. Each backend names the file whose lines are cell lines (``line_file``: ``cell``
for CUDA C++, behind ``#line N "cell"``; the module file of a Triton cell), so the line numbers are
cell lines as they come.
Nothing here knows a backend.

Where ncu is missing or cannot read the counters (gVisor-style sandboxes, a locked-down driver),
:func:`ncu_status` says why and the caller keeps the scope breakdown alone.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from jupyter_ktune.measure.breakdown import Breakdown
from jupyter_ktune.render import counted

SECTIONS = ("SourceCounters", "WarpStateStats")
_STALL = "smsp__pcsamp_warps_issue_stalled_"
_SAMPLES = "smsp__pcsamp_sample_count"


def find_ncu() -> str | None:
    """Path of the ``ncu`` executable, or None."""
    found = shutil.which("ncu")
    if found:
        return found
    for pattern in ("/usr/local/cuda/bin/ncu", "/opt/nvidia/nsight-compute/*/ncu"):
        hits = sorted(glob.glob(pattern))
        if hits:
            return hits[-1]
    return None


def import_ncu_report() -> Any:
    """Import ``ncu_report`` (the wheel, or Nsight Compute's ``extras/python``); None if absent."""
    try:
        import ncu_report

        return ncu_report
    except ImportError:
        pass
    for folder in sorted(glob.glob("/opt/nvidia/nsight-compute/*/extras/python"), reverse=True):
        sys.path.insert(0, folder)
        try:
            import ncu_report

            return ncu_report
        except ImportError:
            sys.path.remove(folder)
    return None


def ncu_status() -> str | None:
    """None when ncu and ncu_report are both here, else the reason the stall view is off."""
    if find_ncu() is None:
        return ("Nsight Compute (ncu) is not installed here, so there is no per-line stall view; "
                "the scope breakdown is shown alone")
    if import_ncu_report() is None:
        return ("ncu_report is missing (pip install ncu-report), so the ncu report cannot be read; "
                "the scope breakdown is shown alone")
    return None


def _reason(metric: str) -> str | None:
    if not metric.startswith(_STALL) or metric.endswith("_not_issued"):
        return None
    return metric[len(_STALL):]


def action_lines(action: Any, keep_file: Callable[[str], bool]) -> dict[int, dict[str, Any]]:
    """Samples and stall reasons per source line of one profiled kernel (one ncu action)."""
    names = [n for n in action.metric_names() if n == _SAMPLES or _reason(n)]
    per_pc: dict[int, dict[str, int]] = {}
    for name in names:
        m = action.metric_by_name(name)
        if m is None or not m.has_correlation_ids():
            continue
        pcs = m.correlation_ids()
        key = "samples" if name == _SAMPLES else _reason(name)
        for i in range(m.num_instances()):
            v = int(m.as_uint64(i))
            if v:
                per_pc.setdefault(int(pcs.as_uint64(i)), {})[key] = v
    out: dict[int, dict[str, Any]] = {}
    for pc, counts in per_pc.items():
        info = action.source_info(pc)
        if info is None or not keep_file(info.file_name()):
            continue
        line = int(info.line())
        if line < 1:
            continue
        row = out.setdefault(line, {"samples": 0, "stalls": {}})
        row["samples"] += counts.get("samples", 0)
        for k, v in counts.items():
            if k != "samples":
                row["stalls"][k] = row["stalls"].get(k, 0) + v
    for row in out.values():  # "selected" is a warp issuing, not a stall
        row["stalls"] = dict(sorted(row["stalls"].items(), key=lambda kv: -kv[1]))
    return out


def cell_file_filter(cell_file: str | None = None) -> Callable[[str], bool]:
    """Which source files are the cell: the file the backend named (its ``line_file``, e.g.
    ``cell`` for CUDA C++), else any file with ``ktune`` in its name (a cached cell module)."""
    if cell_file:
        return lambda f: Path(f).name == Path(cell_file).name
    return lambda f: "ktune" in Path(f).name


def read_report(path: str | os.PathLike[str], kernel: str, keep_file: Callable[[str], bool]
                ) -> Breakdown:
    """Read an ``.ncu-rep`` and return a lines-only Breakdown for the first action of ``kernel``.

    ``kernel`` matches the start of the action's name (``gemm`` matches ``gemm<64, 64, 32>``).
    """
    ncu_report = import_ncu_report()
    if ncu_report is None:
        raise RuntimeError("[ktune] ncu_report is missing: pip install ncu-report")
    t0 = time.perf_counter()
    ctx = ncu_report.load_report(str(path))
    chosen = None
    for r in range(ctx.num_ranges()):
        rng = ctx.range_by_idx(r)
        for a in range(rng.num_actions()):
            act = rng.action_by_idx(a)
            if act.name().startswith(kernel) and chosen is None:
                chosen = act
    if chosen is None:
        raise ValueError(f"[ktune] the ncu report has no kernel named {kernel!r}")
    lines = action_lines(chosen, keep_file)
    dur = chosen.metric_by_name("gpu__time_duration.sum")
    total = sum(r["samples"] for r in lines.values())
    note = (f"ncu warp-state sampling: {counted(total, 'sample')} on "
            f"{counted(len(lines), 'cell line')} "
            "(--clock-control none)")
    return Breakdown.lines_only(chosen.name(), lines, "ncu", notes=(note,),
                                trace_bytes=os.path.getsize(path),
                                kernel_ns=float(dur.as_double()) if dur is not None else None,
                                parse_ms=(time.perf_counter() - t0) * 1e3)


def line_sampling_args() -> list[str]:
    """ncu arguments for the per-line view: source import and the sampling sections."""
    args = ["--import-source", "yes"]
    for s in SECTIONS:
        args += ["--section", s]
    return args


def ncu_command(ncu: str, out: str, kernel: str, argv: list[str],
                what: list[str] | None = None) -> list[str]:
    """The ncu command line: free-running clocks, the first launch of ``kernel``, and ``what``
    to collect (default: the per-line sampling sections)."""
    what = line_sampling_args() if what is None else what
    return [ncu, "--clock-control", "none", "-f", "-o", out, "-k", f"regex:^{kernel}", "-c", "1",
            *what, *argv]


def run_under_ncu(kernel: str, argv: list[str], ncu_args: list[str], folder: Path,
                  timeout: float) -> str:
    """Run ``argv`` (a driver that launches the kernel once) under ncu; the report's path.

    The driver is the caller's (:mod:`jupyter_ktune.runner.profile` compiles the variant with
    its backend): this module only knows ncu, so it imports no backend.
    """
    why = ncu_status()
    if why:
        raise RuntimeError(f"[ktune] {why}")
    out = str(folder / "report")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    cmd = ncu_command(find_ncu() or "ncu", out, kernel, argv, what=ncu_args)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env,
                          check=False)
    rep = out + ".ncu-rep"
    if not os.path.exists(rep):
        tail = (proc.stdout + proc.stderr)[-1500:]
        raise RuntimeError(f"[ktune] ncu wrote no report (exit {proc.returncode}):\n{tail}")
    return rep


#: Shared-memory traffic of a kernel: instructions, wavefronts, and the excess wavefronts that
#: ncu counts as bank conflicts (wavefronts beyond the minimum an access needs).
SHARED_METRICS = ("smsp__sass_inst_executed_op_shared_ld.sum",
                  "smsp__sass_inst_executed_op_shared_st.sum",
                  "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
                  "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
                  "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
                  "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
                  "gpu__time_duration.sum")


def report_metrics(path: str | os.PathLike[str], kernel: str,
                   metrics: tuple[str, ...] = SHARED_METRICS) -> dict[str, float | None]:
    """Named metrics of the first action of ``kernel`` in an ``.ncu-rep``; None where absent.

    Used for the bank-conflict counts of the swizzle example: one ncu pass, clocks free-running.
    """
    ncu_report = import_ncu_report()
    ctx = ncu_report.load_report(str(path))
    for r in range(ctx.num_ranges()):
        rng = ctx.range_by_idx(r)
        for a in range(rng.num_actions()):
            act = rng.action_by_idx(a)
            if act.name().startswith(kernel):
                out: dict[str, float | None] = {}
                for m in metrics:
                    v = act.metric_by_name(m)
                    out[m] = float(v.as_double()) if v is not None else None
                return out
    raise ValueError(f"[ktune] the ncu report has no kernel named {kernel!r}")


def lines_for_editor(bd: Breakdown) -> Mapping[int, Mapping[str, Any]]:
    """The breakdown's per-line samples in the editor bundle's ``lines`` shape."""
    return {int(k): {"samples": int(v["samples"]), "stalls": dict(v["stalls"])}
            for k, v in bd.lines.items()}

