"""What every GEMM of the course shares: its argument checks and its output allocation.

Every course GEMM has one signature, ``fn(a, b) -> c`` with ``a`` of shape (M, K) and ``b`` of shape
(K, N). Its wrapper does three things in order (the habit of Triton's tutorials): check the
arguments with :func:`prepare`, allocate the output with :func:`new_output`, launch.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch

from course_lib import backend
from course_lib.instruments import guard
from course_lib.model import layout
from course_lib import dtypes as course_dtypes

GemmFn = Callable[[object, object], object]


def dtype_of(x: object) -> str:
    """The course dtype name of a tensor or array's element type ("fp32", "fp16", "bf16")."""
    t = _as_tensor(x, "input")
    record = course_dtypes.of_torch(t.dtype)
    if record is None:
        raise TypeError(
            f"element type {t.dtype} is not one the course's GEMMs take; use "
            f"{course_dtypes.torch_dtype_names()} (for example a.float())"
        )
    return record.name


def _as_tensor(x: object, name: str) -> torch.Tensor:
    if isinstance(x, torch.Tensor):
        return x
    if isinstance(x, np.ndarray):
        return torch.from_numpy(x)
    raise TypeError(
        f"{name} must be a torch.Tensor or a numpy.ndarray, not {type(x).__name__}; "
        "make one with course_lib.random_inputs(M, N, K) or torch.as_tensor(...)"
    )


@dataclass(frozen=True)
class Operands:
    """Checked operands of one GEMM call, as torch tensors, plus how to hand the result back."""

    a: torch.Tensor
    b: torch.Tensor
    M: int
    N: int
    K: int
    dtype: str  # course dtype name of the inputs ("fp32", "fp16", "bf16")
    as_numpy: bool  # the caller passed numpy arrays and gets a numpy array back

    def give_back(self, c: torch.Tensor) -> object:
        return c.numpy() if self.as_numpy else c


def prepare(
    a: object,
    b: object,
    *,
    stage: str,
    dtypes: tuple[str, ...],  # the course dtypes the kernel computes (their tensors' types are accepted)
    contiguous: bool = False,
    shape_multiple: int | tuple[int, int, int] = 1,  # course_lib.model.layout's shape rule
) -> Operands:
    """Check the operands of ``stage`` and say what to do when they are wrong.

    Raises ``TypeError`` for the wrong kind of object or element type and ``ValueError`` for wrong
    shapes, empty matrices, the wrong device or a layout the kernel cannot read.
    """
    ta, tb = _as_tensor(a, "a"), _as_tensor(b, "b")
    as_numpy = isinstance(a, np.ndarray) and isinstance(b, np.ndarray)
    for name, t in (("a", ta), ("b", tb)):
        if t.dim() != 2:
            raise ValueError(
                f"{stage}: {name} must be a 2-D matrix, but its shape is {tuple(t.shape)}; "
                "reshape it (for a vector use x.reshape(1, -1) or x.reshape(-1, 1))"
            )
    M, K = ta.shape
    K2, N = tb.shape
    if K != K2:
        raise ValueError(
            f"{stage}: inner dimensions differ: a is {M}x{K} and b is {K2}x{N}; "
            "a.shape[1] must equal b.shape[0] (did you mean b.T?)"
        )
    if M == 0 or N == 0 or K == 0:
        raise ValueError(
            f"{stage}: empty matrix (M={M}, N={N}, K={K}); every dimension must be at least 1"
        )
    if ta.dtype != tb.dtype:
        raise TypeError(
            f"{stage}: a is {ta.dtype} but b is {tb.dtype}; convert both to one type first"
        )
    dt = dtype_of(ta)
    accepted = {course_dtypes.get(d).torch_dtype for d in dtypes}
    if ta.dtype not in accepted:
        names = ", ".join(sorted({str(t).replace("torch.", "") for t in accepted}))
        raise TypeError(f"{stage}: takes {names} inputs, not {ta.dtype}; convert them, e.g. a.to(torch.{names.split(', ')[0]})")
    want = backend.get().torch_device
    for name, t in (("a", ta), ("b", tb)):
        if t.device.type != want:
            hint = "a.cuda()" if want == "cuda" else "a.cpu()"
            raise ValueError(
                f"{stage}: {name} is on {t.device} but the {backend.get().name} backend runs this "
                f"kernel with inputs on '{want}'; move it there ({hint.replace('a.', name + '.')})"
            )
    if contiguous:
        for name, t in (("a", ta), ("b", tb)):
            if not t.is_contiguous():
                raise ValueError(
                    f"{stage}: {name} is not contiguous (strides {t.stride()}); this kernel reads "
                    f"row-major memory: pass {name}.contiguous()"
                )
    if not layout.fits((M, N, K), shape_multiple):
        bad = [f"{n}={v}" for n, v, m in zip("MNK", (M, N, K), layout.multiples(shape_multiple)) if v % m]
        raise ValueError(
            f"{stage}: {layout.rule_text(shape_multiple)}, but {', '.join(bad)}; "
            "pad the matrices with zeros to the next multiple"
        )
    return Operands(ta, tb, M, N, K, dt, as_numpy)


# ---- output allocation -----------------------------------------------------------------------
# course_lib.check places every output inside guard regions (course_lib.instruments.guard), poisoned
# with NaN, so an element the kernel never writes cannot pass by holding an old (perhaps correct)
# value left in recycled memory, and a write outside it is seen.


def new_array(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device | str, name: str = "C") -> torch.Tensor:
    """A kernel's output array: uninitialised; while a guard is active (``check`` runs), inside its
    guard regions and poisoned with NaN."""
    g = guard.active()
    if g is not None:
        return g.output(tuple(shape), dtype, device, name=name)
    return torch.empty(tuple(shape), dtype=dtype, device=device)


def new_output(M: int, N: int, dtype: torch.dtype, device: torch.device | str) -> torch.Tensor:
    """The output matrix C of a GEMM (see :func:`new_array`)."""
    return new_array((M, N), dtype, device)


# ---- launch plans ----------------------------------------------------------------------------
# Host time per call of a 64 x 64 x 64 bf16 product on the H200 (2,000 calls back to back): 21 us for
# torch.matmul, 39 us for the cuBLAS stage, 33 us for tc_6, 112 us for triton_fast (146 us in fp32),
# most of it checks and choices that come out the same on every call with operands like the last ones.
_ALIGN = 16  # bytes: TMA's base address, the alignment Triton specialises pointers on, the extension's check


def plan_key(a: object, b: object) -> tuple | None:
    """What a stage's checks and choices depend on in its operands, as a dict key (None for
    anything but two torch tensors: numpy arrays keep the checked path on every call).

    It holds exactly what :func:`prepare` reads - dimensions, shapes, element type, device, and
    contiguity, which shape and strides decide - and what the final stages read beyond it: strides
    (32-bit offsets, TMA's row-stride rule, the autotuning key, Triton's specialisation of integer
    arguments) and whether each base address is 16-byte aligned (TMA, the extension's check,
    Triton's specialisation of pointers). Equal keys therefore pass and fail the same checks and
    lead to the same choices, so a call with the key of an earlier successful one can skip them.
    Not in it: the values (B^T for TF32 is copied on every call), and the backend, which
    :class:`LaunchPlans` watches instead.
    """
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
        return None
    return (a.shape, a.stride(), a.dtype, a.device, a.data_ptr() % _ALIGN,
            b.shape, b.stride(), b.dtype, b.device, b.data_ptr() % _ALIGN)


class LaunchPlans:
    """One stage's launch plans: per :func:`plan_key`, what the stage decided on its first
    successful call with that key (its checks passed), so that later calls only allocate C
    (:func:`new_output`, on every call: ``check`` poisons it and places it in guard regions) and
    launch. A plan is kept only after its launch succeeded, so input that fails a check never has one.

    The plans are dropped when the backend changes (tests fake a GPU; the checks read the backend's
    device and capability), and the oldest goes when ``limit`` are kept: a plan may hold GPU memory
    (triton_fast's split-K workspace).
    """

    _every: weakref.WeakSet[LaunchPlans] = weakref.WeakSet()  # for drop_every()

    def __init__(self, limit: int = 128) -> None:
        self.limit = limit
        self._plans: dict[tuple, object] = {}
        self._backend: backend.Backend | None = None
        LaunchPlans._every.add(self)

    def get(self, key: tuple | None) -> object | None:
        """The plan kept for ``key``, or None (always None for the key None)."""
        b = backend.get()
        if b is not self._backend:
            self._plans.clear()
            self._backend = b
        return self._plans.get(key)

    def keep(self, key: tuple | None, plan: object) -> object:
        """Keep ``plan`` for ``key`` (unless the key is None) and return it."""
        if key is not None:
            if len(self._plans) >= self.limit:
                del self._plans[next(iter(self._plans))]  # the oldest (dicts keep insertion order)
            self._plans[key] = plan
        return plan

    def __len__(self) -> int:
        return len(self._plans)

    def clear(self) -> None:
        self._plans.clear()

    @classmethod
    def drop_every(cls) -> None:
        """Drop the plans of every stage in the process, so that each next call plans afresh (as a
        caller's first call would, e.g. inside torch.compile's CUDA-graph warm-up)."""
        for plans in list(cls._every):
            plans.clear()


def planned(resolve: Callable[..., tuple[object, object]], launch: Callable[..., object],
            limit: int = 128) -> Callable[..., object]:
    """A final stage's GEMM ``gemm(a, b, *args)`` that checks and decides once per kind of operands.

    ``resolve(a, b, *args)`` is the checked path: it checks the operands (:func:`prepare`), decides
    what to launch, launches it into a new output and returns ``(c, plan)``. The plan is kept for the
    operands' :func:`plan_key` (with ``args``, e.g. a dtype, appended), and a later call with that key
    returns ``launch(plan, a, b, *args)``, which launches the plan into a new output (:func:`new_output`,
    so ``check``'s poisoned outputs and guard regions still catch a kernel that skips an element).
    A call that raises keeps no plan. The plans are ``gemm.plans`` (:class:`LaunchPlans`)."""
    plans = LaunchPlans(limit)

    def gemm(a: object, b: object, *args: object) -> object:
        key = plan_key(a, b)
        key = None if key is None else key + args
        plan = plans.get(key)
        if plan is not None:  # operands like these passed every check of resolve
            return launch(plan, a, b, *args)
        c, plan = resolve(a, b, *args)
        plans.keep(key, plan)
        return c

    gemm.plans = plans
    return gemm


def random_inputs(
    M: int, N: int, K: int, dtype: str = "fp32", *, seed: int | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Random operands a (M x K) and b (K x N), standard normal, on the backend's device.

    They are drawn on that device (on a GPU, an 8192 x 8192 pair takes milliseconds rather than
    the seconds of the CPU), so a seed gives the same inputs again on the same backend.
    """
    record = course_dtypes.get(dtype)
    if record.operands != "matrix":
        raise ValueError(f"{record.name} GEMMs take quantized operands with their scales: make them with "
                         f"course_lib.fp8.fp8_inputs(M, N, K, scaling)")
    torch_dtype = record.torch_dtype
    device = backend.get().torch_device
    gen = torch.Generator(device=device)
    gen.manual_seed(int(seed) if seed is not None else int(torch.randint(0, 2**62, (1,)).item()))
    a = torch.randn(M, K, generator=gen, dtype=torch.float32, device=device).to(torch_dtype)
    b = torch.randn(K, N, generator=gen, dtype=torch.float32, device=device).to(torch_dtype)
    return a, b


def relative_error(c: object, ref: object) -> float:
    """||C - R|| / ||R|| in float64 (Frobenius norms): how the course measures a GEMM's error against a
    reference (float64 in ``check``, cuBLAS in ``bench``). Where R is all zeros, the largest |C - R|."""
    c64 = _as_tensor(c, "c").double()
    ref64 = _as_tensor(ref, "reference").double().to(c64.device)
    diff = c64 - ref64
    ref_norm = float(torch.linalg.norm(ref64))
    return float(torch.linalg.norm(diff)) / ref_norm if ref_norm > 0 else float(diff.abs().max())


def flops(M: int, N: int, K: int) -> int:
    """Floating-point operations of one GEMM: a multiply and an add per (m, n, k)."""
    return 2 * M * N * K
