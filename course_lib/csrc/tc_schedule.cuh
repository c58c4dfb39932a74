// How the wgmma stages cover C with CTAs, written once: one CTA per tile (stages 2-4,
// launch_tile_per_cta) or a persistent grid with a tile scheduler (stages 5-6).
//
// A persistent kernel launches about one CTA per SM and lets each CTA walk a list of output tiles.
// Tiles are handed out in clusters: CLUSTER consecutive tile rows that share one column of B
// (their CTAs receive B's slices by TMA multicast). Cluster tile t of T goes to cluster
// t mod (number of clusters), so the clusters working at the same moment hold consecutive t.
// Consecutive t are ordered in groups of `group_m` cluster rows, column by column inside a group
// (the "grouped" order of Triton's matmul tutorial): the tiles running together then share a
// few rows of A and a few columns of B, which stay in L2.
// course_lib/layout.py has the same order in Python (grouped_order), tested to cover every tile
// exactly once; a test holds locate() below to it at compile time (static_assert).
#pragma once

#include <map>
#include <mutex>
#include <tuple>

#include "tc_hopper.cuh"
#include "tc_host.cuh"
#include "tc_launch.h"

namespace tc {

struct GroupedTiles {
  int cluster_rows;  // ceil(tile rows / CLUSTER)
  int cols;          // tile columns
  int group_m;       // cluster rows per group (>= 1)

  __host__ __device__ constexpr int count() const { return cluster_rows * cols; }

  // Cluster tile t -> (cluster row, tile column).
  __host__ __device__ constexpr void locate(int t, int& cluster_row, int& col) const {
    const int per_group = group_m * cols;
    const int first = (t / per_group) * group_m;
    const int rows = cluster_rows - first < group_m ? cluster_rows - first : group_m;
    const int r = t % per_group;
    cluster_row = first + r % rows;
    col = r / rows;
  }

  // The first row and column of C that CTA `rank` of the cluster computes for cluster tile t
  // (the cluster's CTAs take consecutive BLOCK_M-row tiles of one tile column).
  template <int CLUSTER, int BLOCK_M, int BLOCK_N>
  __device__ void origin(int t, uint32_t rank, int& m0, int& n0) const {
    int cluster_row, col;
    locate(t, cluster_row, col);
    m0 = (cluster_row * CLUSTER + int(rank)) * BLOCK_M;
    n0 = col * BLOCK_N;
  }
};

// The TMA descriptors of the operands, as every wgmma stage reads them: A in boxes of BLOCK_M x 64,
// B in boxes of 64 x 64, both with the 128-byte swizzle that wgmma's descriptors expect.
template <int BLOCK_M>
inline CUtensorMap tensor_map_a(const Gemm& g) {
  return make_tensor_map(g.a, g.M, g.K, BLOCK_M, TILE_K, CU_TENSOR_MAP_SWIZZLE_128B);
}
inline CUtensorMap tensor_map_b(const Gemm& g) {
  return make_tensor_map(g.b, g.K, g.N, TILE_K, 64, CU_TENSOR_MAP_SWIZZLE_128B);
}

// Stages 2-4: one CTA per BLOCK_M x BLOCK_N tile of C; the kernel writes C from registers.
template <int BLOCK_M, int BLOCK_N, typename Kernel>
inline void launch_tile_per_cta(Kernel kernel, int threads, int smem_bytes, const Gemm& g, cudaStream_t stream,
                                const char* name) {
  allow_dynamic_smem(kernel, smem_bytes);
  const dim3 grid(ceil_div(g.N, BLOCK_N), ceil_div(g.M, BLOCK_M));
  kernel<<<grid, threads, smem_bytes, stream>>>(tensor_map_a<BLOCK_M>(g), tensor_map_b(g), g.c, g.M, g.N, g.K);
  check_launch(name);
}

// How many clusters of `kernel` can be resident on the GPU at once (capped by `max_ctas` when it
// is > 0): the grid of a persistent launch.
//
// The answer depends only on the kernel, its launch shape and the device, so it is asked once per
// (kernel, device, threads, shared memory, cluster) and kept: stage 6 needs it twice per call (for
// its rule and for its grid), and the occupancy API is host time on every call otherwise. A
// failed query is not kept (its SM-count estimate is used for that call only).
template <typename Kernel>
inline int resident_clusters(Kernel kernel, int threads, int smem_bytes, int cluster, int max_ctas) {
  int device = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  using Key = std::tuple<const void*, int, int, int, int>;
  static std::mutex mutex;
  static std::map<Key, int> known;
  const Key key{reinterpret_cast<const void*>(kernel), device, threads, smem_bytes, cluster};
  int max_clusters = 0;
  {
    std::lock_guard<std::mutex> lock(mutex);
    const auto found = known.find(key);
    if (found != known.end()) max_clusters = found->second;
  }
  if (max_clusters == 0) {
    max_clusters = device_sm_count() / cluster;
    bool asked = true;
    if (cluster > 1) {
      // Not every SM can host a 2-CTA cluster (clusters live inside one GPC); ask the occupancy API.
      cudaLaunchConfig_t cfg = {};
      cfg.gridDim = dim3(max_clusters * cluster);
      cfg.blockDim = dim3(threads);
      cfg.dynamicSmemBytes = smem_bytes;
      int active = 0;
      if (cudaOccupancyMaxActiveClusters(&active, kernel, &cfg) == cudaSuccess && active > 0) {
        max_clusters = active < max_clusters ? active : max_clusters;
      } else {
        (void)cudaGetLastError();  // keep the SM-count estimate for this call; clear the error
        asked = false;
      }
    }
    if (asked) {
      std::lock_guard<std::mutex> lock(mutex);
      known.emplace(key, max_clusters);
    }
  }
  if (max_ctas > 0 && max_ctas / cluster < max_clusters) max_clusters = max_ctas / cluster > 0 ? max_ctas / cluster : 1;
  return max_clusters;
}

// How many CTAs a persistent launch should have: as many clusters as fit on the GPU at once,
// then trimmed so that every cluster gets the same number of tiles (+-1). 2048 tiles on 132 SMs
// would leave the 16th wave half empty; 128 CTAs x 16 tiles do the same work with no ragged end.
constexpr int trimmed_ctas(int cluster_tiles, int max_clusters, int cluster) {
  const int waves = ceil_div(cluster_tiles, max_clusters);
  return ceil_div(cluster_tiles, waves) * cluster;
}
template <typename Kernel>
inline int persistent_ctas(Kernel kernel, int threads, int smem_bytes, int cluster, int cluster_tiles, int max_ctas) {
  return trimmed_ctas(cluster_tiles, resident_clusters(kernel, threads, smem_bytes, cluster, max_ctas), cluster);
}

// Stages 5-6: a persistent grid of clusters of CLUSTER CTAs that walk C's tiles in grouped order
// (`group_m` cluster rows per group); the kernel takes `args`, then the tile order.
template <int CLUSTER, int BLOCK_M, int BLOCK_N, typename Kernel, typename... Args>
inline void launch_persistent(Kernel kernel, int threads, int smem_bytes, const Gemm& g, int group_m, int max_ctas,
                              cudaStream_t stream, const char* name, const Args&... args) {
  if (group_m < 1) throw std::runtime_error(std::string(name) + ": group_m must be >= 1");
  allow_dynamic_smem(kernel, smem_bytes);
  const GroupedTiles tiles{ceil_div(ceil_div(g.M, BLOCK_M), CLUSTER), ceil_div(g.N, BLOCK_N), group_m};
  const int ctas = persistent_ctas(kernel, threads, smem_bytes, CLUSTER, tiles.count(), max_ctas);
  kernel<<<ctas, threads, smem_bytes, stream>>>(args..., tiles);
  check_launch(name);
}

}  // namespace tc
