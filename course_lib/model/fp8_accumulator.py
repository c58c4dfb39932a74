"""A model of Hopper's FP8 tensor core adding its products with a narrow adder (14 bits below the
largest exponent), with or without promoting the partial sums into fp32 every few instructions:
:func:`limited_sum_matmul`. It runs on the CPU; notebook 12 and experiments/JOURNAL.md ("cuBLAS in
FP8") compare it with cuBLAS on the H200."""

from __future__ import annotations

import torch

# One Hopper FP8 wgmma multiplies K = 32 (tc_hopper.cuh's k16 for 16-bit types: twice as many 8-bit
# elements in the same 32 bytes of a row).
FP8_WGMMA_K = 32
# The bits the model keeps below the largest exponent. DeepSeek-V3's technical report (section 3.3.2)
# gives "around 14 bits" for FP8 GEMM on H800; with 14, this model gives the errors measured on the
# H200 without promotion - cuBLAS's fast accumulation at K = 1,024 and 4,096, the course's Triton
# kernel at K up to 16,384 - to within 5 % (experiments/JOURNAL.md, "cuBLAS in FP8").
ACCUMULATOR_BITS = 14


def aligned_sum(acc: torch.Tensor, products: torch.Tensor, bits: int) -> torch.Tensor:
    """``acc`` plus the sum of ``products`` (M x k x N) over their middle axis, as a tensor core with
    a narrow adder does it: every addend is aligned to the largest exponent among them (the
    accumulator's or a product's) and cut to ``bits`` bits below it, dropping the rest (toward zero)."""
    largest = torch.maximum(acc.abs(), products.abs().amax(dim=1))
    _, exponent = torch.frexp(largest)  # largest < 2^exponent
    grid = torch.ldexp(torch.ones_like(largest), exponent - bits)  # the value of the last bit kept
    kept = torch.trunc(products / grid[:, None, :]) * grid[:, None, :]
    return torch.trunc(acc / grid) * grid + kept.sum(dim=1)


def limited_sum_matmul(a: torch.Tensor, b: torch.Tensor, *, accumulator_bits: int = ACCUMULATOR_BITS,
                       promote_every: int | None = None, k_step: int = FP8_WGMMA_K) -> torch.Tensor:
    """A model of Hopper's FP8 tensor core summing ``a @ b`` (M x K times K x N, float64 result).

    Each ``k_step`` of K is one instruction: its products are added into the accumulator by
    :func:`aligned_sum`, which keeps ``accumulator_bits`` bits below the largest exponent. Without
    promotion the accumulator runs over the whole of K, and as it grows each new product loses more
    of its bits. With ``promote_every = n``, every n instructions the accumulator is added into an
    fp32 sum in registers and restarts from zero (DeepGEMM's two-level accumulation; cuBLAS without
    fast accumulation). A model: the notebook and the JOURNAL compare it with cuBLAS on the H200.
    """
    if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"limited_sum_matmul takes M x K and K x N matrices; got {tuple(a.shape)} and {tuple(b.shape)}")
    if promote_every is not None and promote_every < 1:
        raise ValueError(f"promote_every must be a number of instructions >= 1, or None; got {promote_every}")
    a64, b64 = a.double(), b.double()
    acc = torch.zeros(a64.shape[0], b64.shape[1], dtype=torch.float64)
    total = torch.zeros_like(acc)
    for i, k0 in enumerate(range(0, a64.shape[1], k_step)):
        acc = aligned_sum(acc, a64[:, k0:k0 + k_step, None] * b64[None, k0:k0 + k_step, :], accumulator_bits)
        if promote_every is not None and (i + 1) % promote_every == 0:
            total = (total + acc).float().double()  # the fp32 register sum
            acc.zero_()
    return total + acc
