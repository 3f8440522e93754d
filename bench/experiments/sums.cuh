// What the sum experiments share (map_shapes, sum_grids, sum_bisect): a hand-written thread's share of
// a sum, a checked launch, and the timing of library calls back-to-back on one stream.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "experiment.cuh"
#include "resident/resident.hpp"

namespace experiment {

// This thread's share of a sum of x: one wave of blocks of B striding, U vectors a grid-stride apart
// in flight per trip, each tested against the end.
template <int B, int U>
__device__ __forceinline__ float thread_sum(const float4* __restrict__ x, std::size_t n4) {
  const std::size_t tid = std::size_t(blockIdx.x) * B + threadIdx.x, stride = std::size_t(gridDim.x) * B;
  float acc[U] = {};
  for (std::size_t j = tid; j < n4; j += stride * U) {
    float4 r[U];
#pragma unroll
    for (int u = 0; u < U; ++u) r[u] = j + u * stride < n4 ? x[j + u * stride] : make_float4(0, 0, 0, 0);
#pragma unroll
    for (int u = 0; u < U; ++u) acc[u] += (r[u].x + r[u].y) + (r[u].z + r[u].w);
  }
  float a = 0;
#pragma unroll
  for (int u = 0; u < U; ++u) a += acc[u];
  return a;
}

// Launches k[grid, block] on s, as a programmatic dependent of the previous kernel where pdl is set.
template <class K>
void launch(K k, unsigned grid, unsigned block, cudaStream_t s, bool pdl, auto... args) {
  cudaLaunchConfig_t lc{};
  lc.gridDim = grid;
  lc.blockDim = block;
  lc.stream = s;
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  lc.attrs = &attr;
  lc.numAttrs = pdl ? 1 : 0;
  CHECK(cudaLaunchKernelEx(&lc, k, args...));
}

// Calls timed on one stream: `batch` calls between two events (the device's throughput, median of
// `reps`), and the host's cost of issuing one (median of 15 batches, the queue drained between).
struct batched {
  int batch = 20, reps = 15;
  resident::stream s{resident::device::cuda(0)};
  template <class F>
  double per_call_ms(F&& f) {
    return resident::time_batched(s.ref(), reps, 3, batch, f).median();
  }
  template <class F>
  double host_ns(F&& f) {
    std::vector<double> v;
    for (int r = 0; r < 15; ++r) {
      s.synchronize();
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < batch; ++i) f();
      v.push_back(std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / batch);
    }
    s.synchronize();
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  }
};

}  // namespace experiment
