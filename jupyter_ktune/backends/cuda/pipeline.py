"""Several kernels of one cell run as a pipeline (a two-stage reduction: partial sums, then a
final pass), with the tunables shared between stages and one reference for the end result::

    // ktune: BLOCK in [128, 256, 512]
    // ktune: pipeline = [partials(grid=cdiv(n, BLOCK), block=BLOCK), total(grid=1, block=BLOCK)]

Each stage names a ``__global__`` kernel of the cell and its ``grid``, ``block`` and optional
``smem`` expressions (over the tunables and the inputs, as ``grid =`` lines are). Arguments go
to every stage by parameter name and live once on the device, so a buffer that stage 1 writes
(``partial``) is what stage 2 reads. The whole pipeline is one launch for the timing protocol
and for verification; :meth:`PipelineBound.launch_info` adds each stage's own device time.
"""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jupyter_ktune.backends.cuda.source import KernelSignature, parse_signature
from jupyter_ktune.errors import CellError
from jupyter_ktune.spec import Expr, KernelSpec

_KEYS = ("grid", "block", "smem")


@dataclass(frozen=True)
class Stage:
    """One kernel of the pipeline and its launch geometry."""

    name: str
    grid: Expr
    block: Expr
    smem: Expr | None = None


def parse_pipeline(spec: KernelSpec) -> tuple[Stage, ...]:
    """The stages of the ``pipeline = [...]`` directive, or () when the cell has none."""
    if spec.pipeline is None:
        return ()
    text, line = spec.pipeline
    fix = ("Write: // ktune: pipeline = [stage1(grid=cdiv(n, BLOCK), block=BLOCK), "
           "final(grid=1, block=BLOCK)]")
    try:
        tree = ast.parse(text, mode="eval").body
    except SyntaxError as exc:
        raise CellError(f"cannot read the pipeline: {exc.msg}", line=line, fix=fix) from None
    if not isinstance(tree, ast.List) or not tree.elts:
        raise CellError("the pipeline is not a list of kernels", line=line, fix=fix)
    stages = []
    for node in tree.elts:
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.args):
            raise CellError(f"pipeline stage '{ast.unparse(node)}' is not KERNEL(grid=..., "
                            "block=...)", line=line, fix=fix)
        given = {k.arg: Expr(ast.unparse(k.value), line, str(k.arg)) for k in node.keywords}
        bad = [k for k in given if k not in _KEYS]
        if bad or "grid" not in given or "block" not in given:
            what = f"unknown argument '{bad[0]}'" if bad else "needs grid= and block="
            raise CellError(f"pipeline stage {node.func.id}: {what}", line=line, fix=fix)
        stages.append(Stage(node.func.id, given["grid"], given["block"], given.get("smem")))
    return tuple(stages)


def stage_spec(spec: KernelSpec, stage: Stage, params: set[str]) -> KernelSpec:
    """The cell as seen by one stage: its kernel, its geometry, the outputs it takes."""
    return dataclasses.replace(spec, name=stage.name, grid=stage.grid, block=stage.block,
                               smem=stage.smem,
                               outputs=tuple(o for o in spec.outputs if o in params))


def kernels(spec: KernelSpec) -> list[tuple[KernelSpec, KernelSignature]]:
    """(spec, signature) of each kernel the cell launches: the magic line's one, or the stages."""
    stages = parse_pipeline(spec)
    if not stages:
        return [(spec, parse_signature(spec))]
    out = []
    for stage in stages:
        sig = parse_signature(dataclasses.replace(spec, name=stage.name))
        out.append((stage_spec(spec, stage, {p.name for p in sig.params}), sig))
    return out


def macro_signature(sigs: list[KernelSignature]) -> KernelSignature:
    """A signature whose template parameters are those of every stage: a tunable that is a
    template parameter anywhere must not also be a ``-D`` macro (it would rewrite the
    template's own parameter name)."""
    names = tuple(dict.fromkeys(n for sig in sigs for n in sig.template_params))
    return dataclasses.replace(sigs[0], template_params=names)


def stage_constants(stages: list[tuple[KernelSpec, KernelSignature]],
                    cxx: Mapping[str, int]) -> dict[str, int]:
    """For a pipeline, the tunables that some stage takes as template parameters, so that the
    other stages still see them (as ``constexpr int``; see ``device_source``)."""
    if len(stages) < 2:
        return {}
    return {n: cxx[n] for _, sig in stages for n in sig.template_params if n in cxx}


class PipelineVariant:
    """The stages of one config, compiled into one module."""

    def __init__(self, spec: KernelSpec, variants: list[Any], timer: Any = None):
        self.spec, self.variants, self._timer = spec, variants, timer
        self.expr = " -> ".join(v.expr for v in variants)
        self.fn = variants[0].fn  # the first stage's registers and limits, for generic readers

    def bind(self, host_args: Mapping[str, Any]) -> PipelineBound:
        """Bind each stage; a pointer argument is uploaded once and shared by the stages."""
        bounds: list[Any] = []
        shared: dict[str, Any] = {}
        for variant in self.variants:
            bound = variant.bind(host_args, shared)
            shared.update(bound.device_args)
            bounds.append(bound)
        return PipelineBound(bounds, self.spec, self._timer)


class PipelineBound:
    """The stages, bound to one set of device arrays, launched in order as one launch."""

    def __init__(self, stages: list[Any], spec: KernelSpec, timer: Any = None):
        self.stages, self.spec, self._timer = stages, spec, timer
        self.outputs: dict[str, Any] = {}
        for bound in stages:
            self.outputs.update(bound.outputs)
        missing = [o for o in spec.outputs if o not in self.outputs]
        if missing:
            raise CellError(f"--out names '{missing[0]}', which is a pointer parameter of no "
                            "kernel of the pipeline", line=spec.pipeline[1] if spec.pipeline
                            else 1, fix="Name the pipeline's output arrays in --out.")

    def launch(self) -> None:
        """Enqueue every stage, in order, on the same stream."""
        for bound in self.stages:
            bound.launch()

    def poison_outputs(self) -> None:
        """Poison every stage's outputs (the intermediate buffers too)."""
        for bound in self.stages:
            bound.poison_outputs()

    def read_outputs(self) -> dict[str, Any]:
        """The ``--out`` arrays after the last stage that writes them."""
        out: dict[str, Any] = {}
        for bound in self.stages:
            out.update(bound.read_outputs())
        return {k: out[k] for k in self.spec.outputs}

    def stage_times(self) -> list[float | None]:
        """Each stage's median device time in ms, timed alone by the same protocol (briefly)."""
        if self._timer is None:
            return [None] * len(self.stages)
        from jupyter_ktune.measure.timing import TimingPlan, time_kernel

        plan = TimingPlan(budget_ms=max(self.spec.options.budget_ms / 4, 5.0),
                          warm_cache=self.spec.options.warm_cache)
        return [time_kernel(b.launch, self._timer, plan).median_ms for b in self.stages]

    def launch_info(self) -> Mapping[str, Any]:
        """The first stage's geometry, and per stage its kernel, geometry and device time."""
        first = dict(self.stages[0].launch_info())
        try:
            times = self.stage_times()
        except Exception:  # noqa: BLE001 - the total was timed; a stage's time is extra
            times = [None] * len(self.stages)
        first["kernel"] = " -> ".join(b.variant.expr for b in self.stages)
        first["stages"] = [{**b.launch_info(), "median_ms": t}
                           for b, t in zip(self.stages, times, strict=True)]
        return first
