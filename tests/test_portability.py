"""The committed outputs compare on another CPU too.

The notebooks' outputs are stored from a run on one machine and compared by nbval on CI's, which
may have another CPU: another vector unit, another BLAS kernel, another number of threads, and so
other last bits in every floating-point sum. A stored output that prints such bits (a measured
relative error, say) fails there. This test runs every notebook again under nbval with the CPU's
floating-point kernels switched to other code paths - OpenBLAS's oldest SSE kernels (numpy), MKL's
compatible mode (torch's matmul), PyTorch's kernels without AVX, one thread each - after checking
that this really changes the results of a matrix product, so a pass means something.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
OTHER_CPU = {
    "OPENBLAS_CORETYPE": "Prescott",  # numpy's OpenBLAS: SSE3 kernels instead of the machine's best
    "MKL_CBWR": "COMPATIBLE",  # torch's MKL: the code path every x86 CPU has
    "ATEN_CPU_CAPABILITY": "default",  # PyTorch's own kernels without AVX2/AVX-512
    "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
    "COURSE_BACKEND": "cpu",
}
PROBE = """
import hashlib, numpy as np, torch
rng = np.random.default_rng(0)
a = rng.standard_normal((333, 517), dtype=np.float32); b = rng.standard_normal((517, 129), dtype=np.float32)
h = lambda x: hashlib.sha1(np.ascontiguousarray(x).tobytes()).hexdigest()
print(h(a @ b), h((torch.from_numpy(a).double() @ torch.from_numpy(b).double()).numpy()))
"""


def _probe(env: dict) -> list[str]:
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=120, check=True)
    return out.stdout.split()


@pytest.mark.slow
def test_the_notebooks_compare_with_other_floating_point_kernels():
    here, other = _probe(dict(os.environ)), _probe(dict(os.environ, **OTHER_CPU))
    assert here[0] != other[0] and here[1] != other[1], (
        "switching the CPU kernels did not change a matrix product's bits here, so this test would prove nothing")
    got = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=",
         "--nbval", "--nbval-sanitize-with=notebooks/sanitize.cfg", "notebooks"],
        cwd=ROOT, env=dict(os.environ, **OTHER_CPU), capture_output=True, text=True, timeout=3600,
    )
    assert got.returncode == 0, "nbval fails with other floating-point kernels:\n" + got.stdout[-6000:] + got.stderr[-2000:]
