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
#include "random/oracle.hpp"
#include "support.hpp"

#if RESIDENT_HAVE_RANDOM123
#include <Random123/philox.h>
#endif

namespace rs = resident;
namespace rr = resident::random;
using rs::test::backend;

namespace {

using namespace rs::test::random_oracle;

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

RESIDENT_BACKENDS(rng);

}  // namespace
