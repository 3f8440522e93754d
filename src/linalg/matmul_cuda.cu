// The GPU rungs of the matmul ladder (nvcc): naive, shared tiles, tuned, and cuBLAS.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>

#include "resident/detail/cuda_check.hpp"
#include "resident/detail/cuda_runtime.hpp"
#include "resident/detail/library_check.hpp"
#include "resident/detail/per_device.hpp"
#include "resident/launch/detail/launch_cuda.cuh"
#include "resident/linalg/matmul.hpp"
#include "resident/memory/ledger.hpp"

namespace resident::detail {
namespace {

struct gemm_f32 {
  int m, n, k;
  float alpha, beta;
  const float* a;
  int lda;
  const float* b;
  int ldb;
  float* c;
  int ldc;
};

__device__ __forceinline__ void store_c(const gemm_f32& g, int r, int col, float acc) {
  float* c = g.c + std::size_t(r) * g.ldc + col;
  *c = g.beta == 0.f ? g.alpha * acc : g.alpha * acc + g.beta * *c;
}

// One thread per element of C: threadIdx.x runs along a row of C, so neighbouring threads read
// neighbouring elements of B and write neighbouring elements of C (coalesced).
__global__ void naive_kernel(gemm_f32 g) {
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  const int row = blockIdx.y * blockDim.y + threadIdx.y;
  if (row >= g.m || col >= g.n) return;
  float s = 0.f;
  for (int p = 0; p < g.k; ++p) s += g.a[std::size_t(row) * g.lda + p] * g.b[std::size_t(p) * g.ldb + col];
  store_c(g, row, col, s);
}

// The seed's shared-memory kernel: (T, T) tiles of A and B staged in shared memory, zero-padded at the
// edges so any shape works.
template <int T>
__global__ void shared_kernel(gemm_f32 g) {
  __shared__ float as[T][T];  // (T rows of A, T columns of the k-slab)
  __shared__ float bs[T][T];  // (T rows of the k-slab, T columns of B)
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int col = blockIdx.x * T + tx, row = blockIdx.y * T + ty;
  float s = 0.f;
  for (int p0 = 0; p0 < g.k; p0 += T) {
    as[ty][tx] = row < g.m && p0 + tx < g.k ? g.a[std::size_t(row) * g.lda + p0 + tx] : 0.f;
    bs[ty][tx] = p0 + ty < g.k && col < g.n ? g.b[std::size_t(p0 + ty) * g.ldb + col] : 0.f;
    __syncthreads();
#pragma unroll
    for (int q = 0; q < T; ++q) s += as[ty][q] * bs[q][tx];
    __syncthreads();
  }
  if (row < g.m && col < g.n) store_c(g, row, col, s);
}

// Tuned FP32: a (128, 128) tile of C per block of 256 threads, two blocks resident per SM (the register
// budget that allows: 128 per thread), each thread an 8 x 8 register tile split into four 4 x 4
// quadrants (rows ty*4 and 64 + ty*4, columns tx*4 and 64 + tx*4) so that a warp's 16-byte
// shared-memory reads hit consecutive addresses. k advances in slabs of 8, double-buffered: the next slab
// is fetched into registers while the current one is multiplied. Checked: blocks wholly inside C with
// 16-byte aligned rows load and store without bounds checks (a block-uniform branch), the guarded path
// serves the edges and any shape. Unchecked (chosen on the host when every dimension is a multiple of
// the tiles and every row 16-byte aligned): no checks at all, a few percent faster than the checked form
// (docs/tuning.md).
constexpr int TBM = 128, TBN = 128, TBK = 8;

template <bool Checked>
__global__ void __launch_bounds__(256, 2) tuned_kernel(gemm_f32 g) {
  __shared__ __align__(16) float as[2][TBK][TBM];  // A slab, transposed: as[k][m]
  __shared__ __align__(16) float bs[2][TBK][TBN];  // B slab: bs[k][n]
  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  const int row0 = blockIdx.y * TBM, col0 = blockIdx.x * TBN;
  // Loading: A (128 x 8): thread -> row tid / 2, columns (tid % 2) * 4 .. +3;
  //          B (8 x 128): thread -> row tid / 32, columns (tid % 32) * 4 .. +3.
  const int a_r = tid / 2, a_c = (tid % 2) * 4, b_r = tid / 32, b_c = (tid % 32) * 4;
  const bool a_vec = g.lda % 4 == 0 && reinterpret_cast<std::uintptr_t>(g.a) % 16 == 0;
  const bool b_vec = g.ldb % 4 == 0 && reinterpret_cast<std::uintptr_t>(g.b) % 16 == 0;
  const bool inside = !Checked || (a_vec && b_vec && row0 + TBM <= g.m && col0 + TBN <= g.n);
  const float* pa = g.a + std::size_t(min(row0 + a_r, g.m - 1)) * g.lda;  // a valid row either way
  const float* pb = g.b + col0 + b_c;
  float4 ra, rb;
  auto fetch = [&](int p0) {
    if (!Checked || (inside && p0 + TBK <= g.k)) {
      ra = *reinterpret_cast<const float4*>(pa + p0 + a_c);
      rb = *reinterpret_cast<const float4*>(pb + std::size_t(p0 + b_r) * g.ldb);
      return;
    }
    const int ar = row0 + a_r, ac = p0 + a_c, br = p0 + b_r, bc = col0 + b_c;
    ra.x = ar < g.m && ac < g.k ? pa[ac] : 0.f;
    ra.y = ar < g.m && ac + 1 < g.k ? pa[ac + 1] : 0.f;
    ra.z = ar < g.m && ac + 2 < g.k ? pa[ac + 2] : 0.f;
    ra.w = ar < g.m && ac + 3 < g.k ? pa[ac + 3] : 0.f;
    const float* q = g.b + std::size_t(br) * g.ldb + bc;
    rb.x = br < g.k && bc < g.n ? q[0] : 0.f;
    rb.y = br < g.k && bc + 1 < g.n ? q[1] : 0.f;
    rb.z = br < g.k && bc + 2 < g.n ? q[2] : 0.f;
    rb.w = br < g.k && bc + 3 < g.n ? q[3] : 0.f;
  };
  auto stash = [&](int buf) {
    as[buf][a_c + 0][a_r] = ra.x;
    as[buf][a_c + 1][a_r] = ra.y;
    as[buf][a_c + 2][a_r] = ra.z;
    as[buf][a_c + 3][a_r] = ra.w;
    *reinterpret_cast<float4*>(&bs[buf][b_r][b_c]) = rb;
  };

  float acc[8][8] = {};
  fetch(0);
  stash(0);
  __syncthreads();
  int buf = 0;
  for (int p0 = 0; p0 < g.k; p0 += TBK) {
    const bool more = p0 + TBK < g.k;
    if (more) fetch(p0 + TBK);
#pragma unroll
    for (int q = 0; q < TBK; ++q) {
      float a[8], b[8];
      *reinterpret_cast<float4*>(a) = *reinterpret_cast<const float4*>(&as[buf][q][ty * 4]);
      *reinterpret_cast<float4*>(a + 4) = *reinterpret_cast<const float4*>(&as[buf][q][64 + ty * 4]);
      *reinterpret_cast<float4*>(b) = *reinterpret_cast<const float4*>(&bs[buf][q][tx * 4]);
      *reinterpret_cast<float4*>(b + 4) = *reinterpret_cast<const float4*>(&bs[buf][q][64 + tx * 4]);
#pragma unroll
      for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] += a[i] * b[j];
    }
    if (more) {
      stash(buf ^ 1);  // the other buffer: nobody reads it during this slab
      __syncthreads();
      buf ^= 1;
    }
  }
  const bool c_vec = !Checked || (inside && g.ldc % 4 == 0 && reinterpret_cast<std::uintptr_t>(g.c) % 16 == 0);
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int r = row0 + (i < 4 ? ty * 4 + i : 64 + ty * 4 + i - 4);
#pragma unroll
    for (int j = 0; j < 8; j += 4) {
      const int c = col0 + (j < 4 ? tx * 4 : 64 + tx * 4);
      if (c_vec) {
        auto* out = reinterpret_cast<float4*>(g.c + std::size_t(r) * g.ldc + c);
        float4 v = make_float4(g.alpha * acc[i][j], g.alpha * acc[i][j + 1], g.alpha * acc[i][j + 2],
                               g.alpha * acc[i][j + 3]);
        if (g.beta != 0.f) {
          const float4 old = *out;
          v.x += g.beta * old.x, v.y += g.beta * old.y, v.z += g.beta * old.z, v.w += g.beta * old.w;
        }
        *out = v;
      } else if (r < g.m) {
#pragma unroll
        for (int jj = 0; jj < 4; ++jj)
          if (c + jj < g.n) store_c(g, r, c + jj, acc[i][j + jj]);
      }
    }
  }
}

// One cuBLAS handle per thread and device, created on first use and destroyed when the thread ends (the
// main thread's before the CUDA runtime tears down). A handle carries its stream and math mode: one
// shared by two threads ran a product on the other thread's stream, unordered with its own work.
struct cublas_handles {
  detail::per_device<cublasHandle_t> h;
  ~cublas_handles() {
    for (auto x : h.all())
      if (x) cublasDestroy(x);
  }
};

cublasHandle_t handle_of(int dev) {
  thread_local cublas_handles handles;
  if (!handles.h.cuda(dev)) {
    device_scope current(device::cuda(dev));
    RESIDENT_CUBLAS_TRY(cublasCreate(&handles.h.cuda(dev)));
  }
  return handles.h.cuda(dev);
}

void vendor(const gemm_args& a, bool tf32) {
  cublasHandle_t h = handle_of(a.stream.device().index());
  RESIDENT_CUBLAS_TRY(cublasSetStream(h, a.stream.native()));
  RESIDENT_CUBLAS_TRY(cublasSetMathMode(h, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_PEDANTIC_MATH));
  // Row-major C = A B is column-major C^T = B^T A^T: pass B first, dimensions swapped. Leading
  // dimensions of empty operands (k = 0) are 0 here; BLAS asks for at least 1.
  const int m = int(a.m), n = int(a.n), k = int(a.k);
  const int lda = std::max(1, int(a.lda)), ldb = std::max(1, int(a.ldb));
  if (a.element_size == 4) {
    const float alpha = float(a.alpha), beta = float(a.beta);
    RESIDENT_CUBLAS_TRY(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &alpha, static_cast<const float*>(a.b), ldb,
                           static_cast<const float*>(a.a), lda, &beta, static_cast<float*>(a.c), int(a.ldc)));
  } else {
    RESIDENT_CUBLAS_TRY(cublasDgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &a.alpha, static_cast<const double*>(a.b),
                           ldb, static_cast<const double*>(a.a), lda, &a.beta,
                           static_cast<double*>(a.c), int(a.ldc)));
  }
}

// Whether the tuned kernel's tiles cover C exactly with 16-byte aligned rows: its unchecked form.
bool tiles_exactly(const gemm_f32& g) {
  auto aligned = [](const float* p, int ld) { return ld % 4 == 0 && reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
  return g.m % TBM == 0 && g.n % TBN == 0 && g.k % TBK == 0 && g.k > 0 && aligned(g.a, g.lda) && aligned(g.b, g.ldb) &&
         aligned(g.c, g.ldc);
}

unsigned blocks_for(std::size_t n, int per) { return unsigned((n + std::size_t(per) - 1) / std::size_t(per)); }

}  // namespace

void matmul_cuda(const gemm_args& a, matmul_algo algo) {
  const device d = a.stream.device();
  device_scope current(d);  // kernels and cuBLAS on d's stream need d current; the caller's is restored
  if (algo == matmul_algo::vendor || algo == matmul_algo::vendor_tf32) {
    vendor(a, algo == matmul_algo::vendor_tf32);
    record_kernel(d);
    return;
  }
  gemm_f32 g{int(a.m), int(a.n), int(a.k), float(a.alpha), float(a.beta), static_cast<const float*>(a.a),
             int(a.lda), static_cast<const float*>(a.b), int(a.ldb), static_cast<float*>(a.c), int(a.ldc)};
  const stream_ref s = a.stream;
  switch (algo) {
    case matmul_algo::naive:
      launch_kernel(naive_kernel, s, {dims(blocks_for(a.n, 16), blocks_for(a.m, 16)), dims(16, 16)}, g);
      break;
    case matmul_algo::shared:
      launch_kernel(shared_kernel<16>, s, {dims(blocks_for(a.n, 16), blocks_for(a.m, 16)), dims(16, 16)}, g);
      break;
    default:
      launch_kernel(tiles_exactly(g) ? tuned_kernel<false> : tuned_kernel<true>, s,
                    {dims(blocks_for(a.n, TBN), blocks_for(a.m, TBM)), dims(256)}, g);
      break;
  }
}

}  // namespace resident::detail
