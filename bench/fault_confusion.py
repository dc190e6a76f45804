"""The confusion matrix of bench/fault_injection.py: the fault planted against the reason given.

Issue 15: "the reason the tool gives against the fault that was planted, for every variant".
A result is classified from its status and its reason text alone (what a user sees), with the
first rule that matches; every planted fault names the class it must land in.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable

# (class, status value or None for any, words of which one must be in the reason); first wins
RULES: tuple[tuple[str, str | None, tuple[str, ...]], ...] = (
    ("correct", "ok", ()),
    ("crash", "worker crashed", ()),
    ("kernel hang", "timed out", ("the kernel run took more than",)),
    ("slow reference", "timed out", ("the reference took more than",)),
    ("slow inputs", "timed out", ("the inputs function took more than",)),
    ("timeout, phase unnamed", "timed out", ()),
    ("compile error", "compile error", ()),
    ("out of resources", "out of resources", ()),
    ("device lost", None, ("device context was lost",)),
    ("out of memory", None, ("out of memory", "OutOfMemory", "MemoryError", "unable to allocate",
                             "Unable to allocate")),
    ("wrote past the end", "wrong result", ("past the end of",)),
    ("wrote before the start", "wrong result", ("before the start of",)),
    ("changed an input", "wrong result", ("the kernel changed input",)),
    ("wrote NaN/Inf", "wrong result", ("kernel wrote NaN/Inf",)),
    ("never written", "wrong result", ("never written",)),
    ("wrong output", "wrong result", ()),
)
# what an Interrupt mid-run comes to, judged by the bench from the request after it
INTERRUPT_CLASSES = ("interrupted, next reply in step", "out of step", "not interrupted")
CLASSES = tuple(dict.fromkeys(c for c, _, _ in RULES)) + INTERRUPT_CLASSES + ("other",)


def classify(status: str, reason: str) -> str:
    """The class of one result, from its status value and reason text."""
    for name, want, words in RULES:
        if want is not None and status != want:
            continue
        if words and not any(w in reason for w in words):
            continue
        return name
    return "other"


class Confusion:
    """Counts of (planted fault, class given), with the class each planted fault must get."""

    def __init__(self) -> None:
        self.counts: dict[str, Counter] = defaultdict(Counter)
        self.expected: dict[str, str] = {}
        self.examples: dict[tuple[str, str], str] = {}  # first reason seen per cell

    def add(self, planted: str, expected: str, given: str, reason: str = "") -> None:
        """Count one variant."""
        self.expected[planted] = expected
        self.counts[planted][given] += 1
        self.examples.setdefault((planted, given), reason.splitlines()[0][:160] if reason else "")

    def add_result(self, planted: str, expected: str, status: str, reason: str) -> None:
        """Count one stored result, classified from its status and reason."""
        self.add(planted, expected, classify(status, reason), reason)

    @property
    def total(self) -> int:
        """Variants counted."""
        return sum(sum(c.values()) for c in self.counts.values())

    @property
    def right(self) -> int:
        """Variants given the class their planted fault must get."""
        return sum(c[self.expected[p]] for p, c in self.counts.items())

    def misclassified(self) -> list[dict]:
        """Every (planted, given) cell off the expected column, with an example reason."""
        return [{"planted": p, "expected": self.expected[p], "given": g, "count": n,
                 "example": self.examples[(p, g)]}
                for p, c in self.counts.items() for g, n in c.items() if g != self.expected[p]]

    def to_json(self) -> dict:
        """Rows by planted fault (class -> count), the expected class of each, and totals."""
        return {"rows": {p: dict(c) for p, c in self.counts.items()},
                "expected": dict(self.expected), "variants": self.total,
                "classified_right": self.right, "misclassified": self.misclassified()}

    def table(self) -> str:
        """The matrix as text: one row per planted fault, one column per class that occurs."""
        used = [c for c in CLASSES if any(row[c] for row in self.counts.values())]
        label = "planted / given"
        width = max([len(label), *map(len, self.counts)])
        head = f"{label:{width}s} | " + " | ".join(used) + " | right"
        lines = [head, "-" * len(head)]
        for p, row in self.counts.items():
            cells = " | ".join(f"{row[c] or '':>{len(c)}}" for c in used)
            lines.append(f"{p:{width}s} | {cells} | {self._mark(p)}")
        lines.append(self.total_line())
        return "\n".join(lines)

    def sparse(self) -> str:
        """The same counts, narrow: planted fault, the class it must get, the classes given."""
        width = max([len("planted"), *map(len, self.counts)])
        exp = max([len("must be"), *map(len, self.expected.values())])
        lines = [f"{'planted':{width}s}  {'must be':{exp}s}  given (count)  right"]
        for p, row in self.counts.items():
            given = ", ".join(f"{g} ({n})" for g, n in row.items())
            lines.append(f"{p:{width}s}  {self.expected[p]:{exp}s}  {given}  {self._mark(p)}")
        lines.append(self.total_line())
        return "\n".join(lines)

    def _mark(self, planted: str) -> str:
        row = self.counts[planted]
        return "yes" if row[self.expected[planted]] == sum(row.values()) else "NO"

    def total_line(self) -> str:
        """'137 of 137 variants classified as what was planted'."""
        return f"{self.right} of {self.total} variants classified as what was planted"


def merge(parts: Iterable[Confusion]) -> Confusion:
    """One matrix of several phases' matrices."""
    out = Confusion()
    for part in parts:
        for p, row in part.counts.items():
            out.expected[p] = part.expected[p]
            out.counts[p].update(row)
        for k, v in part.examples.items():
            out.examples.setdefault(k, v)
    return out
