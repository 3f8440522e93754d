#pragma once
/// @file matmul.hpp
/// C = alpha * A * B + beta * C on row-major 2-D arrays of any shape, by one of the ladder's algorithms:
///
///   device  algo          what
///   cpu     naive         the triple loop (rows of C over OpenMP threads)
///   cpu     blocked       cache tiles, OpenMP threads, a vectorized register-tile inner loop
///   cpu     vendor        OpenBLAS
///   cuda    naive         a thread per element of C, reading global memory only
///   cuda    shared        the seed's 16 x 16 shared-memory tiles
///   cuda    tuned         128 x 128 block tiles, 8 x 8 register tiles per thread, double-buffered
///   cuda    vendor        cuBLAS, pedantic FP32 (no tensor cores)
///   cuda    vendor_tf32   cuBLAS with TF32 tensor cores (about 3 decimal digits)
///   any     automatic     vendor
///
/// float on every algorithm; double on the CPU algorithms and on vendor. Asynchronous on C's stream.
///
/// Thread safety: multiplies may run concurrently from several threads on their own streams. cuBLAS
/// handles are per thread and device (a handle's stream and math mode are its own, so one shared by
/// two threads would run one's product on the other's stream).

#include <string>

#include "resident/detail/source_location.hpp"
#include "resident/memory/array.hpp"

namespace resident {

/// The matrix-multiply algorithms (see the table above); automatic picks vendor.
enum class matmul_algo { automatic, naive, blocked, shared, tuned, vendor, vendor_tf32 };

/// "naive", "blocked", ...; parse_matmul_algo is its inverse (@throws invalid_argument).
std::string to_string(matmul_algo a);
/// The algorithm named `name` ("naive", "blocked", ...). @throws invalid_argument listing the names.
matmul_algo parse_matmul_algo(const std::string& name);

/// True when algo runs on d for element type T (sizeof 4: float, 8: double).
bool matmul_supported(matmul_algo algo, device d, std::size_t element_size);

namespace detail {
struct gemm_args {
  std::size_t m, n, k;
  const void *a, *b;
  void* c;
  std::size_t lda, ldb, ldc;
  double alpha, beta;
  std::size_t element_size;  ///< 4 or 8
  stream_ref stream;
};
/// The one entry of every product: checks the algorithm, opens the call's profile scope at `where`, runs it.
void matmul(const gemm_args& g, matmul_algo algo,
            resident::source_location where = resident::source_location::current());
void matmul_cuda(const gemm_args& g, matmul_algo algo);  // src/linalg/matmul_cuda.cu
void check_matmul(std::size_t am, std::size_t ak, std::size_t bk, std::size_t bn, std::size_t cm, std::size_t cn,
                  const void* a, std::size_t a_bytes, const void* b, std::size_t b_bytes, const void* c,
                  std::size_t c_bytes, device da, device db, device dc);
}  // namespace detail

/// C = alpha * A * B + beta * C. A is m x k, B is k x n, C is m x n, all on one device. Runs on C's
/// stream, after the work queued on A's and B's streams (no host synchronization).
/// @throws shape_mismatch (inner or outer dimensions), device_mismatch, invalid_argument (C overlaps A
/// or B; an algorithm that does not run on this device or type; a moved-from array; an extent above
/// INT_MAX for vendor or a GPU algorithm, or more rows than a GPU kernel's grid covers), all before any work.
template <class T>
void matmul(const array2d<T>& A, const array2d<T>& B, array2d<T>& C, matmul_algo algo = matmul_algo::automatic,
            T alpha = T(1), T beta = T(0), resident::source_location where = resident::source_location::current()) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "matmul takes float or double");
  A.storage().check_live();
  B.storage().check_live();
  C.storage().check_live();
  detail::check_matmul(A.rows(), A.cols(), B.rows(), B.cols(), C.rows(), C.cols(), A.data(),
                       A.storage().bytes(), B.data(), B.storage().bytes(), C.data(), C.storage().bytes(), A.device(),
                       B.device(), C.device());
  // The stream rule: the product runs on C's stream, after the work queued on A's and B's.
  for (stream_ref s : {A.stream(), B.stream()})
    if (s.native() != C.stream().native()) C.stream().wait_for(s);
  detail::matmul({A.rows(), B.cols(), A.cols(), A.data(), B.data(), C.data(), A.ld(), B.ld(), C.ld(), double(alpha),
                  double(beta), sizeof(T), C.stream()},
                 algo, where);
}

}  // namespace resident
