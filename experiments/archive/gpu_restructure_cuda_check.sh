#!/usr/bin/env bash
# The restructured tensor-core stages on an H200, from the repository root (OUT: where logs go):
# build the course's extension and the stage-6 variant, run the GPU tests of both, time stage 6
# before/after (gpu_restructure_cuda_ab.py) and run compute-sanitizer over the persistent stages.
# Produced experiments/runs/2026-12-01_sass_restructure_cuda/gpu/.
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
if [ -d .whl ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
    export PYTHONPATH=/tmp/site:$PWD:$PWD/experiments
else
    export PYTHONPATH=$PWD:$PWD/experiments
fi
export COURSE_BACKEND=gpu PYTHONUNBUFFERED=1 MAX_JOBS=16
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv; nvcc --version | tail -n 2;
  python3 -c "import torch, numpy; print('torch', torch.__version__, 'numpy', numpy.__version__)"; } 2>&1 | tee "$OUT/env.txt"
python3 -c "import course_lib; course_lib.describe()" 2>&1 | tee -a "$OUT/env.txt" || exit 1
t0=$(date +%s)
timeout 300 python3 -c "
import time; t=time.time()
from course_lib.kernels import tensor_cores as tc; import tc_6_stream_k as v
tc.extension(); print('course extension', round(time.time()-t), 's'); v.extension(); print('variant', round(time.time()-t), 's')" \
    >"$OUT/build.log" 2>&1 || { tail -n 40 "$OUT/build.log"; exit 1; }
tail -n 2 "$OUT/build.log"
timeout 240 python3 -m pytest -q -p no:cacheprovider -o addopts= -m gpu tests/test_tensor_cores.py experiments/test_tc_6_stream_k.py \
    >"$OUT/pytest_gpu.log" 2>&1; echo "pytest exit $?"; tail -n 4 "$OUT/pytest_gpu.log"
timeout 150 python3 experiments/gpu_restructure_cuda_ab.py "$OUT/ab.json" 2>&1 | tee "$OUT/ab.log"
for tool in racecheck synccheck memcheck; do
    PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout 100 compute-sanitizer --tool $tool --error-exitcode 3 --report-api-errors no \
        python3 tools/gpu_sanitize_tensor_cores.py tc_5_persistent tc_6_tma_store >"$OUT/sanitize_$tool.log" 2>&1
    echo "compute-sanitizer $tool: exit $? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitize_$tool.log" | tail -n 1)"
done
echo "total $(($(date +%s) - t0)) s"
