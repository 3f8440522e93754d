// Compiled by nvcc when the CUDA backend is in the build.
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

#if RESIDENT_HAVE_RANDOM123
#include <Random123/philox.h>
#endif

namespace rs = resident;
namespace rr = resident::random;
using rs::test::backend;

namespace {

// Random123's published known-answer vectors for philox4x32_10 (kat_vectors).
TEST(philox, known_answer_vectors) {
  struct kat {
    rr::words4 ctr;
    std::uint32_t k0, k1;
    rr::words4 out;
  } kats[] = {
      {{{0, 0, 0, 0}}, 0, 0, {{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}}},
      {{{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}}, 0xffffffff, 0xffffffff,
       {{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}}},
      {{{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}}, 0xa4093822, 0x299f31d0,
       {{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}}},
  };
  for (auto& k : kats) {
    auto r = rr::philox4x32_10(k.ctr, k.k0, k.k1);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(r.w[i], k.out.w[i]) << "word " << i;
  }
}

#if RESIDENT_HAVE_RANDOM123
TEST(philox, matches_random123_on_random_counters) {
  std::mt19937_64 g(rs::test::fresh_seed());
  r123::Philox4x32_R<10> ref;
  for (int t = 0; t < 10000; ++t) {
    r123::Philox4x32_R<10>::ctr_type c = {{std::uint32_t(g()), std::uint32_t(g()), std::uint32_t(g()), std::uint32_t(g())}};
    r123::Philox4x32_R<10>::key_type k = {{std::uint32_t(g()), std::uint32_t(g())}};
    auto want = ref(c, k);
    auto got = rr::philox4x32_10(rr::words4{{c[0], c[1], c[2], c[3]}}, k[0], k[1]);
    for (int i = 0; i < 4; ++i) ASSERT_EQ(got.w[i], want[i]);
  }
}
#endif

// ---- the oracle: the documented layout and textbook maps, written here apart from the library ----

// Block c of stream `seed` (counter c low, c high, attempt, 0; key seed low, seed high) by Random123's
// Philox4x32-10. Where its headers are missing, by philox4x32_10, itself held to Random123's published
// answers above.
std::array<std::uint32_t, 4> oracle_block(std::uint64_t seed, std::uint64_t c, std::uint32_t attempt = 0) {
#if RESIDENT_HAVE_RANDOM123
  r123::Philox4x32_R<10> philox;
  const auto w = philox({{std::uint32_t(c), std::uint32_t(c >> 32), attempt, 0u}},
                        {{std::uint32_t(seed), std::uint32_t(seed >> 32)}});
  return {w[0], w[1], w[2], w[3]};
#else
  const auto w = rr::philox4x32_10(rr::words4{{std::uint32_t(c), std::uint32_t(c >> 32), attempt, 0u}},
                                   std::uint32_t(seed), std::uint32_t(seed >> 32));
  return {w.w[0], w.w[1], w.w[2], w.w[3]};
#endif
}

// The library's block function and its maps of words to [0, 1) against the oracle's, on random words
// and at the ends (all zeros, all ones: 0 and the largest value below 1).
TEST(philox, blocks_and_unit_maps_match_the_oracle) {
  std::mt19937_64 g(rs::test::fresh_seed());
  for (int t = 0; t < 10000; ++t) {
    const std::uint64_t seed = g(), c = g();
    const auto attempt = std::uint32_t(g() % 3);
    const rr::words4 w = rr::philox_block(seed, c, attempt);
    const auto o = oracle_block(seed, c, attempt);
    for (int k = 0; k < 4; ++k) ASSERT_EQ(w.w[k], o[k]) << "seed " << seed << " block " << c << " word " << k;
    const auto a = std::uint32_t(g()), b = std::uint32_t(g());
    ASSERT_EQ(static_cast<long double>(rr::unit_float(a)), static_cast<long double>(a >> 8) / 16777216.0L) << a;
    ASSERT_EQ(static_cast<long double>(rr::unit_double(a, b)),
              static_cast<long double>((std::uint64_t(a) << 21) ^ (b >> 11)) / 9007199254740992.0L) << a << " " << b;
  }
  EXPECT_EQ(rr::unit_float(0), 0.f);
  EXPECT_EQ(rr::unit_float(0xFFFFFFFFu), 1.f - 0x1p-24f);
  EXPECT_EQ(rr::unit_double(0, 0), 0.0);
  EXPECT_EQ(rr::unit_double(0xFFFFFFFFu, 0xFFFFFFFFu), 1.0 - 0x1p-53);
}

// Word p of stream `seed` as the documented layout defines it, computed on the host.
std::uint32_t host_word(std::uint64_t seed, std::uint64_t p) { return oracle_block(seed, p / 4)[p % 4]; }

// A value as the oracle has it: exact, or within tol of value (long double: 64-bit significand).
struct oracle_value {
  long double value, tol;
};
template <class T>
::testing::AssertionResult agrees(T got, const oracle_value& o) {
  const long double d = std::fabs(static_cast<long double>(got) - o.value);
  if (o.tol == 0 ? static_cast<long double>(got) == o.value : d <= o.tol) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << got << " against the oracle's " << double(o.value) << " (off " << double(d)
                                       << ", tolerance " << double(o.tol) << ")";
}
long double ulp_of(long double x, int digits) { return std::ldexp(1.0L, std::ilogb(std::fabs(x) + LDBL_MIN) - digits + 1); }

// Uniform [0, 1): the top 24 bits of word i (float); 53 bits of words 2i, 2i + 1 (double), as integers
// times a power of two: exact.
long double oracle_unit(const rr::unit_distribution<float>& d, std::uint64_t p) {
  return static_cast<long double>(host_word(d.seed, p) >> 8) / 16777216.0L;
}
long double oracle_unit(const rr::unit_distribution<double>& d, std::uint64_t p) {
  const auto w = oracle_block(d.seed, p / 2);
  const int j = int(p % 2) * 2;
  const std::uint64_t m = (std::uint64_t(w[j]) << 21) ^ (w[j + 1] >> 11);
  return static_cast<long double>(m) / 9007199254740992.0L;
}
template <class T>
oracle_value oracle(const rr::unit_distribution<T>& d, std::size_t i) { return {oracle_unit(d, d.offset + i), 0}; }
oracle_value oracle(const rr::bits_distribution& d, std::size_t i) {
  return {static_cast<long double>(host_word(d.seed, d.offset + i)), 0};
}
// low + (high - low) u in long double; the library rounds twice (two roundings of T's size at most).
template <class T>
oracle_value oracle(const rr::uniform_distribution<T>& d, std::size_t i) {
  const long double u = oracle_unit(rr::unit_distribution<T>{{}, d.seed, d.offset}, d.offset + i);
  const long double lo = d.low, hi = d.high;
  return {lo + (hi - lo) * u, 2 * ulp_of(std::max(std::fabs(lo), std::fabs(hi)), std::numeric_limits<T>::digits)};
}
// Lemire's multiply-shift with rejection, a rejected word redrawn at the next attempt of its block.
template <class T>
oracle_value oracle(const rr::integer_distribution<T>& d, std::size_t i) {
  const std::uint64_t p = d.offset + i, c = p / 4;
  const int lane = int(p % 4);
  std::uint64_t m = std::uint64_t(oracle_block(d.seed, c)[lane]) * d.range;
  const std::uint32_t threshold = std::uint32_t(-d.range) % d.range;
  for (std::uint32_t attempt = 1; std::uint32_t(m) < threshold; ++attempt)
    m = std::uint64_t(oracle_block(d.seed, c, attempt)[lane]) * d.range;
  return {static_cast<long double>(T(std::uint32_t(d.low) + std::uint32_t(m >> 32))), 0};
}
// Box-Muller in long double: r = sqrt(-2 ln u1), u1 in (0, 1]; z = r cos(2 pi t) (even lane) or
// r sin(2 pi t) (odd). Floats take u1 and t from the top 24 bits of a word pair; doubles from 53 bits
// of words 0-1 (u1 = 1 - u) and 2-3. The library's log is within an ulp, its sine and cosine within
// 1.5 2^-24 (float; double within its own tests' bounds), three roundings after: tol allows 8 ulps of
// r plus two of the value.
template <class T>
oracle_value oracle(const rr::normal_distribution<T>& d, std::size_t i) {
  const std::uint64_t p = d.offset + i;
  constexpr int digits = std::numeric_limits<T>::digits;
  long double u1, t;
  if constexpr (sizeof(T) == 4) {
    const auto w = oracle_block(d.seed, p / 4);
    const int j = int(p % 4) & ~1;
    u1 = static_cast<long double>((w[j] >> 8) + 1) / 16777216.0L;
    t = static_cast<long double>(w[j + 1] >> 8) / 16777216.0L;
  } else {
    const auto w = oracle_block(d.seed, p / 2);
    const std::uint64_t m1 = (std::uint64_t(1) << 53) - ((std::uint64_t(w[0]) << 21) ^ (w[1] >> 11));
    u1 = static_cast<long double>(m1) / 9007199254740992.0L;
    t = static_cast<long double>((std::uint64_t(w[2]) << 21) ^ (w[3] >> 11)) / 9007199254740992.0L;
  }
  const long double two_pi = 6.283185307179586476925286766559L;
  const long double r = std::sqrt(-2 * std::log(u1));
  const long double z = r * ((p % 2) ? std::sin(two_pi * t) : std::cos(two_pi * t));
  const long double v = static_cast<long double>(d.mean) + static_cast<long double>(d.sd) * z;
  const long double eps = std::ldexp(1.0L, 1 - digits);
  return {v, std::fabs(static_cast<long double>(d.sd)) * 8 * eps * (r + 1) + 2 * ulp_of(v, digits)};
}

using rng = backend;

TEST_P(rng, bits_follow_the_counter_layout_and_allocate_nothing) {
  const std::uint64_t seed = rs::test::fresh_seed();
  for (std::uint64_t offset : {0ull, 1ull, 6ull, (1ull << 40) + 3}) {
    for (std::size_t n : {std::size_t(1), std::size_t(3), std::size_t(1000), std::size_t(100003)}) {
      rs::array<std::uint32_t> a(n, dev);
      auto before = rs::pool_stats(dev);
      rs::scoped_ledger l(dev);
      rr::fill_bits(a, seed, offset);
      EXPECT_EQ(rs::pool_stats(dev).allocations, before.allocations) << "a fill allocated";
      EXPECT_EQ(l.delta().kernels, 1u);
      auto h = a.to_host();
      for (std::size_t i = 0; i < n; ++i)
        ASSERT_EQ(h[i], host_word(seed, offset + i)) << "i " << i << " offset " << offset;
    }
  }
}

// A block's values by its number (what the GPU kernels use) are the values by index (what fills promise).
TEST(distributions, values_of_block_match_values_by_index) {
  std::mt19937_64 g(rs::test::fresh_seed());
  auto check = [](const auto& d, std::size_t lead, int per_block) {
    EXPECT_EQ(d.block_lead(), lead);
    for (std::uint64_t k = 0; k < 5; ++k) {
      const auto v = d.values_of_block(d.first_block() + k);
      for (int l = 0; l < per_block; ++l) {
        const std::size_t i = std::size_t(k * per_block + std::uint64_t(l)) - lead;  // wraps below 0 for k = 0
        if (k == 0 && std::size_t(l) < lead) continue;
        const auto want = d(i);
        EXPECT_EQ(std::memcmp(&v.v[l], &want, sizeof want), 0) << "block " << k << " lane " << l;
      }
    }
  };
  const std::uint64_t seed = g(), offset = (g() >> 8) | 3;  // offset % 4 == 3
  check(rr::unit_distribution<float>{{}, seed, offset}, 3, 4);
  check(rr::unit_distribution<double>{{}, seed, offset}, 1, 2);
  check(rr::uniform_distribution<float>{{}, seed, offset, -2.f, 5.f}, 3, 4);
  check(rr::normal_distribution<double>{{}, seed, offset, 1.0, 2.0}, 1, 2);
  check(rr::integer_distribution<std::int32_t>{{}, seed, offset, -7, 1000}, 3, 4);
  check(rr::bits_distribution{{}, seed, offset}, 3, 4);
  check(rr::point_distribution<float>{rr::unit_distribution<float>{{}, seed, 2 * offset}}, 1, 2);
  check(rr::point_distribution<double>{rr::unit_distribution<double>{{}, seed, 2 * offset}}, 0, 1);
}

// Generators run over their Philox blocks: the first and last blocks are cut at the ends of [0, n)
// whatever the offset, and a reduction counts each value once.
TEST_P(rng, generator_blocks_cover_any_offset_and_size) {
  const std::uint64_t seed = rs::test::fresh_seed();
  auto widen = [] RESIDENT_HD(std::uint32_t w) { return std::uint64_t(w); };
  for (std::uint64_t offset : {0ull, 1ull, 2ull, 3ull, (1ull << 40) + 3}) {
    for (std::size_t n : {std::size_t(1), std::size_t(2), std::size_t(5), std::size_t(1001), std::size_t(100003)}) {
      std::uint64_t want = 0;
      for (std::size_t i = 0; i < n; ++i) want += host_word(seed, offset + i);
      const std::uint64_t got = (rs::generate(rr::bits_distribution{{}, seed, offset}) | rs::map(widen) |
                                 rs::reduce(rs::plus{}, std::uint64_t(0)))(n, rs::default_stream(dev));
      ASSERT_EQ(got, want) << "offset " << offset << " n " << n;
    }
  }
  // Floats written into doubles (four values a block, 32 bytes a block of output), at every alignment.
  const std::size_t n = 4099;
  rs::array<float> f(n + 3, dev);
  rs::array<double> d(n + 3, dev);
  rr::fill_uniform(f, seed);  // every element written before the whole arrays are read back
  rr::fill_uniform(d, seed);
  for (std::size_t start = 0; start < 4; ++start) {
    rr::fill_uniform(f.slice(start, n), seed, 5 + start);
    rr::uniform<float>(seed, 5 + start)(d.slice(start, n));
    const auto hf = f.to_host();
    const auto hd = d.to_host();
    for (std::size_t i = start; i < start + n; ++i) ASSERT_EQ(hd[i], double(hf[i])) << "start " << start << " i " << i;
  }
  // A launch of one thread makes both cut blocks itself.
  rs::array<float> one(n, dev), all(n, dev);
  rr::uniform<float>(seed, 7).with_config({rs::dims(1), rs::dims(1)})(one);
  rr::fill_uniform(all, seed, 7);
  EXPECT_EQ(one.to_host(), all.to_host());
  // Points at an odd offset begin in the middle of a block.
  auto inside = [] RESIDENT_HD(rr::point2<float> p) { return std::uint64_t(fmaf(p.x, p.x, p.y * p.y) <= 1.f); };
  const std::size_t points = 10001;
  const std::uint64_t fused = (rr::uniform_points<float>(seed, 1) | rs::map(inside) |
                               rs::reduce(rs::plus{}, std::uint64_t(0)))(points, rs::default_stream(dev));
  rs::array<float> xy(2 * points, dev);
  rr::fill_uniform(xy, seed, 2);
  auto h = xy.to_host();
  std::uint64_t count = 0;
  for (std::size_t i = 0; i < points; ++i) count += std::fma(h[2 * i], h[2 * i], h[2 * i + 1] * h[2 * i + 1]) <= 1.f;
  EXPECT_EQ(fused, count);
}

TEST_P(rng, values_match_the_oracle_the_cpu_and_any_launch_shape) {
  const std::uint64_t seed = rs::test::fresh_seed();
  const std::size_t n = 77777;
  rs::array<float> a(n, dev), b(n, dev), c(n, rs::device::cpu());
  rr::fill_uniform(a, seed, 5);
  rr::uniform<float>(seed, 5).with_config({rs::dims(3), rs::dims(64)})(b);
  rr::fill_uniform(c, seed, 5);
  auto ha = a.to_host(), hb = b.to_host(), hc = c.to_host();
  // Every value against the oracle (Random123's bits, the textbook maps); on a GPU, bit for bit the
  // CPU's too (the CPU's own against itself would prove nothing).
  const bool gpu = dev.is_cuda();
  auto expect_oracle = [&](const auto& got, const auto& d, const char* what) {
    std::size_t bad = 0, first = 0;
    for (std::size_t i = 0; i < got.size(); ++i)
      if (!agrees(got[i], oracle(d, i)) && bad++ == 0) first = i;
    EXPECT_EQ(bad, 0u) << what << ": " << bad << " values off the oracle, the first at " << first << ": "
                       << agrees(got[first], oracle(d, first)).message();
  };
  expect_oracle(ha, rr::unit_distribution<float>{{}, seed, 5}, "uniform float");
  EXPECT_EQ(ha, hb) << "the launch shape changed the numbers";
  if (gpu) {
    EXPECT_EQ(ha, hc) << "CPU and " << dev.name() << " differ";
  }
  // A fill of [0, n) equals fills of [0, k) and [k, n) at offset k.
  rs::array<float> d(n, dev);
  rr::fill_uniform(d.slice(0, 1000), seed, 5);
  rr::fill_uniform(d.slice(1000, n - 1000), seed, 1005);
  EXPECT_EQ(d.to_host(), ha);
  // Misaligned pieces too (a scalar head of 3 elements, a tail, a single element).
  rs::array<float> p(n, dev);
  rr::fill_uniform(p.slice(0, 1), seed, 5);
  rr::fill_uniform(p.slice(1, 998), seed, 6);
  rr::fill_uniform(p.slice(999, n - 999), seed, 1004);
  EXPECT_EQ(p.to_host(), ha);
  // fill_uniform's [0, 1) takes unit_distribution: the same bits as uniform_distribution's scaling by 1.
  rs::array<float> u(n, dev);
  rs::generate(rr::uniform_distribution<float>{{}, seed, 5, 0.f, 1.f})(u);
  EXPECT_EQ(u.to_host(), ha);
  rs::array<double> ud(n, dev), vd(n, dev);
  rr::fill_uniform(ud, seed, 7);
  rs::generate(rr::uniform_distribution<double>{{}, seed, 7, 0.0, 1.0})(vd);
  EXPECT_EQ(ud.to_host(), vd.to_host());
  // Doubles and integers are identical across backends too.
  rs::array<double> e(n, dev), f(n, rs::device::cpu());
  rr::fill_uniform(e, seed, 0, -2.0, 3.0);
  rr::fill_uniform(f, seed, 0, -2.0, 3.0);
  expect_oracle(e.to_host(), rr::uniform_distribution<double>{{}, seed, 0, -2.0, 3.0}, "uniform double");
  expect_oracle(ud.to_host(), rr::unit_distribution<double>{{}, seed, 7}, "unit double");
  if (gpu) {
    EXPECT_EQ(e.to_host(), f.to_host());
  }
  rs::array<std::int32_t> g(n, dev), h(n, rs::device::cpu());
  rr::fill_integers(g, seed, 9, -5, 1000003);
  rr::fill_integers(h, seed, 9, -5, 1000003);
  expect_oracle(g.to_host(), rr::integer_distribution<std::int32_t>{{}, seed, 9, -5, 1000008u}, "integers");
  if (gpu) {
    EXPECT_EQ(g.to_host(), h.to_host());
  }
  // Normals too: the library's own log, sine and cosine, the same operations on both backends.
  rs::array<float> m(n, dev), k(n, rs::device::cpu());
  rr::fill_normal(m, seed, 3, 1.f, 2.f);
  rr::fill_normal(k, seed, 3, 1.f, 2.f);
  expect_oracle(m.to_host(), rr::normal_distribution<float>{{}, seed, 3, 1.f, 2.f}, "normal float");
  if (gpu) {
    EXPECT_EQ(m.to_host(), k.to_host());
  }
}

TEST_P(rng, uniform_statistics) {
  const std::size_t n = 1 << 22;
  rs::array<float> a(n, dev);
  rr::fill_uniform(a, 20261129, 0);
  auto h = a.to_host();
  double mean = 0, var = 0, corr = 0;
  std::vector<std::uint64_t> buckets(100, 0);
  for (std::size_t i = 0; i < n; ++i) {
    ASSERT_GE(h[i], 0.f);
    ASSERT_LT(h[i], 1.f);
    mean += h[i];
    buckets[std::size_t(h[i] * 100)]++;
  }
  mean /= double(n);
  for (std::size_t i = 0; i < n; ++i) var += (h[i] - mean) * (h[i] - mean);
  var /= double(n);
  for (std::size_t i = 0; i + 1 < n; ++i) corr += (h[i] - mean) * (h[i + 1] - mean);
  corr /= double(n - 1) * var;
  double chi2 = 0, expect = double(n) / 100;
  for (auto b : buckets) chi2 += (double(b) - expect) * (double(b) - expect) / expect;
  const double sigma = std::sqrt(1.0 / 12 / double(n));
  EXPECT_NEAR(mean, 0.5, 5 * sigma);
  EXPECT_NEAR(var, 1.0 / 12, 0.002);
  EXPECT_NEAR(corr, 0.0, 5 / std::sqrt(double(n))) << "neighbouring values correlate";
  EXPECT_LT(chi2, 99 + 5 * std::sqrt(2 * 99.0)) << "99 degrees of freedom, 5 sigma";
}

TEST_P(rng, normal_and_integer_statistics) {
  const std::size_t n = 1 << 21;
  rs::array<double> z(n, dev);
  rr::fill_normal(z, 42, 0, 3.0, 2.0);
  auto hz = z.to_host();
  double mean = std::accumulate(hz.begin(), hz.end(), 0.0) / double(n), var = 0;
  for (double v : hz) var += (v - mean) * (v - mean);
  var /= double(n);
  EXPECT_NEAR(mean, 3.0, 5 * 2.0 / std::sqrt(double(n)));
  EXPECT_NEAR(var, 4.0, 0.03);
  rs::array<float> zf(n, dev);
  rr::fill_normal(zf, 43, 0);
  auto hf = zf.to_host();
  double within1 = 0;
  for (float v : hf) within1 += std::abs(v) < 1.f;
  EXPECT_NEAR(within1 / double(n), 0.682689, 0.002);

  // Range 7 does not divide 2^32: plain modulo would be biased; 5 sigma chi-square over 7 buckets.
  rs::array<std::uint32_t> k(n, dev);
  rr::fill_integers(k, 7, 0, 10u, 17u);
  std::vector<double> counts(7, 0);
  for (auto v : k.to_host()) {
    ASSERT_GE(v, 10u);
    ASSERT_LT(v, 17u);
    counts[v - 10] += 1;
  }
  double chi2 = 0, e = double(n) / 7;
  for (double c : counts) chi2 += (c - e) * (c - e) / e;
  EXPECT_LT(chi2, 6 + 5 * std::sqrt(12.0));
}

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
    worst = std::max(worst, std::abs(double(got) - want) / ulp);
  }
  EXPECT_LT(worst, 1.0);
  RecordProperty("worst_ulp", std::to_string(worst));
}

TEST(normal_math, float_sincos_within_one_and_a_half_times_two_to_the_minus_24_over_every_input) {
  double worst = 0;
  for (std::uint32_t k = 0; k < (1u << 24); ++k) {
    const auto cs = rr::detail::sincos_turn_24(k);
    const double t = 6.283185307179586 * double(k) * 0x1p-24;
    worst = std::max({worst, std::abs(double(cs.c) - std::cos(t)), std::abs(double(cs.s) - std::sin(t))});
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
      worst_log = std::max(worst_log, double(std::abs((long double)got - want)) / ulp);
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

// 1,000,003 normals at offset 2^40 + 5 (the case that differed in 193,337 values between the backends'
// libraries): each within its error bound of the textbook Box-Muller in long double, and on a GPU bit
// for bit the CPU's values.
TEST_P(rng, normals_match_box_muller_in_long_double_and_the_cpus_bits) {
  const std::uint64_t seed = rs::test::fresh_seed(), offset = (1ull << 40) + 5;
  SCOPED_TRACE(seed);
  const std::size_t n = 1000003;
  rs::array<float> a = poisoned<float>(n, dev), cpu = poisoned<float>(n, rs::device::cpu());
  rr::fill_normal(a, seed, offset, 0.5f, 3.f);
  rr::fill_normal(cpu, seed, offset, 0.5f, 3.f);
  const auto h = a.to_host();
  // Every value against the textbook Box-Muller in long double; on a GPU, bit for bit the CPU's.
  const rr::normal_distribution<float> nf{{}, seed, offset, 0.5f, 3.f};
  for (std::size_t i = 0; i < n; ++i) ASSERT_TRUE(agrees(h[i], oracle(nf, i))) << "i " << i;
  if (dev.is_cuda()) {
    EXPECT_EQ(h, cpu.to_host()) << dev.name() << " and the CPU differ";
  }
  rs::array<double> d = poisoned<double>(n, dev), dcpu = poisoned<double>(n, rs::device::cpu());
  rr::fill_normal(d, seed, offset, -1.0, 0.25);
  rr::fill_normal(dcpu, seed, offset, -1.0, 0.25);
  const auto hd = d.to_host();
  const rr::normal_distribution<double> nd{{}, seed, offset, -1.0, 0.25};
  for (std::size_t i = 0; i < n; ++i) ASSERT_TRUE(agrees(hd[i], oracle(nd, i))) << "i " << i;
  if (dev.is_cuda()) {
    EXPECT_EQ(hd, dcpu.to_host()) << dev.name() << " and the CPU differ";
  }
}

TEST_P(rng, monte_carlo_pi_fused_equals_fill_then_reduce) {
  const std::size_t n = 1 << 20;
  const std::uint64_t seed = rs::test::fresh_seed();
  // fmaf on both sides: nvcc would contract x * x + y * y into an fma, g++ would not, and a point on
  // the edge could then count on one side only.
  auto inside = [] RESIDENT_HD(rr::point2<float> p) { return std::uint64_t(fmaf(p.x, p.x, p.y * p.y) <= 1.f); };
  rs::scoped_ledger l(dev);
  std::uint64_t fused = (rr::uniform_points<float>(seed) | rs::map(inside) | rs::reduce(rs::plus{}, std::uint64_t(0)))(
      n, rs::default_stream(dev));
  EXPECT_EQ(l.delta().kernels, 1u) << "generate -> map -> reduce must be one kernel";
  // The same points written to memory first: pairs of the uniform stream.
  rs::array<float> xy(2 * n, dev);
  rr::fill_uniform(xy, seed);
  auto h = xy.to_host();
  std::uint64_t count = 0;
  for (std::size_t i = 0; i < n; ++i) count += std::fma(h[2 * i], h[2 * i], h[2 * i + 1] * h[2 * i + 1]) <= 1.f;
  EXPECT_EQ(fused, count);
  EXPECT_NEAR(4.0 * double(fused) / double(n), 3.14159265, 0.01);
}

TEST_P(rng, proportionate_large_array_without_further_allocation) {
  // The GPU run of this (60% of free memory) is `resident bench rng`; here a size that fits any machine.
  const std::size_t n = std::size_t(16) << 20;
  rs::array<float> a(n, dev);
  rs::array<double> sum(1, dev);
  auto before = rs::pool_stats(dev).allocations;
  rr::fill_uniform(a, 11, 0, -1.f, 1.f);
  (rs::map([] RESIDENT_HD(float v) { return v * v; }))(a);
  (rs::map([] RESIDENT_HD(float v) { return double(v); }) | rs::reduce(rs::plus{}, 0.0))(a, sum);
  // The reduction's scratch is the only pool traffic: no array was created.
  EXPECT_LE(rs::pool_stats(dev).allocations, before + 1);
  double s = sum.to_host()[0];
  EXPECT_NEAR(s / double(n), 1.0 / 3, 0.001);
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

RESIDENT_BACKENDS(rng);

}  // namespace
