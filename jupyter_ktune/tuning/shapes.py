"""Tuning over problem shapes: one sweep per shape, winners side by side, a dispatch table.

``triton.autotune``'s ``key`` tunes per shape; ``tune(spec, shapes=[dict(M=..., N=..., K=...)])``
does the same: the cell's inputs function takes the shape's values as keyword arguments, each
shape gets its own sweep (its own store key, its own input sets), and the report shows every
shape's winner and exports a dispatch table (:func:`~jupyter_ktune.tuning.export.dispatch`). The
kernel is the same source for every shape, so compiles are shared where the shape is not a
constexpr: the worker keeps static reports by (source, arch, config) and Triton's on-disk cache
serves the precompile pool; each shape after the first also starts from the previous shape's
best configs (the warm start, by kernel name and space).
"""

from __future__ import annotations

import html
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jupyter_ktune.errors import CellError
from jupyter_ktune.spec import KernelSpec
from jupyter_ktune.tuning.report import TuneReport
from jupyter_ktune.tuning.store import StoredResult


def bind_shape(inputs: Callable[..., Mapping[str, Any]],
               shape: Mapping[str, Any]) -> Callable[[], Mapping[str, Any]]:
    """The inputs function with one shape's keyword arguments bound (picklable, and keyed by its
    code and the shape, so the worker's input-set cache tells shapes apart)."""
    values = dict(shape)

    def inputs_for_shape() -> Mapping[str, Any]:
        return inputs(**values)

    inputs_for_shape.__name__ = getattr(inputs, "__name__", "inputs")
    return inputs_for_shape


def shape_label(shape: Mapping[str, Any]) -> str:
    """``M=4096 N=4096 K=512``."""
    return " ".join(f"{k}={v}" for k, v in shape.items())


def check_shapes(spec: KernelSpec, shapes: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Validate ``shapes``: a non-empty list of dicts with the same keys, and an inputs function."""
    if isinstance(shapes, Mapping) or not isinstance(shapes, Sequence) or not shapes:
        raise TypeError("[ktune] shapes must be a list of dicts, e.g. "
                        "shapes=[dict(M=1024, N=1024, K=1024), dict(M=4096, N=4096, K=4096)]")
    out = [dict(s) for s in shapes]
    if any(set(s) != set(out[0]) for s in out):
        raise ValueError("[ktune] every shape must name the same dimensions, got "
                         + "; ".join(shape_label(s) for s in out))
    if spec.inputs is None:
        raise CellError("tuning over shapes needs an inputs function that takes the shape",
                        line=1, fix="Add --inputs make_inputs with def make_inputs(M, N, K).")
    return out


@dataclass(frozen=True)
class ShapesReport:
    """What ``tune(spec, shapes=[...])`` returns: one :class:`TuneReport` per shape."""

    shapes: tuple[Mapping[str, Any], ...]
    reports: tuple[TuneReport, ...]

    @property
    def key(self) -> tuple[str, ...]:
        """The shape's dimension names, the ``key`` of an exported ``triton.autotune``."""
        return tuple(self.shapes[0]) if self.shapes else ()

    @property
    def winners(self) -> list[StoredResult | None]:
        """Each shape's best result (None when nothing ran correctly)."""
        return [r.best for r in self.reports]

    def text(self) -> str:
        """A table: shape, winner, its median, configs evaluated."""
        rows = [("shape", "winner", "median µs", "evaluated")]
        for s, r, w in zip(self.shapes, self.reports, self.winners, strict=True):
            rows.append((shape_label(s), w.config.label() if w else "(none ran correctly)",
                         f"{w.median_ms * 1e3:.2f}" if w and w.median_ms else "-",
                         f"{len(r.evaluations)}/{r.valid_configs}"))
        widths = [max(len(row[i]) for row in rows) for i in range(4)]
        return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
                         for row in rows)

    def __repr__(self) -> str:
        return self.text()

    def _repr_html_(self) -> str:
        body = "".join(
            f"<tr><td>{html.escape(shape_label(s))}</td>"
            f"<td><code>{html.escape(w.config.label()) if w else '-'}</code></td>"
            f"<td>{f'{w.median_ms * 1e3:.2f}' if w and w.median_ms else '-'}</td>"
            f"<td>{len(r.evaluations)}/{r.valid_configs}</td></tr>"
            for s, r, w in zip(self.shapes, self.reports, self.winners, strict=True))
        return ("<table><tr><th>shape</th><th>winner</th><th>median µs</th><th>evaluated</th>"
                f"</tr>{body}</table>" + self.svg())

    def svg(self) -> str:
        """The chart: each shape's winner and its time, one colour per distinct winner."""
        from jupyter_ktune.tuning.shapes_chart import winners_svg

        return winners_svg([(shape_label(s), w.config.label() if w else None,
                             w.median_ms if w else None)
                            for s, w in zip(self.shapes, self.winners, strict=True)])

    def export(self, kind: str | None = None, **kw: Any) -> str:
        """A dispatch table: ``"triton"`` (autotune list + key), ``"cpp"`` (a switch over shape
        buckets) or ``"pallas"`` (a table keyed by shape); None: the backend's own."""
        from jupyter_ktune.tuning.export import dispatch

        return dispatch(self, kind, **kw)


def tune_shapes(run_one: Callable[[KernelSpec, tuple[tuple[str, Any], ...]], TuneReport],
                spec: KernelSpec, shapes: Sequence[Mapping[str, Any]]) -> ShapesReport:
    """Run ``run_one(spec for the shape, shape items)`` for every shape, in order."""
    checked = check_shapes(spec, shapes)
    reports = []
    for shape in checked:
        one = KernelSpec(**{**{f: getattr(spec, f) for f in spec.__dataclass_fields__},
                            "inputs": bind_shape(spec.inputs, shape)})  # type: ignore[arg-type]
        reports.append(run_one(one, tuple(shape.items())))
    return ShapesReport(tuple(checked), tuple(reports))
