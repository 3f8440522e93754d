// Compiled by nvcc when the CUDA backend is in the build.
// Fused reductions and scans at the edges: every small length and offset, with and without an identity,
// init values that matter, integers that wrap, bool partials of every piece.
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "resident/fuse/pipeline.hpp"
#include "edges_support.hpp"
#include "support.hpp"

namespace rs = resident;
using rs::test::backend;

namespace {

using pipeline_edges = backend;

using namespace rs::test::edges;

struct max_abs {
  RESIDENT_HD float operator()(float a, float b) const { return fabsf(a) < fabsf(b) ? fabsf(b) : fabsf(a); }
};

struct times {
  template <class T>
  RESIDENT_HD T operator()(T a, T b) const {
    return a * b;
  }
};

struct larger {  // a maximum the library knows no identity of
  RESIDENT_HD std::int64_t operator()(std::int64_t a, std::int64_t b) const { return a < b ? b : a; }
};

TEST_P(pipeline_edges, reductions_at_every_length_and_offset_with_and_without_an_identity) {
  const auto seed = rs::test::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const std::size_t most = (std::size_t(1) << 17) + 2;
  const auto h = quarters<float>(most + 4, seed);
  const auto x = rs::to_device(h, dev);
  std::vector<std::int64_t> hneg(most + 4);
  for (std::size_t i = 0; i < hneg.size(); ++i) hneg[i] = -1000 - std::int64_t((i * 7919) % 100000);
  const auto neg = rs::to_device(hneg, dev);
  // Products of values near 1: a piece folded from a wrong start (0, or init twice) is far off.
  std::vector<double> hp(most + 4);
  for (std::size_t i = 0; i < hp.size(); ++i) hp[i] = 1.0 + ((i * 31) % 17 == 0 ? 1.0 / 1024 : -1.0 / 4096);
  const auto p = rs::to_device(hp, dev);
  const auto dsum = rs::map([] RESIDENT_HD(float v) { return double(v); }) | rs::reduce(rs::plus{}, 3.0);
  const auto fmin = rs::reduce(rs::minimum{}, 1000.f);
  const auto fmax = rs::reduce(rs::maximum{}, -1000.f);
  const auto fmax_abs = rs::reduce(max_abs{}, 0.f);
  const auto imax = rs::reduce(larger{}, std::numeric_limits<std::int64_t>::min());
  const auto iprod = rs::map([] RESIDENT_HD(std::int64_t v) { return v % 3 == 0 ? std::int64_t(-1) : std::int64_t(1); }) |
                     rs::reduce(times{}, std::int64_t(5));
  const auto dprod = rs::reduce(times{}, 2.0);
  for (std::size_t n : edge_lengths())
    for (std::size_t off : {0, 1, 2, 3}) {
      if (n > most) continue;
      SCOPED_TRACE("n " + std::to_string(n) + " offset " + std::to_string(off));
      double s = 3.0, ma = 0, pr = 2.0;
      float mn = 1000.f, mx = -1000.f;
      std::int64_t imx = std::numeric_limits<std::int64_t>::min(), ip = 5;
      for (std::size_t i = off; i < off + n; ++i) {
        s += h[i];
        mn = std::min(mn, h[i]);
        mx = std::max(mx, h[i]);
        ma = std::max(ma, double(std::abs(h[i])));
        imx = std::max(imx, hneg[i]);
        ip *= hneg[i] % 3 == 0 ? -1 : 1;
        pr *= hp[i];
      }
      EXPECT_EQ(dsum(x.slice(off, n)), s);
      EXPECT_EQ(fmin(x.slice(off, n)), mn);
      EXPECT_EQ(fmax(x.slice(off, n)), mx);
      EXPECT_EQ(double(fmax_abs(x.slice(off, n))), ma);
      EXPECT_EQ(imax(neg.slice(off, n)), imx) << "a maximum of negatives is not the identity 0";
      EXPECT_EQ(iprod(neg.slice(off, n)), ip);
      EXPECT_NEAR(dprod(p.slice(off, n)), pr, 1e-12 * std::abs(pr));
      // The same into a one-element result slice in the middle of a poisoned array.
      auto r = poisoned<std::int64_t>(1, dev);
      imax(neg.slice(off, n), r.slice(2, 1));
      expect_window(r.to_host(), 2, 1, [&](std::size_t, std::int64_t v) { return v == imx; }, "into a result slice");
    }
}

TEST_P(pipeline_edges, init_values_that_matter) {
  const std::vector<float> h{-7.f, -8.f, -9.5f, -6.25f, -100.f, -7.f, -6.5f};
  for (std::size_t off : {0, 1, 2}) {
    const auto a = rs::to_device(h, dev);
    const auto v = a.slice(off, h.size() - off);
    // Every value is below the init of a maximum: the init wins; above one: the data wins.
    EXPECT_EQ(rs::reduce(rs::maximum{}, -5.f)(v), -5.f);
    EXPECT_EQ(rs::reduce(rs::maximum{}, -1000.f)(v), -6.25f);
    EXPECT_EQ(rs::reduce(rs::minimum{}, -1000.f)(v), -1000.f);
    EXPECT_EQ(rs::reduce(rs::minimum{}, 0.f)(v), -100.f);
    EXPECT_EQ(rs::reduce(rs::plus{}, 1000.f)(v), 1000.f + [&] {
      float s = 0;
      for (std::size_t i = off; i < h.size(); ++i) s += h[i];
      return s;
    }());
    const float nan = std::numeric_limits<float>::quiet_NaN();
    EXPECT_TRUE(std::isnan(rs::reduce(rs::maximum{}, nan)(v)));
    EXPECT_TRUE(std::isnan(rs::reduce(rs::minimum{}, nan)(v)));
    EXPECT_TRUE(std::isnan(rs::reduce(rs::plus{}, nan)(v)));
    // An empty input returns init, and writes it into a result array.
    const auto none = a.slice(off, 0);
    EXPECT_EQ(rs::reduce(rs::maximum{}, -5.f)(none), -5.f);
    EXPECT_TRUE(std::isnan(rs::reduce(rs::plus{}, nan)(none)));
    auto r = poisoned<float>(1, dev);
    rs::reduce(rs::maximum{}, -5.f)(none, r.slice(off, 1));
    expect_window(r.to_host(), off, 1, [](std::size_t, float got) { return got == -5.f; }, "init into a result");
  }
}

TEST_P(pipeline_edges, integer_reductions_wrap_around_exactly) {
  const std::size_t most = 300007;
  std::vector<std::uint8_t> h8(most + 3);
  std::vector<std::uint32_t> h32(most + 3);
  std::vector<std::uint16_t> h16(most + 3);
  for (std::size_t i = 0; i < h8.size(); ++i) {
    h8[i] = std::uint8_t(i * 151 + 7);
    h32[i] = std::uint32_t(i * 2654435761u);
    h16[i] = std::uint16_t(i * 40503u);
  }
  const auto x8 = rs::to_device(h8, dev);
  const auto x32 = rs::to_device(h32, dev);
  const auto x16 = rs::to_device(h16, dev);
  for (std::size_t n : {std::size_t(1), std::size_t(2), std::size_t(15), std::size_t(16), std::size_t(17),
                        std::size_t(31), std::size_t(32), std::size_t(33), std::size_t(47), std::size_t(65535),
                        std::size_t(65537), most})
    for (std::size_t off : {0, 1, 3}) {
      SCOPED_TRACE("n " + std::to_string(n) + " offset " + std::to_string(off));
      std::uint8_t s8 = 200, mn8 = 255, mx8 = 0;
      std::uint16_t s16 = 1;
      std::uint32_t s32 = 0xFFFFFFF0u;
      std::uint64_t wide = 0;
      for (std::size_t i = off; i < off + n; ++i) {
        s8 = std::uint8_t(s8 + h8[i]);
        mn8 = std::min(mn8, h8[i]);
        mx8 = std::max(mx8, h8[i]);
        s16 = std::uint16_t(s16 + h16[i]);
        s32 += h32[i];
        wide += h8[i];
      }
      EXPECT_EQ(rs::reduce(rs::plus{}, std::uint8_t(200))(x8.slice(off, n)), s8);
      EXPECT_EQ(rs::reduce(rs::minimum{}, std::uint8_t(255))(x8.slice(off, n)), mn8);
      EXPECT_EQ(rs::reduce(rs::maximum{}, std::uint8_t(0))(x8.slice(off, n)), mx8);
      EXPECT_EQ(rs::reduce(rs::plus{}, std::uint16_t(1))(x16.slice(off, n)), s16);
      EXPECT_EQ(rs::reduce(rs::plus{}, 0xFFFFFFF0u)(x32.slice(off, n)), s32);
      // Widened before the fold: no wrap at all.
      EXPECT_EQ(rs::reduce(rs::plus{}, std::uint64_t(0))(x8.slice(off, n)), wide);
      rs::array<std::uint8_t> r(1, dev);
      rs::reduce(rs::plus{}, std::uint8_t(200))(x8.slice(off, n), r);
      EXPECT_EQ(r.to_host()[0], s8);
    }
}

TEST_P(pipeline_edges, scans_after_zips_and_generators_at_edge_lengths) {
  for (std::size_t n : edge_lengths()) {
    if (n > (std::size_t(1) << 16) + 2) continue;
    SCOPED_TRACE("n " + std::to_string(n));
    std::vector<std::int32_t> ha(n + 3);
    std::vector<float> hb(n + 3);
    for (std::size_t i = 0; i < ha.size(); ++i) {
      ha[i] = std::int32_t(i % 9) - 4;
      hb[i] = float(i % 4);
    }
    const auto a = rs::to_device(ha, dev);
    const auto b = rs::to_device(hb, dev);
    for (std::size_t off : {0, 1, 3}) {
      auto y = poisoned<std::int64_t>(n, dev);
      (rs::zip(a.slice(off, n), b.slice(3 - off, n)) |
       rs::map([] RESIDENT_HD(std::int32_t p, float q) { return std::int64_t(p) * std::int64_t(q); }) |
       rs::inclusive_scan(rs::plus{}))(y.slice(off, n));
      std::int64_t acc = 0;
      std::vector<std::int64_t> want(n);
      for (std::size_t i = 0; i < n; ++i) want[i] = acc += std::int64_t(ha[off + i]) * std::int64_t(hb[3 - off + i]);
      expect_window(y.to_host(), off, n, [&](std::size_t i, std::int64_t v) { return v == want[i]; },
                    "zip scan at " + std::to_string(off));
      // A running minimum in place on a misaligned slice; a wrapping byte sum from a generator.
      auto z = rs::to_device(hb, dev);
      rs::inclusive_scan(rs::minimum{})(z.slice(off, n));
      const auto hz = z.to_host();
      float run = std::numeric_limits<float>::infinity();
      for (std::size_t i = 0; i < hz.size(); ++i) {
        if (i < off || i >= off + n) {
          ASSERT_EQ(hz[i], hb[i]) << "outside the slice at " << i;
        } else {
          run = std::min(run, hb[i]);
          ASSERT_EQ(hz[i], run) << "at " << i;
        }
      }
      auto w = poisoned<std::uint8_t>(n, dev);
      (rs::generate([] RESIDENT_HD(std::size_t i) { return std::uint8_t(i * 7 + 1); }) | rs::inclusive_scan(rs::plus{}))(
          w.slice(off, n));
      std::uint8_t s = 0;
      std::vector<std::uint8_t> ws(n);
      for (std::size_t i = 0; i < n; ++i) ws[i] = s = std::uint8_t(s + std::uint8_t(i * 7 + 1));
      expect_window(w.to_host(), off, n, [&](std::size_t i, std::uint8_t v) { return v == ws[i]; }, "byte scan");
    }
  }
}

// bool values: folds and scans whose per-piece partials are bools.
struct differ {
  RESIDENT_HD bool operator()(bool a, bool b) const { return a != b; }
};

TEST_P(pipeline_edges, bool_reductions_and_scans_keep_every_pieces_partial) {
  // Two pieces of 2^15 values on the CPU, each of odd parity: an exclusive-or fold from false is false
  // only if neither piece's partial is lost. Partials kept in a std::vector<bool>, written by two
  // threads at once, lost one in about 10^4 to 10^5 calls: repeated, the pieces finishing together.
  const std::size_t n = std::size_t(1) << 16;
  rs::array<bool> x(n, dev);
  rs::generate([] RESIDENT_HD(std::size_t i) { return i == 7 || i == (std::size_t(1) << 15) + 9 || i % 16384 == 5; })(x);
  const auto parity = rs::reduce(differ{}, false);
  rs::array<bool> scanned(n, dev);
  rs::array<std::uint8_t> last(1, dev);
  for (int rep = 0; rep < (dev.is_cpu() ? 20000 : 20); ++rep) {
    ASSERT_FALSE(parity(x)) << "reduction, repetition " << rep;
    rs::inclusive_scan(differ{})(x, scanned);
    rs::map([] RESIDENT_HD(bool v) { return std::uint8_t(v); })(scanned.slice(n - 1, 1), last);
    ASSERT_EQ(last.to_host()[0], 0) << "scan, repetition " << rep;
  }
}

}  // namespace
