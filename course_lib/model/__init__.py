"""The course's models of the hardware and of the kernels' schedules: plain functions of plain data
that the kernels' wrappers, the exercises and the pictures (:mod:`course_lib.viz`, which only draws)
all import, so a picture, an exercise's expected answer and the test of a kernel cannot disagree.

* :mod:`course_lib.model.hardware`         the facts, once: warp size, sectors and lines, banks,
  element sizes, TMA's 16-byte rule, one SM's limits and the H200's SM count
* :mod:`course_lib.model.layout`           ceiling division, a stage's shape rule, the 128-byte swizzle
* :mod:`course_lib.model.mapping`          which block, warp and thread owns each element of C (00)
* :mod:`course_lib.model.waves`            resident blocks per SM, waves and wave quantisation (00, 03, 08)
* :mod:`course_lib.model.coalescing`       one warp's load in 32-byte sectors and 128-byte lines (01, 04)
* :mod:`course_lib.model.tiles`            what a tiled block loads per step, global vs shared reads;
  register tiling's block, warp and thread tiles (02, 03)
* :mod:`course_lib.model.banks`            shared-memory banks, conflict degree, padding and XOR swizzle (02, 04)
* :mod:`course_lib.model.schedules`        the grouped tile order against row-major order, what the
  programs in flight read, stream-K's work units (05, 07)
* :mod:`course_lib.model.fragments`        which lane holds which element for mma.m16n8k16 and wgmma (06, 07)
* :mod:`course_lib.model.ldmatrix`         which lane gives which row address to ldmatrix, which register
  receives what (06)
* :mod:`course_lib.model.ring`             the producer/consumer handshake over a ring of slots: mbarriers
  and their parity (07)
* :mod:`course_lib.model.fp8_accumulator`  Hopper's FP8 tensor core adding in a narrow accumulator (09)

The models import nothing above :mod:`course_lib.backend`, :mod:`course_lib.dtypes` and
:mod:`course_lib.features` (MAINTAINING.md, "Architecture").
"""

from course_lib.model import (
    banks,
    coalescing,
    fp8_accumulator,
    fragments,
    hardware,
    layout,
    ldmatrix,
    mapping,
    ring,
    schedules,
    tiles,
    waves,
)
from course_lib.model.hardware import H200, WARP_SIZE, SMLimits, device_sms, itemsize, tma_elements, tma_rule_text

__all__ = ["banks", "coalescing", "fp8_accumulator", "fragments", "hardware", "layout", "ldmatrix", "mapping", "ring", "schedules",
           "tiles", "waves", "H200", "WARP_SIZE", "SMLimits", "device_sms", "itemsize", "tma_elements", "tma_rule_text"]
