#!/usr/bin/env bash
# What limits the final kernels on the shapes where they fall behind cuBLAS, in one GPU call, from
# the repository root (OUT: where the logs go):
#   1. the stage-6 variant's GPU tests (tile widths 128 / 256, clusters 1 / 2, stream-K);
#   2. experiments/gpu_shapes.py on the weak shapes (bf16): triton_fast's candidates and extra ones,
#      the timer's write flush against a read flush, the stage-6 variant's configurations;
#   3. (in the run of experiments/runs/2026-12-01_1927_shape_limits only, with that commit's code:
#      the warp-specialised Triton candidates; measured slower, then removed);
#   4. Nsight Compute on cuBLAS, triton_fast and stage 6 at those shapes (experiments/gpu_ncu_shapes.py).
# tools/gpu_env.sh sets up the backend and the wheels.
set -uo pipefail
cd "$(dirname "$0")/.."
source tools/gpu_env.sh
FEW=gpt2-qkv-2k,gpt2-qkv-8k,gpt2-xl-fc-4k,gpt2-dW-qkv
DECODE=llama3-qkv-M=1,llama3-o-M=16,qwen2.5-down-M=32,llama3-gate-M=64
status=0
start=$(date +%s)
(cd experiments && python3 -c "import tc_6_stream_k as v; v.extension()") >"$OUT/variant_test.log" 2>&1
timeout 120 python3 -m pytest -q -p no:cacheprovider -o addopts= -m gpu experiments/test_tc_6_stream_k.py \
    >>"$OUT/variant_test.log" 2>&1 || status=1
tail -n 1 "$OUT/variant_test.log"; echo "--- variant tests: $(($(date +%s) - start)) s"
# Few tiles: extra candidates too; decode: the heuristic's (its extra candidates were measured before).
for part in "few:square-4096,$FEW:--extra" "decode:$DECODE:"; do
    IFS=: read -r name only extra <<<"$part"
    mkdir -p "$OUT/$name"
    timeout "${LIMITS_SHAPES_S:-120}" python3 experiments/gpu_shapes.py --out "$OUT/$name" --dtypes bf16 $extra --flush \
        --tc6-variants --only "$only" --budget "${LIMITS_BUDGET:-85}" >"$OUT/$name/stdout.txt" 2>&1 || status=1
    grep -E "cuBLAS|variant|flush" "$OUT/$name/stdout.txt" | cut -c1-400; echo "--- $name: $(($(date +%s) - start)) s"
done
timeout 100 ncu --clock-control none --nvtx --nvtx-include "measure/" --csv \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,launch__grid_size,launch__block_size,sm__throughput.avg.pct_of_peak_sustained_elapsed \
    python3 experiments/gpu_ncu_shapes.py >"$OUT/ncu_shapes.csv" 2>"$OUT/ncu_shapes.err" || status=1
grep -c gpu__time_duration "$OUT/ncu_shapes.csv"; echo "--- ncu: $(($(date +%s) - start)) s"
exit $status
