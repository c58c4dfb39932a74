#!/usr/bin/env bash
# Everything the course does on a GPU, in sections, from the repository root:
#
#   bash tools/gpu_run_all.sh record notebooks        # what re-records the course (< 10 minutes)
#   bash tools/gpu_run_all.sh sanitize assume         # checks: sanitizers, older GPUs (COURSE_ASSUME_CAPABILITY)
#
# Sections:
#   record     python -m course_lib.bench --record -> $OUT/nvidia_h200.json (+ log); with
#              STAGES=a,b only those stages, merged into a copy of the committed recording
#              (--replace-in; KEEP_CUBLAS=1 keeps its cuBLAS rows, refused for FP8 stages while the
#              recording's e4m3 cuBLAS rows were timed another way: provenance "fp8_cublas") -> $OUT/nvidia_h200.json
#   hosttime   experiments/gpu_host_time.py: host time per call, and the final kernels on the model
#              shapes timed as called and in GPU time -> $OUT/host_time.json (+ log)
#   notebooks  every notebook (or those named in $NOTEBOOKS, e.g. "01 02") executed top to bottom on
#              the GPU backend -> $OUT/notebooks_gpu.tgz
#   assume     notebooks 06 to 12 executed live as GPUs of compute capability 7.5 and 8.0 would run
#              them (COURSE_ASSUME_CAPABILITY; $CAPABILITIES overrides, "native" = this GPU as it is)
#              and as this GPU -> $OUT/assume.log, $OUT/notebooks_assume.tgz
#   sanitize   compute-sanitizer memcheck/racecheck over every numba kernel,
#              memcheck/racecheck/synccheck over every tensor-core stage (stage 7 with --fp8), and
#              memcheck over the final Triton stages' planned launches -> $OUT/sanitize.log
#   check      course_lib.check on every stage and dtype at the GPU's shapes -> $OUT/check.log
#   graphs     every final stage replayed from a CUDA graph, on two streams at once and under
#              torch.compile (tests/test_gpu_graphs_and_streams.py) -> $OUT/graphs.log, $OUT/graphs_table.txt
#   exercises  every puzzle's own solution through its check, on the GPU -> $OUT/exercises.log
#
# The experiments (the Triton sweep, stage 6's scheduling knobs and timeline, Nsight Compute) are
# experiments/run_on_gpu.sh's.
#
# tools/gpu_env.sh sets up the GPU backend and installs the Python packages the GPU image lacks from
# wheels in .whl/ (see README).
set -uo pipefail
cd "$(dirname "$0")/.."
source tools/gpu_env.sh

status=0
for section in "$@"; do
    start=$(date +%s)
    case "$section" in
    record)
        if [ -n "${STAGES:-}" ]; then
            cp course_lib/results/nvidia_h200.json "$OUT/nvidia_h200.json"
            timeout 580 python3 -m course_lib.bench --record --stages "$STAGES" --out "$OUT/rerecord.json" \
                --replace-in "$OUT/nvidia_h200.json" ${KEEP_CUBLAS:+--keep-cublas} >"$OUT/record.log" 2>&1 || status=1
        else
            timeout 560 python3 -m course_lib.bench --record --out "$OUT/nvidia_h200.json" >"$OUT/record.log" 2>&1 || status=1
        fi
        tail -n 3 "$OUT/record.log"
        ;;
    hosttime)
        timeout 400 python3 experiments/gpu_host_time.py --out "$OUT/host_time.json" >"$OUT/host_time.log" 2>&1 || status=1
        grep -v WARNING "$OUT/host_time.log" | tail -n 80
        ;;
    notebooks)
        timeout 540 python3 -m course_lib.notebooks ${NOTEBOOKS:-} --backend gpu --out "$OUT/notebooks_gpu" >"$OUT/notebooks.log" 2>&1 || status=1
        cat "$OUT/notebooks.log" | grep -v WARNING
        tar czf "$OUT/notebooks_gpu.tgz" -C "$OUT" notebooks_gpu && rm -rf "$OUT/notebooks_gpu"
        ;;
    assume)
        log="$OUT/assume.log"
        : >"$log"
        mkdir -p "$OUT/notebooks_assume"
        for cap in ${CAPABILITIES:-7.5 8.0 native}; do
            value=$([ "$cap" = native ] || echo "$cap")
            echo "=== COURSE_ASSUME_CAPABILITY=${value:-(unset)}" | tee -a "$log"
            COURSE_ASSUME_CAPABILITY=$value python3 -c "import course_lib; course_lib.describe()" 2>&1 | tee -a "$log"
            COURSE_ASSUME_CAPABILITY=$value timeout 400 python3 -m course_lib.notebooks 06 07 08 09 10 11 12 --backend gpu \
                --out "$OUT/notebooks_assume/$cap" >>"$log" 2>&1 || status=1
            grep -E "executed|FAILED" "$log" | tail -n 2
        done
        tar czf "$OUT/notebooks_assume.tgz" -C "$OUT" notebooks_assume && rm -rf "$OUT/notebooks_assume"
        ;;
    sanitize)
        log="$OUT/sanitize.log"
        : >"$log"
        python3 -c "from course_lib.kernels import tensor_cores as tc; tc.extension()" >>"$log" 2>&1
        sanitize() {  # sanitize <label> "<script> [args]" <tools...>
            local label=$1 script=$2
            shift 2
            for tool in "$@"; do
                echo "=== compute-sanitizer --tool $tool: $label" | tee -a "$log"
                PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout 150 compute-sanitizer --tool "$tool" --error-exitcode 3 \
                    --report-api-errors no python3 $script >>"$log" 2>&1
                echo "exit $?" | tee -a "$log"
                grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$log" | tail -n 1
            done
        }
        sanitize "numba kernels" tools/gpu_sanitize_numba.py memcheck racecheck
        sanitize "tensor-core stages" tools/gpu_sanitize_tensor_cores.py memcheck racecheck synccheck
        sanitize "stage 7 (FP8)" "tools/gpu_sanitize_tensor_cores.py --fp8" memcheck racecheck synccheck
        sanitize "Triton stages (planned launches)" tools/gpu_sanitize_triton.py memcheck
        ;;
    check)
        timeout 540 python3 tools/gpu_check.py >"$OUT/check.log" 2>&1 || status=1
        grep -E "FAILED|stages," "$OUT/check.log"
        ;;
    graphs)
        COURSE_GPU_TABLE="$OUT/graphs_table.txt" timeout 500 python3 -m pytest -q -p no:cacheprovider -o addopts="" \
            tests/test_gpu_graphs_and_streams.py >"$OUT/graphs.log" 2>&1 || status=1
        tail -n 5 "$OUT/graphs.log"
        cat "$OUT/graphs_table.txt" 2>/dev/null
        ;;
    exercises)
        timeout 300 python3 tools/gpu_exercises.py >"$OUT/exercises.log" 2>&1 || status=1
        grep -E "^---|not accepted|Solved|solved" "$OUT/exercises.log" | tail -n 40
        ;;
    *)
        echo "unknown section $section (record, hosttime, notebooks, assume, sanitize, check, graphs, exercises)"
        exit 2
        ;;
    esac
    echo "--- $section: $(($(date +%s) - start)) s"
done
exit $status
