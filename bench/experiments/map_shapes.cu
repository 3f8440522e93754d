// Kernel shapes for the seed map and for map + sum at every size, timed back-to-back (`batch` calls
// between two events, time per call: the device's throughput) against a device-to-device memcpy of the
// same bytes, each figure the median of `reps`, the whole sweep repeated `repeat` times in one run.
// Shapes: the library as shipped; a flat grid (one block per tile of block * U vectors, no loop) with
// the tile's vectors strided by the block (coalesced per load) or contiguous per thread (32 bytes per
// thread, the layout of generated element-wise kernels), with and without cache hints and dependent
// launch; reductions in one wave of k blocks per SM and U vectors in flight, folded by the last block.
// Every result is checked against FP64 first.
//
// usage: map_shapes [log2_n ...]   (default 20 22 24 26 28)
#include <cub/device/device_reduce.cuh>
#include <cub/thread/thread_store.cuh>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "../common/seed.hpp"
#include "experiment.cuh"
#include "sums.cuh"
#include "resident/resident.hpp"

namespace rs = resident;
using rs::cli::func1;
using rs::cli::func2;
using rs::cli::func3;

namespace {

constexpr int batch = 20, reps = 15, repeat = 3;

__device__ __forceinline__ float seed(float v) { return func3(func2(func1(v))); }
__device__ __forceinline__ float4 seed4(float4 v) { return make_float4(seed(v.x), seed(v.y), seed(v.z), seed(v.w)); }

__device__ __forceinline__ void pdl_prologue() {
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}

// Flat grid: block b takes vectors [b * B * U, (b + 1) * B * U). Contig: thread t takes U adjacent vectors
// (t * U ...); else vectors t, t + B, ... Hints: __ldcs / __stcs.
template <int U, bool Contig, bool Hints, bool Pdl>
__global__ void flat(const float4* __restrict__ x, float4* __restrict__ y, std::size_t n4) {
  if constexpr (Pdl) pdl_prologue();
  const std::size_t base = std::size_t(blockIdx.x) * blockDim.x * U;
  float4 r[U];
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const std::size_t j = Contig ? base + std::size_t(threadIdx.x) * U + u : base + threadIdx.x + std::size_t(u) * blockDim.x;
    if (j < n4) r[u] = Hints ? __ldcs(x + j) : x[j];
  }
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const std::size_t j = Contig ? base + std::size_t(threadIdx.x) * U + u : base + threadIdx.x + std::size_t(u) * blockDim.x;
    if (j < n4) {
      if constexpr (Hints)
        __stcs(y + j, seed4(r[u]));
      else
        y[j] = seed4(r[u]);
    }
  }
}

// The flat U2 shape with dependent launch as the library writes it: loads without __restrict__ (plain
// ld.global, not the read-only path), stores through CUB's ThreadStore (a generic-address st.v4).
template <bool Restrict, bool CubStore>
__global__ void flat_like_library(const float4* xr, float4* yr, std::size_t n4) {
  pdl_prologue();
  const float4* x = xr;
  float4* y = yr;
  const std::size_t base = std::size_t(blockIdx.x) * blockDim.x * 2;
  float4 r[2];
#pragma unroll
  for (int u = 0; u < 2; ++u) {
    const std::size_t j = base + threadIdx.x + std::size_t(u) * blockDim.x;
    if (j < n4) r[u] = Restrict ? __ldg(x + j) : x[j];
  }
#pragma unroll
  for (int u = 0; u < 2; ++u) {
    const std::size_t j = base + threadIdx.x + std::size_t(u) * blockDim.x;
    if (j < n4) {
      const float4 v = seed4(r[u]);
      if constexpr (CubStore) {
        uint4 b;
        memcpy(&b, &v, 16);
        cub::ThreadStore<cub::STORE_WB>(reinterpret_cast<uint4*>(y + j), b);
      } else {
        y[j] = v;
      }
    }
  }
}

// One wave striding, U vectors in flight per thread (the library's striding shape).
template <int U>
__global__ void strided(const float4* __restrict__ x, float4* __restrict__ y, std::size_t n4) {
  pdl_prologue();
  const std::size_t tid = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x, stride = std::size_t(gridDim.x) * blockDim.x;
  for (std::size_t j = tid; j < n4; j += stride * U) {
    float4 r[U];
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (j + u * stride < n4) r[u] = x[j + u * stride];
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (j + u * stride < n4) y[j + u * stride] = seed4(r[u]);
  }
}

using experiment::thread_sum;

// Sum of x: one wave of blocks of B striding with U vectors in flight; per-block partials, the last
// block to finish folds them (deterministic for a given grid). Counters left zero.
// Fold = false leaves each block's partial and stops (a wrong total: it times the reading alone).
template <int B, int U, bool Fold = true>
__global__ void __launch_bounds__(B) sum_wave(const float4* __restrict__ x, std::size_t n4, float* partials,
                                             unsigned* counter, float* out) {
  pdl_prologue();
  const float a = thread_sum<B, U>(x, n4);
  using br = cub::BlockReduce<float, B>;
  __shared__ typename br::TempStorage tmp;
  __shared__ bool last;
  float t = br(tmp).Sum(a);
  if constexpr (!Fold) {
    if (threadIdx.x == 0) partials[blockIdx.x] = t;
    return;
  }
  if (threadIdx.x == 0) {
    partials[blockIdx.x] = t;
    __threadfence();
    last = atomicAdd(counter, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  float p = 0;
  for (unsigned b = threadIdx.x; b < gridDim.x; b += B) p += partials[b];
  __syncthreads();
  t = br(tmp).Sum(p);
  if (threadIdx.x == 0) {
    *out = t;
    *counter = 0;
  }
}

// Sum of x with the partials handed over without a fence or an atomic: every block but the last
// publishes its partial in a slot, and the last block (dispatched after all the others, so it never
// waits on a block not yet running) waits for each slot, folds them in block order and leaves them
// zero. Packed: value and flag in one 8-byte store (seen whole or not at all). Otherwise: the value,
// then the flag with release semantics, read with acquire (the form any partial's type can take).
template <int B, int U, bool Packed>
__global__ void __launch_bounds__(B) sum_wave_slots(const float4* __restrict__ x, std::size_t n4,
                                                   unsigned long long* slots, float* values, float* out) {
  pdl_prologue();
  const float a = thread_sum<B, U>(x, n4);
  using br = cub::BlockReduce<float, B>;
  __shared__ typename br::TempStorage tmp;
  const float t = br(tmp).Sum(a);
  const unsigned last = gridDim.x - 1;
  if (blockIdx.x != last) {
    if (threadIdx.x == 0) {
      if constexpr (Packed) {
        const unsigned long long w = (1ull << 32) | __float_as_uint(t);
        asm volatile("st.relaxed.gpu.global.b64 [%0], %1;" ::"l"(slots + blockIdx.x), "l"(w) : "memory");
      } else {
        values[blockIdx.x] = t;
        asm volatile("st.release.gpu.global.b64 [%0], %1;" ::"l"(slots + blockIdx.x), "l"(1ull) : "memory");
      }
    }
    return;
  }
  float p = 0;
  for (unsigned b = threadIdx.x; b < last; b += B) {
    unsigned long long w;
    if constexpr (Packed) {
      do asm volatile("ld.relaxed.gpu.global.b64 %0, [%1];" : "=l"(w) : "l"(slots + b) : "memory");
      while ((w >> 32) == 0);
      p += __uint_as_float(unsigned(w));
    } else {
      do asm volatile("ld.acquire.gpu.global.b64 %0, [%1];" : "=l"(w) : "l"(slots + b) : "memory");
      while (w == 0);
      p += values[b];
    }
    slots[b] = 0;
  }
  __syncthreads();  // tmp is reused
  const float total = br(tmp).Sum(p);
  if (threadIdx.x == 0) *out = total + t;
}

using experiment::launch;

struct bench {
  rs::stream s{rs::device::cuda(0)};
  std::size_t n = 0;
  template <class F>
  double per_call_ms(F&& f) {
    return rs::time_batched(s.ref(), reps, 3, batch, f).median();
  }
};

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> logs;
  for (int i = 1; i < argc; ++i) logs.push_back(std::atoi(argv[i]));
  if (logs.empty()) logs = {20, 22, 24, 26, 28};
  bench b;
  cudaStream_t cs = b.s.ref().native();
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  std::printf("# map_shapes: back-to-back, %d calls per event pair, median of %d, %d sweeps; ratio = time / memcpy time\n",
              batch, reps, repeat);
  for (int rep = 0; rep < repeat; ++rep)
    for (int l : logs) {
      const std::size_t n = std::size_t(1) << l, n4 = n / 4;
      std::vector<float> hx(n), hy(n);
      srand(unsigned(l) * 7919u + unsigned(rep) * 31u + unsigned(time(nullptr)));
      for (auto& v : hx) v = float(rand()) / float(RAND_MAX);
      rs::array<float> ax = rs::to_device(hx, b.s.ref()), ay(n, b.s.ref()), total(1, b.s.ref());
      const float4* x = reinterpret_cast<const float4*>(ax.data());
      float4* y = reinterpret_cast<float4*>(ay.data());
      const double mc = b.per_call_ms([&] { rs::copy(ax, ay); });
      std::printf("sweep %d n = 2^%d: memcpy %.4f ms\n", rep + 1, l, mc);
      auto check_map = [&](const char* name) {
        CHECK(cudaStreamSynchronize(cs));
        CHECK(cudaMemcpy(hy.data(), y, n * 4, cudaMemcpyDeviceToHost));
        for (std::size_t i = 0; i < n; i += 997) {
          double v = hx[i];
          double ref = 0.5 * std::sin(std::sqrt((1.5 * v + 0.5) * (1.5 * v + 0.5) + 1.0));
          if (!(std::abs(hy[i] - ref) < 1e-5)) {
            std::printf("  %s: WRONG at %zu: %g vs %g\n", name, i, double(hy[i]), ref);
            return false;
          }
        }
        return true;
      };
      auto report = [&](const char* kind, const std::string& name, double ms) {
        std::printf("  %-4s %-44s %.4f ms  %.3f x memcpy\n", kind, name.c_str(), ms, ms / mc);
      };
      auto poison = [&] { CHECK(cudaMemsetAsync(y, 0xFF, n * 4, cs)); };
      {
        auto master = rs::map<func1>() | rs::map<func2>() | rs::map<func3>();
        poison();
        master(ax, ay);
        if (check_map("library")) report("map", "library pipeline", b.per_call_ms([&] { master(ax, ay); }));
      }
      auto flat_run = [&](auto k, int block, int U, const std::string& name, bool pdl) {
        const unsigned grid = unsigned((n4 + std::size_t(block) * U - 1) / (std::size_t(block) * U));
        poison();
        launch(k, grid, unsigned(block), cs, pdl, x, y, n4);
        if (check_map(name.c_str())) report("map", name, b.per_call_ms([&] { launch(k, grid, unsigned(block), cs, pdl, x, y, n4); }));
      };
      for (int block : {128, 256, 512}) {
        const std::string bs = " block " + std::to_string(block);
        flat_run(flat<1, false, false, false>, block, 1, "flat U1" + bs, false);
        flat_run(flat<2, false, false, false>, block, 2, "flat U2 strided" + bs, false);
        flat_run(flat<2, true, false, false>, block, 2, "flat U2 contiguous" + bs, false);
        flat_run(flat<4, false, false, false>, block, 4, "flat U4 strided" + bs, false);
        flat_run(flat<2, false, true, false>, block, 2, "flat U2 strided cs hints" + bs, false);
        flat_run(flat<2, false, false, true>, block, 2, "flat U2 strided pdl" + bs, true);
        if (block == 128) {
          flat_run(flat<2, false, true, true>, block, 2, "flat U2 strided pdl cs hints" + bs, true);
          flat_run(flat_like_library<false, false>, block, 2, "flat U2 pdl, plain loads" + bs, true);
          flat_run(flat_like_library<true, true>, block, 2, "flat U2 pdl, ldg, CUB store" + bs, true);
          flat_run(flat_like_library<false, true>, block, 2, "flat U2 pdl, plain loads, CUB store" + bs, true);
        }
      }
      for (int per_sm : {1, 2}) {
        const unsigned grid = unsigned(sms * per_sm);
        poison();
        launch(strided<4>, grid, 1024u / per_sm, cs, true, x, y, n4);
        const std::string name = "strided U4 one wave " + std::to_string(per_sm) + "/SM";
        if (check_map(name.c_str()))
          report("map", name, b.per_call_ms([&] { launch(strided<4>, grid, 1024u / per_sm, cs, true, x, y, n4); }));
      }
      // Sums (reads n * 4 bytes): rate ratio = memcpy time / (2 * sum time).
      double ref = 0;
      for (float v : hx) ref += v;
      auto sum_report = [&](const std::string& name, double ms, float got) {
        const bool ok = std::abs(double(got) - ref) <= 1e-4 * std::abs(ref);
        std::printf("  %-4s %-44s %.4f ms  rate %.3f of memcpy's%s\n", "sum", name.c_str(), ms, mc / (2 * ms),
                    ok ? "" : "  WRONG");
      };
      {
        auto sum = rs::map([] RESIDENT_HD(float v) { return v; }) | rs::reduce(rs::plus{}, 0.f);
        sum(ax, total);
        sum_report("library sum(x, total)", b.per_call_ms([&] { sum(ax, total); }), total.to_host()[0]);
      }
      float* partials = nullptr;
      unsigned* counter = nullptr;
      CHECK(cudaMalloc(&partials, sizeof(float) * 64 * sms));
      CHECK(cudaMalloc(&counter, sizeof(unsigned)));
      CHECK(cudaMemset(counter, 0, sizeof(unsigned)));
      auto wave = [&](auto k, int B, int per_sm, const std::string& name) {
        int fits = 0;
        CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fits, k, B, 0));
        const unsigned grid = unsigned(sms * std::min(per_sm, fits));
        float* out = total.data();
        launch(k, grid, unsigned(B), cs, true, x, n4, partials, counter, out);
        CHECK(cudaStreamSynchronize(cs));
        const double ms = b.per_call_ms([&] { launch(k, grid, unsigned(B), cs, true, x, n4, partials, counter, out); });
        sum_report(name + " " + std::to_string(std::min(per_sm, fits)) + "/SM", ms, total.to_host()[0]);
      };
      for (int per_sm : {4, 8}) {
        wave(sum_wave<256, 2>, 256, per_sm, "wave block 256 U2");
        wave(sum_wave<256, 4>, 256, per_sm, "wave block 256 U4");
        wave(sum_wave<256, 8>, 256, per_sm, "wave block 256 U8");
      }
      wave(sum_wave<512, 4>, 512, 1, "wave block 512 U4");
      wave(sum_wave<512, 4>, 512, 2, "wave block 512 U4");
      wave(sum_wave<512, 4>, 512, 4, "wave block 512 U4");
      wave(sum_wave<1024, 4>, 1024, 1, "wave block 1024 U4");
      wave(sum_wave<1024, 4>, 1024, 2, "wave block 1024 U4");
      // Where a sum's time goes: the same launches reading nothing (launch, block folds and the last
      // block's fold), and reading without the last block's fold (totals wrong on purpose).
      auto fixed = [&](auto k, int B, int per_sm, const std::string& name) {
        const unsigned grid = unsigned(sms * per_sm);
        const double ms = b.per_call_ms([&] { launch(k, grid, unsigned(B), cs, true, x, std::size_t(0), partials, counter, total.data()); });
        std::printf("  %-4s %-44s %.4f ms  (fixed cost)\n", "sum", (name + " " + std::to_string(per_sm) + "/SM, reads nothing").c_str(), ms);
      };
      auto unfolded = [&](auto k, int B, int per_sm, const std::string& name) {
        const unsigned grid = unsigned(sms * per_sm);
        const double ms = b.per_call_ms([&] { launch(k, grid, unsigned(B), cs, true, x, n4, partials, counter, total.data()); });
        std::printf("  %-4s %-44s %.4f ms  rate %.3f of memcpy's (no last-block fold)\n", "sum",
                    (name + " " + std::to_string(per_sm) + "/SM").c_str(), ms, mc / (2 * ms));
      };
      {
        unsigned long long* slots = nullptr;
        CHECK(cudaMalloc(&slots, sizeof(unsigned long long) * 64 * sms));
        CHECK(cudaMemset(slots, 0, sizeof(unsigned long long) * 64 * sms));
        auto slotted = [&](auto k, int B, int per_sm, const std::string& name) {
          const unsigned grid = unsigned(sms * per_sm);
          launch(k, grid, unsigned(B), cs, true, x, n4, slots, partials, total.data());
          CHECK(cudaStreamSynchronize(cs));
          const double ms = b.per_call_ms([&] { launch(k, grid, unsigned(B), cs, true, x, n4, slots, partials, total.data()); });
          sum_report(name + " " + std::to_string(per_sm) + "/SM", ms, total.to_host()[0]);
        };
        slotted(sum_wave_slots<256, 4, true>, 256, 8, "slots, packed, block 256 U4");
        slotted(sum_wave_slots<256, 4, false>, 256, 8, "slots, release, block 256 U4");
        slotted(sum_wave_slots<1024, 4, true>, 1024, 2, "slots, packed, block 1024 U4");
        slotted(sum_wave_slots<1024, 4, false>, 1024, 2, "slots, release, block 1024 U4");
        CHECK(cudaFree(slots));
      }
      fixed(sum_wave<256, 4>, 256, 8, "wave block 256 U4");
      fixed(sum_wave<512, 4>, 512, 2, "wave block 512 U4");
      unfolded(sum_wave<256, 4, false>, 256, 8, "wave block 256 U4");
      unfolded(sum_wave<512, 4, false>, 512, 2, "wave block 512 U4");
      CHECK(cudaMemset(counter, 0, sizeof(unsigned)));
      {
        std::size_t bytes = 0;
        CHECK(cub::DeviceReduce::Sum(nullptr, bytes, ax.data(), total.data(), n, cs));
        void* tmp = nullptr;
        CHECK(cudaMalloc(&tmp, bytes));
        CHECK(cub::DeviceReduce::Sum(tmp, bytes, ax.data(), total.data(), n, cs));
        const double ms = b.per_call_ms([&] { CHECK(cub::DeviceReduce::Sum(tmp, bytes, ax.data(), total.data(), n, cs)); });
        sum_report("cub::DeviceReduce::Sum", ms, total.to_host()[0]);
        CHECK(cudaFree(tmp));
      }
      CHECK(cudaFree(partials));
      CHECK(cudaFree(counter));
      const double mc2 = b.per_call_ms([&] { rs::copy(ax, ay); });
      std::printf("  memcpy again (drift) %.4f ms  %.3f x memcpy\n", mc2, mc2 / mc);
    }
  return 0;
}
