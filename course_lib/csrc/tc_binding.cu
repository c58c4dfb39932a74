// The only file that knows about PyTorch: checks the tensors, finds the current CUDA stream and
// calls the stage's launcher. The Python wrapper (course_lib/kernels/tensor_cores.py) has already
// checked shapes, dtypes and alignment with a clear message; the TORCH_CHECKs below guard
// against calling the extension directly.
#include <torch/extension.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "tc_launch.h"

namespace {

using Launcher = void (*)(const __nv_bfloat16*, const __nv_bfloat16*, __nv_bfloat16*, int, int, int, cudaStream_t);

void check_operands(const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& c) {
  for (const torch::Tensor* t : {&a, &b, &c}) {
    TORCH_CHECK(t->is_cuda() && t->scalar_type() == torch::kBFloat16 && t->dim() == 2 && t->is_contiguous(),
                "tensor-core stages take contiguous 2-D bfloat16 CUDA tensors");
    TORCH_CHECK(reinterpret_cast<uintptr_t>(t->data_ptr()) % 16 == 0, "tensor data must be 16-byte aligned");
  }
  TORCH_CHECK(a.size(1) == b.size(0) && c.size(0) == a.size(0) && c.size(1) == b.size(1), "shapes do not match");
  TORCH_CHECK(a.size(0) % 8 == 0 && a.size(1) % 8 == 0 && b.size(1) % 8 == 0, "M, N and K must be multiples of 8");
  TORCH_CHECK(a.device() == b.device() && a.device() == c.device(), "all tensors must be on one device");
}

template <typename Fn>
void run(const torch::Tensor& a, const torch::Tensor& b, torch::Tensor& c, Fn&& launch) {
  check_operands(a, b, c);
  const c10::cuda::CUDAGuard guard(a.device());
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(a.device().index()).stream();
  launch(reinterpret_cast<const __nv_bfloat16*>(a.data_ptr()), reinterpret_cast<const __nv_bfloat16*>(b.data_ptr()),
         reinterpret_cast<__nv_bfloat16*>(c.data_ptr()), int(a.size(0)), int(b.size(1)), int(a.size(1)), stream);
}

void bind(pybind11::module_& m, const char* name, Launcher launcher) {
  m.def(name, [launcher](const torch::Tensor& a, const torch::Tensor& b, torch::Tensor c) { run(a, b, c, launcher); },
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
        run(a, b, c, [&](auto... args) { tc::launch_tc_5_persistent(args..., cluster, group_m, max_ctas); });
      },
      pybind11::arg("a"), pybind11::arg("b"), pybind11::arg("c"), pybind11::arg("cluster") = 2,
      pybind11::arg("group_m") = 8, pybind11::arg("max_ctas") = 0);
  m.def(
      "tc_6_tma_store",
      [](const torch::Tensor& a, const torch::Tensor& b, torch::Tensor c, int cluster, int group_m, int max_ctas,
         bool stream_k) {
        run(a, b, c, [&](auto... args) { tc::launch_tc_6_tma_store(args..., cluster, group_m, max_ctas, stream_k); });
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
