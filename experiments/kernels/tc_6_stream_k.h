// The launcher of the stage-6 experiment variant (tc_6_stream_k.cu), beside the course's launchers.
#pragma once

#include <cstddef>

#include "tc_launch.h"

namespace tc {

// Stage 6 with its experiment knobs: `cluster` 1 or 2 CTAs sharing B by multicast, `group_m` tile
// rows walked together, `max_ctas` caps the grid (0: one wave of the whole GPU), `stream_k` shares
// the ragged last wave out by K slices. cluster 2, group_m 8, max_ctas = SM count and no stream-K
// is the kernel the course measured. Stream-K's partial sums and flags come from `ws`.
// `block_n` 256 (the course's tile) or 128.
void launch_tc_6_stream_k(const Gemm& g, cudaStream_t stream, const Workspace& ws, int cluster, int group_m, int max_ctas, bool stream_k,
                          int block_n = 256);

#ifdef TC_TIMELINE
// Its per-tile timeline (only in builds with -DTC_TIMELINE): [CTA][consumer][entry] clock stamps.
void read_tc_6_timeline(long long* host, size_t count);
void clear_tc_6_timeline();
size_t tc_6_timeline_shape(int dim);
#endif

}  // namespace tc
