"""Issue 33's targets, judged from ``first_minute.py``'s summaries: one verdict per target and
kernel, each naming the rule that decided it, the figure, and for a target not met what holds it.

The run's tables give the figures; a reader then had to hold them against the issue's numbers
and look up the phases by hand. This prints that judgement last, so a run says by itself which
targets it met on that machine (the H200 of the issue, or the host the call got: the run's
header says which). The rules, from the issue:

- the first verified result of a fresh notebook's first Triton cell <= 3 s, of a CUDA C++ cell
  <= 2 s (median of the fresh processes, from the interpreter's spawn);
- Autotune's first verified result <= 1 s (the bench presses it at the first result);
- a Triton kernel's own autotune list swept >= 3x faster than ``triton.autotune`` in the
  notebook's order and >= 1.5x from a fresh process; a CUDA C++ kernel's space >= 2x faster
  than Kernel Tuner's brute force from a fresh process;
- the same winner as the anchor's; for Triton "or one within the CI": another config passes
  where, timed by ktune's protocol in the bench's process, it is faster than the anchor's pick
  or its median lies inside the 95 % CI of the anchor pick's median (runs since 916d808 record
  that CI; for earlier ones only the faster-pick half of the rule can be read).

A CUDA C++ kernel is one the bench reads from Kernel Tuner (``kt-`` names), as in
``first_minute.compare_kernel``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

TRITON_FIRST_S = 3.0
CUDA_FIRST_S = 2.0
AUTOTUNE_FIRST_S = 1.0
NOTEBOOK_ORDER_RATIO = 3.0  # Triton, against triton.autotune's first call
TRITON_FRESH_RATIO = 1.5
CUDA_FRESH_RATIO = 2.0  # against Kernel Tuner's brute force
HOLDERS = 2  # phases named for a first cell over its target


@dataclass(frozen=True)
class Verdict:
    """One target for one kernel: ``met`` None where the run did not measure it."""

    kernel: str
    target: str
    figure: str
    met: bool | None
    why: str = ""

    def line(self) -> str:
        word = {True: "met", False: "NOT met", None: "not measured"}[self.met]
        tail = f" ({self.why})" if self.why else ""
        return f"{self.kernel:16} {self.target:42} {self.figure:>10}  {word}{tail}"


def _at_most(kernel: str, target: str, value: Any, limit: float, why: str = "") -> Verdict:
    if not isinstance(value, (int, float)):
        return Verdict(kernel, target, "-", None)
    return Verdict(kernel, target, f"{value:.2f} s", value <= limit,
                   "" if value <= limit else why)


def _at_least(kernel: str, target: str, value: Any, limit: float) -> Verdict:
    if not isinstance(value, (int, float)):
        return Verdict(kernel, target, "-", None)
    return Verdict(kernel, target, f"{value:.2f}x", value >= limit)


def _holders(summary: dict[str, Any]) -> str:
    """The largest phases of the first result (median ms), the ones that hold it."""
    phases = summary.get("first_phases_ms") or {}
    top = list(phases.items())[:HOLDERS]
    return "held by " + ", ".join(f"{n} {ms:.0f} ms" for n, ms in top) if top else ""


def _winner(kernel: str, summary: dict[str, Any], cuda: bool) -> Verdict:
    """The same config as the anchor's; for Triton also "or one within the CI": another config
    passes where, by ktune's protocol, it is faster than the anchor's pick or its median lies
    within the 95 % CI of the anchor pick's median. Kernel Tuner's target asks for the same
    winner: another config fails there, with both medians given."""
    target = "the anchor's winner" + ("" if cuda else " (or within its CI)")
    ours, theirs = summary.get("winner"), summary.get("anchor_winner")
    if not ours or not theirs:
        return Verdict(kernel, target, "-", None)
    if dict(ours) == dict(theirs):
        return Verdict(kernel, target, "same", True)
    a, b = summary.get("winner_ms_by_ktune"), summary.get("anchor_winner_ms_by_ktune")
    if not isinstance(a, (int, float)) or not isinstance(b, (int, float)):
        return Verdict(kernel, target, "differs", False if cuda else None,
                       "" if cuda else "the two picks were not timed by one protocol")
    faster = "ktune's pick faster" if a < b else "the anchor's pick faster"
    why = (f"by ktune's protocol {a * 1e3:.1f} against {b * 1e3:.1f} us, {faster} by "
           f"{abs(b - a) / max(a, b) * 100:.1f} %")
    if cuda:
        return Verdict(kernel, target, "differs", False, why)
    ci = summary.get("anchor_winner_ci_ms_by_ktune")
    within = isinstance(ci, (list, tuple)) and len(ci) == 2 and a <= ci[1]
    if within and a > b:
        why += f", inside the anchor pick's CI [{ci[0] * 1e3:.1f}, {ci[1] * 1e3:.1f}] us"
    return Verdict(kernel, target, "differs", a <= b or within, why)


def verdicts(kernel: str, summary: dict[str, Any]) -> list[Verdict]:
    """Every target of ``kernel``'s summary (``compare_kernel``'s), in the issue's order."""
    cuda = kernel.startswith("kt-")
    first_limit = CUDA_FIRST_S if cuda else TRITON_FIRST_S
    out = [
        _at_most(kernel, f"first cell <= {first_limit:g} s (median, from spawn)",
                 summary.get("first_result_s"), first_limit, _holders(summary)),
        _at_most(kernel, f"Autotune's first result <= {AUTOTUNE_FIRST_S:g} s",
                 summary.get("autotune_first_ok_s"), AUTOTUNE_FIRST_S),
    ]
    if cuda:
        out.append(_at_least(kernel, f"fresh >= {CUDA_FRESH_RATIO:g}x Kernel Tuner",
                             summary.get("fresh_ratio"), CUDA_FRESH_RATIO))
    else:
        out.append(_at_least(kernel, f"notebook order >= {NOTEBOOK_ORDER_RATIO:g}x autotune",
                             summary.get("notebook_order_ratio"), NOTEBOOK_ORDER_RATIO))
        out.append(_at_least(kernel, f"fresh >= {TRITON_FRESH_RATIO:g}x autotune",
                             summary.get("fresh_ratio"), TRITON_FRESH_RATIO))
    out.append(_winner(kernel, summary, cuda))
    return out


def print_verdicts(kernels: dict[str, Any]) -> None:
    """The verdicts of every kernel of a run, after its tables."""
    print("\nissue 33's targets on this machine (the rule, the figure, the verdict):")
    for name, got in kernels.items():
        for v in verdicts(name, (got or {}).get("summary", {})):
            print(v.line())


def summaries_in(text: str) -> dict[str, Any]:
    """The kernels' summaries in a run's raw output (``NAME summary {json}`` lines, the last of
    each name), as ``{name: {"summary": ...}}``: a recorded run judged again."""
    import json

    found: dict[str, Any] = {}
    for line in text.splitlines():
        name, sep, rest = line.partition(" summary ")
        if sep and " " not in name and rest.startswith("{"):
            try:
                found[name] = {"summary": json.loads(rest)}
            except ValueError:
                continue
    return found


def main() -> int:
    import argparse
    from pathlib import Path

    ap = argparse.ArgumentParser(description="Judge a recorded first_minute run's summaries.")
    ap.add_argument("raw_output", type=Path, help="a first_minute run's raw_output.txt")
    kernels = summaries_in(ap.parse_args().raw_output.read_text())
    if not kernels:
        print("no 'NAME summary {...}' line in that file")
        return 1
    print_verdicts(kernels)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
