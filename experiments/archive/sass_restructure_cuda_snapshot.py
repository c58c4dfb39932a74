"""Compile every stage (and stage 1 for sm_80) without the cache and write each cubin's SASS.

Produced the raw "after" listings of experiments/runs/2026-12-01_sass_restructure_cuda/comparison.md:

    PYTHONPATH=. python experiments/sass_restructure_cuda_snapshot.py DIR [--variant]

Writes DIR/<stage>.<arch>.sass and DIR/<stage>.<arch>.ptxas.log; with --variant (after the
restructure) also the stage-6 experiment variant, plain and with -DTC_TIMELINE. The SASS "before"
was written by the same steps at commit 8f65bd8 (then: tc.compile_all("sm_90a", use_cache=False),
tc.compile_stage("tc_1_mma_sync", "sm_80", use_cache=False) and, for the timeline,
tc.compile_stage("tc_6_tma_store", defines=("TC_TIMELINE",)), each cubin through cuobjdump --dump-sass).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # experiments/, for tc_6_stream_k

from course_lib import compiler  # noqa: E402
from course_lib.kernels import tensor_cores as tc  # noqa: E402

out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
results = {f"{name}.sm_90a": r for name, r in tc.compile_all("sm_90a", use_cache=False).items()}
results["tc_1_mma_sync.sm_80"] = tc.compile_stage("tc_1_mma_sync", "sm_80", use_cache=False)
if "--variant" in sys.argv:
    import tc_6_stream_k as variant  # noqa: E402

    results["tc_6_stream_k.sm_90a"] = variant.compile_variant(use_cache=False)
    results["tc_6_stream_k.timeline.sm_90a"] = variant.compile_variant(timeline=True, use_cache=False)
for key, r in results.items():
    (out / f"{key}.sass").write_text(compiler.sass(r.cubin))
    (out / f"{key}.ptxas.log").write_text(r.ptxas_log)
    print(key, [(k.name, k.registers, k.spill_store_bytes, k.stack_bytes) for k in r.kernels], r.warnings or "")
