#!/usr/bin/env bash
# The tensor-core experiments on a GPU, in sections, from the repository root (the course's own GPU
# runs are tools/gpu_run_all.sh's):
#
#   bash experiments/run_on_gpu.sh test tc timeline
#
# Sections:
#   triton     experiments/gpu_triton.py: check the Triton stages, the article's experiment, a sweep of
#              the fast kernel's configurations, compiler evidence -> $OUT/triton/
#   stages_ncu Nsight Compute on the course's stages at 4096^3 (experiments/ncu_course_stages.sh;
#              $PROBES picks some) -> $OUT/ncu_course_stages.csv
#   test       experiments/test_tc_6_stream_k.py on the GPU: the stage-6 variant's knobs, stream-K and
#              its timeline build are correct -> $OUT/test.log
#   tc         experiments/gpu_tensor_cores.py (build, check and time every stage, then the scheduling
#              experiments on the stage-6 variant) -> $OUT/tc/
#   timeline   experiments/gpu_tc_timeline.py: the stage-6 variant rebuilt with per-tile clock stamps,
#              where its cycles go at 4096^3 and 8192^3 after 1 s of sustained load, cuBLAS sustained
#              beside it -> $OUT/timeline.json (+ log)
#   ncu        Nsight Compute on eight GEMMs at 4096^3 (experiments/gpu_ncu_probe.py; $NCU_PROBES picks
#              some, e.g. "tc6 tc6_sk") -> $OUT/ncu_<what>.txt
#   sanitize   compute-sanitizer memcheck/racecheck/synccheck over stream-K (every tile split along K,
#              experiments/tc_6_stream_k.py) -> $OUT/sanitize_stream_k.log
#   shapes_test the final kernels' new paths on the GPU: stage 6's schedules (whole tiles, stream-K),
#              every per-shape triton_fast candidate on odd shapes -> $OUT/shapes_test.log
#   shapes     experiments/gpu_shapes.py: every candidate of triton_fast and stage 6's schedules on the
#              model shape table, against cuBLAS -> $OUT/shapes/ ($SHAPE_DTYPES, $SHAPE_BUDGET, $SHAPE_ARGS)
#   fp8        stage 7 (tc_7_fp8): its GPU tests, compute-sanitizer memcheck/racecheck/synccheck over
#              every variant (tools/gpu_sanitize_tensor_cores.py --fp8), the recording
#              (experiments/gpu_fp8_stage7.py), notebooks 09 and 12 live -> $OUT/fp8/
#   fp8_variants  the promoted mainloop's variants (experiments/gpu_fp8_stage7_variants.py; $ONLY
#              picks some) -> $OUT/fp8_stage7_variants.json
#   fixed_cost stage 6's time at the small squares split into a part per K-slice and a part paid once
#              (experiments/gpu_tc6_fixed_cost.py), Nsight Compute's sampled stalls per SASS instruction
#              of kernel<64> and cuBLAS at 1024^3, then the same timing with the last stores waited for
#              only until they have read shared memory (cp.async.bulk.wait_group.read, CUTLASS's
#              tma_store_wait; a copy of the tree is patched, not yours) -> $OUT/fixed_cost_*.json,
#              $OUT/ncu_source_*.csv, $OUT/fixed_cost.log
#   power      nvidia-smi sampled every 100 ms through 5 s of back-to-back cuBLAS bf16 GEMMs
#              (experiments/gpu_power_sampling.py) -> $OUT/power_sampling.csv (+ log)
#
# tools/gpu_env.sh sets up the GPU backend and installs the Python packages the GPU image lacks from
# wheels in .whl/ (see README).
set -uo pipefail
cd "$(dirname "$0")/.."
source tools/gpu_env.sh
build_variant() {  # the course's extension and the variant's, built before anything is timed or sanitized
    (cd experiments && python3 -c "from course_lib.kernels import tensor_cores as tc; import tc_6_stream_k as v; tc.extension(); v.extension()")
}

status=0
for section in "$@"; do
    start=$(date +%s)
    case "$section" in
    triton)
        mkdir -p "$OUT/triton"
        OUT="$OUT/triton" timeout 420 python3 experiments/gpu_triton.py --budget "${TRITON_BUDGET:-320}" >"$OUT/triton/stdout.txt" 2>&1 || status=1
        tail -n 40 "$OUT/triton/stdout.txt"
        ;;
    stages_ncu)
        OUT="$OUT" bash experiments/ncu_course_stages.sh ${PROBES:-} || status=1
        ;;
    test)
        build_variant >"$OUT/test.log" 2>&1
        timeout 400 python3 -m pytest -q -p no:cacheprovider -o addopts= experiments/test_tc_6_stream_k.py >>"$OUT/test.log" 2>&1 || status=1
        tail -n 3 "$OUT/test.log"
        ;;
    shapes_test)
        python3 -c "from course_lib.kernels import tensor_cores as tc; tc.extension()" >"$OUT/shapes_test.log" 2>&1
        timeout 300 python3 -m pytest -q -p no:cacheprovider -o addopts= -x tests/test_tensor_cores.py \
            -k "stage6_schedules or persistent_grid_settings or test_stage_is_correct_on_the_gpu" >>"$OUT/shapes_test.log" 2>&1 || status=1
        timeout 300 python3 -m pytest -q -p no:cacheprovider -o addopts= tests/test_coalescing_and_triton.py \
            -k "shape_candidate" >>"$OUT/shapes_test.log" 2>&1 || status=1
        grep -E "passed|failed|Error" "$OUT/shapes_test.log" | tail -n 8
        ;;
    shapes)
        mkdir -p "$OUT/shapes"
        timeout 560 python3 experiments/gpu_shapes.py --out "$OUT/shapes" --tc6 --dtypes "${SHAPE_DTYPES:-bf16,fp16,tf32,fp32}" \
            --budget "${SHAPE_BUDGET:-300}" ${SHAPE_ARGS:-} >"$OUT/shapes/stdout.txt" 2>&1 || status=1
        tail -n 5 "$OUT/shapes/stdout.txt"
        ;;
    tc)
        mkdir -p "$OUT/tc"
        timeout 470 python3 experiments/gpu_tensor_cores.py --out "$OUT/tc" >"$OUT/tc/stdout.txt" 2>&1 || status=1
        tail -n 30 "$OUT/tc/stdout.txt"
        ;;
    timeline)
        timeout 300 python3 experiments/gpu_tc_timeline.py --out "$OUT" --variants tc6,cublas --sustain-s 1.0 >"$OUT/timeline.log" 2>&1 || status=1
        grep -v -e "^\s*$" "$OUT/timeline.log" | tail -n 24
        ;;
    ncu)
        build_variant >/dev/null 2>&1
        # "<what> <ncu kernel filter>": the CUDA stages' kernels are all named "kernel" (in namespaces).
        for probe in "tc6 kernel" "tc6_sk kernel" "cublas16 regex:gemm|xmma|cutlass|nvjet" "cublas16h regex:gemm|xmma|cutlass|nvjet" \
                     "triton16 fast_matmul_kernel" "triton16h fast_matmul_kernel" "triton32 fast_matmul_kernel" \
                     "cublas32 regex:gemm|xmma|cutlass|nvjet"; do
            set -- $probe
            [ -n "${NCU_PROBES:-}" ] && [[ " $NCU_PROBES " != *" $1 "* ]] && continue
            timeout 120 ncu --clock-control none --kernel-name "$2" --launch-skip 1 --launch-count 1 \
                --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables \
                --section WarpStateStats python3 experiments/gpu_ncu_probe.py "$1" >"$OUT/ncu_$1.txt" 2>&1 || status=1
            echo "ncu $1: $(grep -E -m1 "Duration" "$OUT/ncu_$1.txt")"
        done
        ;;
    sanitize)
        log="$OUT/sanitize_stream_k.log"
        build_variant >"$log" 2>&1
        for tool in memcheck racecheck synccheck; do
            echo "=== compute-sanitizer --tool $tool: stage-6 variant, stream-K" | tee -a "$log"
            PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout 150 compute-sanitizer --tool "$tool" --error-exitcode 3 \
                --report-api-errors no python3 experiments/tc_6_stream_k.py >>"$log" 2>&1
            echo "exit $?" | tee -a "$log"
            grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$log" | tail -n 1
        done
        ;;
    fp8)
        mkdir -p "$OUT/fp8"
        python3 -c "from course_lib.kernels import tensor_cores as tc; tc.extension()" >"$OUT/fp8/build.log" 2>&1
        timeout 150 python3 -m pytest -q -p no:cacheprovider -o addopts= tests/test_tc_fp8.py tests/test_tensor_cores.py \
            -k "gpu" >"$OUT/fp8/tests.log" 2>&1 || status=1
        tail -n 2 "$OUT/fp8/tests.log"
        for tool in memcheck racecheck synccheck; do
            PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout 70 compute-sanitizer --tool "$tool" --error-exitcode 3 \
                --report-api-errors no python3 tools/gpu_sanitize_tensor_cores.py --fp8 >"$OUT/fp8/sanitize_$tool.log" 2>&1
            echo "$tool: exit $? $(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$OUT/fp8/sanitize_$tool.log" | tail -n 1)"
        done
        (cd experiments && timeout 240 python3 gpu_fp8_stage7.py --out "$OUT/fp8/fp8_stage7.json" >"$OUT/fp8/fp8_stage7.log" 2>&1) || status=1
        tail -n 18 "$OUT/fp8/fp8_stage7.log"
        timeout 240 python3 -m course_lib.notebooks --backend gpu --out "$OUT/fp8/notebooks" 09 12 >"$OUT/fp8/notebooks.log" 2>&1 || status=1
        tail -n 2 "$OUT/fp8/notebooks.log"
        ;;
    fp8_variants)
        (cd experiments && timeout 400 python3 gpu_fp8_stage7_variants.py --out "$OUT/fp8_stage7_variants.json") || status=1
        ;;
    fixed_cost)
        log="$OUT/fixed_cost.log"
        (cd experiments && LABEL=main timeout 150 python3 gpu_tc6_fixed_cost.py --out "$OUT/fixed_cost_main.json") >"$log" 2>&1 || status=1
        for w in 64 cublas; do
            filt='regex:stage6'; [ "$w" = cublas ] && filt='regex:nvjet|gemm|cutlass'
            timeout 100 ncu --clock-control none --kernel-name-base mangled --kernel-name "$filt" --launch-skip 1 \
                --launch-count 1 --section SourceCounters --section WarpStateStats --section SpeedOfLight \
                -o "$OUT/rep_$w" python3 experiments/gpu_tc6_fixed_cost.py --launch "$w" >>"$log" 2>&1 || status=1
            ncu -i "$OUT/rep_$w.ncu-rep" --page source --csv --print-source sass >"$OUT/ncu_source_$w.csv" 2>>"$log"
            ncu -i "$OUT/rep_$w.ncu-rep" --page details >>"$log" 2>&1
            rm -f "$OUT/rep_$w.ncu-rep"
        done
        copy=$(mktemp -d) && cp -r . "$copy/tree" && sed -i 's/cp.async.bulk.wait_group 0;/cp.async.bulk.wait_group.read 0;/' \
            "$copy/tree/course_lib/csrc/tc_hopper.cuh"
        (cd "$copy/tree/experiments" && PYTHONPATH="${PYTHONPATH/$PWD/$copy/tree}" LABEL=read_wait timeout 220 \
            python3 gpu_tc6_fixed_cost.py --out "$OUT/fixed_cost_read.json") >>"$log" 2>&1 || status=1
        grep -E "^fit" "$log"
        ;;
    power)
        timeout 60 python3 experiments/gpu_power_sampling.py --out "$OUT" >"$OUT/power_sampling.log" 2>&1 || status=1
        head -n 2 "$OUT/power_sampling.log"
        ;;
    *)
        echo "unknown section $section (triton, stages_ncu, test, shapes_test, shapes, tc, timeline, ncu, sanitize, fp8, fp8_variants, fixed_cost, power)"
        exit 2
        ;;
    esac
    echo "--- $section: $(($(date +%s) - start)) s"
done
exit $status
