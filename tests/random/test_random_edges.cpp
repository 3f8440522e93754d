// Compiled by nvcc when the CUDA backend is in the build.
// Random fills at their edges: bad and out-of-range parameters refused before any work, the counter
// wrapping at 2^64 on every path, uniform values at the ends of their range, integers over the whole
// type, slices filled at their offset.
#include <algorithm>
#include <array>
#include <cfloat>
#include <climits>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>

#include "resident/random/random.hpp"
#include "random/oracle.hpp"
#include "support.hpp"

namespace rs = resident;
namespace rr = resident::random;
using rs::test::backend;

namespace {

using namespace rs::test::random_oracle;
using rng = backend;

template <class T>
rs::array<T> poisoned(std::size_t n, rs::device d) {
  return rs::to_device(std::vector<T>(n, rs::test::poison<T>()), d);
}

// Every range or parameter that cannot be honoured is an invalid_argument before any work: the array
// keeps its poison, and the message names what was asked.
template <class T>
void expect_bad_parameters_rejected(rs::device dev) {
  constexpr T inf = std::numeric_limits<T>::infinity(), nan = std::numeric_limits<T>::quiet_NaN();
  constexpr T big = std::numeric_limits<T>::max();
  rs::array<T> a = poisoned<T>(10, dev);
  rs::test::expect_invalid([&] { rr::fill_uniform(a, 1, 0, T(1), T(1)); }, "low must be below high (got low 1, high 1)");
  rs::test::expect_invalid([&] { rr::fill_uniform(a, 1, 0, T(2), T(1)); }, "low must be below high");
  rs::test::expect_invalid([&] { rr::fill_uniform(a, 1, 0, -inf, T(0)); }, "finite bounds");
  rs::test::expect_invalid([&] { rr::fill_uniform(a, 1, 0, T(0), inf); }, "finite bounds");
  rs::test::expect_invalid([&] { rr::fill_uniform(a, 1, 0, nan, T(1)); }, "finite bounds");
  rs::test::expect_invalid([&] { rr::fill_uniform(a, 1, 0, T(0), nan); }, "finite bounds");
  rs::test::expect_invalid([&] { rr::uniform<T>(1, 0, -inf, inf)(a); }, "random::uniform");
  rs::test::expect_invalid([&] { rr::fill_normal(a, 1, 0, T(0), T(-1)); }, "must be >= 0");
  rs::test::expect_invalid([&] { rr::fill_normal(a, 1, 0, nan, T(1)); }, "must be finite");
  rs::test::expect_invalid([&] { rr::fill_normal(a, 1, 0, T(0), inf); }, "must be finite");
  rs::test::expect_invalid([&] { rr::fill_normal(a, 1, 0, T(0), nan); }, "must be finite");
  rs::test::expect_invalid([&] { rr::normal<T>(1, 0, inf, T(1))(a); }, "random::normal");
  rs::test::expect_invalid([&] { rr::fill_normal(a, 1, 0, T(0), big / T(4)); }, "beyond the largest finite value");
  rs::test::expect_invalid([&] { rr::fill_normal(a, 1, 0, big, big / T(1e6)); }, "beyond the largest finite value");
  for (T v : a.to_host()) ASSERT_EQ(v, rs::test::poison<T>()) << "a rejected call wrote";
}

TEST_P(rng, bad_parameters_are_typed_errors) {
  expect_bad_parameters_rejected<float>(dev);
  expect_bad_parameters_rejected<double>(dev);
  rs::array<std::int32_t> b = poisoned<std::int32_t>(10, dev);
  EXPECT_THROW(rr::fill_integers(b, 1, 0, 5, 5), rs::invalid_argument);
  EXPECT_THROW(rr::fill_integers(b, 1, 0, 5, -5), rs::invalid_argument);
  EXPECT_THROW(rr::integers<std::int32_t>(1, 0, INT_MAX, INT_MIN), rs::invalid_argument);
  rs::array<std::uint32_t> c = poisoned<std::uint32_t>(10, dev);
  EXPECT_THROW(rr::fill_integers(c, 1, 0, 7u, 3u), rs::invalid_argument);
  for (auto v : b.to_host()) ASSERT_EQ(v, rs::test::poison<std::int32_t>());
  for (auto v : c.to_host()) ASSERT_EQ(v, rs::test::poison<std::uint32_t>());
  // The edges that can be honoured are: sd 0 gives the mean, the largest finite mean and sd that keep
  // every value finite work.
  rs::array<float> z = poisoned<float>(1001, dev);
  rr::fill_normal(z, 3, 0, 2.5f, 0.f);
  for (float v : z.to_host()) ASSERT_EQ(v, 2.5f);
  rr::fill_normal(z, 3, 0, 0.f, FLT_MAX / 7.f);
  for (float v : z.to_host()) ASSERT_TRUE(std::isfinite(v)) << v;
  rs::array<double> zd = poisoned<double>(1001, dev);
  rr::fill_normal(zd, 3, 0, -1.0, DBL_MAX / 10.0);
  for (double v : zd.to_host()) ASSERT_TRUE(std::isfinite(v)) << v;
}

// ---- counter wrap: position p = (offset + i) mod 2^64 on every path --------------------------

template <class T>
bool same_bits(const T& a, const T& b) {
  return std::memcmp(&a, &b, sizeof a) == 0;
}

// Fills a distribution's values over [0, n) in every way the library offers (one fill; one element at a
// time; a slice at each misalignment; a one-thread launch): the one fill against the oracle, every
// other path bit for bit the one fill.
template <class D>
void expect_every_path_agrees(const D& d, std::size_t n, rs::device dev, const char* what) {
  using T = typename D::value_type;
  rs::array<T> a = poisoned<T>(n, dev);
  rs::generate(d)(a);
  const std::vector<T> want = a.to_host();
  for (std::size_t i = 0; i < n; ++i)
    ASSERT_TRUE(agrees(want[i], oracle(d, i))) << what << " one fill: offset " << d.offset << " i " << i;
  auto check = [&](const std::vector<T>& got, const char* how) {
    for (std::size_t i = 0; i < n; ++i)
      ASSERT_TRUE(same_bits(got[i], want[i])) << what << " " << how << ": offset " << d.offset << " i " << i;
  };
  rs::array<T> b = poisoned<T>(n, dev);
  for (std::size_t i = 0; i < n; ++i) {
    D di = d;
    di.offset = d.offset + i;
    rs::generate(di)(b.slice(i, 1));
  }
  check(b.to_host(), "one element at a time");
  rs::array<T> c = poisoned<T>(n + 3, dev);
  for (std::size_t start = 1; start < 4; ++start) {
    rs::generate(d)(c.slice(start, n));
    auto h = c.to_host();
    check(std::vector<T>(h.begin() + std::ptrdiff_t(start), h.begin() + std::ptrdiff_t(start + n)), "misaligned slice");
  }
  rs::array<T> e = poisoned<T>(n, dev);
  rs::generate(d).with_config({rs::dims(1), rs::dims(1)})(e);
  check(e.to_host(), "one thread");
  rs::array<T> f = poisoned<T>(n, dev);
  rs::generate(d).with_config({rs::dims(2), rs::dims(32)})(f);
  check(f.to_host(), "two blocks of 32");
}

TEST_P(rng, counter_wraps_at_two_to_the_64_on_every_path) {
  const std::uint64_t seed = rs::test::fresh_seed();
  SCOPED_TRACE(seed);
  // The case first seen: 12 words from 2^64 - 2 are the last two words and then words 0..9.
  rs::array<std::uint32_t> w = poisoned<std::uint32_t>(12, dev);
  rr::fill_bits(w, 7, ~0ull - 1);
  const auto hw = w.to_host();
  for (std::size_t i = 0; i < 12; ++i) ASSERT_EQ(hw[i], host_word(7, (~0ull - 1) + i)) << "i " << i;
  EXPECT_EQ(hw[2], host_word(7, 0));
  for (std::uint64_t back : {1ull, 2ull, 3ull, 5ull, 9ull}) {
    const std::uint64_t offset = 0 - back;
    for (std::size_t n : {std::size_t(1), std::size_t(3), std::size_t(12), std::size_t(37)}) {
      expect_every_path_agrees(rr::bits_distribution{{}, seed, offset}, n, dev, "bits");
      expect_every_path_agrees(rr::unit_distribution<float>{{}, seed, offset}, n, dev, "unit float");
      expect_every_path_agrees(rr::unit_distribution<double>{{}, seed, offset}, n, dev, "unit double");
      expect_every_path_agrees(rr::uniform_distribution<float>{{}, seed, offset, -3.f, 0.5f}, n, dev, "uniform float");
      expect_every_path_agrees(rr::normal_distribution<float>{{}, seed, offset, 1.f, 2.f}, n, dev, "normal float");
      expect_every_path_agrees(rr::normal_distribution<double>{{}, seed, offset, 1.0, 2.0}, n, dev, "normal double");
      expect_every_path_agrees(rr::integer_distribution<std::int32_t>{{}, seed, offset, -7, 1000}, n, dev, "integers");
    }
  }
  // Reductions take the GPU's block loop (its counter steps past the last block) and the CPU's blocks.
  auto widen = [] RESIDENT_HD(std::uint32_t v) { return std::uint64_t(v); };
  for (std::uint64_t back : {1ull, 3ull, 6ull}) {
    const std::uint64_t offset = 0 - back;
    for (std::size_t n : {std::size_t(5), std::size_t(1001), std::size_t(100003)}) {
      std::uint64_t want = 0;
      for (std::size_t i = 0; i < n; ++i) want += host_word(seed, offset + i);
      const std::uint64_t got = (rs::generate(rr::bits_distribution{{}, seed, offset}) | rs::map(widen) |
                                 rs::reduce(rs::plus{}, std::uint64_t(0)))(n, rs::default_stream(dev));
      ASSERT_EQ(got, want) << "offset 2^64 - " << back << " n " << n;
    }
  }
  // Points: point i is (u[2i], u[2i + 1]) of the uniform stream at 2 * offset, which wraps too.
  const std::size_t points = 9;
  auto pick_x = [] RESIDENT_HD(rr::point2<float> q) { return q.x; };
  auto pick_y = [] RESIDENT_HD(rr::point2<float> q) { return q.y; };
  rs::array<float> px = poisoned<float>(points, dev), py = poisoned<float>(points, dev), u = poisoned<float>(2 * points, dev);
  (rr::uniform_points<float>(seed, 0 - 3ull) | rs::map(pick_x))(px);
  (rr::uniform_points<float>(seed, 0 - 3ull) | rs::map(pick_y))(py);
  rr::fill_uniform(u, seed, 0 - 6ull);
  const auto hx = px.to_host(), hy = py.to_host(), hu = u.to_host();
  for (std::size_t i = 0; i < points; ++i) {
    ASSERT_EQ(hx[i], hu[2 * i]) << i;
    ASSERT_EQ(hy[i], hu[2 * i + 1]) << i;
  }
}

// ---- uniform ranges: every value in [low, high) ----------------------------------------------

// A plain reference of the documented formula: low (1 - u) + high u rounded, clamped below high.
template <class T>
T uniform_reference(T low, T high, T u) {
  T v;
  if constexpr (sizeof(T) == 4) {
    v = float(double(low) * double(1.f - u) + double(high) * double(u));
  } else {
    v = std::fma(high, u, low * (1.0 - u));
    if (v < low) v = low;
  }
  return v < high ? v : std::nextafter(high, -std::numeric_limits<T>::infinity());
}

template <class T>
void expect_uniform_in_range(rs::device dev, std::uint64_t seed, T low, T high) {
  const std::size_t n = 40009;
  rs::array<T> a = poisoned<T>(n, dev);
  rr::fill_uniform(a, seed, 3, low, high);
  const auto h = a.to_host();
  const rr::unit_distribution<T> unit{{}, seed, 3};
  std::size_t at_low = 0;
  for (std::size_t i = 0; i < n; ++i) {
    ASSERT_TRUE(h[i] >= low && h[i] < high) << "value " << h[i] << " outside [" << low << ", " << high << ") at " << i;
    ASSERT_TRUE(same_bits(h[i], uniform_reference(low, high, unit(i)))) << "i " << i << " [" << low << ", " << high << ")";
    at_low += h[i] == low;
  }
  if (std::nextafter(low, high) == high) {
    EXPECT_EQ(at_low, n) << "a one-ulp range holds low alone";
  }
  // The generator source gives the same values.
  rs::array<T> b = poisoned<T>(n, dev);
  rr::uniform<T>(seed, 3, low, high)(b);
  EXPECT_EQ(b.to_host(), h);
}

template <class T>
void expect_uniform_edges(rs::device dev, std::uint64_t seed) {
  constexpr T big = std::numeric_limits<T>::max(), tiny = std::numeric_limits<T>::denorm_min();
  constexpr T norm = std::numeric_limits<T>::min();
  const T one_up = std::nextafter(T(1), T(2)), two_down = std::nextafter(T(2), T(0));
  const std::pair<T, T> ranges[] = {
      {T(1), one_up},       {T(1), T(2)},          {two_down, T(2)},     {-big, big},         {T(0), big},
      {-big, T(0)},         {big / T(2), big},     {std::nextafter(big, T(0)), big},        {tiny, T(2) * tiny},
      {-tiny, T(0)},        {-tiny, tiny},         {T(0), tiny},         {norm - tiny, norm}, {T(-2), T(-1)},
      {T(-1), T(-0.0)},     {T(-1e-30), T(1e-30)}, {T(-3), T(7)},        {T(1e6), T(1e6) + T(1)}};
  for (auto [low, high] : ranges) expect_uniform_in_range<T>(dev, seed, low, high);
}

TEST_P(rng, uniform_values_stay_in_low_to_high_at_every_edge) {
  const std::uint64_t seed = rs::test::fresh_seed();
  SCOPED_TRACE(seed);
  expect_uniform_edges<float>(dev, seed);
  expect_uniform_edges<double>(dev, seed);
  // The largest draw, u = 1 - 2^-24 (seed 20261130 position 30401516 has the word 0xffffff8a), gave
  // high itself for [1, 2): 1 + u rounds up to 2.
  ASSERT_EQ(host_word(20261130, 30401516), 0xffffff8au);
  ASSERT_EQ(host_word(20261130, 28188773), 0x000000b5u);  // and u = 0
  for (auto [low, high] : {std::pair{1.f, 2.f}, std::pair{-1.f, 1.f}, std::pair{-FLT_MAX, FLT_MAX}, std::pair{0.f, 1.f}}) {
    rs::array<float> top = poisoned<float>(1, dev), bottom = poisoned<float>(1, dev);
    rr::fill_uniform(top, 20261130, 30401516, low, high);
    rr::fill_uniform(bottom, 20261130, 28188773, low, high);
    const float t = top.to_host()[0];
    EXPECT_LT(t, high) << "[" << low << ", " << high << ")";
    if (low == 1.f || low == 0.f) {
      EXPECT_EQ(t, std::nextafter(high, low)) << "[" << low << ", " << high << ")";
    }
    EXPECT_EQ(bottom.to_host()[0], low);
  }
  // For doubles the largest draw (53 one bits) is made directly.
  const rr::words4 ones{{~0u, ~0u, ~0u, ~0u}};
  for (auto [low, high] : {std::pair{1.0, 2.0}, std::pair{-DBL_MAX, DBL_MAX}, std::pair{-1.0, -0.5}}) {
    const double v = rr::uniform_distribution<double>{{}, 1, 0, low, high}.from(ones, 0, 0);
    EXPECT_LT(v, high);
    if (low == 1.0) {
      EXPECT_EQ(v, std::nextafter(high, low));
    }
  }
  const double v = rr::uniform_distribution<double>{{}, 1, 0, 1.0, 3.0}.from(rr::words4{{0, 0, 0, 0}}, 0, 0);
  EXPECT_EQ(v, 1.0);
}

TEST_P(rng, integers_over_the_whole_range_of_the_type) {
  const std::uint64_t seed = rs::test::fresh_seed();
  SCOPED_TRACE(seed);
  const std::size_t n = 100003;
  rs::array<std::int32_t> a = poisoned<std::int32_t>(n, dev), a_cpu = poisoned<std::int32_t>(n, rs::device::cpu());
  rr::fill_integers(a, seed, 0 - 5ull, INT_MIN, INT_MAX);
  rr::fill_integers(a_cpu, seed, 0 - 5ull, INT_MIN, INT_MAX);
  const auto h = a.to_host();
  EXPECT_EQ(h, a_cpu.to_host());
  double mean = 0;
  for (auto v : h) {
    ASSERT_LT(v, INT_MAX);
    mean += double(v);
  }
  mean /= double(n);
  EXPECT_NEAR(mean, -0.5, 5 * 4294967296.0 / std::sqrt(12.0 * double(n)));
  const rr::integer_distribution<std::int32_t> d{{}, seed, 0 - 5ull, INT_MIN, 0xFFFFFFFFu};
  for (std::size_t i = 0; i < n; ++i) ASSERT_TRUE(agrees(h[i], oracle(d, i))) << i;
  rs::array<std::uint32_t> b = poisoned<std::uint32_t>(n, dev);
  rr::fill_integers(b, seed, 0, 0u, UINT_MAX);
  for (auto v : b.to_host()) ASSERT_LT(v, UINT_MAX);
  rs::array<std::uint32_t> one = poisoned<std::uint32_t>(n, dev);
  rr::fill_integers(one, seed, 0, 41u, 42u);
  for (auto v : one.to_host()) ASSERT_EQ(v, 41u);
}

// The excluded bound may be one past the type's largest value (NumPy's integers(0, 2**31, int32)): the
// only way to draw the largest value. Every value of the type is each raw word, offset by low.
TEST_P(rng, integers_reach_the_largest_value_of_the_type) {
  const std::uint64_t seed = rs::test::fresh_seed();
  SCOPED_TRACE(seed);
  const std::size_t n = 4099;
  rs::array<std::uint32_t> bits = poisoned<std::uint32_t>(n, dev);
  rr::fill_bits(bits, seed, 3);
  const auto w = bits.to_host();
  rs::array<std::uint32_t> u = poisoned<std::uint32_t>(n, dev);
  rr::fill_integers(u, seed, 3, 0, 1ull << 32);
  EXPECT_EQ(u.to_host(), w);
  rs::array<std::int32_t> a = poisoned<std::int32_t>(n, dev);
  rr::fill_integers(a, seed, 3, INT_MIN, std::int64_t(1) << 31);
  const auto h = a.to_host();
  for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(std::uint32_t(h[i]), w[i] ^ 0x80000000u) << i;
  // The top two values of each type, both drawn.
  rr::fill_integers(a, seed, 0, INT_MAX - 1, std::int64_t(1) << 31);
  rr::fill_integers(u, seed, 0, UINT_MAX - 1, 1ull << 32);
  const auto ha = a.to_host();
  const auto hu = u.to_host();
  for (std::size_t i = 0; i < n; ++i) ASSERT_TRUE(ha[i] == INT_MAX - 1 || ha[i] == INT_MAX) << i;
  for (std::size_t i = 0; i < n; ++i) ASSERT_TRUE(hu[i] == UINT_MAX - 1 || hu[i] == UINT_MAX) << i;
  EXPECT_NE(std::count(ha.begin(), ha.end(), INT_MAX), 0);
  EXPECT_NE(std::count(hu.begin(), hu.end(), UINT_MAX), 0);
  // One further is refused, naming the bound it may take.
  rs::test::expect_invalid([&] { rr::fill_integers(a, 1, 0, 0, (std::int64_t(1) << 31) + 1); },
                           "high 2147483649 does not fit int32_t, the element type (it holds -2147483648 to "
                           "2147483647; high, which is excluded, may be one past: 2147483648)");
  rs::test::expect_invalid([&] { rr::fill_integers(u, 1, 0, 0, (1ull << 32) + 1); }, "may be one past: 4294967296");
  rs::test::expect_invalid([&] { rr::fill_integers(a, 1, 0, INT_MIN, INT_MIN); }, "low must be below high");
}

// Bounds are checked as given, before they are converted to the array's element type: a bound the
// type cannot hold once wrapped silently into another range.
TEST_P(rng, integer_bounds_that_do_not_fit_the_type_are_refused_before_any_work) {
  rs::array<std::int32_t> a = poisoned<std::int32_t>(10, dev);
  rs::array<std::uint32_t> u = poisoned<std::uint32_t>(10, dev);
  rs::test::expect_invalid([&] { rr::fill_integers(a, 1, 0, -5, 5'000'000'000LL); }, "high 5000000000 does not fit int32_t");
  rs::test::expect_invalid([&] { rr::fill_integers(a, 1, 0, -3'000'000'000LL, 5); }, "low -3000000000 does not fit int32_t");
  rs::test::expect_invalid([&] { rr::fill_integers(u, 1, 0, -1, 10); }, "low -1 does not fit uint32_t");
  rs::test::expect_invalid([&] { rr::fill_integers(u, 1, 0, 0, 5'000'000'000ULL); }, "high 5000000000 does not fit uint32_t");
  rs::test::expect_invalid([&] { rr::fill_integers(a, 1, 0, 0, 4'294'967'295u); }, "does not fit int32_t");
  rs::test::expect_invalid([&] { (void)rr::integers<std::int32_t>(1, 0, 0, 1ull << 40); }, "does not fit int32_t");
  for (auto v : a.to_host()) ASSERT_EQ(v, rs::test::poison<std::int32_t>());
  for (auto v : u.to_host()) ASSERT_EQ(v, rs::test::poison<std::uint32_t>());
  // Bounds of another integer type that fit are taken as their values.
  rr::fill_integers(u, 1, 0, 3LL, std::int64_t(UINT_MAX));
  for (auto v : u.to_host()) ASSERT_TRUE(v >= 3u && v < UINT_MAX) << v;
  rr::fill_integers(a, 1, 0, std::int8_t(-4), 4u);
  for (auto v : a.to_host()) ASSERT_TRUE(v >= -4 && v < 4) << v;
}

// A fill of a slice at offset k is the whole array's fill at k, whatever k's alignment to the
// Philox blocks and the slice's to memory; fills of nothing, also at the end, write nothing.
template <class T, class Fill>
void expect_slices_match_the_whole(rs::device dev, Fill fill, const char* what) {
  const std::size_t n = 203;
  const std::uint64_t offset = 1000001;
  rs::array<T> whole = poisoned<T>(n, dev);
  fill(whole, offset);
  const auto want = whole.to_host();
  for (std::size_t k : {std::size_t(1), std::size_t(2), std::size_t(3), std::size_t(5), std::size_t(7), std::size_t(101)}) {
    for (std::size_t m : {std::size_t(1), std::size_t(2), std::size_t(3), std::size_t(9), n - k}) {
      rs::array<T> a = poisoned<T>(n, dev);
      fill(a.slice(k, m), offset + k);
      const auto got = a.to_host();
      for (std::size_t i = 0; i < n; ++i) {
        if (i >= k && i < k + m)
          ASSERT_TRUE(same_bits(got[i], want[i])) << what << " slice at " << k << " of " << m << ", i " << i;
        else
          ASSERT_TRUE(same_bits(got[i], rs::test::poison<T>())) << what << " wrote outside its slice at " << i;
      }
    }
  }
  rs::array<T> a = poisoned<T>(n, dev);
  fill(a.slice(n, 0), offset);
  fill(a.slice(0, 0), offset);
  rs::array<T> none(0, dev);
  fill(none, offset);
  for (const T& v : a.to_host()) ASSERT_TRUE(same_bits(v, rs::test::poison<T>())) << what << " an empty fill wrote";
}

TEST_P(rng, a_slice_filled_at_its_offset_equals_the_whole_fill) {
  const std::uint64_t seed = rs::test::fresh_seed();
  SCOPED_TRACE(seed);
  expect_slices_match_the_whole<float>(dev, [&](auto&& a, std::uint64_t o) { rr::fill_uniform(a, seed, o); }, "unit float");
  expect_slices_match_the_whole<double>(dev, [&](auto&& a, std::uint64_t o) { rr::fill_uniform(a, seed, o, -2.0, 3.0); }, "uniform double");
  expect_slices_match_the_whole<float>(dev, [&](auto&& a, std::uint64_t o) { rr::fill_normal(a, seed, o, 1.f, 3.f); }, "normal float");
  expect_slices_match_the_whole<double>(dev, [&](auto&& a, std::uint64_t o) { rr::fill_normal(a, seed, o); }, "normal double");
  expect_slices_match_the_whole<std::int32_t>(dev, [&](auto&& a, std::uint64_t o) { rr::fill_integers(a, seed, o, -9, 1000); }, "integers");
  expect_slices_match_the_whole<std::uint32_t>(dev, [&](auto&& a, std::uint64_t o) { rr::fill_bits(a, seed, o); }, "bits");
}

TEST_P(rng, a_moved_from_array_is_refused) {
  rs::array<float> a(10, dev);
  rs::array<float> b = std::move(a);
  EXPECT_THROW(rr::fill_uniform(a, 1), rs::invalid_argument);
  EXPECT_THROW(rr::fill_normal(a, 1), rs::invalid_argument);
  rs::array<std::uint32_t> w(4, dev);
  rs::array<std::uint32_t> w2 = std::move(w);
  EXPECT_THROW(rr::fill_bits(w, 1), rs::invalid_argument);
}

// Bounds and parameters of a wider type are checked as given: a finite double beyond float's range
// is named as such, not reported as the infinity it would become; other values convert as before.
TEST_P(rng, real_parameters_beyond_the_element_type_are_named_as_given) {
  rs::array<float> a = poisoned<float>(10, dev);
  rs::test::expect_invalid([&] { rr::fill_uniform(a, 1, 0, 0.0, 1e39); }, "high 1e+39 does not fit float");
  rs::test::expect_invalid([&] { rr::fill_uniform(a, 1, 0, -1e300, 0.0); }, "low -1e+300 does not fit float");
  rs::test::expect_invalid([&] { rr::fill_normal(a, 1, 0, 0.0, 1e39); }, "sd 1e+39 does not fit float");
  rs::test::expect_invalid([&] { rr::fill_normal(a, 1, 0, -4e38, 1.0); }, "mean -4e+38 does not fit float");
  rs::test::expect_invalid([&] { (void)rr::uniform<float>(1, 0, 0.0, 1e39); }, "does not fit float");
  rs::test::expect_invalid([&] { rr::fill_uniform(a, 1, 0, 0.0, std::numeric_limits<double>::infinity()); }, "finite bounds");
  for (float v : a.to_host()) ASSERT_EQ(v, rs::test::poison<float>()) << "a rejected call wrote";
  // Integer and double bounds that fit are taken as their values.
  rr::fill_uniform(a, 1, 0, -1, 1);
  for (float v : a.to_host()) ASSERT_TRUE(v >= -1.f && v < 1.f) << v;
  rs::array<float> b = poisoned<float>(10, dev);
  rr::fill_uniform(b, 1, 0, -1.f, 1.f);
  EXPECT_EQ(a.to_host(), b.to_host());
  rr::fill_normal(a, 1, 0, 2.0, 0.5);
  rr::fill_normal(b, 1, 0, 2.f, 0.5f);
  EXPECT_EQ(a.to_host(), b.to_host());
}

// Bounds that differ as given but are one value of the element type (float holds every integer
// only up to 2^24) are refused as such: the message names both as given, not "low 1, high 1", and does
// not suggest swapping them.
TEST_P(rng, bounds_that_become_one_value_of_the_element_type_are_named_as_given) {
  rs::array<float> a = poisoned<float>(10, dev);
  rs::test::expect_invalid([&] { rr::fill_uniform(a, 1, 0, 16777216, 16777217); },
                           "low 16777216 and high 16777217 are both 16777216 as float, the element type");
  rs::test::expect_invalid([&] { rr::fill_uniform(a, 1, 0, 1.0, 1.00000001); },
                           "low 1 and high 1.00000001 are both 1 as float");
  rs::test::expect_invalid([&] { (void)rr::uniform<float>(1, 0, 1.0, 1.00000001); }, "random::uniform: low 1 and high");
  rs::array<double> d = poisoned<double>(10, dev);
  rs::test::expect_invalid([&] { rr::fill_uniform(d, 1, 0, (1LL << 53), (1LL << 53) + 1); },
                           "are both 9007199254740992 as double");
  for (float v : a.to_host()) ASSERT_EQ(v, rs::test::poison<float>()) << "a rejected call wrote";
  for (double v : d.to_host()) ASSERT_EQ(v, rs::test::poison<double>()) << "a rejected call wrote";
  // Equal or reversed as given: the range's own message.
  rs::test::expect_invalid([&] { rr::fill_uniform(a, 1, 0, 2.0, 1.0); }, "low must be below high (got low 2, high 1)");
  // One float apart is a range.
  rr::fill_uniform(a, 1, 0, 16777216, 16777218);
  for (float v : a.to_host()) ASSERT_EQ(v, 16777216.f);
}

}  // namespace
