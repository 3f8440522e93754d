// The climb of the tuned FP32 matmul toward cuBLAS: one kernel template over block tile (BM x BN),
// k-slab BK, thread tile TM x TN (split into quadrants so a warp's 16-byte shared-memory reads are
// consecutive, as in the library's tuned kernel) and the minimum resident blocks per SM, all timed
// against cuBLAS FP32 (pedantic) and the library's `tuned` in one run, each checked against cuBLAS.
// Square n, a multiple of every tile; row-major; C = A B. Its table chooses the library's next tuned
// kernel; its findings are in docs/tuning.md.
//
// usage: sgemm_variants [n ...]     (default 4096 8192)
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "experiment.cuh"
#include "resident/resident.hpp"

namespace rs = resident;


// WARP8: a warp's 32 threads cover 4 rows x 8 columns of thread tiles (fewer distinct shared-memory
// addresses per read) instead of 2 x 16.
// SWZ > 0: blocks run in groups of SWZ block-rows, column by column within a group, so that the blocks
// resident at one time share panels of A and B in L2.
template <int BM, int BN, int BK, int TM, int TN, int MINB, bool WARP8 = false, int SWZ = 0>
__global__ void __launch_bounds__((BM / TM) * (BN / TN), MINB)
    sgemm(int n, const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C) {
  constexpr int T = (BM / TM) * (BN / TN);
  constexpr int LA = BM * BK / 4 / T, LB = BK * BN / 4 / T;  // float4 loads per thread per slab
  static_assert(LA >= 1 && LB >= 1 && BM * BK / 4 % T == 0 && BK * BN / 4 % T == 0, "tile does not split");
  static_assert(TM % 8 == 0 && TN % 8 == 0, "quadrants of 16-byte reads");
  __shared__ __align__(16) float as[2][BK][BM];  // A slab transposed
  __shared__ __align__(16) float bs[2][BK][BN];
  const int tid = threadIdx.x, lane = tid % 32, w = tid / 32, WX = BN / TN / 8;
  const int tx = WARP8 ? (w % WX) * 8 + lane % 8 : tid % (BN / TN);
  const int ty = WARP8 ? (w / WX) * 4 + lane / 8 : tid / (BN / TN);
  int by = blockIdx.y, bx = blockIdx.x;
  if constexpr (SWZ > 0) {
    const int pid = blockIdx.y * gridDim.x + blockIdx.x, per_group = SWZ * gridDim.x;
    const int first = pid / per_group * SWZ, rows = min(int(gridDim.y) - first, SWZ);
    by = first + pid % per_group % rows;
    bx = pid % per_group / rows;
  }
  const int row0 = by * BM, col0 = bx * BN;
  float4 ra[LA], rb[LB];
  auto fetch = [&](int p0) {
#pragma unroll
    for (int l = 0; l < LA; ++l) {
      const int idx = tid + l * T, r = idx / (BK / 4), q = idx % (BK / 4);
      ra[l] = *reinterpret_cast<const float4*>(A + std::size_t(row0 + r) * n + p0 + q * 4);
    }
#pragma unroll
    for (int l = 0; l < LB; ++l) {
      const int idx = tid + l * T, r = idx / (BN / 4), q = idx % (BN / 4);
      rb[l] = *reinterpret_cast<const float4*>(B + std::size_t(p0 + r) * n + col0 + q * 4);
    }
  };
  auto stash = [&](int buf) {
#pragma unroll
    for (int l = 0; l < LA; ++l) {
      const int idx = tid + l * T, r = idx / (BK / 4), q = idx % (BK / 4);
      as[buf][q * 4 + 0][r] = ra[l].x;
      as[buf][q * 4 + 1][r] = ra[l].y;
      as[buf][q * 4 + 2][r] = ra[l].z;
      as[buf][q * 4 + 3][r] = ra[l].w;
    }
#pragma unroll
    for (int l = 0; l < LB; ++l) {
      const int idx = tid + l * T, r = idx / (BN / 4), q = idx % (BN / 4);
      *reinterpret_cast<float4*>(&bs[buf][r][q * 4]) = rb[l];
    }
  };
  float acc[TM][TN] = {};
  fetch(0);
  stash(0);
  __syncthreads();
  int buf = 0;
  for (int p0 = 0; p0 < n; p0 += BK) {
    const bool more = p0 + BK < n;
    if (more) fetch(p0 + BK);
#pragma unroll
    for (int q = 0; q < BK; ++q) {
      float a[TM], b[TN];
#pragma unroll
      for (int i = 0; i < TM / 2; i += 4) {
        *reinterpret_cast<float4*>(a + i) = *reinterpret_cast<const float4*>(&as[buf][q][ty * (TM / 2) + i]);
        *reinterpret_cast<float4*>(a + TM / 2 + i) =
            *reinterpret_cast<const float4*>(&as[buf][q][BM / 2 + ty * (TM / 2) + i]);
      }
#pragma unroll
      for (int j = 0; j < TN / 2; j += 4) {
        *reinterpret_cast<float4*>(b + j) = *reinterpret_cast<const float4*>(&bs[buf][q][tx * (TN / 2) + j]);
        *reinterpret_cast<float4*>(b + TN / 2 + j) =
            *reinterpret_cast<const float4*>(&bs[buf][q][BN / 2 + tx * (TN / 2) + j]);
      }
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] += a[i] * b[j];
    }
    if (more) {
      stash(buf ^ 1);
      __syncthreads();
      buf ^= 1;
    }
  }
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int r = row0 + (i < TM / 2 ? ty * (TM / 2) + i : BM / 2 + ty * (TM / 2) + i - TM / 2);
#pragma unroll
    for (int j = 0; j < TN; j += 4) {
      const int c = col0 + (j < TN / 2 ? tx * (TN / 2) + j : BN / 2 + tx * (TN / 2) + j - TN / 2);
      *reinterpret_cast<float4*>(C + std::size_t(r) * n + c) = make_float4(acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]);
    }
  }
}


int main(int argc, char** argv) {
  std::vector<int> sizes;
  for (int i = 1; i < argc; ++i) sizes.push_back(std::atoi(argv[i]));
  if (sizes.empty()) sizes = {4096, 8192};
  cublasHandle_t h;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) return 1;
  cublasSetMathMode(h, CUBLAS_PEDANTIC_MATH);
  timer tm;
  for (int n : sizes) {
    const std::size_t nn = std::size_t(n) * n;
    rs::array2d<float> A(n, n, rs::device::cuda(0)), B(n, n, rs::device::cuda(0)), C(n, n, rs::device::cuda(0)),
        R(n, n, rs::device::cuda(0));
    rs::random::fill_uniform(A.storage(), 1, 0, -1.f, 1.f);
    rs::random::fill_uniform(B.storage(), 2, 0, -1.f, 1.f);
    rs::synchronize(rs::device::cuda(0));
    const int reps = n <= 4096 ? 20 : 5;
    const double flop = 2.0 * double(n) * n * n;
    const float one = 1.f, zero = 0.f;
    // Row-major C = A B is column-major C^T = B^T A^T.
    auto cublas = [&] { cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, B.data(), n, A.data(), n, &zero, R.data(), n); };
    const double cu_ms = tm.median_ms(cublas, reps, 1);
    const double cu_tf = flop / (cu_ms * 1e9);
    std::vector<float> ref(nn), got(nn);
    CHECK(cudaMemcpy(ref.data(), R.data(), nn * 4, cudaMemcpyDeviceToHost));
    std::printf("n = %d: cuBLAS FP32 %.3f ms, %.1f TFLOP/s\n", n, cu_ms, cu_tf);
    auto report = [&](const char* name, double ms) {
      CHECK(cudaMemcpy(got.data(), C.data(), nn * 4, cudaMemcpyDeviceToHost));
      double num = 0, den = 0;
      for (std::size_t i = 0; i < nn; i += 7) {
        num += (double(got[i]) - ref[i]) * (double(got[i]) - ref[i]);
        den += double(ref[i]) * ref[i];
      }
      std::printf("  %-44s %8.3f ms  %5.1f TFLOP/s  %.3f x cuBLAS  rel. err %.1e%s\n", name, ms, flop / (ms * 1e9),
                  cu_ms / ms, std::sqrt(num / den), std::sqrt(num / den) < 1e-5 ? "" : "  WRONG");
    };
    auto variant = [&](const char* name, auto kernel, int bm, int bn, int threads) {
      CHECK(cudaMemset(C.data(), 0xff, nn * 4));
      const dim3 grid(unsigned(n / bn), unsigned(n / bm));
      const double ms = tm.median_ms([&] { kernel<<<grid, threads>>>(n, A.data(), B.data(), C.data()); }, reps, 1);
      report(name, ms);
    };
    CHECK(cudaMemset(C.data(), 0xff, nn * 4));
    report("library tuned (rs::matmul)",
           tm.median_ms([&] { rs::matmul(A, B, C, rs::matmul_algo::tuned); }, reps, 1));
    variant("128x128, BK 8, 8x8, 1 block/SM (the library's)", sgemm<128, 128, 8, 8, 8, 1>, 128, 128, 256);
    variant("128x128, BK 8, 8x8, 2 blocks/SM", sgemm<128, 128, 8, 8, 8, 2>, 128, 128, 256);
    variant("128x128, BK 8, 8x8, 2 blocks/SM, warp 4x8", sgemm<128, 128, 8, 8, 8, 2, true>, 128, 128, 256);
    variant("128x128, BK 8, 8x8, 2 blocks/SM, groups of 4", sgemm<128, 128, 8, 8, 8, 2, false, 4>, 128, 128, 256);
    variant("128x128, BK 8, 8x8, 2 blocks/SM, groups of 8", sgemm<128, 128, 8, 8, 8, 2, false, 8>, 128, 128, 256);
    variant("128x128, BK 8, 8x8, 2 blocks/SM, groups of 16", sgemm<128, 128, 8, 8, 8, 2, false, 16>, 128, 128, 256);
    variant("128x128, BK 16, 8x8, 2 blocks/SM", sgemm<128, 128, 16, 8, 8, 2>, 128, 128, 256);
    variant("256x128, BK 8, 16x8, 1 block/SM", sgemm<256, 128, 8, 16, 8, 1>, 256, 128, 256);
    variant("128x64, BK 16, 8x8, 2 blocks/SM", sgemm<128, 64, 16, 8, 8, 2>, 128, 64, 128);
    variant("64x128, BK 16, 8x8, 3 blocks/SM", sgemm<64, 128, 16, 8, 8, 3>, 64, 128, 128);
    variant("128x128, BK 8, 16x8, 2 blocks/SM", sgemm<128, 128, 8, 16, 8, 2>, 128, 128, 128);
    variant("128x128, BK 16, 16x8, 2 blocks/SM", sgemm<128, 128, 16, 16, 8, 2>, 128, 128, 128);
  }
  cublasDestroy(h);
  return 0;
}
