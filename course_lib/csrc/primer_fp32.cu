// The numba kernels of notebooks 01 and 02 (course_lib/kernels/naive.py: naive_kernel, and
// course_lib/kernels/shared_memory_tiling.py: the tiled kernel) spelled in CUDA C++, line for line,
// for the primer of notebook 06. They compute C = A * B for row-major fp32 matrices.
//
// They are not stages of the course: the extension does not bind them and nothing launches them.
// The course's tests compile them with nvcc (no GPU needed) and read the machine code.
//
// Notebook 06 prints the lines between `// [excerpt NAME]` and `// [/excerpt NAME]` below.
#include <cuda_runtime.h>

namespace primer {

// [excerpt naive]
// numba: @cuda.jit def naive_kernel(a, b, c)
__global__ void naive_kernel(const float* a, const float* b, float* c, int M, int N, int K) {
  // numba: col, row = cuda.grid(2)
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  const int row = blockIdx.y * blockDim.y + threadIdx.y;
  if (row < M && col < N) {  // the grid is rounded up to whole blocks: stop the threads past the edge
    float acc = 0.f;         // numba: acc = float32(0.0)
    for (int k = 0; k < K; ++k)
      acc += a[row * K + k] * b[k * N + col];  // numba: a[row, k] * b[k, col] (row-major, by hand)
    c[row * N + col] = acc;
  }
}
// [/excerpt naive]

// [excerpt tiled]
// numba: make_tiled_kernel(TILE) returns a kernel with TILE compiled in; C++ says so with a template.
template <int TILE>
__global__ void tiled_kernel(const float* a, const float* b, float* c, int M, int N, int K) {
  __shared__ float a_tile[TILE][TILE];  // numba: cuda.shared.array((TILE, TILE), float32)
  __shared__ float b_tile[TILE][TILE];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int row = blockIdx.y * TILE + ty, col = blockIdx.x * TILE + tx;
  float acc = 0.f;
  for (int k0 = 0; k0 < K; k0 += TILE) {
    // ---- copy one element of each tile; past the edge, a zero that adds nothing
    a_tile[ty][tx] = (row < M && k0 + tx < K) ? a[row * K + k0 + tx] : 0.f;
    b_tile[ty][tx] = (k0 + ty < K && col < N) ? b[(k0 + ty) * N + col] : 0.f;
    __syncthreads();  // (1) the tiles are complete before anyone reads them
    // ---- TILE multiply-adds from shared memory
    for (int k = 0; k < TILE; ++k) acc += a_tile[ty][k] * b_tile[k][tx];
    __syncthreads();  // (2) everyone is done reading before the next copy overwrites
  }
  if (row < M && col < N) c[row * N + col] = acc;
}
// [/excerpt tiled]

// [excerpt launch]
// numba: tiled_kernel[grid, block](a, b, c), the shapes read from the arrays. In C++ the kernel
// gets bare pointers, so the sizes are passed too; <<<grid, block, shared bytes, stream>>> launches.
constexpr int TILE = 32;
void launch_tiled(const float* a, const float* b, float* c, int M, int N, int K, cudaStream_t stream) {
  const dim3 block(TILE, TILE);                                   // 32 x 32 threads
  const dim3 grid((N + TILE - 1) / TILE, (M + TILE - 1) / TILE);  // x: columns, y: rows, rounded up
  tiled_kernel<TILE><<<grid, block, 0, stream>>>(a, b, c, M, N, K);
}
// [/excerpt launch]

void launch_naive(const float* a, const float* b, float* c, int M, int N, int K, cudaStream_t stream) {
  const dim3 block(16, 16);
  const dim3 grid((N + 15) / 16, (M + 15) / 16);
  naive_kernel<<<grid, block, 0, stream>>>(a, b, c, M, N, K);
}

}  // namespace primer
