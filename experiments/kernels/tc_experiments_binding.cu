// The experiment extension's only torch-aware file: the stage-6 variant with its knobs, and (in a
// -DTC_TIMELINE build) its timeline. Built by experiments/tc_6_stream_k.py with the course's headers
// (course_lib/csrc, tc_binding.h) on the include path.
#include "tc_6_stream_k.h"
#include "tc_binding.h"

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def(
      "tc_6_stream_k",
      [](const torch::Tensor& a, const torch::Tensor& b, torch::Tensor c, int cluster, int group_m, int max_ctas,
         bool stream_k, int block_n) {
        tc::run(a, b, c, [&](const tc::Gemm& g, cudaStream_t s, const tc::Workspace& ws) {
          tc::launch_tc_6_stream_k(g, s, ws, cluster, group_m, max_ctas, stream_k, block_n);
        });
      },
      "c = a @ b by stage 6 with its experiment knobs", pybind11::arg("a"), pybind11::arg("b"), pybind11::arg("c"),
      pybind11::arg("cluster") = 2, pybind11::arg("group_m") = 8, pybind11::arg("max_ctas") = 0,
      pybind11::arg("stream_k") = false, pybind11::arg("block_n") = 256);
#ifdef TC_TIMELINE
  m.def("clear_timeline", &tc::clear_tc_6_timeline);
  m.def("timeline", []() {
    torch::Tensor t = torch::empty({int64_t(tc::tc_6_timeline_shape(0)), int64_t(tc::tc_6_timeline_shape(1)),
                                    int64_t(tc::tc_6_timeline_shape(2))}, torch::kInt64);
    tc::read_tc_6_timeline(reinterpret_cast<long long*>(t.data_ptr<int64_t>()), size_t(t.numel()));
    return t;
  }, "the timeline stamps [CTA][consumer][entry] of the last launches (tc_6_stream_k.cu)");
#endif
}
