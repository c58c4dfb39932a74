// The tile scheduler of the persistent stages (5 and 6), written once.
//
// A persistent kernel launches about one CTA per SM and lets each CTA walk a list of output tiles.
// Tiles are handed out in clusters: CLUSTER consecutive tile rows that share one column of B
// (their CTAs receive B's slices by TMA multicast). Cluster tile t of T goes to cluster
// t mod (number of clusters), so the clusters working at the same moment hold consecutive t.
// Consecutive t are ordered in groups of `group_m` cluster rows, column by column inside a group
// (the "grouped" order of Triton's matmul tutorial): the tiles running together then share a
// few rows of A and a few columns of B, which stay in L2.
// course_lib/kernels/tensor_cores.py has the same formula in Python, tested to cover every tile
// exactly once.
#pragma once

#include "tc_hopper.cuh"
#include "tc_host.cuh"

namespace tc {

struct GroupedTiles {
  int cluster_rows;  // ceil(tile rows / CLUSTER)
  int cols;          // tile columns
  int group_m;       // cluster rows per group (>= 1)

  __host__ __device__ int count() const { return cluster_rows * cols; }

  // Cluster tile t -> (cluster row, tile column).
  __host__ __device__ void locate(int t, int& cluster_row, int& col) const {
    const int per_group = group_m * cols;
    const int first = (t / per_group) * group_m;
    const int rows = cluster_rows - first < group_m ? cluster_rows - first : group_m;
    const int r = t % per_group;
    cluster_row = first + r % rows;
    col = r / rows;
  }
};

// How many CTAs a persistent launch should have: as many clusters as fit on the GPU at once,
// then trimmed so that every cluster gets the same number of tiles (+-1). 2048 tiles on 132 SMs
// would leave the 16th wave half empty; 128 CTAs x 16 tiles do the same work with no ragged end.
template <typename Kernel>
inline int persistent_ctas(Kernel kernel, int threads, int smem_bytes, int cluster, int cluster_tiles, int max_ctas) {
  int max_clusters = device_sm_count() / cluster;
  if (cluster > 1) {
    // Not every SM can host a 2-CTA cluster (clusters live inside one GPC); ask the occupancy API.
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(max_clusters * cluster);
    cfg.blockDim = dim3(threads);
    cfg.dynamicSmemBytes = smem_bytes;
    int active = 0;
    if (cudaOccupancyMaxActiveClusters(&active, kernel, &cfg) == cudaSuccess && active > 0)
      max_clusters = active < max_clusters ? active : max_clusters;
    else
      (void)cudaGetLastError();  // keep the SM-count estimate; clear the error
  }
  if (max_ctas > 0 && max_ctas / cluster < max_clusters) max_clusters = max_ctas / cluster > 0 ? max_ctas / cluster : 1;
  const int waves = ceil_div(cluster_tiles, max_clusters);
  return ceil_div(cluster_tiles, waves) * cluster;
}

}  // namespace tc
