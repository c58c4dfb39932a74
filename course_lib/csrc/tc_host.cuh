// Host-side helpers shared by the stage files: error checks, device properties, TMA descriptors.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>
#include <cudaTypedefs.h>  // PFN_cuTensorMapEncodeTiled
#include <cuda_bf16.h>

#include <stdexcept>
#include <string>
#include <unordered_set>

namespace tc {

// Throws with the CUDA error text; pybind11 turns it into a Python RuntimeError.
inline void check_cuda(cudaError_t err, const char* what) {
  if (err != cudaSuccess)
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorName(err) + ": " + cudaGetErrorString(err));
}

// Call right after a <<<...>>> launch: reports a bad configuration (too much shared memory, a grid
// that is not a multiple of the cluster size, ...) at the launch, not at the next synchronisation.
inline void check_launch(const char* kernel) { check_cuda(cudaGetLastError(), kernel); }

inline int device_sm_count() {
  int device = 0, sms = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  check_cuda(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "cudaDeviceGetAttribute");
  return sms;
}

// cuTensorMapEncodeTiled lives in the driver library. Asking the runtime for the entry point
// avoids linking libcuda (the extension links only what PyTorch links).
inline PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult found{};
    check_cuda(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &found),
               "cudaGetDriverEntryPointByVersion(cuTensorMapEncodeTiled)");
    if (found != cudaDriverEntryPointSuccess || p == nullptr)
      throw std::runtime_error("the CUDA driver has no cuTensorMapEncodeTiled (needs a driver for CUDA 12+)");
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
  }();
  return fn;
}

// A TMA descriptor for a row-major matrix of `rows` x `cols` elements (bf16, or bytes: stage 7's
// e4m3), copied in boxes of `box_rows` x `box_cols`. Global strides must be multiples of 16 bytes
// (cols % 8 == 0 for bf16, cols % 16 == 0 for bytes) and the base 16-byte aligned; with 128-byte
// swizzle a box row may be at most 128 bytes (box_cols <= 64 bf16, <= 128 bytes).
inline CUtensorMap make_tensor_map(const void* base, int rows, int cols, int box_rows, int box_cols,
                                   CUtensorMapSwizzle swizzle,
                                   CUtensorMapDataType type = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16) {
  const size_t elem = type == CU_TENSOR_MAP_DATA_TYPE_UINT8 ? 1 : sizeof(__nv_bfloat16);
  CUtensorMap map;
  const cuuint64_t dims[2] = {cuuint64_t(cols), cuuint64_t(rows)};          // innermost first
  const cuuint64_t strides[1] = {cuuint64_t(cols) * elem};  // bytes, dims 1..
  const cuuint32_t box[2] = {cuuint32_t(box_cols), cuuint32_t(box_rows)};
  const cuuint32_t element_strides[2] = {1, 1};
  const CUresult r = tensor_map_encoder()(
      &map, type, 2, const_cast<void*>(base), dims, strides, box, element_strides,
      CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);  // "NONE" = out-of-bounds elements read as zero
  if (r != CUDA_SUCCESS)
    throw std::runtime_error("cuTensorMapEncodeTiled failed (error " + std::to_string(int(r)) + ") for a " +
                             std::to_string(rows) + " x " + std::to_string(cols) + " matrix, box " +
                             std::to_string(box_rows) + " x " + std::to_string(box_cols));
  return map;
}

// Raise a kernel's dynamic shared-memory limit (48 KB by default); the attribute stays with the
// kernel, so each kernel is configured once per process (keyed by its address: several stages'
// kernels share one C++ type).
template <typename Kernel>
inline void allow_dynamic_smem(Kernel kernel, int bytes) {
  static std::unordered_set<const void*> configured;
  const void* key = reinterpret_cast<const void*>(kernel);
  if (configured.count(key)) return;
  check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes),
             "cudaFuncSetAttribute(MaxDynamicSharedMemorySize)");
  configured.insert(key);
}

}  // namespace tc
