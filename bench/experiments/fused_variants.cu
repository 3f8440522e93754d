// The climb toward copy speed for the fused seed pipeline: variants of the map kernel (vectors in
// flight per thread, cache hints, block and grid shapes, bulk copies through shared memory) timed against cudaMemcpy device-to-device of
// the same bytes in one run. Its table chose the library's defaults; its findings are in docs/tuning.md.
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
#include "hand_philox.cuh"
#include "resident/resident.hpp"

namespace rs = resident;


__device__ __forceinline__ float seed(float v) {
  v = 1.5f * v + 0.5f;
  v = sqrtf(v * v + 1.f);
  return 0.5f * sinf(v);
}

enum hint { plain, streaming, last_use, l2_256 };

template <hint H>
__device__ __forceinline__ float4 load(const float4* p) {
  if constexpr (H == streaming) return __ldcs(p);
  else if constexpr (H == last_use) return __ldlu(p);
  else if constexpr (H == l2_256) {  // read-only, no L1 allocation, L2 fetches 256-byte blocks
    float4 v;
    asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.f32 {%0, %1, %2, %3}, [%4];"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
                 : "l"(p));
    return v;
  }
  else return *p;
}
template <hint H>
__device__ __forceinline__ void store(float4* p, float4 v) {
  if constexpr (H == streaming) __stcs(p, v);
  else *p = v;
}

__device__ __forceinline__ float4 seed4(float4 v) { return make_float4(seed(v.x), seed(v.y), seed(v.z), seed(v.w)); }

// n4 float4 vectors; U vectors per thread per iteration, all loads before the first store. Math = false:
// the same loop copying (what the memory alone allows this loop).
template <int U, hint LH, hint SH, bool Math = true>
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
      if (j + u * stride < n4) store<SH>(y + j + u * stride, Math ? seed4(r[u]) : r[u]);
  }
}

// Each block walks its own contiguous chunk (n4 / gridDim vectors, whole iterations of blockDim * U)
// instead of the grid striding over the whole array: fewer DRAM pages open at once.
template <int U, bool Math>
__global__ void chunked(const float4* x, float4* y, std::size_t n4) {
  const std::size_t step = std::size_t(blockDim.x) * U;
  const std::size_t chunk = (n4 + gridDim.x - 1) / gridDim.x;
  const std::size_t per = (chunk + step - 1) / step * step;
  const std::size_t from = std::size_t(blockIdx.x) * per, to = min(from + per, n4);
  for (std::size_t j = from + threadIdx.x; j < to; j += step) {
    float4 r[U];
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (j + u * blockDim.x < to) r[u] = x[j + u * blockDim.x];
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (j + u * blockDim.x < to) y[j + u * blockDim.x] = Math ? seed4(r[u]) : r[u];
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

// Work taken dynamically instead of by a fixed grid stride, so that SMs that run faster take more and
// all finish together: warps (Warp = true) or whole blocks grab K iterations of U vectors per thread
// from a counter in *ctr; the last grabber to find nothing left resets the counters for the next
// launch (zero at the start).
template <int U, int K, bool Warp>
__global__ void dynamic(const float4* x, float4* y, std::size_t n4, unsigned long long* ctr) {
  const unsigned width = Warp ? 32u : blockDim.x;
  const unsigned lane = Warp ? threadIdx.x % 32u : threadIdx.x;
  const std::size_t grab = std::size_t(width) * U * K;
  const unsigned long long grabbers = Warp ? std::size_t(gridDim.x) * (blockDim.x / 32) : gridDim.x;
  __shared__ std::size_t shared_base;
  for (;;) {
    std::size_t base = 0;
    if (Warp) {
      if (lane == 0) base = atomicAdd(ctr, (unsigned long long)grab);
      base = __shfl_sync(0xffffffffu, base, 0);
    } else {
      if (lane == 0) shared_base = atomicAdd(ctr, (unsigned long long)grab);
      __syncthreads();
      base = shared_base;
      __syncthreads();
    }
    if (base >= n4) {
      if (lane == 0 && atomicAdd(ctr + 1, 1ull) == grabbers - 1) {
        ctr[0] = 0;  // the last one out: no one reads the counters again in this launch
        ctr[1] = 0;
      }
      return;
    }
#pragma unroll 1
    for (int k = 0; k < K; ++k) {
      const std::size_t j = base + std::size_t(k) * width * U + lane;
      float4 r[U];
#pragma unroll
      for (int u = 0; u < U; ++u)
        if (j + u * width < n4) r[u] = x[j + u * width];
#pragma unroll
      for (int u = 0; u < U; ++u)
        if (j + u * width < n4) y[j + u * width] = seed4(r[u]);
    }
  }
}

// The tensor memory accelerator's bulk copies: each block streams chunks of CH bytes through ST stages
// of shared memory. Thread 0 issues a chunk's bulk load (completion counted on the stage's mbarrier),
// every thread waits for it, applies the pipeline in shared memory, and thread 0 bulk-stores the chunk
// and reuses the stage for the block's chunk ST iterations later once the store has read it.
// Assumes n4 * 16 is a multiple of CH.
__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
template <int CH, int ST>
__global__ void bulk(const float4* x, float4* y, std::size_t n4) {
  extern __shared__ __align__(128) float4 buf[];
  __shared__ __align__(8) unsigned long long bar[ST];
  constexpr int V = CH / 16;
  const std::size_t chunks = n4 / V;
  if (threadIdx.x == 0) {
    for (int s = 0; s < ST; ++s) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_addr(&bar[s])));
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  auto issue = [&](int s, std::size_t c) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(&bar[s])), "r"(CH) : "memory");
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                     smem_addr(buf + s * V)),
                 "l"(x + c * V), "r"(CH), "r"(smem_addr(&bar[s]))
                 : "memory");
  };
  if (threadIdx.x == 0)
    for (int k = 0; k < ST; ++k)
      if (blockIdx.x + std::size_t(k) * gridDim.x < chunks) issue(k, blockIdx.x + std::size_t(k) * gridDim.x);
  std::size_t it = 0;
  for (std::size_t c = blockIdx.x; c < chunks; c += gridDim.x, ++it) {
    const int s = int(it % ST);
    const unsigned parity = unsigned(it / ST) & 1u;
    unsigned done = 0;
    while (!done)
      asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                   : "=r"(done)
                   : "r"(smem_addr(&bar[s])), "r"(parity)
                   : "memory");
    for (int j = threadIdx.x; j < V; j += blockDim.x) {
      float4 v = buf[s * V + j];
      v.x = seed(v.x);
      v.y = seed(v.y);
      v.z = seed(v.z);
      v.w = seed(v.w);
      buf[s * V + j] = v;
    }
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // our writes, visible to the bulk store
    __syncthreads();
    if (threadIdx.x == 0) {
      asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(y + c * V),
                   "r"(smem_addr(buf + s * V)), "r"(CH)
                   : "memory");
      asm volatile("cp.async.bulk.commit_group;" ::: "memory");
      const std::size_t next = c + std::size_t(ST) * gridDim.x;
      if (next < chunks) {
        asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");  // the stage is free again
        issue(s, next);
      }
    }
  }
  if (threadIdx.x == 0) asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}



void run_kernel(void (*k)(const float4*, float4*, std::size_t), int U, const char* name, const float4* x, float4* y,
                std::size_t n4, int block, int grid_waves, double memcpy_ms, timer& tm, const std::vector<float>& hx,
                std::vector<float>& hy, bool math = true);

// After a launch that wrote y: every 997th element against the FP64 pipeline of x.
// Copies (math = false) against x itself.
bool matches_reference(const char* name, const float4* y, std::size_t n4, const std::vector<float>& hx,
                       std::vector<float>& hy, bool math = true) {
  CHECK(cudaGetLastError());
  CHECK(cudaMemcpy(hy.data(), y, n4 * 16, cudaMemcpyDeviceToHost));
  for (std::size_t i = 0; i < hy.size(); i += 997) {
    double v = hx[i], ref = math ? 0.5 * std::sin(std::sqrt((1.5 * v + 0.5) * (1.5 * v + 0.5) + 1.0)) : v;
    if (!(std::abs(hy[i] - ref) < 1e-6)) {
      std::printf("%s: WRONG at %zu: %g vs %g\n", name, i, double(hy[i]), ref);
      return false;
    }
  }
  return true;
}

// grid_waves > 0: that many full waves at occupancy; 0: one thread per U vectors; < 0: -grid_waves blocks per SM.
template <int U, hint LH, hint SH>
void run(const char* name, const float4* x, float4* y, std::size_t n4, int block, int grid_waves, double memcpy_ms,
         timer& tm, const std::vector<float>& hx, std::vector<float>& hy) {
  run_kernel(variant<U, LH, SH>, U, name, x, y, n4, block, grid_waves, memcpy_ms, tm, hx, hy);
}

void run_kernel(void (*k)(const float4*, float4*, std::size_t), int U, const char* name, const float4* x, float4* y,
                std::size_t n4, int block, int grid_waves, double memcpy_ms, timer& tm, const std::vector<float>& hx,
                std::vector<float>& hy, bool math) {
  int per_sm = 0, sms = 0;
  CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k, block, 0));
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  std::size_t grid = grid_waves > 0   ? std::size_t(per_sm) * sms * grid_waves
                     : grid_waves < 0 ? std::size_t(sms) * std::size_t(-grid_waves)
                                      : (n4 + std::size_t(block) * U - 1) / (std::size_t(block) * U);
  CHECK(cudaMemset(y, 0xFF, n4 * 16));  // poison: NaN everywhere
  k<<<unsigned(grid), block>>>(x, y, n4);
  if (!matches_reference(name, y, n4, hx, hy, math)) return;
  double ms = tm.median_ms([&] { k<<<unsigned(grid), block>>>(x, y, n4); });
  std::printf("  %-34s U=%d block %4d grid %7zu  %.4f ms  %.3f x memcpy\n", name, U, block, grid, ms, ms / memcpy_ms);
}

template <int CH, int ST>
void run_bulk(const char* name, const float4* x, float4* y, std::size_t n4, int block, int per_sm, double memcpy_ms,
              timer& tm, const std::vector<float>& hx, std::vector<float>& hy) {
  const int smem = CH * ST;
  CHECK(cudaFuncSetAttribute(bulk<CH, ST>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  int fits = 0, sms = 0;
  CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fits, bulk<CH, ST>, block, smem));
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  if (fits < per_sm) {
    std::printf("  %s: only %d blocks fit per SM\n", name, fits);
    return;
  }
  const unsigned grid = unsigned(sms * per_sm);
  CHECK(cudaMemset(y, 0xFF, n4 * 16));
  bulk<CH, ST><<<grid, block, smem>>>(x, y, n4);
  if (!matches_reference(name, y, n4, hx, hy)) return;
  double ms = tm.median_ms([&] { bulk<CH, ST><<<grid, block, smem>>>(x, y, n4); });
  std::printf("  %-34s     block %4d grid %7u  %.4f ms  %.3f x memcpy\n", name, block, grid, ms, ms / memcpy_ms);
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
      // In place, as the seed's user writes it (data = f(data)): the same bytes read and written.
      ms = tm.median_ms([&] { master(ax); });
      std::printf("  %-34s                              %.4f ms  %.3f x memcpy\n", "resident pipeline, in place", ms,
                  ms / mc);
      ms = tm.median_ms([&] { CHECK(cudaMemcpyAsync(ay.data(), ax.data(), n * 4, cudaMemcpyDeviceToDevice)); });
      std::printf("  %-34s                              %.4f ms  %.3f x memcpy\n", "memcpy again (drift)", ms, ms / mc);
    }
    run<4, plain, plain>("U4, block 1024 x 1/SM", x, y, n4, 1024, -1, mc, tm, hx, hy);
    run_kernel(variant<4, plain, plain, false>, 4, "U4 copy only, block 1024 x 1/SM", x, y, n4, 1024, -1, mc, tm, hx,
               hy, false);
    run_kernel(variant<4, plain, plain, false>, 4, "U4 copy only, block 512 x 2/SM", x, y, n4, 512, -2, mc, tm, hx,
               hy, false);
    run_kernel(variant<2, plain, plain, false>, 2, "U2 copy only, block 1024 x 2/SM", x, y, n4, 1024, -2, mc, tm, hx,
               hy, false);
    run_kernel(chunked<4, true>, 4, "chunked U4, block 1024 x 1/SM", x, y, n4, 1024, -1, mc, tm, hx, hy);
    run_kernel(chunked<4, false>, 4, "chunked U4 copy only, 1024 x 1/SM", x, y, n4, 1024, -1, mc, tm, hx, hy, false);
    run_kernel(chunked<4, false>, 4, "chunked U4 copy only, 1024 x 2/SM", x, y, n4, 1024, -2, mc, tm, hx, hy, false);
    {
      unsigned long long* ctr;
      CHECK(cudaMalloc(&ctr, 16));
      CHECK(cudaMemset(ctr, 0, 16));
      // reset = true: the counters are zeroed by a memset before each launch (what a library call
      // without per-stream state would do) instead of by the kernel's last grabber.
      auto dyn = [&](const char* name, auto kernel, int block, int per_sm, bool reset = false) {
        int sms = 0, fits = 0;
        CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
        CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fits, kernel, block, 0));
        cudaFuncAttributes fa{};
        CHECK(cudaFuncGetAttributes(&fa, kernel));
        const unsigned grid = unsigned(sms * std::min(per_sm, fits));
        CHECK(cudaMemset(y, 0xFF, n4 * 16));
        kernel<<<grid, block>>>(x, y, n4, ctr);
        if (!matches_reference(name, y, n4, hx, hy)) return;
        const double ms = tm.median_ms([&] {
          if (reset) CHECK(cudaMemsetAsync(ctr, 0, 16));
          kernel<<<grid, block>>>(x, y, n4, ctr);
        });
        std::printf("  %-40s block %4d x %2u/SM (%d regs)  %.4f ms  %.3f x memcpy\n", name, block, grid / sms,
                    fa.numRegs, ms, ms / mc);
      };
      dyn("dynamic warps, U4 x 8", dynamic<4, 8, true>, 1024, 1);
      dyn("dynamic blocks, U4 x 4", dynamic<4, 4, false>, 512, 2);
      for (int per_sm : {4, 6, 8}) {
        dyn("dynamic blocks, U4 x 1", dynamic<4, 1, false>, 256, per_sm);
        dyn("dynamic blocks, U2 x 2", dynamic<2, 2, false>, 256, per_sm);
        dyn("dynamic blocks, U4 x 2", dynamic<4, 2, false>, 256, per_sm);
      }
      for (int per_sm : {8, 12, 16}) {
        dyn("dynamic blocks, U4 x 1", dynamic<4, 1, false>, 128, per_sm);
        dyn("dynamic blocks, U4 x 2", dynamic<4, 2, false>, 128, per_sm);
      }
      dyn("dynamic blocks, U4 x 1", dynamic<4, 1, false>, 512, 3);
      dyn("dynamic blocks, U4 x 1, memset each", dynamic<4, 1, false>, 256, 4, true);
      dyn("dynamic blocks, U4 x 1, memset each", dynamic<4, 1, false>, 256, 6, true);
      CHECK(cudaFree(ctr));
    }
    run<4, plain, plain>("U4, block 512 x 2/SM", x, y, n4, 512, -2, mc, tm, hx, hy);
    run<4, plain, streaming>("U4 stcs, block 1024 x 1/SM", x, y, n4, 1024, -1, mc, tm, hx, hy);
    run<4, l2_256, plain>("U4 L2::256B, block 1024 x 1/SM", x, y, n4, 1024, -1, mc, tm, hx, hy);
    run_bulk<8192, 4>("bulk 8 KiB x 4 stages, 2/SM", x, y, n4, 256, 2, mc, tm, hx, hy);
    run_bulk<32768, 3>("bulk 32 KiB x 3 stages, 2/SM", x, y, n4, 512, 2, mc, tm, hx, hy);
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
