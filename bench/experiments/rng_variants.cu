// The fused generator kernel: the library's map body over a uniform Philox source at several block
// sizes and an earlier block-aligned experiment, against a hand-written Philox fill and cuRAND's Philox into
// the same buffer, in one run; its findings are in docs/tuning.md.
//
// usage: rng_variants [log2_n]     (default 28)
#include <cuda_runtime.h>
#include <curand.h>

#include <cub/block/block_reduce.cuh>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "experiment.cuh"
#include "hand_philox.cuh"
#include "resident/resident.hpp"

namespace rs = resident;
namespace rd = resident::detail;


using dist = rs::random::unit_distribution<float>;
using loader = rd::generate_loader<dist>;
using writer = rd::writer<float>;
using ident = rd::chain<>;

__global__ void unbounded(loader in, ident fn, writer out, std::size_t head, std::size_t nvec, std::size_t n) {
  rd::fused_map_body<4, 1, false>(in, fn, out, head, nvec, n);
}
// Block-aligned fast path: no scalar head, every vector starts a Philox block (offset % 4 == 0 checked
// on the host); U blocks per thread per iteration; the scalar tail as in the library.
template <int U>
__global__ void aligned(loader in, ident fn, writer out, std::size_t nvec, std::size_t n) {
  rd::dependent_launch_prologue();
  const std::size_t tid = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  const std::uint64_t c0 = in.g.offset / 4;
  for (std::size_t j = tid; j < nvec; j += stride * U) {
    rs::random::words4 w[U];
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (j + u * stride < nvec) w[u] = rs::random::philox_block(in.g.seed, c0 + j + u * stride);
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (j + u * stride < nvec) {
        float r[4];
#pragma unroll
        for (int k = 0; k < 4; ++k) r[k] = fn(in.g.from(w[u], k, c0 + j + u * stride));
        out.template store<4>((j + u * stride) * 4, r);
      }
  }
  const std::size_t tail = nvec * 4;
  if (tid < n - tail) out.store1(tail + tid, in.eval1(fn, tail + tid));
}

// Monte-Carlo pi: the library's reduction kernel over a point source, U generator blocks per thread per
// iteration.
struct inside_fn {
  __device__ std::uint64_t operator()(rs::random::point2<float> p) const {
    return std::uint64_t(fmaf(p.x, p.x, p.y * p.y) <= 1.f);
  }
};
using point_loader = rd::generate_loader<rs::random::point_distribution<float>>;
using pi_chain = rd::chain<inside_fn>;
template <int MINB = 1>
__global__ void __launch_bounds__(rd::reduce_block, MINB)
    pi_kernel(point_loader in, pi_chain fn, std::size_t n, rd::maybe<std::uint64_t>* partials,
              unsigned long long* counters, std::uint64_t* result) {
  // The library's kernel body, at MINB blocks per SM.
  rd::fused_reduce_body<rd::reduce_block, 1, 1>(in, fn, rs::plus{}, std::uint64_t(0), 0, 0, n, partials, counters, nullptr, result);
}

// Monte-Carlo pi written out by hand (2 points per Philox block, counted into *out with one atomic per
// block), to weigh the loop's instruction mix: the 64-bit loop (the library's) or a 32-bit trip count
// (Trips32), w >> 8 as a shift or as __umulhi(w, 2^24) (Hi: the FMA pipe's IMAD.HI instead of the
// integer pipe's SHF), the count in 64 or 32 bits.
template <bool Trips32, bool Hi, class C>
__global__ void __launch_bounds__(256) pi_explicit(std::uint64_t seed, std::uint64_t blocks, unsigned long long* out) {
  const std::uint64_t tid = std::uint64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::uint64_t stride = std::uint64_t(gridDim.x) * blockDim.x;
  C acc = 0;
  auto unit = [](std::uint32_t w) { return float(Hi ? __umulhi(w, 1u << 24) : w >> 8) * 0x1.0p-24f; };
  auto body = [&](std::uint64_t c) {
    const rs::random::words4 w = rs::random::philox_block(seed, c);
    const float x0 = unit(w.w[0]), y0 = unit(w.w[1]), x1 = unit(w.w[2]), y1 = unit(w.w[3]);
    acc += C(x0 * x0 + y0 * y0 <= 1.f) + C(x1 * x1 + y1 * y1 <= 1.f);
  };
  if constexpr (Trips32) {
    if (tid < blocks) {
      std::uint32_t trips = std::uint32_t((blocks - tid + stride - 1) / stride);  // < 2^32 here
      for (std::uint64_t c = tid; trips; --trips, c += stride) body(c);
    }
  } else {
    for (std::uint64_t c = tid; c < blocks; c += stride) body(c);
  }
  using block_reduce = cub::BlockReduce<unsigned long long, 256>;
  __shared__ typename block_reduce::TempStorage tmp;
  const unsigned long long total = block_reduce(tmp).Sum((unsigned long long)acc);
  if (threadIdx.x == 0) atomicAdd(out, total);
}



int main(int argc, char** argv) {
  const int lg = argc > 1 ? std::atoi(argv[1]) : 28;
  const std::size_t n = std::size_t(1) << lg, nvec = n / 4;
  const std::uint64_t seed = 7;
  float *y, *ref;
  CHECK(cudaMalloc(&y, n * 4));
  CHECK(cudaMalloc(&ref, n * 4));
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  auto gbs = [&](double ms) { return double(n) * 4 / (ms * 1e-3) / 1e9; };
  std::printf("n = 2^%d floats (%.1f GiB written per fill)\n", lg, double(n) * 4 / (1 << 30));

  timer tm;
  constexpr int reps = 30;
  curandGenerator_t g;
  if (curandCreateGenerator(&g, CURAND_RNG_PSEUDO_PHILOX4_32_10) != CURAND_STATUS_SUCCESS) return 1;
  curandSetPseudoRandomGeneratorSeed(g, seed);
  const double cu = tm.median_ms([&] { curandGenerateUniform(g, ref, n); }, reps);
  std::printf("  %-40s %8.4f ms  %6.0f GB/s  1.000 x cuRAND\n", "cuRAND Philox uniform", cu, gbs(cu));

  const loader in{dist{{}, seed, 0}};
  std::size_t head = 0;  // a run-time value, as in the library: the scalar head and tail paths stay in
  auto run = [&](const char* name, auto kernel, int block) {
    int per_sm = 0;
    CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, block, 0));
    cudaFuncAttributes fa{};
    CHECK(cudaFuncGetAttributes(&fa, kernel));
    const unsigned grid = unsigned(per_sm * sms);
    CHECK(cudaMemset(y, 0xff, n * 4));
    const double ms = tm.median_ms([&] {
      if constexpr (requires { kernel(in, ident{}, writer{y}, head, nvec, n); })
        kernel<<<grid, block>>>(in, ident{}, writer{y}, head, nvec, n);
      else
        kernel<<<grid, block>>>(in, ident{}, writer{y}, nvec, n);
    }, reps);
    std::vector<float> a(1024), b(1024);
    CHECK(cudaMemcpy(a.data(), y + n - 1024, 4096, cudaMemcpyDeviceToHost));
    rs::array<float> lib(1024, rs::device::cuda(0));
    rs::random::fill_uniform(lib, seed, n - 1024);
    b = lib.to_host();
    std::printf("  %-40s %8.4f ms  %6.0f GB/s  %.3f x cuRAND  (%d regs, %zu B local, %d x %d threads/SM)%s\n", name, ms,
                gbs(ms), cu / ms, fa.numRegs, std::size_t(fa.localSizeBytes), per_sm, block,
                a == b ? "" : "  MISMATCH");
  };
  for (int block : {256, 512, 1024}) {
    std::printf("block %d:\n", block);
    run("library body", unbounded, block);
    run("block-aligned path, 1 block per thread", aligned<1>, block);
    run("block-aligned path, 2 blocks per thread", aligned<2>, block);
  }
  {
    int per_sm = 0;
    CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, philox_fill, 256, 0));
    const double ms = tm.median_ms([&] { philox_fill<<<unsigned(per_sm * sms), 256>>>(reinterpret_cast<float4*>(y), nvec, seed); }, reps);
    std::printf("  %-40s %8.4f ms  %6.0f GB/s  %.3f x cuRAND\n", "hand-written Philox fill, block 256", ms, gbs(ms), cu / ms);
  }
  rs::array<float> lib(n, rs::device::cuda(0));
  const double ms = tm.median_ms([&] { rs::random::fill_uniform(lib, seed); }, reps);
  std::printf("  %-40s %8.4f ms  %6.0f GB/s  %.3f x cuRAND\n", "random::fill_uniform (library)", ms, gbs(ms), cu / ms);
  {
    // Monte-Carlo pi over n points (2n uniforms), fused: the library's body, by hand, the library's call.
    std::printf("Monte-Carlo pi, %zu points, fused generate -> map -> reduce:\n", n);
    rd::maybe<std::uint64_t>* partials;
    unsigned long long* counter;
    std::uint64_t* result;
    CHECK(cudaMalloc(&partials, sizeof(*partials) * 132 * 64));
    CHECK(cudaMalloc(&counter, 2 * sizeof(unsigned long long)));
    CHECK(cudaMalloc(&result, sizeof(std::uint64_t)));
    const point_loader pin{rs::random::point_distribution<float>{dist{{}, seed, 0}}};
    auto pi = [&](const char* name, auto kernel) {
      int per_sm = 0;
      CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, rd::reduce_block, 0));
      cudaFuncAttributes fa{};
      CHECK(cudaFuncGetAttributes(&fa, kernel));
      const unsigned grid = unsigned(per_sm * sms);
      const double ms = tm.median_ms([&] {
        CHECK(cudaMemsetAsync(counter, 0, 2 * sizeof(unsigned long long)));
        kernel<<<grid, rd::reduce_block>>>(pin, pi_chain{}, n, partials, counter, result);
      }, reps);
      std::uint64_t count = 0;
      CHECK(cudaMemcpy(&count, result, sizeof(count), cudaMemcpyDeviceToHost));
      std::printf("  %-40s %8.4f ms  pi ~ %.5f  (%d regs, %d x %d threads/SM)\n", name, ms, 4.0 * double(count) / double(n),
                  fa.numRegs, per_sm, rd::reduce_block);
    };
    pi("library body", pi_kernel<>);
    auto explicit_pi = [&](const char* name, auto kernel) {
      int per_sm = 0;
      CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, 256, 0));
      cudaFuncAttributes fa{};
      CHECK(cudaFuncGetAttributes(&fa, kernel));
      const unsigned grid = unsigned(per_sm * sms);
      auto* acc = reinterpret_cast<unsigned long long*>(result);
      const double ms = tm.median_ms([&] {
        CHECK(cudaMemsetAsync(acc, 0, sizeof(*acc)));
        kernel<<<grid, 256>>>(seed, n / 2, acc);
      }, reps);
      std::uint64_t count = 0;
      CHECK(cudaMemcpy(&count, acc, sizeof(count), cudaMemcpyDeviceToHost));
      std::printf("  %-40s %8.4f ms  pi ~ %.5f  (%d regs, %d x 256 threads/SM)\n", name, ms, 4.0 * double(count) / double(n),
                  fa.numRegs, per_sm);
    };
    explicit_pi("by hand: 64-bit loop, shift, 64-bit count", pi_explicit<false, false, std::uint64_t>);
    explicit_pi("by hand: 32-bit trips", pi_explicit<true, false, std::uint64_t>);
    explicit_pi("by hand: umulhi for the shift", pi_explicit<false, true, std::uint64_t>);
    explicit_pi("by hand: 32-bit trips, umulhi", pi_explicit<true, true, std::uint64_t>);
    explicit_pi("by hand: 32-bit trips, umulhi, 32-bit count", pi_explicit<true, true, std::uint32_t>);
    auto inside = [] RESIDENT_HD(rs::random::point2<float> p) { return std::uint64_t(fmaf(p.x, p.x, p.y * p.y) <= 1.f); };
    auto fused = rs::random::uniform_points<float>(seed) | rs::map(inside) | rs::reduce(rs::plus{}, std::uint64_t(0));
    const double lib = tm.median_ms([&] { fused(n, rs::default_stream(rs::device::cuda(0))); }, reps);
    std::printf("  %-40s %8.4f ms  (fill-then-reduce: resident bench rng)\n", "library pipeline, value returned", lib);
    rs::array<std::uint64_t> on_device(1, rs::device::cuda(0));
    const double kept = tm.median_ms([&] { fused(n, on_device); }, reps);
    std::printf("  %-40s %8.4f ms  pi ~ %.5f\n", "library pipeline, count kept on device", kept,
                4.0 * double(on_device.to_host()[0]) / double(n));
    const bool pdl = rs::programmatic_launch();
    rs::set_programmatic_launch(false);
    const double plain = tm.median_ms([&] { fused(n, on_device); }, reps);
    rs::set_programmatic_launch(pdl);
    std::printf("  %-40s %8.4f ms\n", "the same without dependent launch", plain);
    CHECK(cudaFree(partials));
    CHECK(cudaFree(counter));
    CHECK(cudaFree(result));
  }
  curandDestroyGenerator(g);
  CHECK(cudaFree(y));
  CHECK(cudaFree(ref));
  return 0;
}
