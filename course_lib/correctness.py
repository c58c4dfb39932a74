"""One correctness check for every GEMM of the course: :func:`check`, which the notebooks call as
``course_lib.check``.

``check(gemm)`` runs a registered stage (or any callable ``fn(a, b) -> c``) on fresh random inputs
for a list of shapes and compares the output with a float64 reference computed from the same
(already rounded) inputs: by relative error ||C - R|| / ||R|| (Frobenius norms), and element by
element against what rounding can explain (:func:`element_bound`). Before every run the outputs the
course's GEMMs allocate are poisoned with NaN, so an element the kernel never writes cannot pass,
and the inputs and outputs lie inside guard regions (:mod:`course_lib.instruments.guard`), so a read or write
outside them is found and named. It runs every shape, then raises ``AssertionError`` listing each
wrong one: the shape, the seed that reproduces it, and what was wrong (the worst element, its value
and the reference value; the accesses outside the arrays).

A registered stage that cannot run here (a GPU-only stage on the CPU backend, or a stage that needs
a feature this GPU lacks, see :mod:`course_lib.features`) is not called: ``check`` returns a
:class:`NotChecked` that says why, so a notebook goes on; nothing about it was verified here.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Callable, Sequence

import torch

from course_lib import backend, dtypes
from course_lib.dtypes import CourseDtype
from course_lib.instruments import guard
from course_lib.gemm import relative_error
from course_lib.model import layout
from course_lib.model.layout import Shape
from course_lib.registry import Stage
from course_lib.target import Target, resolve


# Relative-error tolerances (course_lib.dtypes: CourseDtype.tolerance) hold for K <= tolerance_k
# (1024; FP8's 4096); they grow with sqrt(K / tolerance_k) beyond, because rounding errors of a
# length-K sum of random-signed terms grow like sqrt(K) (Higham, "Accuracy and Stability of Numerical
# Algorithms", ch. 3, probabilistic bound). A missing term or a wrong element is far larger than these
# at the sizes check uses.

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


# FP8 GEMMs (dtype "e4m3"): shapes whose K crosses a 128-wide block of scales and ends mid-slice.
FP8_CPU_SHAPES: tuple[Shape, ...] = ((1, 8, 16), (37, 72, 200), (130, 136, 256), (16, 264, 1024))
FP8_GPU_SHAPES: tuple[Shape, ...] = FP8_CPU_SHAPES + ((1, 4096, 4096), (300, 1000, 520), (1000, 1032, 4096),
                                                      (2048, 2048, 2048))


def default_shapes(multiple: int | tuple[int, int, int] = 1, dtype: str | CourseDtype = "fp32") -> list[Shape]:
    """The shapes ``check`` uses on this backend for ``dtype``; each dimension rounded up to its
    multiple in the shape rule ``multiple`` (course_lib.model.layout)."""
    gpu = backend.get().is_gpu
    if dtypes.get(dtype).operands == "fp8":
        shapes = FP8_GPU_SHAPES if gpu else FP8_CPU_SHAPES
    else:
        shapes = GPU_SHAPES if gpu else CPU_SHAPES
    return list(dict.fromkeys(layout.round_up(s, multiple) for s in shapes))


def tolerance(dtype: str | CourseDtype, K: int) -> float:
    """Largest relative error ``check`` accepts for ``dtype`` and inner dimension ``K``."""
    record = dtypes.get(dtype)
    return record.tolerance * max(1.0, math.sqrt(K / record.tolerance_k))


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


@dataclass(frozen=True)
class Failure:
    """What was wrong at one shape.

    ``why`` is what ``check`` prints for the shape: the finding, then the note that explains it. Code
    that reacts to what was found (the exercises' feedback) reads the fields below, never ``why``'s
    words; every count is 0 (every text "") where the check did not look or found nothing:

    - ``finding``: what was wrong at this shape (``why`` without ``note``);
    - ``note``: the explanation that comes with the finding and reads the same at every shape (what a
      GPU would have done with a read outside an array, what NaN in C means, ...), "" if none;
    - ``stray``: what the guard found (:class:`course_lib.instruments.guard.Violation`, each of which
      renders its own sentence), one per array and kind of access outside it: reads or writes past
      A, B or C, an operand changed;
    - ``out_of_bounds``: True when a numba thread indexed outside an array on the simulator, which
      stopped the run (``finding`` names the thread, the element and the source line);
    - ``elements``: M x N, the elements of C (0 where the GEMM returned no M x N matrix of its type);
    - ``non_finite``: elements of C that are NaN or infinite after the run;
    - ``never_written``: of those, elements the kernel never stored to: still the NaN C was filled
      with (on numba's simulator: no thread wrote them);
    - ``read_unwritten_c``: elements of C the kernel read before writing them (numba's simulator: a
      sum accumulated into C without setting it first starts from the NaN C was filled with);
    - ``from_unwritten_shared``: of the non-finite ones, elements computed from shared memory that no
      thread of their block had written (numba's simulator fills a block's shared arrays with marked
      NaN before it runs: :mod:`course_lib.instruments.shared_memory`);
    - ``unwritten_shared``: the reads of such shared memory, named, one per shared array:
      :class:`course_lib.instruments.shared_memory.UnwrittenShared` (the array, the element, its row and
      column, which threads read it and at which line, and the likely cause: an unfilled tile slot,
      a read before a barrier, threads that returned before a barrier);
    - ``undefined_loads``: masked-off elements that Triton's interpreter loaded without ``other=``
      (made NaN during the check);
    - ``wrong_elements``: finite elements of C wrong by more than rounding explains (every wrong one
      where the relative error alone is over the tolerance).
    """

    shape: Shape
    seed: int
    dtype: str
    finding: str
    reproduce: str  # the call that makes these inputs again
    note: str = ""
    stray: tuple[guard.Violation, ...] = ()
    out_of_bounds: bool = False
    elements: int = 0
    non_finite: int = 0
    never_written: int = 0
    read_unwritten_c: int = 0
    from_unwritten_shared: int = 0
    unwritten_shared: tuple = ()
    undefined_loads: int = 0
    wrong_elements: int = 0

    @property
    def untouched(self) -> bool:
        """C left exactly as it was filled (NaN everywhere) and nothing else happened: not begun."""
        return bool(self.elements) and self.never_written == self.elements and not self.stray

    @property
    def why(self) -> str:
        """What ``check`` prints for the shape: the finding, then the note that explains it."""
        return _join([self.finding], self.note)

    def line(self) -> str:
        M, N, K = self.shape
        return f"M={M}, N={N}, K={K} (reproduce with {self.reproduce}): {self.why}"


class CheckFailure(AssertionError):
    """``check`` found a GEMM wrong; ``failures`` lists every shape where it was, and why."""

    def __init__(self, label: str, dtype: str, failures: Sequence[Failure], n_shapes: int) -> None:
        self.label, self.dtype, self.failures, self.n_shapes = label, dtype, tuple(failures), n_shapes
        if len(self.failures) == 1:
            text = f"{label} ({dtype}) is wrong for {self.failures[0].line()}"
        else:
            text = f"{label} ({dtype}) is wrong for {len(self.failures)} of {n_shapes} shapes:\n" + "\n".join(
                f"  {f.line()}" for f in self.failures)
        super().__init__(text)


# Element-wise bound. The norm bound above lets one wrong element hide among millions of right ones
# (an element off by 3.0 in a bf16 GEMM of 1000 x 1003 x 517 moves the relative error by 1.3e-4), so
# every element must also lie within what rounding can explain (Higham, "Accuracy and Stability of
# Numerical Algorithms", sec. 3.1 and 3.5; Higham and Mary, "A New Approach to Probabilistic Rounding
# Error Analysis", 2019):
#   |C - R|[i, j] <= 2 u_out |R[i, j]| + 8 (u_mul + u_acc sqrt(K)) s[i, j],
#   s[i, j] = sqrt(sum_k (A[i, k] B[k, j])^2),
# where R is the float64 product of the (already rounded) inputs.
# - u_out: rounding C once to its own type (unit roundoff 2^-24 fp32, 2^-11 fp16, 2^-8 bf16); factor 2
#   for the value rounded being C's, not R's.
# - u_mul: each product's relative error. 2^-24 for rounded fp32 products; 2 x 2^-10 for TF32, whose
#   operands lose up to 2^-10 each (truncated, triton-lang/triton#4574); 0 for fp16 and bf16, whose
#   products are exact in fp32.
# - u_acc sqrt(K): the fp32 accumulator's rounding over K terms, with u_acc = 2^-22 (four times fp32's
#   unit roundoff: tensor cores align a product sum before rounding it once, not per term).
# - A GEMM that adds partial sums (split-K slices) in its 16-bit output type - cuBLAS, as PyTorch
#   allows by default (Stage.rounds_partial_sums) - rounds each to u_out: u_out joins u_mul. On the
#   H200 cuBLAS bf16 at 1000 x 1003 x 517 erred by up to 1.9 u_out s (0.166 at s = 22).
# Products and sums err independently and with random signs on random inputs, so their error grows
# like their root-sum-square s, not like the sum of |A||B|; 8 standard deviations of such a bounded
# sum are exceeded with probability below 2 exp(-32) ~ 3e-14 per element (Hoeffding), never at the
# 2e7 elements of the largest shape. A wrong element - off by 3.0 in bf16, by far less in the others -
# is outside it at every shape check uses (tests/test_check.py).
# u_out and u_mul of each dtype are its record's unit_roundoff and product_error (course_lib.dtypes).
ACCUMULATOR_ERROR = 2.0**-22


def element_bound(a: torch.Tensor, b: torch.Tensor, ref: torch.Tensor, dtype: str,
                  rounds_partial_sums: bool = False) -> torch.Tensor:
    """The largest error rounding can explain, element by element (see the comment above)."""
    K = a.shape[1]
    a64, b64 = a.double(), b.double()
    s = torch.sqrt((a64 * a64) @ (b64 * b64))
    record = dtypes.get(dtype)
    u_out, u_mul = record.unit_roundoff, record.product_error
    if rounds_partial_sums and u_out > dtypes.FP32.unit_roundoff:  # partial sums rounded to a narrower output
        u_mul += u_out
    # Below the output type's smallest normal number its spacing stops shrinking (subnormals): a
    # result there is off by up to half that spacing whatever its size (fp16: 2^-25, at K = 1 too).
    info = torch.finfo(record.torch_dtype)
    subnormal_step = info.tiny * info.eps
    return 2 * u_out * ref.abs() + 8 * (u_mul + ACCUMULATOR_ERROR * math.sqrt(K)) * s + subnormal_step + 1e-300


# The guard regions around A and B hold a finite value (course_lib.instruments.guard.INPUT_GUARD), so a read
# past them shows as a wrong value, not as NaN.
NAN_NOTE = "C is filled with NaN before the run, so NaN means the kernel never wrote that element"


@dataclass
class _Values:
    """What is wrong with C's values: ``finding`` ("" if nothing), ``note``, and the counts of
    :class:`Failure`."""

    rel: float
    finding: str = ""
    note: str = ""
    non_finite: int = 0
    never_written: int = 0
    wrong_elements: int = 0


def _values(c: torch.Tensor, ref: torch.Tensor, a, b, dtype: str, limit: float,
            rounds_partial_sums: bool = False, written: torch.Tensor | None = None,
            element_wise: bool = True) -> _Values:
    """Compare C (any floating type) with the float64 reference. ``written``: where the kernel stored
    (numba's simulator knows); without it, an element still holding the poison NaN was not.
    ``element_wise``: hold every element to :func:`element_bound` too (not for FP8, whose tensor core
    may add with a narrow adder that bound does not model: there an element counts as wrong where it
    is off by more than the tolerance times the reference's root mean square)."""
    M, N = ref.shape
    c64 = c.to(device=ref.device, dtype=torch.float64)
    finite = torch.isfinite(c64)
    if not bool(finite.all()):
        i, j = (int(v) for v in torch.nonzero(~finite)[0])
        n_bad = int((~finite).sum())
        unwritten = ~written.to(ref.device) if written is not None else guard.never_written(c).to(ref.device)
        return _Values(
            math.inf,
            f"{n_bad} of {M * N} elements are not finite, first C[{i}, {j}] = {c64[i, j].item()} "
            f"(reference {ref[i, j].item():.6g})", NAN_NOTE,
            non_finite=n_bad, never_written=int((unwritten & ~finite).sum()))
    diff = (c64 - ref).abs()
    rel = relative_error(c64, ref)
    if not rel <= limit:
        i, j = divmod(int(torch.argmax(diff)), N)
        bound = (element_bound(a, b, ref, dtype, rounds_partial_sums) if element_wise
                 else limit * float(ref.square().mean().sqrt()))
        n_wrong = int((diff > bound).sum())
        return _Values(rel, (
            f"relative error {rel:.3e} > tolerance {limit:.1e}; worst element C[{i}, {j}] = "
            f"{c64[i, j].item():.6g}, reference {ref[i, j].item():.6g}"), wrong_elements=max(n_wrong, 1))
    if not element_wise:
        return _Values(rel)
    excess = diff / element_bound(a, b, ref, dtype, rounds_partial_sums)
    if bool((excess > 1).any()):
        n_bad = int((excess > 1).sum())
        i, j = divmod(int(torch.argmax(excess)), N)
        return _Values(rel, (
            f"{n_bad} element{'s' if n_bad != 1 else ''} wrong by more than rounding explains, worst "
            f"C[{i}, {j}] = {c64[i, j].item():.6g}, reference {ref[i, j].item():.6g} (off by "
            f"{diff[i, j].item():.3g}, at most {diff[i, j].item() / excess[i, j].item():.2g} allowed there)"
        ), wrong_elements=n_bad)
    return _Values(rel)


def _value_problem(c64: torch.Tensor, ref: torch.Tensor, a, b, dtype: str, limit: float,
                   rounds_partial_sums: bool = False) -> tuple[float, str | None]:
    """(relative error, what is wrong with the values, its note included, or None)."""
    v = _values(c64, ref, a, b, dtype, limit, rounds_partial_sums)
    return v.rel, ("; ".join(x for x in (v.finding, v.note) if x) or None)


def _join(parts: Sequence[str], note: str) -> str:
    return "; ".join([p for p in parts if p] + ([note] if note else []))


def check_one(
    gemm: Target | Callable, shape: Shape, dtype: str | CourseDtype = "fp32", *, seed: int, label: str | None = None,
    tol: float | None = None,
) -> ShapeResult:
    """Run ``gemm`` (a :class:`~course_lib.target.Target`, or a callable taken as one in ``dtype``)
    once on fresh inputs of ``shape`` and compare with the float64 reference.

    The inputs and the output lie inside guard regions (:mod:`course_lib.instruments.guard`): what the kernel
    read or wrote outside them is reported with the values' errors. Raises :class:`CheckFailure`,
    whose :class:`Failure` carries what was found as fields as well as in words."""
    t = gemm if isinstance(gemm, Target) else resolve(gemm, dtype)
    label = t.label if label is None else label
    M, N, K = shape
    what = t.arithmetic

    def fail(finding: str, note: str = "", **found) -> CheckFailure:
        finding = _join([s.describe() for s in found.get("stray", ())] + [finding], "")
        return CheckFailure(label, what, [Failure(shape, seed, what, finding, t.reproduce(M, N, K, seed), note=note,
                                                  **found)], 1)

    operands = t.inputs(M, N, K, seed=seed)
    with guard.guarded() as g:
        try:
            c = t.fn(*t.placed(g, operands))
        except IndexError as e:  # numba's simulator: a thread indexed outside an array
            finding, note = guard.index_error_parts(e)
            raise fail(finding, note, out_of_bounds=True) from None
        stray = tuple(g.violations())
        undefined = g.undefined_note()
        undefined_loads = g.undefined_loads
        written, read_unwritten_c = g.output_writes()
        ledger = g.shared_ledger  # numba's simulator: what the blocks did with shared memory
    if not isinstance(c, torch.Tensor):
        try:
            c = torch.as_tensor(c)
        except Exception as e:  # noqa: BLE001 - reported as a failure of the GEMM, with its cause
            raise fail(f"returned {type(c).__name__}, not a matrix ({e})", stray=stray) from None
    if tuple(c.shape) != (M, N):
        raise fail(f"returned shape {tuple(c.shape)}, expected ({M}, {N})", stray=stray)
    if c.dtype != t.output_dtype:
        raise fail(f"returned {c.dtype}, expected {t.output_dtype}", stray=stray)
    a, b = t.exact_operands(operands)
    ref = a @ b
    limit = tolerance(t.dtype, K) if tol is None else tol
    v = _values(c, ref, a, b, t.dtype.name, limit, t.rounds_partial_sums, written, element_wise=not t.fp8)
    found = dict(stray=stray, elements=M * N, non_finite=v.non_finite, never_written=v.never_written,
                 read_unwritten_c=read_unwritten_c, undefined_loads=undefined_loads, wrong_elements=v.wrong_elements)
    if v.non_finite and ledger is not None:
        found["from_unwritten_shared"], found["unwritten_shared"] = ledger.explain(c)
    if v.non_finite:
        v.finding, v.note = _why_not_finite(v, undefined, read_unwritten_c, found)
    if stray or v.finding:
        raise fail(v.finding, v.note, **found)
    return ShapeResult(shape, seed, v.rel, limit)


def _why_not_finite(v: _Values, undefined: str, read_unwritten_c: int, found: dict) -> tuple[str, str]:
    """The finding and note for a C with non-finite elements: where the NaN came from, if known."""
    if undefined:  # Triton: masked loads without other= (NaN during the check)
        return v.finding, undefined
    if found.get("unwritten_shared"):
        from course_lib.instruments.shared_memory import SHARED_NOTE  # noqa: PLC0415 - numba's simulator only

        reads = found["unwritten_shared"]
        advice = list(dict.fromkeys(u.advice() for u in reads))
        return "; ".join([v.finding] + [u.describe() for u in reads]), "; ".join(advice + [SHARED_NOTE])
    if read_unwritten_c:
        return (f"{v.finding}; the kernel read {read_unwritten_c} element{'s' if read_unwritten_c != 1 else ''} "
                f"of C before writing {'them' if read_unwritten_c != 1 else 'it'}",
                "C is filled with NaN before the run (as memory fresh from torch.empty holds anything), so a sum "
                "accumulated into C must start by setting it, or better, live in a local variable")
    if v.never_written == v.non_finite:
        return v.finding, NAN_NOTE
    if v.never_written:
        return f"{v.finding}; {v.never_written} of them were never written", NAN_NOTE
    return v.finding, "NaN or infinity computed by the kernel: C was written there"


def check(
    gemm: str | Stage | Callable,
    dtype: str | CourseDtype = "fp32",
    shapes: Sequence[Shape] | None = None,
    *,
    scaling: str | None = None,
    seed: int | None = None,
    tol: float | None = None,
    label: str | None = None,
) -> CheckReport | NotChecked:
    """Check a GEMM against a float64 reference on fresh random inputs.

    ``gemm`` is a stage name, a :class:`Stage` or any callable: ``fn(a, b) -> c``, or for ``dtype``
    "e4m3" ``fn(qa, qw) -> C = A W^T`` in bf16 on :class:`course_lib.fp8.Quantized` operands scaled
    per ``scaling`` ("tensor" unless told; the reference is then the float64 product of the
    dequantized operands). ``seed`` fixes the inputs (shape i uses ``seed + i``); without it every
    call draws new ones. Runs every shape, then raises :class:`CheckFailure` (an ``AssertionError``)
    listing each wrong one; returns a :class:`CheckReport` otherwise, or a :class:`NotChecked` for a
    stage that cannot run here. ``label`` names the GEMM in the report (default: the stage's or the
    function's name).
    """
    t = resolve(gemm, dtype, scaling)
    if label is not None:
        t = dataclasses.replace(t, label=label)
    if t.why_not_here is not None:
        return NotChecked(t.label, t.arithmetic, t.why_not_here)
    if shapes is None:
        shapes = default_shapes(t.shape_rule, t.dtype)
    if not shapes:
        raise ValueError("check needs at least one shape (M, N, K)")
    for shape in shapes:
        if len(shape) != 3 or min(shape) < 1:
            raise ValueError(f"a shape is (M, N, K) with every dimension >= 1, not {shape!r}")
    base = int(torch.randint(0, 2**31, (1,)).item()) if seed is None else int(seed)
    results, failures = [], []
    for i, shape in enumerate(shapes):
        try:
            results.append(check_one(t, tuple(int(v) for v in shape), seed=base + i, tol=tol))
        except CheckFailure as f:
            failures.extend(f.failures)
    if failures:
        raise CheckFailure(t.label, t.arithmetic, failures, len(shapes))
    return CheckReport(t.label, t.arithmetic, tuple(results))
