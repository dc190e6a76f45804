"""Kernel Tuner's own CUDA convolution tuned by Kernel Tuner and by ktune, back to back (issue 21).

The kernel is ``test/convolution.cu`` of Kernel Tuner's source distribution on PyPI
(``pip download --no-binary :all: --no-deps kernel_tuner==1.5.0``), read from the tarball at run
time, never copied here: a 2-D convolution of a 4096 x 4096 fp32 image with a 17 x 17 filter held
in ``__constant__`` memory, each block staging its tile in shared memory, every tunable a
preprocessor macro (``block_size_x/y``, ``tile_size_x/y``). Both tools sweep the same space
(:data:`PARAMS` under :data:`RESTRICTION`, the shape of Kernel Tuner's convolution example):

- Kernel Tuner 1.5: ``tune_kernel(..., lang="cupy")``, brute force, ``cmem_args`` for the filter,
  ``answer`` checked with ``atol`` (its default, 1e-6, fails every correct fp32 sum of 289
  products of this size), its default 7 runs per config (mean, no L2 flush);
- ktune: the file as a ``%%kernel`` cell, the same space as directives, ``tune(..., "exhaustive")``
  on the CUDA backend (verification by ktune's tolerance rule, L2 flush, racing, re-timing of
  the top 3), with the per-phase breakdown and the worker's start stated apart.

Both get the same reference: torch's fp32 ``conv2d`` on the GPU (TF32 off), or NumPy where there
is none. Kernel Tuner's answer is computed before its clock starts; ktune computes its own once
per input set, inside its wall time.

Examples
--------
    python3 bench/convolution_vs_kernel_tuner.py --sdist kernel_tuner-1.5.0.tar.gz --check   # CPU
    python3 bench/convolution_vs_kernel_tuner.py --sdist .whlg/kernel_tuner-1.5.0.tar.gz --out $OUT
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]
MEMBER = "test/convolution.cu"
H = W = 4096  # the file's image_height / image_width
R = 17  # its default filter_height / filter_width
SPACES = {  # "full": 144 valid configs; "small" (32) fits one device call with both tools
    "full": {"block_size_x": [16, 32, 64, 128], "block_size_y": [1, 2, 4, 8, 16],
             "tile_size_x": [1, 2, 4], "tile_size_y": [1, 2, 4]},
    "small": {"block_size_x": [32, 64], "block_size_y": [2, 4, 8, 16],
              "tile_size_x": [1, 2], "tile_size_y": [1, 2]}}
PARAMS = dict(SPACES["small"])
RESTRICTION = "64 <= block_size_x * block_size_y <= 1024"
KTUNE_LINE = ("convolution_kernel --backend cuda --inputs inputs --reference reference "
              "--out output --budget-ms 5")
ATOL = 1e-3  # Kernel Tuner's answer check: the outputs are sums of 289 products of ~0.25


def kernel_source(sdist: Path, name: str = MEMBER) -> str:
    """``test/convolution.cu`` (or another file ``name``) from Kernel Tuner's sdist, as shipped."""
    with tarfile.open(sdist) as tar:
        member = next((m for m in tar.getmembers() if m.name.endswith("/" + name)), None)
        if member is None:
            raise SystemExit(f"[bench] {sdist} holds no {name}: pass Kernel Tuner's sdist")
        return tar.extractfile(member).read().decode()


def inputs(h: int = H, w: int = W, r: int = R) -> dict:
    """Fresh random image, filter, and the ``__constant__`` filter (33 x 33 floats declared)."""
    rng = np.random.default_rng()
    image = rng.random((h + r - 1) * (w + r - 1), dtype=np.float32)
    filt = rng.random(r * r, dtype=np.float32)
    constant = np.zeros(33 * 33, np.float32)
    constant[: r * r] = filt
    return dict(output=np.zeros(h * w, np.float32), input=image, filter=filt, d_filter=constant)


def reference(output, input, filter, d_filter, h: int = H, w: int = W, r: int = R):
    """The convolution as the kernel computes it (cross-correlation, valid region)."""
    img = input.reshape(h + r - 1, w + r - 1)
    taps = filter.reshape(r, r)
    try:
        import torch

        if torch.cuda.is_available():
            torch.backends.cudnn.allow_tf32 = False
            x = torch.from_numpy(img).cuda()[None, None]
            k = torch.from_numpy(taps).cuda()[None, None]
            return torch.nn.functional.conv2d(x, k).reshape(-1).cpu().numpy()
    except ImportError:
        pass
    acc = np.zeros((h, w), np.float32)
    for i, j in itertools.product(range(r), range(r)):
        acc += img[i:i + h, j:j + w] * taps[i, j]
    return acc.reshape(-1)


def ktune_body(source: str) -> str:
    """The file as a user pastes it into a cell, under ktune's directives for the same space."""
    space = "; ".join(f"{k} in {v}" for k, v in PARAMS.items())
    directives = (f"// ktune: {space}\n// ktune: require {RESTRICTION}\n"
                  "// ktune: grid = (cdiv(4096, block_size_x * tile_size_x), "
                  "cdiv(4096, block_size_y * tile_size_y)); block = (block_size_x, block_size_y)\n"
                  f"// ktune: flops = {2 * H * W * R * R}; "
                  f"bytes = {4 * ((H + R - 1) * (W + R - 1) + H * W)}\n")
    return directives + source


def ktune_spec(source: str) -> Any:
    """:func:`ktune_body` parsed as its cell (``KTUNE_LINE``)."""
    import jupyter_ktune

    return jupyter_ktune.parse_cell(KTUNE_LINE, ktune_body(source),
                                    {"inputs": inputs, "reference": reference})


def run_kernel_tuner(source: str) -> dict:
    """Brute force with Kernel Tuner's CuPy backend over the same space."""
    import kernel_tuner

    args = inputs()
    t_answer = time.perf_counter()  # the user's answer, as ktune's prepare phase computes it
    answer = reference(**args)
    t0 = time.perf_counter()
    results, _env = kernel_tuner.tune_kernel(
        "convolution_kernel", source, (W, H), [args["output"], args["input"], args["filter"]],
        PARAMS, grid_div_x=["block_size_x", "tile_size_x"],
        grid_div_y=["block_size_y", "tile_size_y"],
        restrictions=["block_size_x*block_size_y>=64", "block_size_x*block_size_y<=1024"],
        cmem_args={"d_filter": args["d_filter"]}, answer=[answer, None, None], atol=ATOL,
        lang="cupy", quiet=True)
    wall = time.perf_counter() - t0
    ok = [r for r in results if isinstance(r.get("time"), float)]
    best = min(ok, key=lambda r: r["time"]) if ok else None
    return {"wall_s": wall, "answer_s": t0 - t_answer, "configs": len(results),
            "timed": len(ok),
            "version": kernel_tuner.__version__,
            "winner": {k: best[k] for k in PARAMS} if best else None,
            "winner_ms": best["time"] if best else None,
            "times": {"x".join(str(r[k]) for k in PARAMS): r.get("time") for r in results}}


def save(out: dict, folder: Path | None) -> None:
    """Write the results so far as ``convolution_vs_kernel_tuner.json`` (when asked)."""
    if folder:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "convolution_vs_kernel_tuner.json").write_text(
            json.dumps(out, indent=1, default=str))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    found = sorted(ROOT.glob(".whl*/kernel_tuner-*.tar.gz"))
    ap.add_argument("--sdist", type=Path, default=found[-1] if found else None,
                    required=not found, help="kernel_tuner-<v>.tar.gz from PyPI (default: the "
                    "one in the carried wheelhouse, .whl/ or .whlg/)")
    ap.add_argument("--check", action="store_true",
                    help="CPU: build the cell and compile one config for sm_90, no GPU")
    ap.add_argument("--space", choices=tuple(SPACES), default="small")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    PARAMS.clear()
    PARAMS.update(SPACES[a.space])
    source = kernel_source(a.sdist)
    spec = ktune_spec(source)
    if a.check:
        from jupyter_ktune.api import run_kernel

        count = spec.space.count()
        r = run_kernel(spec, {"block_size_x": 32, "block_size_y": 8, "tile_size_x": 2,
                              "tile_size_y": 2})
        static = r.static.kernels if r.static else None
        print(f"{count.text()} of {spec.space.size}; one config: {r.status.value} "
              f"({(r.reason or '').splitlines()[0][:120] if r.reason else ''}); "
              f"static: {static}")
        return 0
    import sweep_vs_kernel_tuner as svk

    store = Path(tempfile.mkdtemp()) / "conv.sqlite"
    out: dict[str, Any] = {"kernel": f"{a.sdist.name}:{MEMBER}", "params": PARAMS,
                           "restriction": RESTRICTION,
                           "ktune": svk.run_ktune(store, spec, tuple(PARAMS))}
    print(json.dumps({k: v for k, v in out["ktune"].items() if k != "times"}, default=str)[:2500],
          flush=True)
    save(out, a.out)  # ktune's half kept if Kernel Tuner's runs past the cap
    try:
        out["kernel_tuner"] = run_kernel_tuner(source)
    except Exception as exc:  # noqa: BLE001 - report it, keep ktune's half
        out["kernel_tuner"] = {"error": f"{type(exc).__name__}: {str(exc)[:1500]}"}
    kt, kk = out["kernel_tuner"], out["ktune"]
    key = lambda w: "x".join(str(w[k]) for k in PARAMS)  # noqa: E731
    if kt.get("winner") and kk.get("winner"):
        out["kt_winner_in_ktune_ms"] = kk["times"].get(key(kt["winner"]))
        out["ktune_winner_in_kt_ms"] = kt["times"].get(key(kk["winner"]))
    if "wall_s" in kt:
        out["speedup_wall"] = kt["wall_s"] / kk["wall_s"]
        out["speedup_wall_with_worker_start"] = kt["wall_s"] / (kk["wall_s"]
                                                                + kk["worker_start_s"])
        # ktune's wall holds the reference (its prepare phase); Kernel Tuner's answer is
        # computed before its timer starts: the same work counted on both sides
        out["speedup_wall_answer_counted"] = (kt["wall_s"] + kt["answer_s"]) / kk["wall_s"]
    save(out, a.out)
    print(json.dumps({k: v for k, v in kt.items() if k != "times"}, default=str)[:1500])
    print(f"\n{'':14} {'wall s':>8} {'configs':>8}  winner (bx, by, tx, ty): its time by "
          "each tool, ms (ktune's / Kernel Tuner's)")
    for name, side in (("ktune", kk), ("Kernel Tuner", kt)):
        w = side.get("winner")
        if not w:
            print(f"{name:14} {side.get('error', 'no winner')[:100]}")
            continue
        print(f"{name:14} {side['wall_s']:8.1f} {side['configs']:>8}  {key(w)}: "
              f"{kk['times'].get(key(w)) or float('nan'):.4f} / "
              f"{kt.get('times', {}).get(key(w)) or float('nan'):.4f}")
    print(f"Kernel Tuner wall / ktune wall: {out.get('speedup_wall')} "
          f"({out.get('speedup_wall_with_worker_start')} counting the worker's start, "
          f"{kk['worker_start_s']:.1f} s; {out.get('speedup_wall_answer_counted')} with "
          f"Kernel Tuner's answer, {kt.get('answer_s', 0):.1f} s, counted as ktune's "
          f"reference is); ktune's verdict: {kk.get('verdict')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
