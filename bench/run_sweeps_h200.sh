#!/usr/bin/env bash
# The one device call for issue 7's benchmarks: wheels, then the three scripts, results to $OUT.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
export PYTHONUNBUFFERED=1 OUT=${OUT:-/tmp/out}
nvidia-smi -L; nproc; python3 -c "import triton, torch; print('triton', triton.__version__, 'torch', torch.__version__)"
timeout -k 5 95 python3 bench/sweep_vs_autotune.py --size 4096 --budget-ms 10 --store /tmp/mm.sqlite --out $OUT/sweep_vs_autotune.json 2>&1 
timeout -k 5 45 python3 bench/search_efficiency.py --budget-ms 5 --record /tmp/eff.sqlite --stores /tmp/mm.sqlite --seeds 20 --out $OUT/search_efficiency.json 2>&1 
timeout -k 5 30 python3 bench/kernel_tuner_compare.py --out $OUT/kernel_tuner_compare.json 2>&1 
cp /tmp/mm.sqlite* /tmp/eff.sqlite* $OUT/ 2>/dev/null; true  
