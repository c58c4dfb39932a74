// Stage 7 alone, for experiments/gpu_fp8_stage7_variants.py: built with course_lib/csrc on the include
// path and -DTC7_PROMOTE_EVERY / -DTC7_ORDERED, one extension per variant.
#include "tc_binding.h"

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { tc::bind_tc_7_fp8(m); }
