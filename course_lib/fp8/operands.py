"""The operands of an FP8 GEMM and what the course's FP8 kernels accept.

An FP8 GEMM takes its operands quantized, ``fn(qa, qw) -> C``: A (M x K, activations) and W (N x K,
the weight of ``torch.nn.Linear``), both e4m3 and K-major as Hopper's FP8 tensor cores want them,
C = A W^T in bf16. :data:`OPERAND_SCALING` says how each scaling scales the two operands,
:func:`fp8_inputs` makes random operands, :func:`scaling_of` reads the scaling back from them, and
:func:`check_gemm_operands` is the one check every FP8 kernel's wrapper runs (Triton's
``fp8_matmul``, CUDA's stage 7).
"""

from __future__ import annotations

import torch

from course_lib import backend
from course_lib.gemm import plan_key
from course_lib.fp8.formats import Quantized, quantize, scaling_block
from course_lib.model.layout import cdiv

# How each scaling scales the two operands: A (activations, M x K) and W (weights, N x K). A scale
# that varies along M or N multiplies whole rows or columns of C: the kernel applies it once, after
# the sum. One that varies along K (blocks) multiplies partial sums: the kernel applies it inside
# the loop over K, every 128 elements.
# DeepSeek-V3's blocks: A (activations) per 1 x 128, W (weights) per 128 x 128.
BLOCK_SCALES = ((1, 128), (128, 128))
OPERAND_SCALING = {
    "tensor": (("tensor", None), ("tensor", None)),
    "row": (("row", None), ("row", None)),  # rows of A, rows of W = columns of C
    "block": (("block", BLOCK_SCALES[0]), ("block", BLOCK_SCALES[1])),
}


def fp8_inputs(M: int, N: int, K: int, scaling: str = "tensor", *, seed: int | None = None,
               device: torch.device | str | None = None) -> tuple[Quantized, Quantized]:
    """Standard normal A (M x K) and W (N x K), quantized to e4m3 with ``scaling`` (:data:`OPERAND_SCALING`),
    on the backend's device; a seed gives the same operands again."""
    if scaling not in OPERAND_SCALING:
        raise ValueError(f"unknown FP8 GEMM scaling {scaling!r}: use one of {sorted(OPERAND_SCALING)}")
    device = backend.get().torch_device if device is None else device
    gen = torch.Generator(device=device)
    gen.manual_seed(int(seed) if seed is not None else int(torch.randint(0, 2**62, (1,)).item()))
    a = torch.randn(M, K, generator=gen, device=device)
    w = torch.randn(N, K, generator=gen, device=device)
    (sa, ba), (sw, bw) = OPERAND_SCALING[scaling]
    return quantize(a, "e4m3", sa, ba), quantize(w, "e4m3", sw, bw)


def scaling_of(qa: Quantized, qw: Quantized) -> str:
    """The name in :data:`OPERAND_SCALING` of the way ``qa`` and ``qw`` are scaled; ValueError if none."""
    for name, ((sa, ba), (sw, bw)) in OPERAND_SCALING.items():
        if (qa.block == scaling_block(tuple(qa.values.shape), sa, ba)
                and qw.block == scaling_block(tuple(qw.values.shape), sw, bw)):
            return name
    raise ValueError(f"FP8 GEMM operands scaled by blocks {qa.block} (A) and {qw.block} (W): use one of "
                     f"{sorted(OPERAND_SCALING)} (course_lib.fp8.OPERAND_SCALING)")


def _per_row_or_block_shape(q: Quantized, name: str, stage: str) -> None:
    """Raises where ``q.scales`` is not one scale per block of ``q.block`` over ``q.values``."""
    rows, cols = q.values.shape
    b_rows, b_cols = q.block
    want = (cdiv(rows, b_rows), cdiv(cols, b_cols))
    if tuple(q.scales.shape) != want:
        raise ValueError(
            f"{stage}: {name}.scales has shape {tuple(q.scales.shape)}, but {b_rows} x {b_cols} blocks "
            f"over a {rows} x {cols} matrix need {want}; make {name} with course_lib.fp8.quantize"
        )


def _per_row(q: Quantized, name: str, stage: str, block_kernel: str) -> bool:
    """Whether ``q`` has one scale per row (True) or one per tensor (False); anything else raises."""
    _per_row_or_block_shape(q, name, stage)
    rows, cols = q.values.shape
    b_rows, b_cols = q.block
    if b_cols >= cols and b_rows >= rows:
        return False
    if b_cols >= cols and b_rows == 1:
        return True
    raise ValueError(
        f"{stage}: {name} has one scale per {b_rows} x {b_cols} block; this kernel takes one scale per "
        f"tensor or one per row, applied once to each tile's sums: quantize {name} with "
        f"fp8.quantize(x, 'e4m3', 'tensor') or fp8.quantize(x, 'e4m3', 'row'). Block scales (1 x 128, "
        f"128 x 128) change along K: {block_kernel} takes those; column scales no kernel here"
    )


def check_gemm_operands(qa: object, qw: object, stage: str, blocks: bool = False,
                        block_kernel: str = "fp8_matmul_blockscaled") -> tuple[int, int, int, bool, bool]:
    """M, N, K and whether each operand has per-row scales; raises, naming ``stage`` (the kernel's
    function) and saying what to do, where the kernel cannot take the operands. ``blocks``: the
    operands must have DeepSeek-V3's block scales instead (A per 1 x 128, W per 128 x 128:
    :data:`BLOCK_SCALES`), which ``block_kernel`` takes."""
    for name, q in (("qa", qa), ("qw", qw)):
        if not isinstance(q, Quantized):
            raise TypeError(f"{stage}: {name} must be a course_lib.fp8.Quantized (from fp8.quantize), "
                            f"not {type(q).__name__}")
        if q.fmt.name != "e4m3" or q.values.dtype != torch.float8_e4m3fn:
            raise ValueError(
                f"{stage}: {name} is in {q.fmt.name} ({q.values.dtype}); this kernel multiplies e4m3 "
                f"only (e5m2 is the format of gradients): quantize with fp8.quantize(x, 'e4m3', ...)"
            )
        if q.values.dim() != 2:
            raise ValueError(f"{stage}: {name} must be a 2-D matrix, but its shape is "
                             f"{tuple(q.values.shape)}; quantize x.reshape(-1, x.shape[-1])")
    (M, K), (N, K2) = qa.values.shape, qw.values.shape
    if K != K2:
        raise ValueError(
            f"{stage}: qa is {M} x {K} and qw is {N} x {K2}, but both must be K-major with the same K: "
            "qa is M x K (activations) and qw is N x K (the weight of nn.Linear, out x in); if you "
            "hold W^T (K x N), quantize its transpose, w.T.contiguous()"
        )
    if M == 0 or N == 0 or K == 0:
        raise ValueError(f"{stage}: empty matrix (M={M}, N={N}, K={K}); every dimension must be at least 1")
    if blocks:
        for name, q, want in (("qa", qa, BLOCK_SCALES[0]), ("qw", qw, BLOCK_SCALES[1])):
            if tuple(q.block) != want:
                raise ValueError(
                    f"{stage}: {block_kernel} takes A in 1 x 128 blocks and W in 128 x 128 blocks, "
                    f"but {name} has {q.block[0]} x {q.block[1]}: quantize it with "
                    f"fp8.quantize(x, 'e4m3', 'block', {want}), or use fp8_matmul for one scale per tensor or row")
        _per_row_or_block_shape(qa, "qa", stage)
        _per_row_or_block_shape(qw, "qw", stage)
        rows_a = rows_w = True
    else:
        rows_a, rows_w = _per_row(qa, "qa", stage, block_kernel), _per_row(qw, "qw", stage, block_kernel)

    tensors = {"qa.values": qa.values, "qa.scales": qa.scales, "qw.values": qw.values, "qw.scales": qw.scales}
    devices = {str(t.device) for t in tensors.values()}
    if len(devices) > 1:
        where = ", ".join(f"{n} on {t.device}" for n, t in tensors.items())
        raise ValueError(f"{stage}: the operands are on different devices ({where}); move all four "
                         "to one device")
    want = backend.get().torch_device
    if qa.values.device.type != want:
        raise ValueError(f"{stage}: the operands are on {qa.values.device}, but the {backend.get().name} "
                         f"backend runs the kernel on '{want}'; move them there")
    for name, t in (("qa", qa.values), ("qw", qw.values)):
        if t.stride(1) != 1 and K > 1:
            raise ValueError(f"{stage}: {name}.values is not contiguous along K (strides {t.stride()}); "
                             f"the FP8 tensor cores read both operands K-major: pass {name}.values.contiguous()")
    return M, N, K, rows_a, rows_w


def fp8_plan_key(qa: object, qw: object, config: object = None) -> tuple | None:
    """What an FP8 wrapper's checks and choices depend on in its operands and ``config``, as a dict
    key; None for anything but two :class:`~course_lib.fp8.Quantized` of torch tensors (those take the
    checked path on every call, which says what is wrong).

    It holds :func:`course_lib.gemm.plan_key` of the values and of the scales - shape, strides,
    element type, device and 16-byte alignment of each of the four tensors -, the operands' blocks
    (the scaling), their formats' names and the configuration: everything
    :func:`~course_lib.fp8.check_gemm_operands`, the choice of kernel and configuration and Triton's
    specialisation read. Equal keys pass and fail the same checks and lead to the same launch. The
    backend is watched by :class:`course_lib.gemm.LaunchPlans` instead."""
    if type(qa) is not Quantized or type(qw) is not Quantized or type(qa.block) is not tuple or type(qw.block) is not tuple:
        return None
    values, scales = plan_key(qa.values, qw.values), plan_key(qa.scales, qw.scales)
    if values is None or scales is None:
        return None
    return values, scales, qa.block, qw.block, getattr(qa.fmt, "name", None), getattr(qw.fmt, "name", None), config
