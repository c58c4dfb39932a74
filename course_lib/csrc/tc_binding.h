// From torch tensors to a launcher call: the checks and the stream every binding of the tensor-core
// kernels needs (tc_binding.cu; a build of other kernels on the same headers includes it too).
// The Python wrapper (course_lib/kernels/tensor_cores/stages.py) has already checked shapes,
// dtypes and alignment with a clear message; the TORCH_CHECKs below guard against calling an
// extension directly.
#pragma once

#include <torch/extension.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

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

// Checks the tensors, then calls launch(gemm, stream) on the current CUDA stream of their device.
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
  launch(g, stream);
}

}  // namespace tc
