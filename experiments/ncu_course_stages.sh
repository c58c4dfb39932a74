#!/usr/bin/env bash
# Nsight Compute on the course's stages at 4096^3 (the GPU's own clocks): memory traffic and hit rates,
# shared-memory wavefronts and bank conflicts, occupancy, issue slots, stall reasons.
#   OUT=/tmp/out bash experiments/ncu_course_stages.sh [probe ...]   -> $OUT/ncu_course_stages.csv
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu_out}
mkdir -p "$OUT"
export COURSE_BACKEND=gpu PYTHONUNBUFFERED=1
METRICS=gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,dram__bytes_read.sum,dram__bytes_write.sum,\
lts__t_sector_hit_rate.pct,l1tex__t_sector_hit_rate.pct,\
l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum,\
l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum,\
l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,\
smsp__inst_executed.sum,smsp__inst_executed_op_shared_ld.sum,smsp__inst_executed_op_shared_st.sum,\
smsp__inst_executed_pipe_fma.sum,sm__warps_active.avg.pct_of_peak_sustained_active,\
sm__maximum_warps_per_active_cycle_pct,smsp__issue_active.avg.pct_of_peak_sustained_active,\
sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,\
launch__occupancy_limit_registers,launch__occupancy_limit_shared_mem,launch__occupancy_limit_warps,\
launch__occupancy_limit_blocks,launch__block_size,launch__grid_size,\
'regex:sm__pipe_tensor.*cycles_active.avg.pct_of_peak_sustained_active',\
'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio'
csv="$OUT/ncu_course_stages.csv"
: >"$csv"
probes=("$@")
[ ${#probes[@]} -eq 0 ] && mapfile -t probes < <(python3 experiments/ncu_course_stages.py --filters | cut -d' ' -f1)
while read -r probe kernel; do
    [[ " ${probes[*]} " == *" $probe "* ]] || continue
    start=$(date +%s)
    echo "=== $probe" >>"$csv"
    timeout 240 ncu --clock-control none --kernel-name-base demangled --kernel-name "regex:$kernel" --launch-skip 1 --launch-count 1 \
        --csv --page raw --metrics "$METRICS" python3 experiments/ncu_course_stages.py "$probe" >>"$csv" 2>>"$OUT/ncu_err.txt"
    echo "ncu $probe: exit $? in $(( $(date +%s) - start )) s"
done < <(python3 experiments/ncu_course_stages.py --filters)
