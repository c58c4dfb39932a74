"""The course's models of the hardware and of the kernels' schedules: plain functions of plain data
that the kernels' wrappers, the exercises and the pictures (:mod:`course_lib.viz`, which only draws)
all import, so a picture, an exercise's expected answer and the test of a kernel cannot disagree.

* :mod:`course_lib.model.hardware`         the facts, once: warp size, sectors and lines, banks,
  element sizes, TMA's 16-byte rule, one SM's limits and the H200's SM count
* :mod:`course_lib.model.fp8_accumulator`  Hopper's FP8 tensor core adding in a narrow accumulator

The models import nothing above :mod:`course_lib.backend`, :mod:`course_lib.dtypes` and
:mod:`course_lib.features` (MAINTAINING.md, "Architecture").
"""

from course_lib.model import hardware
from course_lib.model.hardware import H200, WARP_SIZE, SMLimits, device_sms, itemsize, tma_elements, tma_rule_text

__all__ = ["hardware", "H200", "WARP_SIZE", "SMLimits", "device_sms", "itemsize", "tma_elements", "tma_rule_text"]
