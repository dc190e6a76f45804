#!/usr/bin/env bash
# One device call per part, so a short device budget buys whole results:
#   bash bench/h200_batch.sh sweeps      # issue 7: sweep vs triton.autotune, search efficiency, Kernel Tuner
#   bash bench/h200_batch.sh hardware    # issues 5, 8, 9: GEMM, attention, swizzle, breakdowns, faults
#   bash bench/h200_batch.sh next        # what the open issues 7 and 8 need measured next
#   bash bench/h200_batch.sh more        # and after that
#   bash bench/h200_batch.sh again       # and after that
#   bash bench/h200_batch.sh ab          # TMA GEMM and cuBLAS interleaved (bench/gemm_interleaved.py)
# Needs the wheelhouse in .whl/ (../shared/device/wheelhouse.sh plus kernel-tuner, optuna, dask).
# Each step has its own cap and its own log in $OUT; everything else it writes is packed into
# $OUT/<part>.tgz at the end (the device tool returns at most 8 files).
set -u
part=${1:?sweeps or hardware}
OUT=${OUT:-/tmp/out}; R=/tmp/r; mkdir -p "$OUT" "$R"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1
T0=$(date +%s)
DEADLINE=${DEADLINE:-560}  # seconds after T0 by which every step has ended (device call: 600 s)
step() {  # step NAME CAP_S COMMAND...: output to $OUT/NAME.log, never through a pipe
  local name=$1 cap=$2; shift 2
  local left=$(( DEADLINE - ($(date +%s) - T0) ))
  if (( left < 15 )); then echo "== $name: skipped, ${left} s left"; return; fi
  (( cap > left )) && cap=$left
  local t=$(date +%s)
  timeout -k 5 "$cap" "$@" >"$OUT/$name.log" 2>&1
  echo "== $name: rc=$? $(( $(date +%s) - t )) s (cap $cap s, $(( $(date +%s) - T0 )) s in all)"
  tar -czf "$OUT/$part.tgz" -C $R . 2>/dev/null  # after every step: a call cut short keeps it
}
{ nvidia-smi -L; nproc; python3 -c "import triton, torch, jax; print('triton', triton.__version__, 'torch', torch.__version__, 'jax', jax.__version__)"; } 2>&1 | tee "$OUT/env.log"
case $part in
sweeps)  # the stores come back in the .tgz; the strategies are replayed from them on any machine
  step sweep_vs_autotune 150 python3 bench/sweep_vs_autotune.py --size 4096 --budget-ms 10 \
       --store $R/mm.sqlite --out $R/sweep_vs_autotune.json
  step search_record 220 python3 bench/search_efficiency.py --budget-ms 5 --record $R/eff.sqlite \
       --spaces attn_fwd scale --seeds 20 --out $R/search_efficiency_record_only.json
  step kernel_tuner 130 python3 bench/kernel_tuner_compare.py --store $R/kt.sqlite \
       --out $R/kernel_tuner_compare.json
  ;;
final)  # third call: the sweep after the speed fixes, the fixed hang variant, what call 2 cut short
  step sweep_vs_autotune 150 python3 bench/sweep_vs_autotune.py --size 4096 --budget-ms 10 \
       --store $R/mm.sqlite --out $R/sweep_vs_autotune.json
  step faults 90 python3 bench/fault_injection.py --timeout 5 --out $R/reliability
  step kernel_tuner 100 python3 bench/kernel_tuner_compare.py --store $R/kt.sqlite \
       --out $R/kernel_tuner_compare.json
  step search_record 170 python3 bench/search_efficiency.py --budget-ms 5 --record $R/eff.sqlite \
       --spaces attn_fwd scale --seeds 20 --out $R/search_efficiency_record_only.json
  step swizzle 40 python3 bench/swizzle_banks.py --out $R --n 8192 --tiles 64 --swizzles 32B 64B 128B
  step attention 90 python3 bench/attention_vs_sdpa.py --dims 128 --contexts 1024 4096 \
       --json $R/attention_vs_sdpa.json
  ;;
last)  # fourth call: the sweep comparison again (call 3's progress printer crashed), phase 1 of faults
  step sweep_vs_autotune 130 python3 bench/sweep_vs_autotune.py --size 4096 --budget-ms 10 \
       --store $R/mm.sqlite --out $R/sweep_vs_autotune.json
  step faults 90 python3 bench/fault_injection.py --timeout 5 --phases 1 --out $R/reliability
  ;;
next)  # what the open issues need measured next: the sweep after the in-place verify and the kept
      # pool, cold and warm (7); the TMA GEMM (8); the attention and copy records, resumed from the
      # stores of run 3 and run 2 (the store skips what it holds: same source hash, device, toolchain)
  step sweep_vs_autotune 170 python3 bench/sweep_vs_autotune.py --size 4096 --budget-ms 10 --warm \
       --store $R/mm.sqlite --out $R/sweep_vs_autotune.json
  step gemm 150 env OUT=$R python3 bench/gemm_vs_cublas.py 8192
  cp bench/results/sweeps-h200/run2/eff.sqlite $R/copy.sqlite
  step copy_record 40 python3 bench/search_efficiency.py --budget-ms 5 --record $R/copy.sqlite \
       --spaces scale --out $R/search_efficiency_copy_record_only.json
  cp bench/results/sweeps-h200/run3/eff.sqlite $R/attn.sqlite
  step attn_record 200 python3 bench/search_efficiency.py --budget-ms 5 --record $R/attn.sqlite \
       --spaces attn_fwd --out $R/search_efficiency_attn_record_only.json
  ;;
more)  # call 2 of this round: the sweep with inputs drawn ahead (7); the TMA cell around its best
      # config (8); the attention record resumed from run 5's store (7); D=128 at 16k context (8)
  step sweep_vs_autotune 140 python3 bench/sweep_vs_autotune.py --size 4096 --budget-ms 10 --warm \
       --store $R/mm.sqlite --out $R/sweep_vs_autotune.json
  step gemm_tma 110 env OUT=$R python3 bench/gemm_vs_cublas.py 8192 --tma-more
  cp bench/results/sweeps-h200/run5/attn.sqlite $R/attn.sqlite
  step attn_record 150 python3 bench/search_efficiency.py --budget-ms 5 --record $R/attn.sqlite \
       --spaces attn_fwd --out $R/search_efficiency_attn_record_only.json
  step attention 130 python3 bench/attention_vs_sdpa.py --dims 128 --contexts 16384 \
       --json $R/attention_vs_sdpa.json
  ;;
again)  # call 3: both GEMM runs again on another draw of machine, cuBLAS timed before and after
      # (its time moved 10 % between calls 1 and 2); attention D=128, N=16384, causal (cut in call 2)
  step gemm_tma 90 env OUT=$R python3 bench/gemm_vs_cublas.py 8192 --tma-more
  step gemm 110 env OUT=$R python3 bench/gemm_vs_cublas.py 8192
  step attention 150 python3 bench/attention_vs_sdpa.py --dims 128 --contexts 16384 --causal 1 \
       --no-names --json $R/attention_vs_sdpa.json
  ;;
ab)  # call 4: the two best TMA configs and cuBLAS interleaved, 30 rounds, CI on the ratio
  step gemm_ab 170 python3 bench/gemm_interleaved.py 8192 --rounds 30 --json $R/gemm_interleaved.json
  ;;
causal16k)  # call 5: attention D=128, N=16384, causal alone (its 150 s cap in call 3 was too short)
  step attention 280 python3 bench/attention_vs_sdpa.py --dims 128 --contexts 16384 --causal 1 \
       --no-names --json $R/attention_vs_sdpa.json
  ;;
hardware)
  step faults 130 python3 bench/fault_injection.py --timeout 5 --out $R/reliability
  step gemm 110 env OUT=$R python3 bench/gemm_vs_cublas.py 8192
  step attention 170 python3 bench/attention_vs_sdpa.py --contexts 1024 4096 16384 \
       --json $R/attention_vs_sdpa.json
  step swizzle 60 python3 bench/swizzle_banks.py --out $R --n 8192
  step breakdown 80 python3 bench/breakdown_h200_check.py --out $R
  ;;
esac
for f in "$OUT"/*.log; do echo "---- $f"; tail -n 14 "$f"; done
