"""The GPU half of ``bench/attention_wgmma_vs_cudnn.py``: correctness, timing, interleaved rounds.

Kept apart so ``--check`` needs neither torch nor triton. ``run(args, cell)`` takes the parsed
arguments and the module holding the cell helpers (``spec_for``, ``make_inputs``, ``SPACE``,
``label``). Each step prints as it goes; the JSON and the final table are written at the end
and after every (D, causal, N) case, so a run cut short keeps what it measured.
"""

from __future__ import annotations

import json
import time
from typing import Any

import numpy as np


def sdpa_cudnn(q: Any, k: Any, v: Any, causal: int) -> Any:
    """torch SDPA forced onto its cuDNN backend (fp16, (Z, H, N, D))."""
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=bool(causal))


def error_pattern(got: Any, want: Any, n_ctx: int) -> str:
    """Where a wrong output is wrong: by row within a 64-row warpgroup slice, by 8-column
    chunk, and by query block, so one device run says which fragment or descriptor is off."""
    err = np.abs(got.astype(np.float32) - want.astype(np.float32))
    rows = err.max(axis=1)
    by_row64 = [float(rows[r::64].max()) for r in range(0, 64, 8)]
    by_col8 = [float(err[:, c:c + 8].max()) for c in range(0, err.shape[1], 8)]
    per_head = rows.reshape(-1, n_ctx)
    by_block = [float(per_head[:, b:b + 64].max()) for b in range(0, min(n_ctx, 512), 64)]
    return (f"max err {err.max():.3g}; by row%64 (step 8) {np.round(by_row64, 3).tolist()}; "
            f"by 8-col chunk {np.round(by_col8, 3).tolist()}; by 64-row block "
            f"{np.round(by_block, 3).tolist()}; NaN {int(np.isnan(got.astype(np.float32)).sum())}")


def in_process(cell: Any, cfg: dict, n_ctx: int, d: int, causal: int, body_edit=None,
               fp8: bool = False):
    """Compile and bind ``cfg`` in this process; return (bound, host inputs, torch q k v).

    With ``fp8`` the torch tensors are the same e4m3 values as float8_e4m3fn tensors."""
    import torch

    from jupyter_ktune.backends.cuda.backend import CudaBackend

    spec = cell.spec_for(n_ctx, d, causal, body_edit=body_edit, fp8=fp8)
    host = cell.make_inputs(n_ctx, d, causal, fp8=fp8)()
    bound = CudaBackend().compile(spec, spec.space.config(cfg)).bind(host)
    zh = host["ZH"]

    def dev(a: Any) -> Any:
        t = torch.from_numpy(a.view(np.uint8) if fp8 else a).cuda()
        return (t.view(torch.float8_e4m3fn) if fp8 else t).view(cell.Z, zh // cell.Z, n_ctx, d)

    return bound, host, [dev(host[x]) for x in ("q", "k", "v")]


def against_cudnn(cell: Any, cfg: dict, n_ctx: int, d: int, causal: int, body_edit=None,
                  fp8: bool = False):
    """Launch ``cfg`` once and compare with cuDNN SDPA on the same inputs: (rel err, text).

    fp8 inputs go to cuDNN as fp16 tensors of the same values (exact: e4m3 fits in fp16)."""
    import torch

    bound, host, (q, k, v) = in_process(cell, cfg, n_ctx, d, causal, body_edit, fp8)
    if fp8:
        q, k, v = (x.to(torch.float16) for x in (q, k, v))
    want = sdpa_cudnn(q, k, v, causal).reshape(-1, d).float()
    bound.launch()
    torch.cuda.synchronize()
    got = torch.from_numpy(bound.read_outputs()["o"]).cuda().float()
    rel = ((got - want).abs().max() / want.abs().max()).item()
    return rel, error_pattern(got.cpu().numpy(), want.cpu().numpy(), n_ctx), bound, (q, k, v)


def swap_lbo_sbo(body: str) -> str:
    """The V descriptor with its two byte offsets exchanged (a diagnosis, not a config)."""
    return body.replace("kt::wgmma_desc_mnmajor_sw128(v_addr + kb * 16 * 128, BLOCK_N * 128)",
                        "kt::wgmma_desc<128>(v_addr + kb * 16 * 128, 1024u, BLOCK_N * 128)")


def verified_configs(cell: Any, d: int, space: list[dict], out: dict[str, Any],
                     fp8: bool = False) -> list[dict]:
    """The configs of ``space`` that verify through the extension at N = 1024 causal and not
    and at N = 1000 (a partial last tile), Z*H = 16, fresh inputs; verdicts into ``out``."""
    from jupyter_ktune import run_kernel

    good = []
    for cfg in space:
        verdicts = []
        for n_ctx, causal in ((1024, 0), (1024, 1), (1000, 0)):
            r = run_kernel(cell.spec_for(n_ctx, d, causal, zh=16, fp8=fp8), cfg)
            verdicts.append(r.status.value)
            print(f"   {cell.label(cfg):34} N={n_ctx} causal={causal}: {r.status.value}  "
                  f"{r.reason[:200]}", flush=True)
        out["correct"][cell.label(cfg)] = verdicts
        if all(v == "ok" for v in verdicts):
            good.append(cfg)
    return good


def fp8_sdpa(q8: Any, k8: Any, v8: Any, causal: int) -> tuple[Any, str]:
    """torch SDPA on float8_e4m3fn tensors under cuDNN, if this torch has it: (fn, note)."""
    try:
        sdpa_cudnn(q8, k8, v8, causal)
    except Exception as exc:  # noqa: BLE001 - the finding is whether torch exposes it
        return None, f"not exposed: {type(exc).__name__}: {str(exc).splitlines()[0][:160]}"

    def call() -> Any:
        return sdpa_cudnn(q8, k8, v8, causal)

    return call, f"cuDNN fp8 through SDPA; its kernels: {', '.join(launched(call))}"


def launched(fn: Any) -> list[str]:
    """The GPU kernels one call of ``fn`` launches (torch.profiler), to say what a library
    really ran (an fp8 call that runs at fp16 speed may have upcast)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    try:
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            fn()
            torch.cuda.synchronize()
        return sorted({e.key[:90] for e in prof.key_averages()
                       if getattr(e, "device_type", None) is not None
                       and "CUDA" in str(e.device_type)}) or ["(none seen)"]
    except Exception as exc:  # noqa: BLE001 - a note, not a verdict
        return [f"(profiler: {type(exc).__name__})"]


def run_fp8(args: Any, cell: Any) -> int:
    """The e4m3 cell: verify (atol 0.5, rtol 0.1), time, race cuDNN fp16 (and fp8 if exposed)."""
    import torch
    import triton

    from jupyter_ktune import run_kernel
    from jupyter_ktune.tuning.report import ratio_ci

    out: dict[str, Any] = {"space": cell.SPACE_FP8, "correct": {}, "cases": [],
                           "device": torch.cuda.get_device_name(), "torch": torch.__version__}
    print("fp8 1. correctness through the extension (atol 0.5, rtol 0.1; Z*H = 16)", flush=True)
    good = {d: verified_configs(cell, d, cell.SPACE_FP8[d], out, fp8=True) for d in args.dims}
    args.json.write_text(json.dumps(out, indent=1, default=str))
    print("fp8 2. per case: extension timing, then interleaved rounds against cuDNN", flush=True)
    for d in args.dims:
        for causal in args.causal:
            for n_ctx in sorted(args.contexts):
                if not good[d]:
                    continue
                spec = cell.spec_for(n_ctx, d, causal, fp8=True).with_options(verify=False)
                timed = {}
                for cfg in good[d]:
                    r = run_kernel(spec, cfg)
                    timed[cell.label(cfg)] = (r.median_ms, cfg)
                    print(f"   D={d} causal={causal} N={n_ctx} {cell.label(cfg):34} "
                          f"{r.status.value} {r.median_ms} ms", flush=True)
                timed = {k: v for k, v in timed.items() if v[0]}
                if not timed:
                    continue
                best_label = min(timed, key=lambda k: timed[k][0])
                rel, pattern, bound, (q8, k8, v8) = against_cudnn(
                    cell, timed[best_label][1], n_ctx, d, causal, fp8=True)
                print(f"   best {best_label}: against cuDNN fp16 on the same values: rel err "
                      f"{rel:.2e}", flush=True)
                q, k, v = (x.to(torch.float16) for x in (q8, k8, v8))
                sides = {"cuDNN fp16":
                         lambda q=q, k=k, v=v, causal=causal: sdpa_cudnn(q, k, v, causal),
                         best_label: bound.launch}
                fn8, note8 = fp8_sdpa(q8, k8, v8, causal)
                if fn8 is not None:
                    sides["cuDNN fp8"] = fn8
                print(f"   fp8 SDPA: {note8}", flush=True)
                samples: dict[str, list[float]] = {s: [] for s in sides}
                names = list(sides)
                for rnd in range(args.rounds):
                    for s in names[rnd % len(names):] + names[:rnd % len(names)]:
                        samples[s].append(float(triton.testing.do_bench(sides[s],
                                                                        return_mode="median")))
                flops = 4 * cell.Z * cell.H * n_ctx * n_ctx * d / (2 if causal else 1)
                med = {s: float(np.median(v)) for s, v in samples.items()}
                case = {"D": d, "causal": causal, "N": n_ctx, "best": best_label,
                        "rel_err_vs_cudnn_fp16": rel, "fp8_sdpa": note8, "samples_ms": samples,
                        "tflops": {s: flops / (m * 1e-3) / 1e12 for s, m in med.items()}}
                for s in sides:
                    if s != best_label:
                        ratio, lo, hi = ratio_ci(np.asarray(samples[best_label]),
                                                 np.asarray(samples[s]))
                        case[f"pct_of_{s.replace(' ', '_')}"] = [100 * ratio, 100 * lo, 100 * hi]
                print("   " + ", ".join(f"{s} {m:.3f} ms ({case['tflops'][s]:.0f} TFLOP/s)"
                                        for s, m in med.items()), flush=True)
                out["cases"].append(case)
                args.json.write_text(json.dumps(out, indent=1, default=str))
    print(f"\nfp8 (e4m3) attention forward, Z={cell.Z} H={cell.H}, "
          f"{args.rounds} interleaved rounds")
    for c in out["cases"]:
        pcts = {k: v for k, v in c.items() if k.startswith("pct_of_")}
        print(f"D={c['D']} causal={c['causal']} N={c['N']} {c['best']}: " + "; ".join(
            f"{k[7:]} {v[0]:.1f} % [{v[1]:.1f}, {v[2]:.1f}]" for k, v in pcts.items())
            + f"; {c['fp8_sdpa']}")
    return 0


def run(args: Any, cell: Any) -> int:
    import cloudpickle
    import torch
    import triton

    from jupyter_ktune import run_kernel

    if cell.__name__ != "__main__":  # the worker cannot import bench modules: send them whole
        cloudpickle.register_pickle_by_value(cell)
    if getattr(args, "fp8", False):
        return run_fp8(args, cell)
    from jupyter_ktune.tuning.report import ratio_ci

    out: dict[str, Any] = {"space": cell.SPACE, "correct": {}, "cases": [],
                           "device": torch.cuda.get_device_name(),
                           "torch": torch.__version__, "triton": triton.__version__}

    def save() -> None:
        args.json.write_text(json.dumps(out, indent=1, default=str))

    print("1. correctness through the extension (float32 NumPy reference, fresh inputs), "
          "Z*H = 16", flush=True)
    good: dict[int, list[dict]] = {}
    for d in args.dims:
        good[d] = verified_configs(cell, d, cell.SPACE[d], out)
        if not good[d]:
            cfg = cell.SPACE[d][0]
            rel, pattern, _, _ = against_cudnn(cell, cfg, 1024, d, 0)
            print(f"   {cell.label(cfg)} against cuDNN: rel err {rel:.3g}; {pattern}")
            rel2, pattern2, _, _ = against_cudnn(cell, cfg, 1024, d, 0, swap_lbo_sbo)
            print(f"   same, V descriptor offsets swapped: rel err {rel2:.3g}; {pattern2}")
            out.setdefault("diagnosis", {})[str(d)] = [pattern, pattern2]
    save()

    print("2./3. timing per case: extension (verify off), then interleaved do_bench vs cuDNN",
          flush=True)
    rows, ranking = [], {}
    for d in args.dims:
        for causal in args.causal:
            for n_ctx in sorted(args.contexts):
                if not good[d]:
                    continue
                case: dict[str, Any] = {"D": d, "causal": causal, "N": n_ctx, "ext_ms": {}}
                spec = cell.spec_for(n_ctx, d, causal).with_options(verify=False)
                # the first (shortest) context times every correct config, longer ones its
                # three fastest (each timing builds fresh inputs: 2 GiB at N = 16384)
                ranked = ranking.get((d, causal))
                configs = good[d] if ranked is None else ranked[:3]
                for cfg in configs:
                    r = run_kernel(spec, cfg)
                    case["ext_ms"][cell.label(cfg)] = r.median_ms
                    print(f"   D={d} causal={causal} N={n_ctx} {cell.label(cfg):30} "
                          f"{r.status.value} {r.median_ms} ms", flush=True)
                timed = {k: v for k, v in case["ext_ms"].items() if v}
                if not timed:
                    continue
                best_label = min(timed, key=timed.get)
                ranking.setdefault((d, causal), [next(c for c in good[d] if cell.label(c) == k)
                                                 for k in sorted(timed, key=timed.get)])
                best = next(c for c in good[d] if cell.label(c) == best_label)
                rel, pattern, bound, (q, k, v) = against_cudnn(cell, best, n_ctx, d, causal)
                case.update(best=best_label, rel_err_vs_cudnn=rel)
                print(f"   best {best_label}: against cuDNN rel err {rel:.2e}", flush=True)
                if not rel < 2e-2:
                    print(f"   WRONG against cuDNN ({pattern}): not timing it")
                    out["cases"].append(case)
                    save()
                    continue
                sides = {"cuDNN": lambda q=q, k=k, v=v, causal=causal: sdpa_cudnn(q, k, v, causal),
                         best_label: bound.launch}
                samples: dict[str, list[float]] = {s: [] for s in sides}
                names = list(sides)
                t0 = time.perf_counter()
                for rnd in range(args.rounds):
                    for s in names[rnd % 2:] + names[:rnd % 2]:
                        samples[s].append(float(triton.testing.do_bench(sides[s],
                                                                        return_mode="median")))
                flops = 4 * cell.Z * cell.H * n_ctx * n_ctx * d / (2 if causal else 1)
                ratio, lo, hi = ratio_ci(np.asarray(samples[best_label]),
                                         np.asarray(samples["cuDNN"]))
                med = {s: float(np.median(v)) for s, v in samples.items()}
                case.update(samples_ms=samples, pct_of_cudnn=[100 * ratio, 100 * lo, 100 * hi],
                            tflops={s: flops / (m * 1e-3) / 1e12 for s, m in med.items()},
                            rounds_s=round(time.perf_counter() - t0, 1))
                print(f"   {args.rounds} rounds: cuDNN {med['cuDNN']:.3f} ms, ours "
                      f"{med[best_label]:.3f} ms: {100 * ratio:.1f} % [{100 * lo:.1f}, "
                      f"{100 * hi:.1f}]", flush=True)
                out["cases"].append(case)
                rows.append(case)
                save()
    print(f"\nfp16 attention forward, Z={cell.Z} H={cell.H}, on {out['device']} (torch "
          f"{torch.__version__}, triton {triton.__version__}); {args.rounds} interleaved rounds")
    print(f"{'D':>3} {'causal':>6} {'N':>6}  {'best config':30} {'ours TF/s':>9} "
          f"{'cuDNN TF/s':>10}  % of cuDNN [95 % CI]")
    for c in rows:
        tf = c["tflops"]
        pct = c["pct_of_cudnn"]
        print(f"{c['D']:3} {c['causal']:6} {c['N']:6}  {c['best']:30} {tf[c['best']]:9.1f} "
              f"{tf['cuDNN']:10.1f}  {pct[0]:5.1f} [{pct[1]:.1f}, {pct[2]:.1f}]")
    save()
    return 0
