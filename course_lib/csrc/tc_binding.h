// From torch tensors to a launcher call: the checks and the stream every binding of the tensor-core
// kernels needs (tc_binding.cu; a build of other kernels on the same headers includes it too).
// The Python wrapper (course_lib/kernels/tensor_cores/stages.py) has already checked shapes,
// dtypes and alignment with a clear message; the TORCH_CHECKs below guard against calling an
// extension directly.
#pragma once

#include <torch/extension.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <exception>
#include <map>
#include <thread>
#include <utility>
#include <vector>

#include "tc_launch.h"

namespace tc {

// `any_shape`: the kernel reads one element at a time (stage 0), so M, N, K and the alignment are free.
// `any_m`: M is free (stage 6: TMA fills a partial box of rows with zeros and clips its stores).
inline void check_operands(const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& c,
                           bool any_shape = false, bool any_m = false) {
  for (const torch::Tensor* t : {&a, &b, &c}) {
    TORCH_CHECK(t->is_cuda() && t->scalar_type() == torch::kBFloat16 && t->dim() == 2 && t->is_contiguous(),
                "tensor-core stages take contiguous 2-D bfloat16 CUDA tensors");
    TORCH_CHECK(any_shape || reinterpret_cast<uintptr_t>(t->data_ptr()) % 16 == 0,
                "tensor data must be 16-byte aligned");
  }
  TORCH_CHECK(a.size(1) == b.size(0) && c.size(0) == a.size(0) && c.size(1) == b.size(1), "shapes do not match");
  TORCH_CHECK(any_shape || ((any_m || a.size(0) % 8 == 0) && a.size(1) % 8 == 0 && b.size(1) % 8 == 0),
              any_m ? "N and K must be multiples of 8" : "M, N and K must be multiples of 8");
  TORCH_CHECK(a.device() == b.device() && a.device() == c.device(), "all tensors must be on one device");
}

// A launch's Workspace (tc_launch.h) from PyTorch's caching allocator, on the launch's stream.
// * Scratch: a new tensor per launch. The allocator hands a freed block out again only to work
//   queued after it on the same stream, and during a CUDA graph's capture it allocates from that
//   graph's own pool, which its replays keep; so no other launch can touch it while this one runs.
// * Zeroed ints: the kernels leave them zero, so outside a capture one set per stream serves every
//   launch on it (launches on one stream run one after another). It is never freed while work may
//   use it, and it is made by another thread, on a side stream, so that it stays out of any graph's
//   pool: torch.compile's CUDA graphs warm up with every allocation of the warming thread sent to the
//   graph's pool (torch/_inductor/cudagraph_trees.py, _use_cuda_memory_pool_manager). During a capture
//   the graph gets a set of its own, zeroed by a memset that the graph records (and repeats on every
//   replay): a graph may be replayed on any stream, beside launches on the stream it was captured on.
// The same rules as the Triton kernels' (course_lib/kernels/coalescing_and_triton/common.py,
// stream_buffer).
class TorchWorkspace {
 public:
  TorchWorkspace(const torch::Device& device, cudaStream_t stream) : device_(device), stream_(stream) {}

  Workspace get() {
    return Workspace{[this](size_t bytes) { return scratch(bytes); }, [this](size_t count) { return zeroed(count); }};
  }

 private:
  torch::Tensor bytes(size_t n) {
    return torch::empty({int64_t(n)}, torch::TensorOptions().dtype(torch::kUInt8).device(device_));
  }

  void* scratch(size_t n) {
    keep_.push_back(bytes(n));  // freed when the launcher returns: the stream's order protects it
    return keep_.back().data_ptr();
  }

  int* zeroed(size_t count) {
    const size_t n = count * sizeof(int);
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    C10_CUDA_CHECK(cudaStreamIsCapturing(stream_, &capture));
    if (capture != cudaStreamCaptureStatusNone) {
      keep_.push_back(bytes(n));
      C10_CUDA_CHECK(cudaMemsetAsync(keep_.back().data_ptr(), 0, n, stream_));
      return static_cast<int*>(keep_.back().data_ptr());
    }
    // Never destroyed: tensors must not outlive the CUDA context at exit.
    static auto& per_stream = *new std::map<std::pair<int, cudaStream_t>, torch::Tensor>();
    torch::Tensor& t = per_stream[{device_.index(), stream_}];
    if (!t.defined() || size_t(t.numel()) < n) {
      if (t.defined()) C10_CUDA_CHECK(cudaStreamSynchronize(stream_));  // queued launches may use the old set
      t = zeroed_by_another_thread(n > 4096 ? n : 4096);
    }
    return static_cast<int*>(t.data_ptr());
  }

  torch::Tensor zeroed_by_another_thread(size_t n) {
    torch::Tensor t;
    std::exception_ptr failed;
    std::thread maker([&] {
      try {
        const c10::cuda::CUDAGuard on_device(device_);
        const c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool(false, device_.index());
        const c10::cuda::CUDAStreamGuard on_side(side);
        t = bytes(n);
        C10_CUDA_CHECK(cudaMemsetAsync(t.data_ptr(), 0, n, side.stream()));
        C10_CUDA_CHECK(cudaStreamSynchronize(side.stream()));
      } catch (...) {
        failed = std::current_exception();
      }
    });
    maker.join();
    if (failed) std::rethrow_exception(failed);
    return t;
  }

  torch::Device device_;
  cudaStream_t stream_;
  std::vector<torch::Tensor> keep_;
};

// Checks the tensors, then calls launch(gemm, stream, workspace) on the current CUDA stream of their
// device.
template <typename Launch>
void run(const torch::Tensor& a, const torch::Tensor& b, torch::Tensor& c, Launch&& launch, bool any_shape = false,
         bool any_m = false) {
  check_operands(a, b, c, any_shape, any_m);
  const c10::cuda::CUDAGuard guard(a.device());
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(a.device().index()).stream();
  const Gemm g{reinterpret_cast<const __nv_bfloat16*>(a.data_ptr()),
               reinterpret_cast<const __nv_bfloat16*>(b.data_ptr()),
               reinterpret_cast<__nv_bfloat16*>(c.data_ptr()),
               int(a.size(0)), int(b.size(1)), int(a.size(1))};
  TorchWorkspace ws(a.device(), stream);
  launch(g, stream, ws.get());
}

// Stage 7 (FP8): e4m3 A (M x K) and W (N x K), fp32 scales laid out as `scaling` says (tc_launch.h),
// bf16 C (M x N); then launch(gemm, stream, workspace) on the current CUDA stream, as run() above.
template <typename Launch>
void run_fp8(const torch::Tensor& a, const torch::Tensor& w, const torch::Tensor& scale_a, const torch::Tensor& scale_w,
             torch::Tensor& c, int scaling, bool fast_accumulation, Launch&& launch) {
  for (const torch::Tensor* t : {&a, &w})
    TORCH_CHECK(t->is_cuda() && t->scalar_type() == torch::kFloat8_e4m3fn && t->dim() == 2 && t->is_contiguous(),
                "tc_7_fp8 takes contiguous 2-D float8_e4m3fn CUDA tensors a (M x K) and w (N x K)");
  TORCH_CHECK(c.is_cuda() && c.scalar_type() == torch::kBFloat16 && c.dim() == 2 && c.is_contiguous(),
              "tc_7_fp8 writes a contiguous 2-D bfloat16 CUDA tensor c");
  for (const torch::Tensor* t : std::initializer_list<const torch::Tensor*>{&a, &w, &c})
    TORCH_CHECK(reinterpret_cast<uintptr_t>(t->data_ptr()) % 16 == 0, "tensor data must be 16-byte aligned");
  for (const torch::Tensor* t : {&scale_a, &scale_w})
    TORCH_CHECK(t->is_cuda() && t->scalar_type() == torch::kFloat32 && t->is_contiguous(),
                "the scales must be contiguous float32 CUDA tensors");
  const int64_t M = a.size(0), K = a.size(1), N = w.size(0);
  TORCH_CHECK(w.size(1) == K && c.size(0) == M && c.size(1) == N, "shapes do not match: a M x K, w N x K, c M x N");
  TORCH_CHECK(K % 16 == 0 && N % 8 == 0, "K must be a multiple of 16 and N of 8");
  const int64_t kb = (K + 127) / 128, nb = (N + 127) / 128;
  const bool sizes = scaling == SCALING_TENSOR ? scale_a.numel() == 1 && scale_w.numel() == 1
                     : scaling == SCALING_ROW  ? scale_a.numel() == M && scale_w.numel() == N
                     : scaling == SCALING_BLOCK ? scale_a.numel() == M * kb && scale_w.numel() == nb * kb
                                                : false;
  TORCH_CHECK(sizes, "scales do not match the scaling (0: one each, 1: M and N, 2: M x ceil(K/128) and "
                     "ceil(N/128) x ceil(K/128))");
  for (const torch::Tensor* t : std::initializer_list<const torch::Tensor*>{&w, &c, &scale_a, &scale_w})
    TORCH_CHECK(t->device() == a.device(), "all tensors must be on one device");
  const c10::cuda::CUDAGuard guard(a.device());
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(a.device().index()).stream();
  const Fp8Gemm g{reinterpret_cast<const uint8_t*>(a.data_ptr()), reinterpret_cast<const uint8_t*>(w.data_ptr()),
                  scale_a.data_ptr<float>(), scale_w.data_ptr<float>(),
                  reinterpret_cast<__nv_bfloat16*>(c.data_ptr()), int(M), int(N), int(K), scaling, fast_accumulation};
  TorchWorkspace ws(a.device(), stream);
  launch(g, stream, ws.get());
}

// Stage 7's entry (also bound by experiments/kernels/tc_7_variants_binding.cu): it takes its scales,
// how they are laid out (tc_launch.h), whether the sums stay in the tensor core's accumulator, and the
// schedule (tc_launch.h: -1 by the shape, 0 whole tiles, 2 operands swapped).
inline void bind_tc_7_fp8(pybind11::module_& m) {
  m.def(
      "tc_7_fp8",
      [](const torch::Tensor& a, const torch::Tensor& w, const torch::Tensor& scale_a, const torch::Tensor& scale_w,
         torch::Tensor c, int scaling, bool fast_accumulation, int group_m, int max_ctas, int schedule) {
        run_fp8(a, w, scale_a, scale_w, c, scaling, fast_accumulation,
                [&](const Fp8Gemm& g, cudaStream_t stream, const Workspace& ws) {
                  launch_tc_7_fp8(g, stream, ws, group_m, max_ctas, schedule);
                });
      },
      "c = (a @ w.T) scaled (e4m3 in, fp32 accumulation, bf16 out) into the preallocated c",
      pybind11::arg("a"), pybind11::arg("w"), pybind11::arg("scale_a"), pybind11::arg("scale_w"), pybind11::arg("c"),
      pybind11::arg("scaling"), pybind11::arg("fast_accumulation") = false, pybind11::arg("group_m") = 8,
      pybind11::arg("max_ctas") = 0, pybind11::arg("schedule") = SCHEDULE_AUTO);
}

}  // namespace tc
