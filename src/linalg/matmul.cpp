// The matmul front door and the CPU algorithms (host compiler, OpenMP through cpu_loop, OpenBLAS).
#include "resident/linalg/matmul.hpp"

#include <cblas.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "backend/runtime.hpp"
#include "resident/insight/detail/call_scope.hpp"
#include "resident/launch/launch.hpp"
#include "resident/memory/ledger.hpp"

namespace resident {

std::string to_string(matmul_algo a) {
  switch (a) {
    case matmul_algo::automatic: return "auto";
    case matmul_algo::naive: return "naive";
    case matmul_algo::blocked: return "blocked";
    case matmul_algo::shared: return "shared";
    case matmul_algo::tuned: return "tuned";
    case matmul_algo::vendor: return "vendor";
    case matmul_algo::vendor_tf32: return "vendor_tf32";
  }
  return "?";
}

matmul_algo parse_matmul_algo(const std::string& s) {
  for (auto a : {matmul_algo::automatic, matmul_algo::naive, matmul_algo::blocked, matmul_algo::shared,
                 matmul_algo::tuned, matmul_algo::vendor, matmul_algo::vendor_tf32})
    if (to_string(a) == s) return a;
  RESIDENT_FAIL("unknown matmul algorithm '" + s +
                         "': use auto, naive, blocked, shared, tuned, vendor or vendor_tf32");
}

bool matmul_supported(matmul_algo a, device d, std::size_t es) {
  if (a == matmul_algo::automatic || a == matmul_algo::vendor) return true;
  return detail::backend_of(d).matmul_supported(a, es);
}

namespace detail {
namespace {

bool overlaps(const void* a, std::size_t na, const void* b, std::size_t nb) {
  auto x = reinterpret_cast<std::uintptr_t>(a), y = reinterpret_cast<std::uintptr_t>(b);
  return na && nb && x < y + nb && y < x + na;
}

template <class T>
void cpu_naive(const gemm_args& g) {
  const T* A = static_cast<const T*>(g.a);
  const T* B = static_cast<const T*>(g.b);
  T* C = static_cast<T*>(g.c);
  const T alpha = T(g.alpha), beta = T(g.beta);
  // k = 0 (alpha = 0) still scales C: its work counted as one term a row element.
  cpu_loop(g.m, g.n * std::max<std::size_t>(g.k, 1)).run([&](cpu_piece rows) {
    for (std::size_t i = rows.first; i < rows.last; ++i)
      for (std::size_t j = 0; j < g.n; ++j) {
        T s = 0;
        for (std::size_t p = 0; p < g.k; ++p) s += A[i * g.lda + p] * B[p * g.ldb + j];
        T& c = C[i * g.ldc + j];
        c = beta == T(0) ? alpha * s : alpha * s + beta * c;
      }
  });
}

// The register tile of the blocked algorithm: acc (MR x NR) += A[rows, p0:p1] * B[p0:p1, cols], with
// NR = 64 bytes of T (one AVX-512 vector, two AVX2 ones). Built for several instruction sets and chosen
// at run time, so a portable build still uses the machine's widest vectors and its FMA units.
constexpr std::size_t MR = 4;
template <class T>
constexpr std::size_t NR = 64 / sizeof(T);

#define RESIDENT_MICRO_KERNEL(T)                                                                       \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"))) void micro_kernel(      \
      const T* a, std::size_t lda, const T* b, std::size_t ldb, std::size_t kc, T* acc) {             \
    T c0[NR<T>] = {}, c1[NR<T>] = {}, c2[NR<T>] = {}, c3[NR<T>] = {};                                 \
    for (std::size_t p = 0; p < kc; ++p) {                                                           \
      const T* bp = b + p * ldb;                                                                     \
      const T a0 = a[p], a1 = a[lda + p], a2 = a[2 * lda + p], a3 = a[3 * lda + p];                  \
      for (std::size_t q = 0; q < NR<T>; ++q) {                                                      \
        c0[q] += a0 * bp[q];                                                                         \
        c1[q] += a1 * bp[q];                                                                         \
        c2[q] += a2 * bp[q];                                                                         \
        c3[q] += a3 * bp[q];                                                                         \
      }                                                                                              \
    }                                                                                                \
    for (std::size_t q = 0; q < NR<T>; ++q) {                                                        \
      acc[q] = c0[q];                                                                                \
      acc[NR<T> + q] = c1[q];                                                                        \
      acc[2 * NR<T> + q] = c2[q];                                                                    \
      acc[3 * NR<T> + q] = c3[q];                                                                    \
    }                                                                                                \
  }
RESIDENT_MICRO_KERNEL(float)
RESIDENT_MICRO_KERNEL(double)
#undef RESIDENT_MICRO_KERNEL

// Cache-blocked: a KC x NC panel of B is packed once into NR-wide column strips (zero-padded at the
// right edge), so the register tile above reads it contiguously whatever B's leading dimension; the
// threads then share the panel, each taking MC rows of C at a time.
template <class T>
void cpu_blocked(const gemm_args& g) {
  constexpr std::size_t MC = 64, KC = 256, NC = 512, nr = NR<T>;
  const T* A = static_cast<const T*>(g.a);
  const T* B = static_cast<const T*>(g.b);
  T* C = static_cast<T*>(g.c);
  const T alpha = T(g.alpha), beta = T(g.beta);
  const std::size_t m = g.m, n = g.n, k = g.k;
  // C = beta * C first, so the blocks below only accumulate alpha * A * B.
  cpu_loop(m, n).run([&](cpu_piece rows) {
    for (std::size_t i = rows.first; i < rows.last; ++i)
      for (std::size_t j = 0; j < n; ++j) {
        T& c = C[i * g.ldc + j];
        c = beta == T(0) ? T(0) : beta * c;
      }
  });
  std::vector<T> panel(KC * NC);  // (NC / nr strips) x (KC rows) x (nr columns)
  const std::size_t row_blocks = (m + MC - 1) / MC;
  for (std::size_t p0 = 0; p0 < k; p0 += KC) {
    const std::size_t kc = std::min(k, p0 + KC) - p0;
    for (std::size_t j0 = 0; j0 < n; j0 += NC) {
      const std::size_t nc = std::min(n, j0 + NC) - j0, strips = (nc + nr - 1) / nr;
      cpu_loop(strips * kc, nr).run([&](cpu_piece rows) {
        for (std::size_t sp = rows.first; sp < rows.last; ++sp) {
          const std::size_t st = sp / kc, p = sp % kc;
          T* dst = panel.data() + (st * kc + p) * nr;
          const T* src = B + (p0 + p) * g.ldb + j0 + st * nr;
          const std::size_t w = std::min(nr, nc - st * nr);
          for (std::size_t q = 0; q < nr; ++q) dst[q] = q < w ? src[q] : T(0);
        }
      });
      cpu_loop(row_blocks, MC * nc, cut::one_each).run([&](cpu_piece blocks) {
        for (std::size_t rb = blocks.first; rb < blocks.last; ++rb) {
          const std::size_t i0 = rb * MC, i1 = std::min(m, i0 + MC);
          T acc[MR * nr];
          for (std::size_t i = i0; i < i1; i += MR) {
            const std::size_t mr = std::min(MR, i1 - i);
            for (std::size_t st = 0; st < strips; ++st) {
              const T* bs = panel.data() + st * kc * nr;
              if (mr == MR) {
                micro_kernel(A + i * g.lda + p0, g.lda, bs, nr, kc, acc);
              } else {  // the last rows
                std::fill(acc, acc + MR * nr, T(0));
                for (std::size_t p = 0; p < kc; ++p)
                  for (std::size_t r = 0; r < mr; ++r) {
                    const T a = A[(i + r) * g.lda + p0 + p];
                    for (std::size_t q = 0; q < nr; ++q) acc[r * nr + q] += a * bs[p * nr + q];
                  }
              }
              const std::size_t j = j0 + st * nr, w = std::min(nr, nc - st * nr);
              for (std::size_t r = 0; r < mr; ++r)
                for (std::size_t q = 0; q < w; ++q) C[(i + r) * g.ldc + j + q] += alpha * acc[r * nr + q];
            }
          }
        }
      });
    }
  }
}

void cpu_vendor(const gemm_args& g) {
  const int m = int(g.m), n = int(g.n), k = int(g.k);
  const int lda = std::max(1, int(g.lda)), ldb = std::max(1, int(g.ldb));  // BLAS asks for >= 1
  if (g.element_size == 4)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, float(g.alpha), static_cast<const float*>(g.a),
                lda, static_cast<const float*>(g.b), ldb, float(g.beta), static_cast<float*>(g.c),
                int(g.ldc));
  else
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, g.alpha, static_cast<const double*>(g.a),
                lda, static_cast<const double*>(g.b), ldb, g.beta, static_cast<double*>(g.c),
                int(g.ldc));
}

// BLAS (OpenBLAS, cuBLAS) and the GPU kernels take int extents: a larger one would wrap, to a negative
// value BLAS refuses with a printed complaint (C left as it was) or to a small one that reads out of
// bounds. The GPU kernels also cover C's rows with grid.y, at most 65535 blocks.
void check_extents(const gemm_args& g, matmul_algo algo, device d) {
  const bool blas = algo == matmul_algo::vendor || algo == matmul_algo::vendor_tf32;
  if (!backend_of(d).matmul_int_extents(algo)) return;  // the CPU's naive and blocked index with size_t
  const std::pair<const char*, std::size_t> extents[] = {{"m", g.m},     {"n", g.n},     {"k", g.k},
                                                         {"lda", g.lda}, {"ldb", g.ldb}, {"ldc", g.ldc}};
  constexpr auto most = std::size_t(std::numeric_limits<int>::max());
  for (auto [name, v] : extents)
    if (v > most)
      RESIDENT_FAIL("matmul: " + std::string(name) + " = " + std::to_string(v) + " exceeds " + std::to_string(most) +
                    ", the largest extent algorithm '" + to_string(algo) + "' takes on " + d.name() +
                    (d.is_cpu() ? " (BLAS counts in int); use naive or blocked, or split the product into blocks"
                                : "; split the product into blocks of rows and columns"));
  if (blas) return;
  const std::size_t tile = algo == matmul_algo::tuned ? 128 : 16, rows = 65535 * tile;
  if (g.m > rows)
    RESIDENT_FAIL("matmul: algorithm '" + to_string(algo) + "' on a GPU takes at most " + std::to_string(rows) +
                  " rows of A (65535 blocks of " + std::to_string(tile) + "), got m = " + std::to_string(g.m) +
                  (algo == matmul_algo::tuned ? "; use vendor" : "; use tuned or vendor") +
                  ", or split A's rows into blocks");
}

}  // namespace

void check_matmul(std::size_t am, std::size_t ak, std::size_t bk, std::size_t bn, std::size_t cm, std::size_t cn,
                  const void* a, std::size_t a_bytes, const void* b, std::size_t b_bytes, const void* c,
                  std::size_t c_bytes, device da, device db, device dc) {
  auto dims = [](std::size_t r, std::size_t c) { return std::to_string(r) + " x " + std::to_string(c); };
  if (ak != bk)
    RESIDENT_FAIL("matmul: A is " + dims(am, ak) + " and B is " + dims(bk, bn) +
                         ": A's columns must equal B's rows", shape_mismatch);
  if (cm != am || cn != bn)
    RESIDENT_FAIL("matmul: C is " + dims(cm, cn) + " but A * B is " + dims(am, bn), shape_mismatch);
  if (!(da == dc) || !(db == dc))
    RESIDENT_FAIL("matmul: A on " + da.name() + ", B on " + db.name() + ", C on " + dc.name() +
                          "; all three must be on one device", device_mismatch);
  if (overlaps(c, c_bytes, a, a_bytes) || overlaps(c, c_bytes, b, b_bytes))
    RESIDENT_FAIL("matmul: C overlaps A or B; write the product into a separate array");
}

void matmul(const gemm_args& g, matmul_algo algo, resident::source_location where) {
  const device d = g.stream.device();
  if (algo == matmul_algo::automatic) algo = matmul_algo::vendor;
  if (!matmul_supported(algo, d, g.element_size))
    RESIDENT_FAIL("matmul: algorithm '" + to_string(algo) + "' does not run on " + d.name() + " for " +
                           (g.element_size == 4 ? "float" : "double") +
                           (d.is_cpu()              ? "; the CPU offers naive, blocked and vendor"
                            : g.element_size == 4 ? "; the GPU offers naive, shared, tuned, vendor_tf32 and vendor"
                                                  : "; the GPU offers vendor for double (the others are float's)"));
  if (g.m == 0 || g.n == 0) return;
  check_extents(g, algo, d);
  // alpha = 0: BLAS's rule, A and B not read (C = beta * C: an infinity in A gives no NaN), whichever
  // algorithm was asked for: a product of no terms (k = 0), which every algorithm reads as that.
  gemm_args h = g;
  if (h.alpha == 0) h.k = 0;
  const std::uint64_t es = g.element_size, c_bytes = std::uint64_t(g.m) * g.n * es;
  const call_scope scope("matmul", g.stream,
                         {(std::uint64_t(g.m) * h.k + std::uint64_t(h.k) * g.n) * es + (g.beta != 0 ? c_bytes : 0),
                          c_bytes, std::uint64_t(g.m) * g.n, 0, g.a, g.c},
                         call_kind::compute, where);
  backend_of(d).matmul(h, algo);
}

void matmul_cpu(const gemm_args& g, matmul_algo algo) {
  if (algo == matmul_algo::vendor)
    cpu_vendor(g);
  else if (g.element_size == 4)
    algo == matmul_algo::naive ? cpu_naive<float>(g) : cpu_blocked<float>(g);
  else
    algo == matmul_algo::naive ? cpu_naive<double>(g) : cpu_blocked<double>(g);
  record_kernel(g.stream.device());
}

}  // namespace detail
}  // namespace resident
