// Compiled by nvcc when the CUDA backend is in the build.
// The normals' logarithm, sine and cosine against long double over their inputs.
#include <array>
#include <cfloat>
#include <climits>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>

#include "resident/random/random.hpp"
#include "support.hpp"
#include "ulps.hpp"

namespace rs = resident;
namespace rr = resident::random;
using rs::test::backend;

namespace {

// ---- normals: the library's own log, sine and cosine, the same bits on both backends ---------

// Every input of the float transform, compared with double precision std::log / std::sin / std::cos.
TEST(normal_math, float_log_within_one_ulp_over_every_input) {
  double worst = 0;
  for (std::uint32_t m = 1; m <= (1u << 24); ++m) {
    const float got = rr::detail::minus_two_log_24(m);
    const double want = -2.0 * std::log(double(m) * 0x1p-24);
    if (m == (1u << 24)) {
      ASSERT_EQ(got, 0.f);
      continue;
    }
    const double ulp = std::ldexp(1.0, std::ilogb(float(want)) - 23);
    worst = resident::test::worse(worst, std::abs(double(got) - want) / ulp);
  }
  EXPECT_LT(worst, 1.0);
  RecordProperty("worst_ulp", std::to_string(worst));
}

TEST(normal_math, float_sincos_within_one_and_a_half_times_two_to_the_minus_24_over_every_input) {
  double worst = 0;
  for (std::uint32_t k = 0; k < (1u << 24); ++k) {
    const auto cs = rr::detail::sincos_turn_24(k);
    const double t = 6.283185307179586 * double(k) * 0x1p-24;
    const double ec = std::abs(double(cs.c) - std::cos(t)), es = std::abs(double(cs.s) - std::sin(t));
    worst = resident::test::worse(worst, resident::test::worse(ec, es));
    ASSERT_LE(std::abs(cs.c), 1.f);
    ASSERT_LE(std::abs(cs.s), 1.f);
  }
  EXPECT_LT(worst, 1.5 * 0x1p-24);
  RecordProperty("worst_abs_in_2^-24", std::to_string(worst * 0x1p24));
}

// The double transform's inputs, sampled (2^22 of 2^53, the ends and the octant edges), against long double.
TEST(normal_math, double_log_and_sincos_within_bounds) {
  std::mt19937_64 g(rs::test::fresh_seed());
  double worst_log = 0, worst_trig = 0;
  auto check = [&](std::uint64_t m) {
    if (m >= 1 && m < (1ull << 53)) {
      const double got = rr::detail::minus_two_log_53(m);
      const long double want = -2.0L * std::log((long double)(m) * 0x1p-53L);
      const double ulp = std::ldexp(1.0, std::ilogb(double(want)) - 52);
      worst_log = resident::test::worse(worst_log, double(std::abs((long double)got - want)) / ulp);
    }
    const std::uint64_t k = m & ((1ull << 53) - 1);
    const auto cs = rr::detail::sincos_turn_53(k);
    const long double t = 6.283185307179586476925286766559L * (long double)(k) * 0x1p-53L;
    worst_trig = std::max({worst_trig, double(std::abs((long double)cs.c - std::cos(t))),
                           double(std::abs((long double)cs.s - std::sin(t)))});
  };
  for (std::uint64_t m = 0; m < 4096; ++m) {
    check(m);
    check((1ull << 53) - m);
    check((1ull << 52) + m - 2048);
    for (int q = 1; q < 8; ++q) check((std::uint64_t(q) << 50) + m - 2048);  // octant edges
  }
  for (int t = 0; t < (1 << 22); ++t) check(g() >> 11);
  EXPECT_EQ(rr::detail::minus_two_log_53(1ull << 53), 0.0);
  EXPECT_LT(worst_log, 1.0);
  EXPECT_LT(worst_trig, 0x1p-52);
  RecordProperty("worst_log_ulp", std::to_string(worst_log));
  RecordProperty("worst_trig_abs_in_2^-53", std::to_string(worst_trig * 0x1p53));
}

}  // namespace
