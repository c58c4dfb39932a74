// The only file of the course's extension that knows about PyTorch: one entry per stage, named for
// the stage, that checks the tensors, finds the current CUDA stream and calls the stage's launcher
// (tc_binding.h).
#include "tc_binding.h"

namespace {

constexpr const char* DOC = "c = a @ b (bf16 in, fp32 accumulation, bf16 out) into the preallocated c";

using Launcher = void (*)(const tc::Gemm&, cudaStream_t);
using PersistentLauncher = void (*)(const tc::Gemm&, cudaStream_t, int group_m, int max_ctas);

// [excerpt bind]
void bind(pybind11::module_& m, const char* name, Launcher launcher, bool any_shape = false) {
  m.def(
      name,
      [launcher, any_shape](const torch::Tensor& a, const torch::Tensor& b, torch::Tensor c) {
        tc::run(
            a, b, c, [&](const tc::Gemm& g, cudaStream_t stream, const tc::Workspace&) { launcher(g, stream); },
            any_shape);
      },
      DOC);
}
// [/excerpt bind]

// The persistent stages also take the tile order's group height and a cap on the grid.
void bind(pybind11::module_& m, const char* name, PersistentLauncher launcher) {
  m.def(
      name,
      [launcher](const torch::Tensor& a, const torch::Tensor& b, torch::Tensor c, int group_m, int max_ctas) {
        tc::run(a, b, c, [&](const tc::Gemm& g, cudaStream_t stream, const tc::Workspace&) {
          launcher(g, stream, group_m, max_ctas);
        });
      },
      DOC, pybind11::arg("a"), pybind11::arg("b"), pybind11::arg("c"), pybind11::arg("group_m") = 8,
      pybind11::arg("max_ctas") = 0);
}

// Stage 6 also takes the schedule (tc_launch.h): -1 by the shape, 0 whole tiles, 1 stream-K,
// 2 operands swapped (M <= 128); and the tile's width: 0 by the shape, 256, 128 or 64 (128 x 256,
// 128 x 128 or 128 x 64 tiles); and it takes any M (`any_m`).
using ScheduleLauncher = void (*)(const tc::Gemm&, cudaStream_t, const tc::Workspace&, int group_m, int max_ctas,
                                  int schedule, int block_n);
void bind(pybind11::module_& m, const char* name, ScheduleLauncher launcher) {
  m.def(
      name,
      [launcher](const torch::Tensor& a, const torch::Tensor& b, torch::Tensor c, int group_m, int max_ctas,
                 int schedule, int block_n) {
        tc::run(
            a, b, c,
            [&](const tc::Gemm& g, cudaStream_t stream, const tc::Workspace& ws) {
              launcher(g, stream, ws, group_m, max_ctas, schedule, block_n);
            },
            /*any_shape=*/false, /*any_m=*/true);
      },
      DOC, pybind11::arg("a"), pybind11::arg("b"), pybind11::arg("c"), pybind11::arg("group_m") = 8,
      pybind11::arg("max_ctas") = 0, pybind11::arg("schedule") = tc::SCHEDULE_AUTO,
      pybind11::arg("block_n") = tc::TILE_AUTO);
}

}  // namespace

// The list of the course's CUDA stages: the Python side reads it from here (kernels/tensor_cores/csrc.py,
// entries) - which sources a build compiles (<stage>.cu), which need sm_90a (those under
// #ifdef TC_WITH_SM90A), which are bf16 GEMMs of the one signature (bind) and which bind themselves.
// A new stage is one line here, its .cu file and its row in the course manifest (course_lib/registry.py).
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  bind(m, "tc_0_mma_sync_minimal", tc::launch_tc_0_mma_sync_minimal, /*any_shape=*/true);
  bind(m, "tc_1_mma_sync", tc::launch_tc_1_mma_sync);
#ifdef TC_WITH_SM90A
  m.attr("has_sm90a") = true;
  bind(m, "tc_2_wgmma_tma", tc::launch_tc_2_wgmma_tma);
  bind(m, "tc_3_pipeline", tc::launch_tc_3_pipeline);
  bind(m, "tc_4_warp_specialized", tc::launch_tc_4_warp_specialized);
  bind(m, "tc_5_persistent", tc::launch_tc_5_persistent);
  bind(m, "tc_6_tma_store", tc::launch_tc_6_tma_store);
  m.def("tc_6_tma_store_plan", &tc::tc_6_tma_store_plan,
        "(tile rows, tile columns, schedule code) that tc_6_tma_store runs at M x N x K on this GPU",
        pybind11::arg("M"), pybind11::arg("N"), pybind11::arg("K"), pybind11::arg("max_ctas") = 0,
        pybind11::arg("schedule") = tc::SCHEDULE_AUTO, pybind11::arg("block_n") = tc::TILE_AUTO);
  tc::bind_tc_7_fp8(m);
#else
  m.attr("has_sm90a") = false;
#endif
}
