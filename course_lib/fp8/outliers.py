"""Notebook 12's demonstration data: activations with a few outlier channels, and what one scale
per tensor costs the ordinary channels when the outliers set it."""

from __future__ import annotations

import torch

from course_lib.fp8.formats import quantize
from course_lib.gemm import relative_error

OUTLIER_CHANNELS = (7, 900, 2100, 3333)


def outlier_activations(factor: float, tokens: int = 64, channels: int = 4096,
                        seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Standard normal activations (tokens x channels) whose :data:`OUTLIER_CHANNELS` are ``factor``
    times larger, and the mask of the ordinary channels."""
    x = torch.randn(tokens, channels, generator=torch.Generator().manual_seed(seed))
    x[:, list(OUTLIER_CHANNELS)] *= factor
    ordinary = torch.ones(channels, dtype=torch.bool)
    ordinary[list(OUTLIER_CHANNELS)] = False
    return x, ordinary


def outlier_error(factor: float, fmt: str = "e4m3", scaling: str = "tensor",
                  block: tuple[int, int] | None = None) -> float:
    """The relative error of the ordinary channels of :func:`outlier_activations` quantized with
    ``scaling``: what the outliers' share of the scale costs the rest."""
    x, ordinary = outlier_activations(factor)
    return relative_error(quantize(x, fmt, scaling, block).dequantize()[:, ordinary], x[:, ordinary])


