// The only file of the course's extension that knows about PyTorch: one entry per stage, named for
// the stage, that checks the tensors, finds the current CUDA stream and calls the stage's launcher
// (tc_binding.h).
#include "tc_binding.h"

namespace {

using Launcher = void (*)(const tc::Gemm&, cudaStream_t);

void bind(pybind11::module_& m, const char* name, Launcher launcher) {
  m.def(name, [launcher](const torch::Tensor& a, const torch::Tensor& b, torch::Tensor c) { tc::run(a, b, c, launcher); },
        "c = a @ b (bf16 in, fp32 accumulation, bf16 out) into the preallocated c");
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  bind(m, "tc_1_mma_sync", tc::launch_tc_1_mma_sync);
#ifdef TC_WITH_SM90A
  m.attr("has_sm90a") = true;
  bind(m, "tc_2_wgmma_tma", tc::launch_tc_2_wgmma_tma);
  bind(m, "tc_3_pipeline", tc::launch_tc_3_pipeline);
  bind(m, "tc_4_warp_specialized", tc::launch_tc_4_warp_specialized);
  m.def(
      "tc_5_persistent",
      [](const torch::Tensor& a, const torch::Tensor& b, torch::Tensor c, int cluster, int group_m, int max_ctas) {
        tc::run(a, b, c, [&](const tc::Gemm& g, cudaStream_t s) { tc::launch_tc_5_persistent(g, s, cluster, group_m, max_ctas); });
      },
      pybind11::arg("a"), pybind11::arg("b"), pybind11::arg("c"), pybind11::arg("cluster") = 2,
      pybind11::arg("group_m") = 8, pybind11::arg("max_ctas") = 0);
  m.def(
      "tc_6_tma_store",
      [](const torch::Tensor& a, const torch::Tensor& b, torch::Tensor c, int cluster, int group_m, int max_ctas,
         bool stream_k) {
        tc::run(a, b, c, [&](const tc::Gemm& g, cudaStream_t s) {
          tc::launch_tc_6_tma_store(g, s, cluster, group_m, max_ctas, stream_k);
        });
      },
      pybind11::arg("a"), pybind11::arg("b"), pybind11::arg("c"), pybind11::arg("cluster") = 2,
      pybind11::arg("group_m") = 8, pybind11::arg("max_ctas") = 0, pybind11::arg("stream_k") = false);
#ifdef TC_TIMELINE
  m.def("tc6_clear_timeline", &tc::clear_tc6_timeline);
  m.def("tc6_timeline", []() {
    torch::Tensor t = torch::empty({int64_t(tc::tc6_timeline_shape(0)), int64_t(tc::tc6_timeline_shape(1)),
                                    int64_t(tc::tc6_timeline_shape(2))}, torch::kInt64);
    tc::read_tc6_timeline(reinterpret_cast<long long*>(t.data_ptr<int64_t>()), size_t(t.numel()));
    return t;
  }, "stage 6's timeline stamps [CTA][consumer][entry] (tc_6_tma_store.cu)");
#endif
#else
  m.attr("has_sm90a") = false;
#endif
}
