#include <climits>
#include <tuple>

#include "busy.hpp"
#include "resident/linalg/matmul.hpp"
#include "support.hpp"

namespace rs = resident;
using rs::test::backend;

namespace {

// ||C - (alpha A B + beta C0)|| / || |alpha| |A||B| + |beta C0| || with the reference in double, over
// OpenMP threads. Scaled by the magnitudes, not by the result: a short dot product that cancels to near
// zero is still computed well when its error is small next to the terms it summed.
template <class T>
double gemm_error(const std::vector<T>& a, const std::vector<T>& b, const std::vector<T>& c0, const std::vector<T>& c,
                  std::size_t m, std::size_t n, std::size_t k, double alpha, double beta) {
  double num = 0, den = 0;
#pragma omp parallel for reduction(+ : num, den)
  for (long i = 0; i < long(m); ++i)
    for (std::size_t j = 0; j < n; ++j) {
      double s = 0, magnitude = 0;
      for (std::size_t p = 0; p < k; ++p) {
        const double t = double(a[std::size_t(i) * k + p]) * double(b[p * n + j]);
        s += t;
        magnitude += std::abs(t);
      }
      const double c_term = beta * double(c0[std::size_t(i) * n + j]);
      const double ref = alpha * s + c_term;
      const double scale = std::abs(alpha) * magnitude + std::abs(c_term);
      const double got = double(c[std::size_t(i) * n + j]);
      if (!std::isfinite(got)) num += INFINITY;
      num += (got - ref) * (got - ref);
      den += scale * scale;
    }
  return std::sqrt(num / (den > 0 ? den : 1));
}

double tolerance(rs::matmul_algo a, std::size_t es) {
  if (a == rs::matmul_algo::vendor_tf32) return 5e-3;
  return es == 4 ? 2e-5 : 1e-12;
}

template <class T>
void check_algo(rs::device dev, rs::matmul_algo algo, std::size_t m, std::size_t k, std::size_t n, double alpha,
                double beta) {
  auto seed = rs::test::fresh_seed();
  SCOPED_TRACE(rs::to_string(algo) + " " + std::to_string(m) + "x" + std::to_string(k) + "x" + std::to_string(n) +
               " seed " + std::to_string(seed));
  auto ha = rs::test::random_vector<T>(m * k, seed);
  auto hb = rs::test::random_vector<T>(k * n, seed + 1);
  auto hc = rs::test::random_vector<T>(m * n, seed + 2);
  if (beta == 0) std::fill(hc.begin(), hc.end(), rs::test::poison<T>());  // must be overwritten, not read
  auto A = rs::to_device(std::span<const T>(ha), m, k, dev);
  auto B = rs::to_device(std::span<const T>(hb), k, n, dev);
  auto C = rs::to_device(std::span<const T>(hc), m, n, dev);
  rs::matmul(A, B, C, algo, T(alpha), T(beta));
  auto got = C.to_host();
  EXPECT_LT(gemm_error(ha, hb, hc, got, m, k == 0 ? n : n, k, alpha, beta == 0 ? 0.0 : beta), tolerance(algo, sizeof(T)));
}

using matmuls = backend;

std::vector<rs::matmul_algo> float_algos(rs::device d) {
  if (d.is_cpu()) return {rs::matmul_algo::naive, rs::matmul_algo::blocked, rs::matmul_algo::vendor};
  return {rs::matmul_algo::naive, rs::matmul_algo::shared, rs::matmul_algo::tuned, rs::matmul_algo::vendor,
          rs::matmul_algo::vendor_tf32};
}

TEST_P(matmuls, every_algorithm_on_awkward_shapes) {
  const std::tuple<std::size_t, std::size_t, std::size_t> shapes[] = {
      {1, 1, 1}, {1, 37, 1}, {1, 64, 200}, {300, 64, 1}, {127, 255, 63}, {129, 8, 131}, {64, 1, 64}};
  for (auto algo : float_algos(dev))
    for (auto [m, k, n] : shapes) check_algo<float>(dev, algo, m, k, n, 1.0, 0.0);
}

TEST_P(matmuls, large_odd_shape_with_alpha_and_beta) {
  for (auto algo : float_algos(dev)) {
    if (algo == rs::matmul_algo::naive && dev.is_cpu() && rs::debug_checks) continue;  // minutes under ASan
    check_algo<float>(dev, algo, 1000, 777, 1234, 0.5, -2.0);
  }
}

// Rows a multiple of four floats: interior tiles take the tuned kernel's unchecked 16-byte path, edge
// tiles (and the last, partial k-slab when k % 8 != 0) its checked one, both with beta reading C.
TEST_P(matmuls, interior_and_edge_tiles_with_aligned_rows) {
  for (auto algo : float_algos(dev)) {
    check_algo<float>(dev, algo, 300, 260, 388, 0.5, -2.0);
    check_algo<float>(dev, algo, 256, 512, 384, 1.0, 0.0);  // tiles cover C exactly: no checks at all
    check_algo<float>(dev, algo, 128, 8, 256, 0.5, 1.5);
  }
}

TEST_P(matmuls, double_precision) {
  std::vector<rs::matmul_algo> algos{rs::matmul_algo::vendor};
  if (dev.is_cpu()) algos = {rs::matmul_algo::naive, rs::matmul_algo::blocked, rs::matmul_algo::vendor};
  for (auto algo : algos) {
    check_algo<double>(dev, algo, 127, 255, 63, 1.0, 0.0);
    check_algo<double>(dev, algo, 70, 33, 90, -1.5, 0.25);
  }
}

TEST_P(matmuls, zero_inner_dimension_scales_c) {
  for (auto algo : float_algos(dev)) check_algo<float>(dev, algo, 5, 0, 7, 1.0, 3.0);
}

TEST_P(matmuls, bad_inputs_are_typed_errors) {
  rs::array2d<float> A(4, 5, dev), B(6, 3, dev), C(4, 3, dev), B2(5, 3, dev), C2(4, 4, dev);
  EXPECT_THROW(rs::matmul(A, B, C), rs::shape_mismatch);
  EXPECT_THROW(rs::matmul(A, B2, C2), rs::shape_mismatch);
  try {
    rs::matmul(A, B, C);
  } catch (const rs::shape_mismatch& e) {
    EXPECT_NE(std::string(e.what()).find("A is 4 x 5 and B is 6 x 3"), std::string::npos) << e.what();
  }
  rs::array2d<float> S(5, 5, dev);
  EXPECT_THROW(rs::matmul(S, S, S), rs::invalid_argument) << "C aliasing A and B";
  if (dev.is_cuda()) {
    rs::array2d<float> host_b(5, 3, rs::device::cpu());
    EXPECT_THROW(rs::matmul(A, host_b, C), rs::device_mismatch);
    rs::array2d<double> Ad(4, 5, dev), Bd(5, 3, dev), Cd(4, 3, dev);
    EXPECT_THROW(rs::matmul(Ad, Bd, Cd, rs::matmul_algo::tuned), rs::invalid_argument);
  } else {
    EXPECT_THROW(rs::matmul(A, B2, C, rs::matmul_algo::tuned), rs::invalid_argument);
  }
  EXPECT_THROW(rs::parse_matmul_algo("fastest"), rs::invalid_argument);
  EXPECT_EQ(rs::parse_matmul_algo("vendor_tf32"), rs::matmul_algo::vendor_tf32);
}

// BLAS and the GPU kernels take int extents: one above INT_MAX used to wrap (BLAS printed a complaint
// and left C as it was). Refused before any work, through the call every matmul makes after its shape
// checks; no memory is touched, so none is allocated. An empty product stays accepted at any extent.
TEST_P(matmuls, extents_beyond_int_are_refused_before_any_work) {
  const std::size_t big = std::size_t(INT_MAX) + 1;
  const auto s = rs::default_stream(dev);
  auto gemm = [&](std::size_t m, std::size_t n, std::size_t k, std::size_t lda, std::size_t ldb, std::size_t ldc) {
    return rs::detail::gemm_args{m, n, k, nullptr, nullptr, nullptr, lda, ldb, ldc, 1.0, 0.0, sizeof(float), s};
  };
  std::vector<rs::matmul_algo> algos{rs::matmul_algo::vendor, rs::matmul_algo::automatic};
  if (dev.is_cuda()) algos = float_algos(dev);
  rs::scoped_ledger l(dev);
  for (auto algo : algos) {
    SCOPED_TRACE(rs::to_string(algo));
    rs::test::expect_invalid([&] { rs::detail::matmul(gemm(big, 1, 1, 1, 1, 1), algo); }, "m = 2147483648 exceeds");
    rs::test::expect_invalid([&] { rs::detail::matmul(gemm(1, big, 1, 1, big, big), algo); }, "n = 2147483648 exceeds");
    rs::test::expect_invalid([&] { rs::detail::matmul(gemm(1, 1, big, big, 1, 1), algo); }, "k = 2147483648 exceeds");
    rs::test::expect_invalid([&] { rs::detail::matmul(gemm(2, 1, 2, big, 1, 1), algo); }, "lda = 2147483648 exceeds");
    rs::test::expect_invalid([&] { rs::detail::matmul(gemm(2, 1, 2, 2, big, 1), algo); }, "ldb = 2147483648 exceeds");
    rs::test::expect_invalid([&] { rs::detail::matmul(gemm(2, 1, 2, 2, 1, big), algo); }, "ldc = 2147483648 exceeds");
    EXPECT_NO_THROW(rs::detail::matmul(gemm(big, 0, big, big, 1, 1), algo)) << "an empty product does nothing";
  }
  EXPECT_EQ(l.delta().kernels, 0u) << "a refused product reached the device";
}

// The GPU kernels cover C's rows with grid.y, at most 65535 blocks: more rows than that are refused
// naming the algorithm and its limit, not as a launch configuration the caller never wrote.
using matmuls_cuda = backend;  // GPU-only cases: the `.gpu` CTest entry

TEST_P(matmuls_cuda, gpu_kernels_refuse_more_rows_than_their_grid_covers) {
  const auto s = rs::default_stream(dev);
  auto gemm = [&](std::size_t m) {
    return rs::detail::gemm_args{m, 1, 1, nullptr, nullptr, nullptr, 1, 1, 1, 1.0, 0.0, sizeof(float), s};
  };
  rs::test::expect_invalid([&] { rs::detail::matmul(gemm(1048561), rs::matmul_algo::naive); },
                           "'naive' on a GPU takes at most 1048560 rows");
  rs::test::expect_invalid([&] { rs::detail::matmul(gemm(1048561), rs::matmul_algo::shared); },
                           "'shared' on a GPU takes at most 1048560 rows");
  rs::test::expect_invalid([&] { rs::detail::matmul(gemm(8388481), rs::matmul_algo::tuned); },
                           "'tuned' on a GPU takes at most 8388480 rows");
}

TEST_P(matmuls, moved_from_arrays_are_refused) {
  rs::array2d<float> A(4, 5, dev), B(5, 3, dev), C(4, 3, dev);
  rs::array2d<float> gone = std::move(A);
  rs::test::expect_invalid([&] { rs::matmul(A, B, C); }, "use of a moved-from array");
  rs::array2d<float> taken = std::move(C);
  rs::test::expect_invalid([&] { rs::matmul(gone, B, C); }, "use of a moved-from array");
}

// A and B last written on stream a, C on stream b: every algorithm must see a's last kernel. Before
// it, A and B hold poison the host waited for; a busy kernel of 100 ms ahead of their writers makes a
// product that does not wait for them read the poison.
TEST_P(matmuls_cuda, inputs_on_other_streams_are_ordered_before_the_product) {
  rs::stream a(dev), b(dev);
  const std::size_t m = 512, k = 4096, n = 64;
  constexpr int steps = 30;
  for (auto algo : float_algos(dev)) {
    SCOPED_TRACE(rs::to_string(algo));
    rs::array2d<float> A(m, k, a.ref()), B(k, n, a.ref()), C(m, n, b.ref());
    rs::generate([] RESIDENT_HD(std::size_t) { return rs::test::poison<float>(); })(A.storage());
    rs::generate([] RESIDENT_HD(std::size_t) { return rs::test::poison<float>(); })(B.storage());
    a.synchronize();
    rs::test::queue_busy(a, 100);
    rs::generate([] RESIDENT_HD(std::size_t) { return 1.f; })(A.storage());
    rs::generate([] RESIDENT_HD(std::size_t) { return 0.5f; })(B.storage());
    for (int i = 0; i < steps; ++i) {
      rs::map([] RESIDENT_HD(float v) { return v + 1.f; })(A.storage());
      rs::map([] RESIDENT_HD(float v) { return v + 0.5f; })(B.storage());
    }
    rs::matmul(A, B, C, algo);
    const auto got = C.to_host();
    const float want = float(k) * (1.f + steps) * (0.5f + 0.5f * steps);  // exact in float
    // Every element (a product that started before the steps ended is off somewhere, not only at the ends).
    EXPECT_EQ(std::count(got.begin(), got.end(), want), std::ptrdiff_t(got.size())) << "elements off " << want;
  }
}

// The CPU backend's rule: a product is done when matmul returns, whichever streams its operands are
// on; read straight from C's memory with no synchronization, after inputs written just before it.
using matmuls_cpu = backend;

TEST_P(matmuls_cpu, cpu_runs_in_issue_order_a_product_is_done_when_it_returns) {
  rs::stream a(dev), b(dev);
  const std::size_t m = 64, k = 256, n = 48;
  for (auto algo : float_algos(dev)) {
    SCOPED_TRACE(rs::to_string(algo));
    rs::array2d<float> A(m, k, a.ref()), B(k, n, a.ref()), C(m, n, b.ref());
    for (int round = 1; round <= 3; ++round) {  // new inputs each round: C must follow at once
      const float x = float(round), y = 0.5f * float(round);
      rs::generate([x] RESIDENT_HD(std::size_t) { return x; })(A.storage());
      rs::generate([y] RESIDENT_HD(std::size_t) { return y; })(B.storage());
      rs::matmul(A, B, C, algo);
      const float want = float(k) * x * y;  // exact in float
      std::size_t off = 0;
      for (std::size_t i = 0; i < m; ++i)
        for (std::size_t j = 0; j < n; ++j) off += C.data()[i * C.ld() + j] != want;
      EXPECT_EQ(off, 0u) << "round " << round << ": elements of C not yet " << want;
    }
  }
}

RESIDENT_BACKENDS(matmuls);
RESIDENT_CUDA_ONLY(matmuls_cuda);  // the CPU algorithms take any number of rows up to INT_MAX; ordering
RESIDENT_CPU_ONLY(matmuls_cpu);

}  // namespace
