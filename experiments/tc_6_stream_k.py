"""Stage 6 with its experiment knobs (experiments/kernels/tc_6_stream_k.cu), from Python.

The course's stage 6 (``course_lib.kernels.tensor_cores.tc_6_tma_store``) hands out whole tiles
to 2-CTA clusters. This variant is the kernel that was measured as stage 6 before the course kept
only its default path, and it still has the knobs the scheduling experiments turned:

* ``cluster`` 1 or 2, ``group_m``, ``max_ctas`` (the course's defaults: 2, 8, one CTA per SM);
* ``block_n``: tiles of 128 x 256 (the course's) or 128 x 128;
* ``stream_k``: share the ragged last wave out by K slices (Osama et al., PPoPP 2023);
* a build with ``timeline=True`` (``-DTC_TIMELINE``) whose consumers stamp ``clock64`` per tile
  (``extension(timeline=True).timeline()``; experiments/gpu_tc_timeline.py reads it).

It builds (GPU machines only) from its own sources plus the course's headers in course_lib/csrc,
with the course's flags. Its stream-K schedule (``WorkCursor`` in course_lib/csrc/tc_stream_k.cuh)
is the course's, since stage 6 uses stream-K for few tiles: the Python model of it is
``course_lib.model.schedules.stream_k_work``.

    PYTHONPATH=. COURSE_BACKEND=gpu python3 experiments/tc_6_stream_k.py   # stream-K at two small
        shapes, for compute-sanitizer (experiments/run_on_gpu.sh sanitize)
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable

from course_lib import backend, compiler, registry
from course_lib.features import HOPPER_SM90A
from course_lib.kernels import tensor_cores as tc

KERNELS = Path(__file__).resolve().parent / "kernels"
SOURCE = KERNELS / "tc_6_stream_k.cu"
BINDING = KERNELS / "tc_experiments_binding.cu"
INCLUDE = (KERNELS, tc.CSRC)
_EXTENSIONS: dict[bool, object] = {}


def extension(timeline: bool = False, verbose: bool = False):
    """Build (first call, about a minute) or load the variant's extension; ``timeline`` adds the
    clock stamps (a second build, its own cache folder)."""
    b = backend.get()
    if not HOPPER_SM90A.available(b.capability) or b.assumed:
        raise RuntimeError(f"the stage-6 variant needs {HOPPER_SM90A.name} ({HOPPER_SM90A.where})")
    if timeline not in _EXTENSIONS:
        _, flags, _ = tc.build_plan(b.capability)
        name = "course_tc_6_stream_k" + ("_timeline" if timeline else "")
        defines = ["-DTC_TIMELINE"] if timeline else []
        _EXTENSIONS[timeline] = compiler.load_extension(name, [SOURCE, BINDING], flags + defines, INCLUDE, verbose=verbose)
    return _EXTENSIONS[timeline]


def persistent_variant(*, cluster: int = 2, group_m: int = 8, max_ctas: int | Callable[[], int] = 0,
                       stream_k: bool = False, timeline: bool = False, block_n: int = 256) -> Callable:
    """A GEMM (bf16, as the course's stages) that runs the variant with these knobs; the name says
    which, e.g. ``tc_6_stream_k[cluster=2,group_m=8,max_ctas=132,stream_k]`` (``block_n`` 128 adds
    ``,n128``)."""
    fn = tc.make_gemm("tc_6_tma_store", lambda: extension(timeline).tc_6_stream_k,
                      shape_multiple=registry.get_stage("tc_6_tma_store").shape_multiple, cluster=cluster,
                      group_m=group_m, max_ctas=max_ctas, stream_k=stream_k, block_n=block_n)
    ctas = max_ctas if isinstance(max_ctas, int) else "sm_count"
    fn.__name__ = fn.__qualname__ = (f"tc_6_stream_k[cluster={cluster},group_m={group_m},max_ctas={ctas}"
                                     f"{',stream_k' if stream_k else ''}{',n128' if block_n == 128 else ''}]")
    return fn


def as_measured() -> Callable:
    """The variant with the course's knobs (cluster 2, group_m 8, one CTA per SM, no stream-K):
    the kernel whose SASS the course measured as stage 6."""
    return persistent_variant(cluster=2, group_m=8, max_ctas=backend.sm_count)


def compile_variant(timeline: bool = False, use_cache: bool = True) -> compiler.CompileResult:
    """The variant compiled for sm_90a without a GPU (ptxas's report and the cubin)."""
    flags = [*compiler.NVCC_FLAGS, *(["-DTC_TIMELINE"] if timeline else [])]
    return compiler.compile_cubin(SOURCE, "sm_90a", flags, include_dirs=INCLUDE, use_cache=use_cache,
                                  name="tc_6_stream_k" + ("_timeline" if timeline else ""))


# ---- a run for compute-sanitizer ----------------------------------------------------------------------
SANITIZE_SHAPES = ((256, 256, 256), (264, 520, 200))


def main() -> int:
    """Stream-K at shapes with fewer tiles than clusters (every tile split along K, finished through
    the partial-sum buffers and flags), for compute-sanitizer; non-zero exit if a result is wrong."""
    import torch

    import course_lib

    bad = 0
    for cluster, block_n in ((1, 256), (2, 256), (1, 128), (2, 128)):
        fn = persistent_variant(cluster=cluster, stream_k=True, block_n=block_n)
        for M, N, K in SANITIZE_SHAPES:
            a, b = course_lib.random_inputs(M, N, K, "bf16", seed=0)
            c = fn(a, b)
            torch.cuda.synchronize()
            ref = a.double() @ b.double()
            err = float(torch.linalg.norm(c.double() - ref) / torch.linalg.norm(ref))
            bad += not err < 1e-2
            print(f"{fn.__name__} {M}x{N}x{K}: relative error {err:.2e} {'ok' if err < 1e-2 else 'WRONG'}", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
