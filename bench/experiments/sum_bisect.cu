// The library's sum against the hand-written slot sum of map_shapes, one difference at a time, in one
// process: which part of the library's kernel (its loads and accumulation, its fold of the partials,
// the order of its dependent-launch wait) or of its call (the host's path around the launch) costs the
// few % between them. Per size, timed back-to-back (`batch` calls between two events) against a
// device-to-device memcpy of the same array; every total checked against an FP64 sum first.
//
//   library sum               rs::map(identity) | rs::reduce(plus) into a device array, as shipped
//   library kernel by hand    the kernel the library launches (fused_reduce_kernel), launched here with
//                             the library's grid: blocks of 1024 two per SM (wide) or 256 eight per SM
//   hand                      map_shapes' sum_wave_slots: thread_sum's loads (sums.cuh), the packed slots
//   hand loads, library fold  thread_sum's loads, then the library's fold_slots
//   library loads, hand fold  the library's for_each_vector and accumulators, then the hand's slots
//   each hand kernel          with the wait before letting the next kernel be scheduled (wait first)
//                             and after it (let go first)
//   variant                   the library's body for this sum copied, with its loop (as shipped,
//                             checked throughout, 32-bit indices) and its fold's loads as parameters
//
// usage: sum_bisect [log2_n ...]   (default 20 21 22 23 24 26)
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <cub/block/block_reduce.cuh>

#include "experiment.cuh"
#include "sums.cuh"
#include "resident/resident.hpp"

namespace rs = resident;

namespace {

constexpr int batch = 20, reps = 15, repeat = 3;

struct identity {
  RESIDENT_HD float operator()(float v) const { return v; }
};

template <bool WaitFirst>
__device__ __forceinline__ void prologue() {
  if constexpr (WaitFirst) asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  if constexpr (!WaitFirst) asm volatile("griddepcontrol.wait;" ::: "memory");
}

// The library's loads and accumulators: for_each_vector over a view_loader, one accumulator per lane.
template <int U>
__device__ __forceinline__ float library_loads(const float* x, std::size_t n4) {
  const rs::detail::view_loader<float> in{x};
  float acc[4] = {-0.f, -0.f, -0.f, -0.f};
  rs::detail::for_each_vector<4, U, std::size_t>(in, 0, n4, [&](std::size_t, const auto& raw) {
#pragma unroll
    for (int k = 0; k < 4; ++k) acc[k] += raw.v[k];
  });
  return (acc[0] + acc[1]) + (acc[2] + acc[3]);
}

// map_shapes' packed slots: every block but the last stores value and flag in one 8-byte word; the
// last waits for each, folds them in block order and leaves them zero.
template <int B>
__device__ __forceinline__ void hand_fold(float a, unsigned long long* slots, float* out) {
  using br = cub::BlockReduce<float, B>;
  __shared__ typename br::TempStorage tmp;
  const float t = br(tmp).Sum(a);
  const unsigned last = gridDim.x - 1;
  if (blockIdx.x != last) {
    if (threadIdx.x == 0) {
      const unsigned long long w = (1ull << 32) | __float_as_uint(t);
      asm volatile("st.relaxed.gpu.global.b64 [%0], %1;" ::"l"(slots + blockIdx.x), "l"(w) : "memory");
    }
    return;
  }
  float p = 0;
  for (unsigned b = threadIdx.x; b < last; b += B) {
    unsigned long long w;
    do asm volatile("ld.relaxed.gpu.global.b64 %0, [%1];" : "=l"(w) : "l"(slots + b) : "memory");
    while ((w >> 32) == 0);
    p += __uint_as_float(unsigned(w));
    slots[b] = 0;
  }
  __syncthreads();  // tmp is reused
  const float total = br(tmp).Sum(p);
  if (threadIdx.x == 0) *out = total + t;
}

template <int B, int MinBlocks, bool WaitFirst>
__global__ void __launch_bounds__(B, MinBlocks) hand(const float4* __restrict__ x, std::size_t n4,
                                                     unsigned long long* slots, float* out) {
  prologue<WaitFirst>();
  hand_fold<B>(experiment::thread_sum<B, 4>(x, n4), slots, out);
}

template <int B, int MinBlocks, bool WaitFirst>
__global__ void __launch_bounds__(B, MinBlocks) hand_loads_library_fold(const float4* __restrict__ x, std::size_t n4,
                                                                        unsigned long long* slots, float* out) {
  prologue<WaitFirst>();
  rs::detail::fold_slots<B>(experiment::thread_sum<B, 4>(x, n4), rs::plus{}, -0.f, slots, [&](float t) { *out = t; });
}

template <int B, int MinBlocks, bool WaitFirst>
__global__ void __launch_bounds__(B, MinBlocks) library_loads_hand_fold(const float* x, std::size_t n4,
                                                                        unsigned long long* slots, float* out) {
  prologue<WaitFirst>();
  hand_fold<B>(library_loads<4>(x, n4), slots, out);
}

// The library's reduction body for a sum of floats (fused_reduce_body's path for 4-byte partials with
// an identity), with its loop and the loads per thread of its last block's fold as parameters.
// Loop 0: 64-bit indices, trips wholly inside unchecked, then the one cut by the end; 1: every trip
// checked, vector by vector (the hand's shape); 2: as 0 with 32-bit indices (nvec below 2^32), written
// out; 3: the library's for_each_vector with 32-bit indices; 4: as 3 from a head given at run time
// (0); 5: as 4 with the library's scalar head and tail; 6: as 3 from the first aligned vector (the head
// in the pointer) with the scalar head after the loop and the tail, the library's order.
template <int B, int MinBlocks, int Loop, int FoldLoads, bool WaitFirst>
__global__ void __launch_bounds__(B, MinBlocks) variant(const float* x, std::size_t nvec, unsigned long long* slots,
                                                        float* out, std::size_t head = 0) {
  prologue<WaitFirst>();
  const rs::detail::view_loader<float> in{x};
  float acc[4] = {-0.f, -0.f, -0.f, -0.f};
  auto visit = [&](std::size_t, const auto& raw) {
#pragma unroll
    for (int k = 0; k < 4; ++k) acc[k] += raw.v[k];
  };
  if constexpr (Loop == 0) {
    rs::detail::for_each_vector<4, 4, std::size_t>(in, 0, nvec, visit);
  } else if constexpr (Loop == 3) {
    rs::detail::for_each_vector<4, 4, unsigned>(in, 0, nvec, visit);
  } else if constexpr (Loop == 4) {
    rs::detail::for_each_vector<4, 4, unsigned>(in, head, nvec, visit);
  } else if constexpr (Loop == 5) {
    const std::size_t tid = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x, n = head + nvec * 4;
    if (tid < head) acc[0] += x[tid];
    rs::detail::for_each_vector<4, 4, unsigned>(in, head, nvec, visit);
    const std::size_t tail = head + nvec * 4;
    if (tid < n - tail) acc[0] += x[tail + tid];
  } else if constexpr (Loop == 6) {
    const std::size_t tid = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x, n = head + nvec * 4;
    rs::detail::for_each_vector<4, 4, unsigned>(in.shifted(head), 0, nvec, visit);
    if (tid < head) acc[0] += x[tid];
    const std::size_t tail = head + nvec * 4;
    if (tid < n - tail) acc[0] += x[tail + tid];
  } else if constexpr (Loop == 1) {
    const std::size_t tid = std::size_t(blockIdx.x) * B + threadIdx.x, stride = std::size_t(gridDim.x) * B;
    for (std::size_t j = tid; j < nvec; j += stride * 4) rs::detail::visit_vectors<4, 4, true, true>(in, 0, nvec, j, stride, visit);
  } else {
    const unsigned tid = blockIdx.x * B + threadIdx.x, stride = gridDim.x * B, n = unsigned(nvec);
    unsigned j = tid;
    for (; j + 3 * stride < n; j += 4 * stride) {
      rs::detail::vec<float, 4> r[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) r[u] = rs::detail::load_read_only<4>(in, std::size_t(j + u * stride) * 4);
#pragma unroll
      for (int u = 0; u < 4; ++u) visit(0, r[u]);
    }
    if (j < n) {
      rs::detail::vec<float, 4> r[4];
#pragma unroll
      for (int u = 0; u < 4; ++u)
        if (j + u * stride < n) r[u] = rs::detail::load_read_only<4>(in, std::size_t(j + u * stride) * 4);
#pragma unroll
      for (int u = 0; u < 4; ++u)
        if (j + u * stride < n) visit(0, r[u]);
    }
  }
  float mine = acc[0];
#pragma unroll
  for (int k = 1; k < 4; ++k) mine = mine + acc[k];
  auto done = [&](float t) { *out = 0.f + t; };
  rs::detail::fold_slots<B, float, rs::plus, decltype(done), FoldLoads>(mine, rs::plus{}, -0.f, slots, done);
}

// Every launch here is a programmatic dependent of the previous kernel, as the library's are.
template <class K, class... A>
void launch(K k, unsigned grid, unsigned block, cudaStream_t s, A... args) {
  experiment::launch(k, grid, block, s, true, args...);
}

using bench = experiment::batched;

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> logs;
  for (int i = 1; i < argc; ++i) logs.push_back(std::atoi(argv[i]));
  if (logs.empty()) logs = {20, 21, 22, 23, 24, 26};
  bench b{batch, reps};
  const cudaStream_t cs = b.s.ref().native();
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const auto sum = rs::map(identity{}) | rs::reduce(rs::plus{}, 0.f);
  using L = rs::detail::view_loader<float>;
  using Fn = decltype(sum.chain);
  constexpr auto lib_wide = rs::detail::fused_reduce_kernel<1024, 2, 4, 4, unsigned, L, Fn, rs::plus, float>;
  constexpr auto lib_narrow = rs::detail::fused_reduce_kernel<256, 0, 4, 4, unsigned, L, Fn, rs::plus, float>;
  {
    cudaFuncAttributes a{};
    CHECK(cudaFuncGetAttributes(&a, lib_wide));
    std::printf("# sum_bisect: back-to-back, %d calls per event pair, median of %d, %d sweeps; %d SMs; library wide "
                "kernel %d registers", batch, reps, repeat, sms, a.numRegs);
    CHECK(cudaFuncGetAttributes(&a, hand<1024, 2, true>));
    std::printf(", hand wide %d\n", a.numRegs);
  }
  unsigned long long* slots = nullptr;
  CHECK(cudaMalloc(&slots, sizeof(unsigned long long) * 16 * sms));
  CHECK(cudaMemset(slots, 0, sizeof(unsigned long long) * 16 * sms));
  const unsigned wide = unsigned(2 * sms), narrow = unsigned(8 * sms);
  for (int rep = 0; rep < repeat; ++rep)
    for (int l : logs) {
      const std::size_t n = std::size_t(1) << l, n4 = n / 4;
      std::vector<float> hx(n);
      srand(unsigned(l) * 7919u + unsigned(rep) * 31u + unsigned(time(nullptr)));
      for (auto& v : hx) v = float(rand()) / float(RAND_MAX);
      double ref = 0;
      for (float v : hx) ref += v;
      rs::array<float> x = rs::to_device(hx, b.s.ref()), z(n, b.s.ref()), total(1, b.s.ref());
      const float* xp = x.data();
      const float4* x4 = reinterpret_cast<const float4*>(xp);
      float* out = total.data();
      const double mc = b.per_call_ms([&] { rs::copy(x, z); });
      std::printf("sweep %d n = 2^%d: memcpy %.4f ms\n", rep + 1, l, mc);
      // A sum reads 4 bytes per element, memcpy reads and writes 8: rate ratio = mc / (2 * ms).
      auto report = [&](const std::string& name, auto&& call, bool host) {
        CHECK(cudaMemsetAsync(out, 0xFF, sizeof(float), cs));  // NaN
        call();
        const float got = total.to_host()[0];
        const bool ok = std::abs(double(got) - ref) <= 1e-4 * std::abs(ref);
        const double ms = b.per_call_ms(call);
        std::printf("  %-44s %.4f ms  rate %.3f of memcpy's", name.c_str(), ms, mc / (2 * ms));
        if (host) std::printf("  host %5.0f ns", b.host_ns(call));
        std::printf("%s\n", ok ? "" : "  WRONG");
      };
      const bool lib_is_wide = n >= rs::detail::cuda_tuning::reduce_wide_from;
      report(std::string("library sum (") + (lib_is_wide ? "wide" : "narrow") + ")", [&] { sum(x, total); }, true);
      report("library kernel by hand, wide", [&] {
        launch(lib_wide, wide, 1024, cs, L{xp}, sum.chain, rs::plus{}, 0.f, std::size_t(0), n4, n,
               static_cast<rs::detail::maybe<float>*>(nullptr), static_cast<unsigned long long*>(nullptr), slots, out);
      }, true);
      report("library kernel by hand, narrow", [&] {
        launch(lib_narrow, narrow, 256, cs, L{xp}, sum.chain, rs::plus{}, 0.f, std::size_t(0), n4, n,
               static_cast<rs::detail::maybe<float>*>(nullptr), static_cast<unsigned long long*>(nullptr), slots, out);
      }, false);
      report("hand, wide, wait first", [&] { launch(hand<1024, 2, true>, wide, 1024, cs, x4, n4, slots, out); }, true);
      report("hand, wide, let go first", [&] { launch(hand<1024, 2, false>, wide, 1024, cs, x4, n4, slots, out); }, false);
      report("hand, narrow, wait first", [&] { launch(hand<256, 0, true>, narrow, 256, cs, x4, n4, slots, out); }, false);
      report("hand, narrow, let go first", [&] { launch(hand<256, 0, false>, narrow, 256, cs, x4, n4, slots, out); }, false);
      report("hand loads, library fold, wide, wait first",
             [&] { launch(hand_loads_library_fold<1024, 2, true>, wide, 1024, cs, x4, n4, slots, out); }, false);
      report("library loads, hand fold, wide, wait first",
             [&] { launch(library_loads_hand_fold<1024, 2, true>, wide, 1024, cs, xp, n4, slots, out); }, false);
      report("library loads, hand fold, wide, let go first",
             [&] { launch(library_loads_hand_fold<1024, 2, false>, wide, 1024, cs, xp, n4, slots, out); }, false);
      report("variant: 64-bit, fold loads 2, wide", [&] { launch(variant<1024, 2, 0, 2, true>, wide, 1024, cs, xp, n4, slots, out, std::size_t(0)); }, false);
      report("variant: fold loads 1, wide", [&] { launch(variant<1024, 2, 0, 1, true>, wide, 1024, cs, xp, n4, slots, out, std::size_t(0)); }, false);
      report("variant: checked trips, fold loads 1, wide",
             [&] { launch(variant<1024, 2, 1, 1, true>, wide, 1024, cs, xp, n4, slots, out, std::size_t(0)); }, false);
      report("variant: 32-bit, fold loads 1, wide",
             [&] { launch(variant<1024, 2, 2, 1, true>, wide, 1024, cs, xp, n4, slots, out, std::size_t(0)); }, false);
      report("variant: library loop, wide", [&] { launch(variant<1024, 2, 3, 1, true>, wide, 1024, cs, xp, n4, slots, out, std::size_t(0)); }, false);
      report("variant: library loop, head, wide", [&] { launch(variant<1024, 2, 4, 1, true>, wide, 1024, cs, xp, n4, slots, out, std::size_t(0)); }, false);
      report("variant: library loop, head, tail, wide", [&] { launch(variant<1024, 2, 5, 1, true>, wide, 1024, cs, xp, n4, slots, out, std::size_t(0)); }, false);
      report("variant: library loop, head after, tail, wide",
             [&] { launch(variant<1024, 2, 6, 1, true>, wide, 1024, cs, xp, n4, slots, out, std::size_t(0)); }, false);
      report("variant: library loop, narrow", [&] { launch(variant<256, 0, 3, 8, false>, narrow, 256, cs, xp, n4, slots, out, std::size_t(0)); }, false);
      report("variant: library loop, head, tail, narrow",
             [&] { launch(variant<256, 0, 5, 8, false>, narrow, 256, cs, xp, n4, slots, out, std::size_t(0)); }, false);
      report("variant: library loop, head after, tail, narrow",
             [&] { launch(variant<256, 0, 6, 8, false>, narrow, 256, cs, xp, n4, slots, out, std::size_t(0)); }, false);
      report("variant: 64-bit, narrow", [&] { launch(variant<256, 0, 0, 8, false>, narrow, 256, cs, xp, n4, slots, out, std::size_t(0)); }, false);
      report("variant: 32-bit, narrow", [&] { launch(variant<256, 0, 2, 8, false>, narrow, 256, cs, xp, n4, slots, out, std::size_t(0)); }, false);
      report("library sum (again)", [&] { sum(x, total); }, false);
      std::printf("  memcpy again (drift) %.4f ms\n", b.per_call_ms([&] { rs::copy(x, z); }));
    }
  CHECK(cudaFree(slots));
  return 0;
}
