"""One correctness check for every GEMM of the course.

``check(gemm)`` runs a registered stage (or any callable ``fn(a, b) -> c``) on fresh random inputs
for a list of shapes and compares the output with a float64 reference computed from the same
(already rounded) inputs, by relative error ||C - R|| / ||R|| (Frobenius norms). Before every run
the outputs the course's GEMMs allocate are poisoned with NaN, so an element the kernel never
writes cannot pass. A failure raises ``AssertionError`` naming the shape, the seed that reproduces
it, the worst element, its value and the reference value.

A registered stage that cannot run here (a GPU-only stage on the CPU backend, or a stage that needs
a feature this GPU lacks, see :mod:`course_lib.features`) is not called: ``check`` returns a
:class:`NotChecked` that says why, so a notebook goes on; nothing about it was verified here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import torch

from course_lib import backend
from course_lib.gemm import TORCH_DTYPES, check_dtype_name, poisoned_outputs, random_inputs
from course_lib.registry import Stage, get_stage, stage_or_callable

Shape = tuple[int, int, int]  # (M, N, K): a is M x K, b is K x N, c is M x N

# Relative-error tolerances for K <= 1024; they grow with sqrt(K / 1024) beyond, because rounding
# errors of a length-K sum of random-signed terms grow like sqrt(K) (Higham, "Accuracy and Stability
# of Numerical Algorithms", ch. 3, probabilistic bound). A missing term or a wrong element is far
# larger than these at the sizes check uses.
# TF32 keeps 10 of fp32's 23 mantissa bits. Triton's tl.dot on Hopper drops the other 13 instead of
# rounding (triton-lang/triton#4574), so each operand may be off by up to 2^-10 relative and one
# product by up to 2 * 2^-10 = 1.95e-3: a 1 x 1 x 1 GEMM reached 1.13e-3 on the H200.
BASE_TOLERANCE = {"fp32": 1e-5, "tf32": 2e-3, "fp16": 1e-2, "bf16": 1e-2}

# Shapes for the CPU backend are tiny: numba's simulator runs every GPU thread as a Python thread.
# None is a multiple of 8, 16, 32, 64 or 128 except where a dimension is 1 (and 1x1x1 itself).
CPU_SHAPES: tuple[Shape, ...] = (
    (1, 1, 1),
    (3, 5, 7),
    (33, 17, 40),  # several tiles in M, a partial tile everywhere
    (1, 45, 19),  # one row: a skinny output
    (37, 1, 21),  # one column: a tall output
    (9, 11, 1),  # K = 1: a rank-one update
)
# On a GPU the same small shapes plus large ones, again off every tile size, and one that is a
# multiple of everything so the fast interior path is checked too.
GPU_SHAPES: tuple[Shape, ...] = CPU_SHAPES + (
    (1, 300, 257),
    (300, 1, 257),
    (129, 257, 511),
    (1000, 1003, 517),
    (2048, 2048, 2048),
    (4095, 4097, 1023),
)


def default_shapes(multiple: int = 1) -> list[Shape]:
    """The shapes ``check`` uses on this backend; each dimension rounded up to ``multiple``."""
    shapes = GPU_SHAPES if backend.get().is_gpu else CPU_SHAPES
    if multiple <= 1:
        return list(shapes)
    up = lambda v: -(-v // multiple) * multiple  # noqa: E731
    return list(dict.fromkeys(tuple(up(v) for v in s) for s in shapes))


def tolerance(dtype: str, K: int) -> float:
    """Largest relative error ``check`` accepts for ``dtype`` and inner dimension ``K``."""
    return BASE_TOLERANCE[check_dtype_name(dtype)] * max(1.0, math.sqrt(K / 1024))


@dataclass(frozen=True)
class ShapeResult:
    shape: Shape
    seed: int
    rel_error: float
    tolerance: float


@dataclass(frozen=True)
class CheckReport:
    """What ``check`` verified; it is only ever returned when every shape passed."""

    label: str
    dtype: str
    results: tuple[ShapeResult, ...]

    @property
    def worst(self) -> ShapeResult:
        return max(self.results, key=lambda r: r.rel_error / r.tolerance)

    @property
    def max_rel_error(self) -> float:
        """The largest relative error over the shapes (it depends on the machine's floating-point
        kernels, so the printed summary leaves it out: print this to see it)."""
        return max(r.rel_error for r in self.results)

    def __repr__(self) -> str:
        # Only what is the same on every machine: the measured errors depend on the CPU's (or GPU's)
        # floating-point kernels, so they are not printed here (``max_rel_error`` has them).
        tols = sorted({r.tolerance for r in self.results})
        tol = f"{tols[0]:.0e}" if len(tols) == 1 else f"{tols[0]:.2g} to {tols[-1]:.2g}, growing with K"
        n = len(self.results)
        return (
            f"check passed: {self.label} ({self.dtype}) on {n} shape{'s' if n != 1 else ''}, "
            f"relative error within {tol}"
        )


@dataclass(frozen=True)
class NotChecked:
    """What ``check`` returns for a stage it did not run here, and why (nothing was verified)."""

    label: str
    dtype: str
    reason: str

    def __bool__(self) -> bool:  # `if check(...)` must not read as a pass
        return False

    def __repr__(self) -> str:
        return f"not checked here: {self.reason}"


def _fail(label: str, dtype: str, shape: Shape, seed: int, why: str) -> AssertionError:
    M, N, K = shape
    return AssertionError(
        f"{label} ({dtype}) is wrong for M={M}, N={N}, K={K} "
        f"(reproduce with course_lib.random_inputs({M}, {N}, {K}, {dtype!r}, seed={seed})): {why}"
    )


def check_one(
    fn: Callable, shape: Shape, dtype: str, *, seed: int, label: str = "gemm", tol: float | None = None
) -> ShapeResult:
    """Run ``fn`` once on fresh inputs of ``shape`` and compare with the float64 reference."""
    M, N, K = shape
    a, b = random_inputs(M, N, K, dtype, seed=seed)
    with poisoned_outputs():
        c = fn(a, b)
    if not isinstance(c, torch.Tensor):
        try:
            c = torch.as_tensor(c)
        except Exception as e:  # noqa: BLE001 - reported as a failure of the GEMM, with its cause
            raise _fail(label, dtype, shape, seed, f"returned {type(c).__name__}, not a matrix ({e})")
    if tuple(c.shape) != (M, N):
        raise _fail(label, dtype, shape, seed, f"returned shape {tuple(c.shape)}, expected ({M}, {N})")
    want = TORCH_DTYPES[dtype]
    if c.dtype != want:
        raise _fail(label, dtype, shape, seed, f"returned {c.dtype}, expected {want}")
    ref = a.double() @ b.double()
    c64 = c.to(device=ref.device, dtype=torch.float64)
    finite = torch.isfinite(c64)
    if not bool(finite.all()):
        i, j = (int(v) for v in torch.nonzero(~finite)[0])
        n_bad = int((~finite).sum())
        raise _fail(
            label, dtype, shape, seed,
            f"{n_bad} of {M * N} elements are not finite, first C[{i}, {j}] = {c64[i, j].item()} "
            f"(reference {ref[i, j].item():.6g}); outputs are poisoned with NaN before each run, "
            "so NaN usually means the kernel never wrote that element",
        )
    diff = (c64 - ref).abs()
    ref_norm = float(torch.linalg.norm(ref))
    rel = float(torch.linalg.norm(c64 - ref)) / ref_norm if ref_norm > 0 else float(diff.max())
    limit = tolerance(dtype, K) if tol is None else tol
    if not rel <= limit:
        flat = int(torch.argmax(diff))
        i, j = divmod(flat, N)
        raise _fail(
            label, dtype, shape, seed,
            f"relative error {rel:.3e} > tolerance {limit:.1e}; worst element C[{i}, {j}] = "
            f"{c64[i, j].item():.6g}, reference {ref[i, j].item():.6g}",
        )
    return ShapeResult(shape, seed, rel, limit)


def check(
    gemm: str | Stage | Callable,
    dtype: str = "fp32",
    shapes: Sequence[Shape] | None = None,
    *,
    seed: int | None = None,
    tol: float | None = None,
) -> CheckReport | NotChecked:
    """Check a GEMM against a float64 reference on fresh random inputs.

    ``gemm`` is a stage name, a :class:`Stage` or any callable ``fn(a, b) -> c``. ``seed`` fixes the
    inputs (shape i uses ``seed + i``); without it every call draws new ones. Raises
    ``AssertionError`` on the first wrong shape; returns a :class:`CheckReport` otherwise, or a
    :class:`NotChecked` for a stage that cannot run here.
    """
    check_dtype_name(dtype)
    if isinstance(gemm, (str, Stage)):
        stage = get_stage(gemm) if isinstance(gemm, str) else gemm
        why = stage.why_not_here(dtype) if dtype in stage.gemms else None
        if why is not None:
            return NotChecked(stage.name, dtype, why)
    label, fn = stage_or_callable(gemm, dtype)
    if shapes is None:
        multiple = get_stage(label).shape_multiple if isinstance(gemm, (str, Stage)) else 1
        shapes = default_shapes(multiple)
    if not shapes:
        raise ValueError("check needs at least one shape (M, N, K)")
    base = int(torch.randint(0, 2**31, (1,)).item()) if seed is None else int(seed)
    results = []
    for i, shape in enumerate(shapes):
        if len(shape) != 3 or min(shape) < 1:
            raise ValueError(f"a shape is (M, N, K) with every dimension >= 1, not {shape!r}")
        results.append(check_one(fn, tuple(int(v) for v in shape), dtype, seed=base + i, label=label, tol=tol))
    return CheckReport(label, dtype, tuple(results))
