// The climb toward copy speed for the fused seed pipeline: variants of the map kernel (vectors in
// flight per thread, cache hints, block and grid shapes) timed against cudaMemcpy device-to-device of
// the same bytes in one run. Its table chose the library's defaults; bench/results/ keeps each run.
//
// usage: fused_variants [log2_n ...]     (default 26 28)
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <cstdlib>
#include <string>
#include <vector>

#include "experiment.cuh"
#include "resident/resident.hpp"

namespace rs = resident;


__device__ __forceinline__ float seed(float v) {
  v = 1.5f * v + 0.5f;
  v = sqrtf(v * v + 1.f);
  return 0.5f * sinf(v);
}

enum hint { plain, streaming, last_use };

template <hint H>
__device__ __forceinline__ float4 load(const float4* p) {
  if constexpr (H == streaming) return __ldcs(p);
  else if constexpr (H == last_use) return __ldlu(p);
  else return *p;
}
template <hint H>
__device__ __forceinline__ void store(float4* p, float4 v) {
  if constexpr (H == streaming) __stcs(p, v);
  else *p = v;
}

// n4 float4 vectors; U vectors per thread per iteration, all loads before the first store.
template <int U, hint LH, hint SH>
__global__ void variant(const float4* x, float4* y, std::size_t n4) {
  const std::size_t tid = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  for (std::size_t j = tid; j < n4; j += stride * U) {
    float4 r[U];
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (j + u * stride < n4) r[u] = load<LH>(x + j + u * stride);
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (j + u * stride < n4) {
        float4 v = r[u];
        v.x = seed(v.x);
        v.y = seed(v.y);
        v.z = seed(v.z);
        v.w = seed(v.w);
        store<SH>(y + j + u * stride, v);
      }
  }
}

// Software-pipelined: the next iteration's U vectors are loaded before this iteration's are computed
// and stored, so loads stay in flight while the math runs.
template <int U>
__global__ void prefetch(const float4* x, float4* y, std::size_t n4) {
  const std::size_t tid = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  float4 cur[U];
#pragma unroll
  for (int u = 0; u < U; ++u)
    if (tid + u * stride < n4) cur[u] = x[tid + u * stride];
  for (std::size_t j = tid; j < n4; j += stride * U) {
    float4 nxt[U];
    const std::size_t jn = j + stride * U;
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (jn + u * stride < n4) nxt[u] = x[jn + u * stride];
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (j + u * stride < n4) {
        float4 v = cur[u];
        v.x = seed(v.x);
        v.y = seed(v.y);
        v.z = seed(v.z);
        v.w = seed(v.w);
        y[j + u * stride] = v;
      }
#pragma unroll
    for (int u = 0; u < U; ++u) cur[u] = nxt[u];
  }
}

// Philox fill written by hand: one block of four words per thread per float4, for comparison with the
// library's generate path.
__global__ void philox_fill(float4* y, std::size_t n4, std::uint64_t seed) {
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  for (std::size_t j = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; j < n4; j += stride) {
    const rs::random::words4 w = rs::random::philox_block(seed, j);
    y[j] = make_float4(rs::random::unit_float(w.w[0]), rs::random::unit_float(w.w[1]), rs::random::unit_float(w.w[2]),
                       rs::random::unit_float(w.w[3]));
  }
}


void run_kernel(void (*k)(const float4*, float4*, std::size_t), int U, const char* name, const float4* x, float4* y,
                std::size_t n4, int block, int grid_waves, double memcpy_ms, timer& tm, const std::vector<float>& hx,
                std::vector<float>& hy);

// grid_waves > 0: that many full waves at occupancy; 0: one thread per U vectors; < 0: -grid_waves blocks per SM.
template <int U, hint LH, hint SH>
void run(const char* name, const float4* x, float4* y, std::size_t n4, int block, int grid_waves, double memcpy_ms,
         timer& tm, const std::vector<float>& hx, std::vector<float>& hy) {
  run_kernel(variant<U, LH, SH>, U, name, x, y, n4, block, grid_waves, memcpy_ms, tm, hx, hy);
}

void run_kernel(void (*k)(const float4*, float4*, std::size_t), int U, const char* name, const float4* x, float4* y,
                std::size_t n4, int block, int grid_waves, double memcpy_ms, timer& tm, const std::vector<float>& hx,
                std::vector<float>& hy) {
  int per_sm = 0, sms = 0;
  CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k, block, 0));
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  std::size_t grid = grid_waves > 0   ? std::size_t(per_sm) * sms * grid_waves
                     : grid_waves < 0 ? std::size_t(sms) * std::size_t(-grid_waves)
                                      : (n4 + std::size_t(block) * U - 1) / (std::size_t(block) * U);
  CHECK(cudaMemset(y, 0xFF, n4 * 16));  // poison: NaN everywhere
  k<<<unsigned(grid), block>>>(x, y, n4);
  CHECK(cudaGetLastError());
  CHECK(cudaMemcpy(hy.data(), y, n4 * 16, cudaMemcpyDeviceToHost));
  for (std::size_t i = 0; i < hy.size(); i += 997) {
    double v = hx[i], ref = 0.5 * std::sin(std::sqrt((1.5 * v + 0.5) * (1.5 * v + 0.5) + 1.0));
    if (!(std::abs(hy[i] - ref) < 1e-6)) {
      std::printf("%s: WRONG at %zu: %g vs %g\n", name, i, double(hy[i]), ref);
      return;
    }
  }
  double ms = tm.median_ms([&] { k<<<unsigned(grid), block>>>(x, y, n4); });
  std::printf("  %-34s U=%d block %4d grid %7zu  %.4f ms  %.3f x memcpy\n", name, U, block, grid, ms, ms / memcpy_ms);
}

void report_library_choice() {
  // What the occupancy API picks for the kernels above (the library's default policy).
  int grid = 0, block = 0;
  CHECK(cudaOccupancyMaxPotentialBlockSize(&grid, &block, variant<4, plain, plain>, 0, 0));
  std::printf("occupancy API for U4: block %d, grid %d\n", block, grid);
}

int main(int argc, char** argv) {
  std::vector<int> logs;
  for (int i = 1; i < argc; ++i) logs.push_back(std::atoi(argv[i]));
  if (logs.empty()) logs = {26, 28};
  timer tm;
  report_library_choice();
  for (int l : logs) {
    const std::size_t n = std::size_t(1) << l, n4 = n / 4;
    std::vector<float> hx(n), hy(n);
    srand(unsigned(l) * 7919u + unsigned(time(nullptr)));
    for (auto& v : hx) v = float(rand()) / float(RAND_MAX);
    float4 *x, *y;
    CHECK(cudaMalloc(&x, n * 4));
    CHECK(cudaMalloc(&y, n * 4));
    CHECK(cudaMemcpy(x, hx.data(), n * 4, cudaMemcpyHostToDevice));
    double mc = tm.median_ms([&] { CHECK(cudaMemcpyAsync(y, x, n * 4, cudaMemcpyDeviceToDevice)); });
    std::printf("n = 2^%d: memcpy %.4f ms (%.0f GB/s read + write)\n", l, mc, 2.0 * n * 4 / (mc * 1e-3) / 1e9);
    // The library as shipped, for reference.
    {
      rs::array<float> ax = rs::to_device(hx, rs::device::cuda(0)), ay(n, rs::device::cuda(0));
      auto master = rs::map([] RESIDENT_HD(float v) { return 1.5f * v + 0.5f; }) |
                    rs::map([] RESIDENT_HD(float v) { return sqrtf(v * v + 1.f); }) |
                    rs::map([] RESIDENT_HD(float v) { return 0.5f * sinf(v); });
      double ms = tm.median_ms([&] { master(ax, ay); });
      std::printf("  %-34s                              %.4f ms  %.3f x memcpy\n", "resident pipeline (library)", ms,
                  ms / mc);
    }
    run<4, plain, plain>("U4, block 1024 x 1/SM", x, y, n4, 1024, -1, mc, tm, hx, hy);
    run<4, plain, plain>("U4, block 512 x 1/SM", x, y, n4, 512, -1, mc, tm, hx, hy);
    run<4, plain, plain>("U4, block 512 x 2/SM", x, y, n4, 512, -2, mc, tm, hx, hy);
    run<4, plain, plain>("U4, block 256 x 4/SM", x, y, n4, 256, -4, mc, tm, hx, hy);
    run<4, plain, plain>("U4, block 128 x 8/SM", x, y, n4, 128, -8, mc, tm, hx, hy);
    run<4, plain, plain>("U4, block 256 x 6/SM (occupancy)", x, y, n4, 256, 1, mc, tm, hx, hy);
    run<2, plain, plain>("U2, block 1024 x 1/SM", x, y, n4, 1024, -1, mc, tm, hx, hy);
    run<8, plain, plain>("U8, block 1024 x 1/SM", x, y, n4, 1024, -1, mc, tm, hx, hy);
    run<4, plain, streaming>("U4 stcs, block 1024 x 1/SM", x, y, n4, 1024, -1, mc, tm, hx, hy);
    run<1, plain, plain>("U1, block 256, exact cover", x, y, n4, 256, 0, mc, tm, hx, hy);
    run<1, plain, plain>("U1, block 1024, exact cover", x, y, n4, 1024, 0, mc, tm, hx, hy);
    run_kernel(prefetch<1>, 1, "prefetch U1, block 1024 x 1/SM", x, y, n4, 1024, -1, mc, tm, hx, hy);
    run_kernel(prefetch<2>, 2, "prefetch U2, block 1024 x 1/SM", x, y, n4, 1024, -1, mc, tm, hx, hy);
    run_kernel(prefetch<2>, 2, "prefetch U2, block 512 x 2/SM", x, y, n4, 512, -2, mc, tm, hx, hy);
    run_kernel(prefetch<2>, 2, "prefetch U2, block 256 x 4/SM", x, y, n4, 256, -4, mc, tm, hx, hy);
    run_kernel(prefetch<4>, 4, "prefetch U4, block 1024 x 1/SM", x, y, n4, 1024, -1, mc, tm, hx, hy);
    run_kernel(prefetch<4>, 4, "prefetch U4, block 512 x 1/SM", x, y, n4, 512, -1, mc, tm, hx, hy);
    run_kernel(prefetch<2>, 2, "prefetch U2, block 512 x 1/SM", x, y, n4, 512, -1, mc, tm, hx, hy);
    {
      rs::array<float> ay(n, rs::device::cuda(0));
      double lib = tm.median_ms([&] { rs::random::fill_uniform(ay, 7); });
      std::printf("  %-34s                              %.4f ms  %.0f GB/s written\n", "random::fill_uniform (library)",
                  lib, n * 4 / (lib * 1e-3) / 1e9);
      for (int block : {256, 1024}) {
        int per_sm = 0, sms = 0;
        CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, philox_fill, block, 0));
        CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
        unsigned grid = unsigned(per_sm * sms);
        double ms = tm.median_ms([&] { philox_fill<<<grid, block>>>(y, n4, 7); });
        std::printf("  philox fill by hand, block %4d grid %5u          %.4f ms  %.0f GB/s written\n", block, grid, ms,
                    n * 4 / (ms * 1e-3) / 1e9);
      }
    }
    CHECK(cudaFree(x));
    CHECK(cudaFree(y));
  }
  return 0;
}
