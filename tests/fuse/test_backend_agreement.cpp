// One call, one value on both backends: each case compares to an exact value (or the library's own host
// evaluation of a counter-based stream), so a backend that differs fails: NaN, -0.0 and infinities in
// reductions and scans, integer wrap, floats into every integer type, bool, mixed element types,
// denormals, random fills, run-time reductions, the vector path against the scalar head and tail at
// lengths 1, 3, 17, 4097 and offsets 0..3. Where the backends may differ by design (an fma the GPU
// contracts, a float32 sum's partials, the sign of a zero min / max over +0 and -0) no value is held.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "resident/fuse/pipeline.hpp"
#include "resident/jit/jit.hpp"
#include "resident/linalg/matmul.hpp"
#include "resident/random/random.hpp"
#include "support.hpp"

namespace rs = resident;
using rs::test::backend;

namespace {

using backend_agreement = backend;

const float finf = std::numeric_limits<float>::infinity();
const float fnan = std::numeric_limits<float>::quiet_NaN();

std::vector<std::size_t> lengths() { return {1, 3, 17, 4097}; }

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0 || (a != a && b != b); }
bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0 || (a != a && b != b); }


template <class T>
rs::array<T> padded(const std::vector<T>& h, std::size_t off, rs::device dev) {
  std::vector<T> p(off, T(99));
  p.insert(p.end(), h.begin(), h.end());
  return rs::to_device(p, dev);
}

TEST_P(backend_agreement, nan_inf_and_negative_zero_in_reductions_at_every_length_and_offset) {
  const auto id = rs::map([] RESIDENT_HD(float v) { return v; });
  for (std::size_t n : lengths())
    for (std::size_t off : {0, 1, 2, 3})
      for (std::size_t at : {std::size_t(0), n / 2, n - 1}) {
        const std::string what = "n " + std::to_string(n) + " offset " + std::to_string(off) + " at " + std::to_string(at);
        std::vector<float> h(n);
        for (std::size_t i = 0; i < n; ++i) h[i] = float(int(i % 7) - 3);  // small integers: exact sums
        double exact = 0;
        float lo = finf, hi = -finf;
        for (float v : h) exact += v, lo = std::min(lo, v), hi = std::max(hi, v);
        {
          const auto x = padded(h, off, dev);
          EXPECT_EQ((id | rs::reduce(rs::plus{}, 0.f))(x.slice(off, n)), float(exact)) << what;
          EXPECT_EQ((id | rs::reduce(rs::plus{}, 0.0))(x.slice(off, n)), exact) << what;
          EXPECT_EQ((id | rs::reduce(rs::minimum{}, finf))(x.slice(off, n)), lo) << what;
          EXPECT_EQ((id | rs::reduce(rs::maximum{}, -finf))(x.slice(off, n)), hi) << what;
        }
        // A NaN anywhere: every operator gives NaN (also as init).
        auto hn = h;
        hn[at] = fnan;
        const auto xn = padded(hn, off, dev);
        EXPECT_TRUE(std::isnan((id | rs::reduce(rs::plus{}, 0.f))(xn.slice(off, n)))) << what;
        EXPECT_TRUE(std::isnan((id | rs::reduce(rs::minimum{}, finf))(xn.slice(off, n)))) << what;
        EXPECT_TRUE(std::isnan((id | rs::reduce(rs::maximum{}, -finf))(xn.slice(off, n)))) << what;
        const auto x = padded(h, off, dev);
        EXPECT_TRUE(std::isnan((id | rs::reduce(rs::minimum{}, fnan))(x.slice(off, n)))) << what;
        EXPECT_TRUE(std::isnan((id | rs::reduce(rs::maximum{}, fnan))(x.slice(off, n)))) << what;
        // An infinity: min / max pick it; +inf and -inf together sum to NaN.
        auto hi_ = h;
        hi_[at] = -finf;
        const auto xi = padded(hi_, off, dev);
        EXPECT_EQ((id | rs::reduce(rs::minimum{}, finf))(xi.slice(off, n)), -finf) << what;
        EXPECT_EQ((id | rs::reduce(rs::plus{}, 0.f))(xi.slice(off, n)), -finf) << what;
        EXPECT_TRUE(std::isnan((id | rs::reduce(rs::plus{}, finf))(xi.slice(off, n)))) << what;
        // All -0.0: a sum from -0.0 stays -0.0, from +0.0 is +0.0; min and max are -0.0 (no +0 to tie).
        const auto xz = padded(std::vector<float>(n, -0.f), off, dev);
        const float sz = (id | rs::reduce(rs::plus{}, -0.f))(xz.slice(off, n));
        EXPECT_TRUE(sz == 0.f && std::signbit(sz)) << what;
        const float sp = (id | rs::reduce(rs::plus{}, 0.f))(xz.slice(off, n));
        EXPECT_TRUE(sp == 0.f && !std::signbit(sp)) << what;
        const float mz = (id | rs::reduce(rs::minimum{}, finf))(xz.slice(off, n));
        EXPECT_TRUE(mz == 0.f && std::signbit(mz)) << what;
        const float Mz = (id | rs::reduce(rs::maximum{}, -finf))(xz.slice(off, n));
        EXPECT_TRUE(Mz == 0.f && std::signbit(Mz)) << what;
      }
}

TEST_P(backend_agreement, integer_sums_wrap_and_scans_wrap_at_every_length_and_offset) {
  for (std::size_t n : lengths())
    for (std::size_t off : {0, 1, 2, 3}) {
      const std::string what = "n " + std::to_string(n) + " offset " + std::to_string(off);
      std::vector<std::int32_t> hi(n);
      std::vector<std::uint32_t> hu(n);
      std::uint32_t wi = 0, wu = 0;
      for (std::size_t i = 0; i < n; ++i) {
        hi[i] = std::int32_t(0x7FFFFF00u + std::uint32_t(i * 977u));  // sums wrap past INT32_MAX
        hu[i] = 0xFFFFFFF0u - std::uint32_t(i);
        wi += std::uint32_t(hi[i]);
        wu += hu[i];
      }
      const auto xi = padded(hi, off, dev);
      const auto xu = padded(hu, off, dev);
      const auto idi = rs::map([] RESIDENT_HD(std::int32_t v) { return v; });
      const auto idu = rs::map([] RESIDENT_HD(std::uint32_t v) { return v; });
      EXPECT_EQ((idu | rs::reduce(rs::plus{}, std::uint32_t(0)))(xu.slice(off, n)), wu) << what;
      // int32: wrap through unsigned arithmetic in the stage (signed overflow is undefined in C++).
      const auto wrap = rs::map([] RESIDENT_HD(std::int32_t v) { return std::uint32_t(v); });
      EXPECT_EQ((wrap | rs::reduce(rs::plus{}, std::uint32_t(0)))(xi.slice(off, n)), wi) << what;
      // 64-bit accumulation of int32 values: exact.
      std::int64_t e64 = 0;
      for (auto v : hi) e64 += v;
      EXPECT_EQ((idi | rs::reduce(rs::plus{}, std::int64_t(0)))(xi.slice(off, n)), e64) << what;
      // Scans of uint32 wrap the same way.
      rs::array<std::uint32_t> s(n, dev);
      (idu | rs::inclusive_scan(rs::plus{}))(xu.slice(off, n), s);
      const auto hs = s.to_host();
      std::uint32_t acc = 0;
      for (std::size_t i = 0; i < n; ++i) {
        acc += hu[i];
        ASSERT_EQ(hs[i], acc) << what << " at " << i;
      }
      // int8 written from int32 wraps modulo 256 (C++20), vector and scalar paths alike.
      rs::array<std::int8_t> b(n, dev);
      idi(xi.slice(off, n), b);
      const auto hb = b.to_host();
      for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(hb[i], std::int8_t(hi[i])) << what << " at " << i;
    }
}

TEST_P(backend_agreement, scans_propagate_nan_and_keep_infinities_and_negative_zero) {
  for (std::size_t n : lengths())
    for (std::size_t off : {0, 1, 2, 3}) {
      const std::string what = "n " + std::to_string(n) + " offset " + std::to_string(off);
      std::vector<float> h(n);
      for (std::size_t i = 0; i < n; ++i) h[i] = float(int(i % 5) - 2);
      const std::size_t at = n / 2;
      h[at] = fnan;
      const auto x = padded(h, off, dev);
      const auto id = rs::map([] RESIDENT_HD(float v) { return v; });
      rs::array<float> mx(n, dev), mn(n, dev), sm(n, dev);
      (id | rs::inclusive_scan(rs::maximum{}))(x.slice(off, n), mx);
      (id | rs::inclusive_scan(rs::minimum{}))(x.slice(off, n), mn);
      (id | rs::inclusive_scan(rs::plus{}))(x.slice(off, n), sm);
      const auto a = mx.to_host(), b = mn.to_host(), c = sm.to_host();
      float M = -finf, m = finf, S = 0;
      for (std::size_t i = 0; i < n; ++i) {
        M = i == 0 ? h[0] : rs::maximum{}(M, h[i]);
        m = i == 0 ? h[0] : rs::minimum{}(m, h[i]);
        S = i == 0 ? h[0] : S + h[i];
        ASSERT_TRUE(same_bits(a[i], M)) << what << " max at " << i << ": " << a[i] << " vs " << M;
        ASSERT_TRUE(same_bits(b[i], m)) << what << " min at " << i;
        ASSERT_TRUE(same_bits(c[i], S)) << what << " sum at " << i;
      }
      // -0.0 alone: a sum scan of -0.0 stays -0.0 everywhere; an inf then -inf gives NaN after.
      const auto z = padded(std::vector<float>(n, -0.f), off, dev);
      (id | rs::inclusive_scan(rs::plus{}))(z.slice(off, n), sm);
      for (float v : sm.to_host()) ASSERT_TRUE(v == 0.f && std::signbit(v)) << what;
    }
}

TEST_P(backend_agreement, floats_into_every_integer_type_saturate_on_every_path) {
  const std::vector<float> vals = {fnan, 1e30f, -1e30f, 3.7f, -3.7f, finf, -finf, 255.5f, 256.f, -1.f, -0.f, 65535.9f};
  for (std::size_t n : lengths())
    for (std::size_t off : {0, 1, 2, 3}) {
      const std::string what = "n " + std::to_string(n) + " offset " + std::to_string(off);
      std::vector<float> h(n);
      for (std::size_t i = 0; i < n; ++i) h[i] = vals[i % vals.size()];
      const auto x = padded(h, off, dev);
      const auto id = rs::map([] RESIDENT_HD(float v) { return v; });
      auto sat = [](float v, double lo, double hi) {
        if (v != v) return 0.0;
        if (v <= lo) return lo;
        if (v >= hi) return hi;
        return std::trunc(double(v));
      };
      rs::array<std::uint8_t> u8(n, dev);
      rs::array<std::int16_t> i16(n, dev);
      rs::array<std::int64_t> i64(n, dev);
      rs::array<std::uint64_t> u64(n, dev);
      id(x.slice(off, n), u8);
      id(x.slice(off, n), i16);
      id(x.slice(off, n), i64);
      id(x.slice(off, n), u64);
      const auto a = u8.to_host();
      const auto b = i16.to_host();
      const auto c = i64.to_host();
      const auto d = u64.to_host();
      for (std::size_t i = 0; i < n; ++i) {
        ASSERT_EQ(double(a[i]), sat(h[i], 0, 255)) << what << " uint8 at " << i;
        ASSERT_EQ(double(b[i]), sat(h[i], -32768, 32767)) << what << " int16 at " << i;
        const double s64 = sat(h[i], -0x1p63, 0x1p63);
        if (s64 >= 0x1p63)
          ASSERT_EQ(c[i], std::numeric_limits<std::int64_t>::max()) << what << " int64 at " << i;
        else
          ASSERT_EQ(double(c[i]), s64) << what << " int64 at " << i;
        const double su64 = sat(h[i], 0, 0x1p64);
        if (su64 >= 0x1p64)
          ASSERT_EQ(d[i], std::numeric_limits<std::uint64_t>::max()) << what << " uint64 at " << i;
        else
          ASSERT_EQ(double(d[i]), su64) << what << " uint64 at " << i;
      }
      // Through a double stage into int32 (double -> int32, 8-byte source, 4-byte output).
      rs::array<std::int32_t> i32(n, dev);
      rs::map([] RESIDENT_HD(float v) { return double(v) * 1e10; })(x.slice(off, n), i32);
      const auto e = i32.to_host();
      for (std::size_t i = 0; i < n; ++i)
        ASSERT_EQ(double(e[i]), [&] {
          const double v = double(h[i]) * 1e10;
          if (v != v) return 0.0;
          if (v <= -0x1p31) return -0x1p31;
          if (v >= 0x1p31 - 1) return 0x1p31 - 1;
          return std::trunc(v);
        }()) << what << " int32 from double at " << i;
    }
}

TEST_P(backend_agreement, bool_and_mixed_type_zips_at_every_length_and_offset) {
  for (std::size_t n : lengths())
    for (std::size_t off : {0, 1, 2, 3}) {
      const std::string what = "n " + std::to_string(n) + " offset " + std::to_string(off);
      std::vector<float> hf(n);
      std::vector<std::int8_t> hb(n);
      std::vector<double> hd(n);
      for (std::size_t i = 0; i < n; ++i) {
        hf[i] = i % 4 == 0 ? fnan : i % 4 == 1 ? -0.f : i % 4 == 2 ? 0.5f : 0.f;
        hb[i] = std::int8_t(int(i * 37 % 256) - 128);
        hd[i] = double(i) * 0.25 - 3.0;
      }
      const auto f = padded(hf, off, dev);
      const auto b = padded(hb, off, dev);
      const auto d = padded(hd, off, dev);
      // float -> bool: NaN is true, -0.0 false, 0.5 true.
      rs::array<bool> flags(n, dev);
      rs::map([] RESIDENT_HD(float v) { return v; })(f.slice(off, n), flags);
      rs::array<std::uint8_t> flag_bytes(n, dev);
      rs::map([] RESIDENT_HD(bool v) { return std::uint8_t(v); })(flags, flag_bytes);
      const auto hflags = flag_bytes.to_host();
      for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(bool(hflags[i]), i % 4 == 0 || i % 4 == 2) << what << " at " << i;
      // bool reductions: plus is "or", minimum "and".
      const auto idb = rs::map([] RESIDENT_HD(bool v) { return v; });
      const bool any = (idb | rs::reduce(rs::plus{}, false))(flags);
      const bool all = (idb | rs::reduce(rs::minimum{}, true))(flags);
      EXPECT_TRUE(any) << what;
      EXPECT_EQ(all, n == 1) << what;  // element 1 (-0.0) is false
      // A zip of int8, double and float into int16: int8 + double, with the float's NaN checked.
      rs::array<std::int16_t> out(n, dev);
      (rs::zip(b.slice(off, n), d.slice(off, n), f.slice(off, n)) |
       rs::map([] RESIDENT_HD(std::int8_t a, double x, float y) { return y != y ? double(a) * 300.0 : double(a) + x; }))(out);
      const auto ho = out.to_host();
      for (std::size_t i = 0; i < n; ++i) {
        const double v = hf[i] != hf[i] ? double(hb[i]) * 300.0 : double(hb[i]) + hd[i];
        const double want = v <= -32768 ? -32768 : v >= 32767 ? 32767 : std::trunc(v);
        ASSERT_EQ(double(ho[i]), want) << what << " zip at " << i;
      }
      // A sum over the zip in double: exact (quarters and small integers).
      double ref = 0;
      for (std::size_t i = 0; i < n; ++i) ref += double(hb[i]) + hd[i];
      const double got = (rs::zip(b.slice(off, n), d.slice(off, n)) |
                          rs::map([] RESIDENT_HD(std::int8_t a, double x) { return double(a) + x; }) |
                          rs::reduce(rs::plus{}, 0.0))();
      EXPECT_EQ(got, ref) << what;
    }
}

TEST_P(backend_agreement, denormals_are_kept_not_flushed) {
  const float tiny = 0x1p-140f;  // below FLT_MIN: a denormal
  for (std::size_t n : lengths()) {
    const auto x = rs::to_device(std::vector<float>(n, tiny), dev);
    rs::array<float> y(n, dev);
    rs::map([] RESIDENT_HD(float v) { return v * 0.125f; })(x, y);
    for (float v : y.to_host()) ASSERT_EQ(v, 0x1p-143f) << "n " << n;
    EXPECT_EQ((rs::map([] RESIDENT_HD(float v) { return v; }) | rs::reduce(rs::plus{}, 0.f))(x), float(n) * tiny) << n;
    EXPECT_EQ((rs::map([] RESIDENT_HD(float v) { return v; }) | rs::reduce(rs::minimum{}, finf))(x), tiny) << n;
  }
}

// The random streams promise the same bits on every backend: each fill at every length, offset and
// slice offset equals the distribution evaluated value by value on the host.
TEST_P(backend_agreement, random_fills_equal_the_host_evaluation_bit_for_bit) {
  const std::uint64_t seed = 0x1234567890abcdefull;
  for (std::size_t n : lengths())
    for (std::uint64_t offset : {0ull, 1ull, 2ull, 3ull, 0xFFFFFFFFFFFFFFFEull})
      for (std::size_t off : {0, 1, 2, 3}) {
        const std::string what = "n " + std::to_string(n) + " offset " + std::to_string(offset) + " slice at " + std::to_string(off);
        rs::array<float> uf(n + off, dev), nf(n + off, dev);
        rs::array<double> ud(n + off, dev), nd(n + off, dev);
        rs::array<std::int32_t> ii(n + off, dev);
        rs::random::fill_uniform(uf.slice(off, n), seed, offset, -3.f, 5.f);
        rs::random::fill_normal(nf.slice(off, n), seed, offset, 1.f, 2.f);
        rs::random::fill_uniform(ud.slice(off, n), seed, offset, -3.0, 5.0);
        rs::random::fill_normal(nd.slice(off, n), seed, offset, 1.0, 2.0);
        rs::random::fill_integers(ii.slice(off, n), seed, offset, -7, 1000);
        const rs::random::uniform_distribution<float> du{{}, seed, offset, -3.f, 5.f};
        const rs::random::normal_distribution<float> dn{{}, seed, offset, 1.f, 2.f};
        const rs::random::uniform_distribution<double> dud{{}, seed, offset, -3.0, 5.0};
        const rs::random::normal_distribution<double> dnd{{}, seed, offset, 1.0, 2.0};
        const rs::random::integer_distribution<std::int32_t> di{{}, seed, offset, -7, 1007u};
        const auto a = uf.to_host(), b = nf.to_host();
        const auto c = ud.to_host(), d = nd.to_host();
        const auto e = ii.to_host();
        for (std::size_t i = 0; i < n; ++i) {
          ASSERT_TRUE(same_bits(a[off + i], du(i))) << what << " uniform float at " << i;
          ASSERT_TRUE(same_bits(b[off + i], dn(i))) << what << " normal float at " << i;
          ASSERT_TRUE(same_bits(c[off + i], dud(i))) << what << " uniform double at " << i;
          ASSERT_TRUE(same_bits(d[off + i], dnd(i))) << what << " normal double at " << i;
          ASSERT_EQ(e[off + i], di(i)) << what << " integer at " << i;
        }
      }
}

// Run-time chains: NaN wins in min / max, integer sums wrap, the identity does not leak.
TEST_P(backend_agreement, jit_reductions_nan_wrap_and_signed_zero) {
  for (std::size_t n : lengths())
    for (std::size_t off : {0, 1, 2, 3}) {
      const std::string what = "n " + std::to_string(n) + " offset " + std::to_string(off);
      std::vector<float> h(n);
      for (std::size_t i = 0; i < n; ++i) h[i] = float(int(i % 9) - 4);
      double exact = 0;
      for (float v : h) exact += v;
      auto x = padded(h, off, dev);
      EXPECT_EQ(rs::jit::sum().result<float>(x.slice(off, n)), float(exact)) << what;
      EXPECT_EQ(rs::jit::min().result<float>(x.slice(off, n)), *std::min_element(h.begin(), h.end())) << what;
      EXPECT_EQ(rs::jit::max().result<float>(x.slice(off, n)), *std::max_element(h.begin(), h.end())) << what;
      h[n - 1] = fnan;
      x = padded(h, off, dev);
      EXPECT_TRUE(std::isnan(rs::jit::min().result<float>(x.slice(off, n)))) << what;
      EXPECT_TRUE(std::isnan(rs::jit::max().result<float>(x.slice(off, n)))) << what;
      const auto z = padded(std::vector<float>(n, -0.f), off, dev);
      const float mz = rs::jit::min().result<float>(z.slice(off, n));
      EXPECT_TRUE(mz == 0.f && std::signbit(mz)) << what;
      std::vector<std::uint32_t> hu(n, 0xFFFFFFFFu);
      const auto u = padded(hu, off, dev);
      EXPECT_EQ(rs::jit::sum().result<std::uint32_t>(u.slice(off, n)), std::uint32_t(0u - std::uint32_t(n))) << what;
      std::vector<std::int32_t> hi(n, 0x7FFFFFFF);
      const auto si = padded(hi, off, dev);
      std::uint32_t w = 0;
      for (auto v : hi) w += std::uint32_t(v);
      EXPECT_EQ(rs::jit::sum().result<std::int32_t>(si.slice(off, n)), std::int32_t(w)) << what;
    }
}

RESIDENT_BACKENDS(backend_agreement);

}  // namespace
