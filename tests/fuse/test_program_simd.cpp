// Run-time programs on the CPU, run a block of values at a time with one vectorized loop per
// operation (src/fuse/program_cpu.cpp): every operation against FP64 within the bound docs/cpu.md
// states for it (glibc's vector math: 4 ULP; one correctly rounded operation: 0.5), block and piece
// boundaries, in place, and the sum. CTest runs it once per SIMD path, as test_cpu_simd.
#include <cmath>
#include <cstdio>
#include <limits>

#include "resident/fuse/program.hpp"
#include "resident/launch/detail/cpu_simd.hpp"
#include "support.hpp"
#include "ulps.hpp"

namespace rs = resident;

namespace {

const rs::device cpu = rs::device::cpu();

using rs::test::ulps;

struct one_op {
  rs::op o;
  long double (*ref)(long double);
  double lo, hi;  // the inputs' domain
  double bound;   // ULP
};

const one_op every_op[] = {
    {rs::op::add(1.25), [](long double v) { return v + 1.25L; }, 0.5, 100, 0.5},
    {rs::op::mul(-3), [](long double v) { return v * -3.0L; }, -100, 100, 0.5},
    {rs::op::affine(1.5, 0.5), [](long double v) { return 1.5L * v + 0.5L; }, 0, 100, 1.0},
    {rs::op::square(), [](long double v) { return v * v; }, -100, 100, 0.5},
    {rs::op::sqrt(), [](long double v) { return std::sqrt(v); }, 0, 1e6, 0.5},
    {rs::op::rsqrt(), [](long double v) { return 1 / std::sqrt(v); }, 1e-3, 1e6, 1.5},
    {rs::op::exp(), [](long double v) { return std::exp(v); }, -80, 80, 4},
    {rs::op::log(), [](long double v) { return std::log(v); }, 1e-30, 1e30, 4},
    {rs::op::sin(), [](long double v) { return std::sin(v); }, -100, 100, 4},
    {rs::op::cos(), [](long double v) { return std::cos(v); }, -100, 100, 4},
    {rs::op::tanh(), [](long double v) { return std::tanh(v); }, -10, 10, 4},
    {rs::op::abs(), [](long double v) { return std::fabs(v); }, -100, 100, 0},
    {rs::op::neg(), [](long double v) { return -v; }, -100, 100, 0},
    {rs::op::recip(), [](long double v) { return 1 / v; }, 0.01, 100, 0.5},
    {rs::op::minimum(2), [](long double v) { return std::fmin(v, 2.0L); }, -10, 10, 0},
    {rs::op::maximum(2), [](long double v) { return std::fmax(v, 2.0L); }, -10, 10, 0},
    // A NaN constant loses (fmin / fmax): the value passes unchanged.
    {rs::op::minimum(std::nan("")), [](long double v) { return v; }, -10, 10, 0},
    {rs::op::maximum(std::nan("")), [](long double v) { return v; }, -10, 10, 0},
    {rs::op::pow(2.5), [](long double v) { return std::pow(v, 2.5L); }, 0.01, 10, 4},
};

// Odd, over a block (512) and over the team's threshold, so blocks, pieces and the rest all occur.
constexpr std::size_t n = (std::size_t(1) << 16) + 13;

template <class T>
double worst_ulps(const one_op& c) {
  const auto seed = rs::test::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const std::vector<T> h = rs::test::random_vector<T>(n, seed, c.lo, c.hi);
  rs::array<T> x = rs::to_device(std::span<const T>(h), cpu);
  rs::array<T> y = rs::to_device(std::vector<T>(n, rs::test::poison<T>()), cpu);
  rs::run(rs::program{} | c.o, x, y);
  const std::vector<T> got = y.to_host();
  double worst = 0;
  for (std::size_t i = 0; i < n; ++i) worst = resident::test::worse(worst, ulps<T>(got[i], c.ref(h[i])));
  return worst;
}

template <class T>
void every_operation_within_its_bound(const char* type) {
  for (const one_op& c : every_op) {
    const double worst = worst_ulps<T>(c);
    std::printf("  %-16s %-6s %-8s max %.2f ulp\n", c.o.name().c_str(), type,
                rs::detail::cpu_simd_name(rs::detail::cpu_simd_path()), worst);
    EXPECT_LE(worst, c.bound) << c.o.name() << " in " << type << " on the "
                              << rs::detail::cpu_simd_name(rs::detail::cpu_simd_path()) << " path";
  }
}

TEST(program_simd, every_operation_in_float_is_within_its_ulp_bound) { every_operation_within_its_bound<float>("float"); }
TEST(program_simd, every_operation_in_double_is_within_its_ulp_bound) { every_operation_within_its_bound<double>("double"); }

rs::program seed_program() {
  return rs::program{} | rs::op::affine(1.5, 0.5) | rs::op::square() | rs::op::add(1) | rs::op::sqrt() |
         rs::op::sin() | rs::op::mul(0.5);
}
long double seed_reference(long double v) {
  const long double w = 1.5L * v + 0.5L;
  return 0.5L * std::sin(std::sqrt(w * w + 1));
}

TEST(program_simd, every_length_around_blocks_and_lanes_maps_and_sums_as_fp64) {
  for (std::size_t len : {std::size_t(0), std::size_t(1), std::size_t(15), std::size_t(16), std::size_t(17),
                          std::size_t(511), std::size_t(512), std::size_t(513), std::size_t(1025), std::size_t(100003)}) {
    const auto seed = rs::test::fresh_seed();
    SCOPED_TRACE("n = " + std::to_string(len) + ", seed = " + std::to_string(seed));
    const std::vector<float> h = rs::test::random_vector<float>(len, seed, -10, 10);
    rs::array<float> x = rs::to_device(std::span<const float>(h), cpu);
    rs::array<float> y = rs::to_device(std::vector<float>(len, rs::test::poison<float>()), cpu);
    rs::scoped_ledger l(cpu);
    rs::run(seed_program(), x, y);
    EXPECT_EQ(l.delta().kernels, len ? 1u : 0u) << "one loop per call";
    const std::vector<float> got = y.to_host();
    double worst = 0, sum = 0, abs_sum = 0;
    for (std::size_t i = 0; i < len; ++i) {
      const long double r = seed_reference(h[i]);
      worst = resident::test::worse(worst, double(std::fabs(got[i] - r)));
      sum += double(r);
      abs_sum += std::fabs(double(r));
    }
    EXPECT_LT(worst, 1e-6);
    const float s = rs::run_sum(seed_program(), x);
    // Each term within 1e-6 of FP64 (checked above); terms of either sign, some near 0, so no term is
    // too small to miss: the bound alone is checked.
    EXPECT_LE(std::fabs(double(s) - sum), rs::test::sum_tolerance<float>(len, abs_sum, 1e-6 * double(len)));
    rs::run(seed_program(), x);  // in place: each block read before it is written
    EXPECT_EQ(x.to_host(), got);
  }
}

// Linear operations (add, mul, neg) are folded into their neighbours' loops as affine ones: the
// values are exactly those of the operations one after another, signed zeros included.
template <class T>
void linear_operations_fold_without_changing_a_value() {
  const rs::program p = rs::program{} | rs::op::neg() | rs::op::add(0.5) | rs::op::mul(3) | rs::op::square() |
                        rs::op::mul(-2) | rs::op::add(1) | rs::op::abs() | rs::op::sqrt() | rs::op::add(-1) |
                        rs::op::recip() | rs::op::minimum(4) | rs::op::maximum(-4) | rs::op::mul(-0.0) |
                        rs::op::neg();
  const auto seed = rs::test::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::vector<T> h = rs::test::random_vector<T>(4099, seed, -3, 3);
  h[0] = T(0), h[1] = -T(0), h[2] = T(-0.5), h[3] = T(0.5);
  rs::array<T> x = rs::to_device(std::span<const T>(h), cpu);
  rs::run(p, x);
  const std::vector<T> got = x.to_host();
  for (std::size_t i = 0; i < h.size(); ++i) {
    T v = h[i];
    v = -v;
    v = v + T(0.5);
    v = v * T(3);
    v = v * v;
    v = v * T(-2);
    v = v + T(1);
    v = v < T(0) ? -v : v;
    v = std::sqrt(v);
    v = v + T(-1);
    v = T(1) / v;
    v = v < T(4) ? v : T(4);
    v = v > T(-4) ? v : T(-4);
    v = v * T(-0.0);
    v = -v;
    ASSERT_EQ(std::signbit(got[i]), std::signbit(v)) << "element " << i;
    ASSERT_TRUE(got[i] == v || (std::isnan(got[i]) && std::isnan(v))) << "element " << i << ": " << got[i] << " vs " << v;
  }
}

TEST(program_simd, linear_operations_fold_without_changing_a_value_in_float) {
  linear_operations_fold_without_changing_a_value<float>();
}
TEST(program_simd, linear_operations_fold_without_changing_a_value_in_double) {
  linear_operations_fold_without_changing_a_value<double>();
}

// An equal value gives an equal result wherever it lies: the array's last values (fewer than a vector)
// went through the C library's scalar exp, log, sin, cos, tanh and pow, an ulp or two from the vector
// ones (exp(1.0) in double).
template <class T>
void equal_values_give_equal_results_at_any_place() {
  for (const one_op& o : every_op) {
    for (const double v : {1.0, 3.0, 0.7, 2.5, 11.0, 0.1, 40.0, 88.0}) {
      if (v < o.lo || v > o.hi) continue;
      const rs::program p = rs::program{} | o.o;
      rs::array<T> ref = rs::to_device(std::vector<T>(4096, T(v)), cpu);
      rs::run(p, ref);
      const T want = ref.to_host()[0];
      for (const std::size_t m : {std::size_t(1), std::size_t(3), std::size_t(67), std::size_t(600), std::size_t(5001)}) {
        rs::array<T> x = rs::to_device(std::vector<T>(m, T(v)), cpu);
        rs::run(p, x);
        const std::vector<T> got = x.to_host();
        for (std::size_t i = 0; i < m; ++i)
          ASSERT_TRUE(got[i] == want || (std::isnan(got[i]) && std::isnan(want)))
              << o.o.name() << "(" << v << ") at " << i << " of " << m << ": " << got[i] << " vs " << want;
        const rs::array<T> y = rs::to_device(std::vector<T>(m, T(v)), cpu);
        const double sum = double(rs::run_sum(p, y)), each = double(want);
        ASSERT_NEAR(sum, each * double(m), 1e-6 * std::fabs(each) * double(m) + 1e-30) << o.o.name();
      }
    }
  }
}
TEST(program_simd, equal_values_give_equal_results_at_any_place_in_float) {
  equal_values_give_equal_results_at_any_place<float>();
}
TEST(program_simd, equal_values_give_equal_results_at_any_place_in_double) {
  equal_values_give_equal_results_at_any_place<double>();
}

TEST(program_simd, an_output_over_part_of_the_input_is_refused) {
  rs::array<float> x = rs::to_device(std::vector<float>(4096, 1.0f), cpu);
  EXPECT_THROW(rs::run(seed_program(), x.slice(0, 2048), x.slice(16, 2048)), rs::invalid_argument);
}

}  // namespace
