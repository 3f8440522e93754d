// Edge cases and misuse of the fused pipelines, on both backends: small and 2^k +- 1 lengths, slices
// at every offset (vector plans falling back to scalar), zips of mixed types and misalignments,
// reductions without an identity, init values that matter, integer wrap-around, result arrays of the
// wrong size, bad launch shapes; each against an FP64 or exact integer reference made on the host, and
// refused calls checked to write nothing.
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

TEST_P(pipeline_edges, maps_at_every_small_length_and_offset_in_place_and_converting) {
  const auto seed = rs::test::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const std::size_t most = (std::size_t(1) << 17) + 2;
  const auto h = quarters<float>(most + 8, seed);
  const auto x = rs::to_device(h, dev);
  const auto f = rs::map([] RESIDENT_HD(float v) { return 2.f * v - 0.25f; });
  const auto to_double = f | rs::map([] RESIDENT_HD(float v) { return double(v) * 0.5; });
  for (std::size_t n : edge_lengths())
    for (std::size_t in_off : {0, 1, 2, 3})
      for (std::size_t out_off : {0, 1, 2, 3}) {
        if (in_off != out_off && in_off != 0 && n > 100) continue;  // enough to cover each plan
        const std::string what = "n " + std::to_string(n) + ", in at " + std::to_string(in_off) + ", out at " +
                                 std::to_string(out_off);
        auto y = poisoned<float>(n, dev);
        f(x.slice(in_off, n), y.slice(out_off, n));
        expect_window(y.to_host(), out_off, n, [&](std::size_t i, float v) { return v == 2.f * h[in_off + i] - 0.25f; },
                      what + " float");
        auto z = poisoned<double>(n, dev);
        to_double(x.slice(in_off, n), z.slice(out_off, n));
        expect_window(z.to_host(), out_off, n,
                      [&](std::size_t i, double v) { return v == double(2.f * h[in_off + i] - 0.25f) * 0.5; },
                      what + " float to double");
        // Narrowing: double slice into a float slice.
        auto w = poisoned<float>(n, dev);
        rs::map([] RESIDENT_HD(double v) { return v * 4.0; })(z.slice(out_off, n), w.slice(in_off, n));
        expect_window(w.to_host(), in_off, n,
                      [&](std::size_t i, float v) { return v == float(double(2.f * h[in_off + i] - 0.25f) * 2.0); },
                      what + " double to float");
      }
  // In place on a slice at every offset: only the window changes.
  for (std::size_t n : edge_lengths())
    for (std::size_t off : {0, 1, 2, 3}) {
      auto y = rs::to_device(h, dev);
      f(y.slice(off, std::min(n, most)));
      const auto got = y.to_host();
      for (std::size_t i = 0; i < got.size(); ++i) {
        const bool inside = i >= off && i < off + n;
        ASSERT_EQ(got[i], inside ? 2.f * h[i] - 0.25f : h[i]) << "n " << n << " offset " << off << " at " << i;
      }
    }
}

TEST_P(pipeline_edges, uint8_to_float_and_float_to_uint8_maps_at_every_offset) {
  const std::size_t most = 70001;
  std::vector<std::uint8_t> hb(most + 8);
  for (std::size_t i = 0; i < hb.size(); ++i) hb[i] = std::uint8_t(i * 37 + 11);
  const auto b = rs::to_device(hb, dev);
  for (std::size_t n : {std::size_t(0), std::size_t(1), std::size_t(3), std::size_t(17), std::size_t(4097), most})
    for (std::size_t in_off : {0, 1, 2, 3})
      for (std::size_t out_off : {0, 1, 2, 3}) {
        auto y = poisoned<float>(n, dev);
        rs::map([] RESIDENT_HD(std::uint8_t v) { return float(v) + 0.5f; })(b.slice(in_off, n), y.slice(out_off, n));
        expect_window(y.to_host(), out_off, n, [&](std::size_t i, float v) { return v == float(hb[in_off + i]) + 0.5f; },
                      "n " + std::to_string(n) + " in " + std::to_string(in_off) + " out " + std::to_string(out_off));
        // Back to bytes, wrapping: 2 * v + 1 modulo 256 through an integer stage.
        auto z = poisoned<std::uint8_t>(n, dev);
        rs::map([] RESIDENT_HD(float v) { return std::uint32_t(v) * 2u + 1u; })(y.slice(out_off, n), z.slice(in_off, n));
        expect_window(z.to_host(), in_off, n,
                      [&](std::size_t i, std::uint8_t v) { return v == std::uint8_t(hb[in_off + i] * 2u + 1u); },
                      "bytes back, n " + std::to_string(n));
      }
}

// Floating values written into integer arrays saturate and NaN gives 0, on both backends (C++ leaves a
// value out of range undefined; a GPU saturates): through the vector stores and the scalar tail.
TEST_P(pipeline_edges, floats_written_into_integers_saturate_and_nan_gives_zero) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> in = {nan, 1e10f, -1e10f, 3.7f, -3.7f, inf, -inf, 126.9f, 127.5f, -128.5f, 0.0f};
  const auto x = rs::to_device(in, dev);
  rs::array<std::int8_t> b(in.size(), dev);
  rs::array<std::int32_t> i(in.size(), dev);
  rs::array<std::uint32_t> u(in.size(), dev);
  rs::map([] RESIDENT_HD(float f) { return f; })(x, b);
  rs::map([] RESIDENT_HD(float f) { return f; })(x, i);
  rs::map([] RESIDENT_HD(float f) { return f; })(x, u);
  EXPECT_EQ(b.to_host(), (std::vector<std::int8_t>{0, 127, -128, 3, -3, 127, -128, 126, 127, -128, 0}));
  const std::int32_t hi = std::numeric_limits<std::int32_t>::max(), lo = std::numeric_limits<std::int32_t>::lowest();
  EXPECT_EQ(i.to_host(), (std::vector<std::int32_t>{0, hi, lo, 3, -3, hi, lo, 126, 127, -128, 0}));
  const std::uint32_t top = std::numeric_limits<std::uint32_t>::max();
  EXPECT_EQ(u.to_host(), (std::vector<std::uint32_t>{0, top, 0, 3, 0, top, 0, 126, 127, 0, 0}));
  // A scan into integers converts each value the same way, at every length (a reduction with an
  // integer init over floating values does not compile).
  for (std::size_t n : {std::size_t(11), std::size_t(1000), std::size_t(100003)}) {
    SCOPED_TRACE("n " + std::to_string(n));
    std::vector<float> v(n);
    for (std::size_t k = 0; k < n; ++k) v[k] = k % 3 == 0 ? nan : k % 3 == 1 ? 1e10f : -1e10f;
    const auto xs = rs::to_device(v, dev);
    rs::array<std::int8_t> s(n, dev);
    (rs::map([] RESIDENT_HD(float f) { return f; }) | rs::inclusive_scan(rs::maximum{}))(xs, s);
    const auto hs = s.to_host();
    for (std::size_t k = 0; k < n; ++k) ASSERT_EQ(hs[k], k == 0 ? 0 : 127) << "scan element " << k;
  }
}

TEST_P(pipeline_edges, zipped_maps_and_scans_written_into_one_of_their_inputs) {
  // The output is one of the zipped arrays (the same slice): each element is read before it is written.
  for (std::size_t n : {std::size_t(1), std::size_t(5), std::size_t(17), std::size_t(4097), std::size_t(100003)})
    for (std::size_t off : {0, 1, 2}) {
      SCOPED_TRACE("n " + std::to_string(n) + " offset " + std::to_string(off));
      std::vector<float> ha(n + 3), hb(n + 3);
      for (std::size_t i = 0; i < n + 3; ++i) {
        ha[i] = float(i % 10);
        hb[i] = float(i % 3) - 1.f;
      }
      auto a = rs::to_device(ha, dev);
      const auto b = rs::to_device(hb, dev);
      const auto add = rs::map([] RESIDENT_HD(float p, float q) { return p + 2.f * q; });
      (rs::zip(a.slice(off, n), b.slice(off, n)) | add)(a.slice(off, n));
      auto got = a.to_host();
      for (std::size_t i = 0; i < n + 3; ++i)
        ASSERT_EQ(got[i], i >= off && i < off + n ? ha[i] + 2.f * hb[i] : ha[i]) << "map at " << i;
      auto c = rs::to_device(ha, dev);
      (rs::zip(c.slice(off, n), b.slice(off, n)) | add | rs::inclusive_scan(rs::plus{}))(c.slice(off, n));
      got = c.to_host();
      float acc = 0;
      for (std::size_t i = 0; i < n + 3; ++i) {
        if (i >= off && i < off + n) acc += ha[i] + 2.f * hb[i];
        ASSERT_EQ(got[i], i >= off && i < off + n ? acc : ha[i]) << "scan at " << i;
      }
    }
}

struct sum8 {
  RESIDENT_HD double operator()(double a, float b, std::int32_t c, std::uint8_t d, std::int64_t e, std::uint16_t f,
                                float g, double k) const {
    return a + 2.0 * b + 3.0 * c + 4.0 * d + 5.0 * double(e) + 6.0 * f + 7.0 * g + 8.0 * k;
  }
};

TEST_P(pipeline_edges, zips_of_mixed_types_at_different_misalignments) {
  const auto seed = rs::test::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const std::size_t most = (std::size_t(1) << 16) + 1;
  const auto hd = quarters<double>(most + 8, seed);
  const auto hf = quarters<float>(most + 8, seed + 1);
  std::vector<std::int32_t> hi(most + 8);
  std::vector<std::uint8_t> hb(most + 8);
  for (std::size_t i = 0; i < hi.size(); ++i) {
    hi[i] = std::int32_t(i % 1001) - 500;
    hb[i] = std::uint8_t(i * 13);
  }
  const auto d = rs::to_device(hd, dev);
  const auto f = rs::to_device(hf, dev);
  const auto k = rs::to_device(hi, dev);
  const auto b = rs::to_device(hb, dev);
  for (std::size_t n : {std::size_t(0), std::size_t(1), std::size_t(2), std::size_t(5), std::size_t(17),
                        std::size_t(1023), std::size_t(1025), most})
    for (std::size_t oa : {0, 1, 2, 3})
      for (std::size_t ob : {0, 1, 3}) {
        const std::string what = "n " + std::to_string(n) + " offsets " + std::to_string(oa) + ", " + std::to_string(ob);
        // double + float into double, float at its own offset, the output at a third.
        auto y = poisoned<double>(n, dev);
        (rs::zip(d.slice(oa, n), f.slice(ob, n)) | rs::map([] RESIDENT_HD(double p, float q) { return p - 2.0 * q; }))(
            y.slice(ob, n));
        expect_window(y.to_host(), ob, n,
                      [&](std::size_t i, double v) { return v == hd[oa + i] - 2.0 * hf[ob + i]; }, what + " double+float");
        // int + float into float.
        auto z = poisoned<float>(n, dev);
        (rs::zip(k.slice(ob, n), f.slice(oa, n)) | rs::map([] RESIDENT_HD(std::int32_t p, float q) { return float(p) * q; }))(
            z.slice(oa, n));
        expect_window(z.to_host(), oa, n,
                      [&](std::size_t i, float v) { return v == float(hi[ob + i]) * hf[oa + i]; }, what + " int+float");
        // uint8 + float, reduced (exact: quarters times bytes, summed in double).
        auto dot = rs::zip(b.slice(oa, n), f.slice(ob, n)) |
                   rs::map([] RESIDENT_HD(std::uint8_t p, float q) { return double(p) * double(q); }) |
                   rs::reduce(rs::plus{}, 0.5);
        double ref = 0.5;
        for (std::size_t i = 0; i < n; ++i) ref += double(hb[oa + i]) * hf[ob + i];
        EXPECT_EQ(dot(), ref) << what << " uint8+float dot";
      }
  // A zip of one array: a plain source, into a map, a reduction and a scan.
  const auto one = rs::zip(f.slice(1, 1000));
  rs::array<float> out(1000, dev);
  (one | rs::map([] RESIDENT_HD(float v) { return -v; }))(out);
  const auto got = out.to_host();
  for (std::size_t i = 0; i < 1000; ++i) ASSERT_EQ(got[i], -hf[1 + i]);
  double ref = 0;
  for (std::size_t i = 1; i <= 1000; ++i) ref = std::max(ref, double(hf[i]));
  EXPECT_EQ((one | rs::map([] RESIDENT_HD(float v) { return double(v); }) | rs::reduce(rs::maximum{}, 0.0))(), ref);
}

TEST_P(pipeline_edges, a_zip_of_eight_arrays_of_six_types) {
  for (std::size_t n : {std::size_t(1), std::size_t(3), std::size_t(17), std::size_t(40001)}) {
    std::vector<double> ha(n + 1), hk(n + 1);
    std::vector<float> hb(n + 1), hg(n + 1);
    std::vector<std::int32_t> hc(n + 1);
    std::vector<std::uint8_t> hd(n + 1);
    std::vector<std::int64_t> he(n + 1);
    std::vector<std::uint16_t> hf(n + 1);
    for (std::size_t i = 0; i <= n; ++i) {
      ha[i] = double(i % 7);
      hb[i] = float(i % 5) * 0.5f;
      hc[i] = std::int32_t(i % 11) - 5;
      hd[i] = std::uint8_t(i);
      he[i] = std::int64_t(i % 13) - 6;
      hf[i] = std::uint16_t(i * 7);
      hg[i] = float(i % 3);
      hk[i] = double(i % 17) * 0.25;
    }
    auto a = rs::to_device(ha, dev);
    auto b = rs::to_device(hb, dev);
    auto c = rs::to_device(hc, dev);
    auto d = rs::to_device(hd, dev);
    auto e = rs::to_device(he, dev);
    auto f = rs::to_device(hf, dev);
    auto g = rs::to_device(hg, dev);
    auto k = rs::to_device(hk, dev);
    for (std::size_t off : {0, 1}) {
      SCOPED_TRACE("n " + std::to_string(n) + " offset of the last three " + std::to_string(off));
      auto z = rs::zip(a.slice(0, n), b.slice(0, n), c.slice(0, n), d.slice(0, n), e.slice(0, n), f.slice(off, n),
                       g.slice(off, n), k.slice(off, n)) |
               rs::map(sum8{});
      auto ref = [&](std::size_t i) {
        return sum8{}(ha[i], hb[i], hc[i], hd[i], he[i], hf[off + i], hg[off + i], hk[off + i]);
      };
      rs::array<double> y(n, dev);
      z(y);
      const auto got = y.to_host();
      double sum = -1.0;
      for (std::size_t i = 0; i < n; ++i) {
        ASSERT_EQ(got[i], ref(i)) << "at " << i;
        sum += ref(i);
      }
      EXPECT_EQ((z | rs::reduce(rs::plus{}, -1.0))(), sum);
      rs::array<double> one(1, dev);
      (z | rs::reduce(rs::plus{}, -1.0))(one);
      EXPECT_EQ(one.to_host()[0], sum);
    }
  }
}

struct times {
  template <class T>
  RESIDENT_HD T operator()(T a, T b) const {
    return a * b;
  }
};

TEST_P(pipeline_edges, result_arrays_of_the_wrong_size_are_refused_before_work) {
  const auto x = rs::to_device(std::vector<float>(1000, 1.f), dev);
  const auto a = rs::to_device(std::vector<float>(1000, 2.f), dev);
  auto sum = rs::reduce(rs::plus{}, 0.f);
  auto dot = rs::zip(x, a) | rs::map([] RESIDENT_HD(float p, float q) { return p * q; }) | rs::reduce(rs::plus{}, 0.f);
  auto count = rs::generate([] RESIDENT_HD(std::size_t i) { return float(i & 1); }) | rs::reduce(rs::plus{}, 0.f);
  for (std::size_t size : {std::size_t(0), std::size_t(2), std::size_t(7)}) {
    SCOPED_TRACE("a result array of " + std::to_string(size));
    auto r = rs::to_device(std::vector<float>(size, rs::test::poison<float>()), dev);
    rs::scoped_ledger l(dev);
    EXPECT_THROW(sum(x, r), rs::shape_mismatch);
    EXPECT_THROW(sum(x.slice(3, 5), r), rs::shape_mismatch);
    EXPECT_THROW(dot(r), rs::shape_mismatch);
    EXPECT_THROW(count(100, r), rs::shape_mismatch);
    if (size) {
      EXPECT_THROW(sum(x, r.slice(0, size - 1 == 1 ? 0 : size - 1)), rs::shape_mismatch);
    }
    EXPECT_EQ(l.delta().kernels, 0u);
    for (float v : r.to_host()) EXPECT_EQ(v, rs::test::poison<float>()) << "written although refused";
  }
  // One-element result slices in the middle of an array: only that element is written.
  for (std::size_t at : {0, 1, 2}) {
    auto r = poisoned<float>(1, dev);
    sum(x.slice(1, 999), r.slice(at, 1));
    expect_window(r.to_host(), at, 1, [](std::size_t, float v) { return v == 999.f; }, "sum into a slice");
    r = poisoned<float>(1, dev);
    dot(r.slice(at, 1));
    expect_window(r.to_host(), at, 1, [](std::size_t, float v) { return v == 2000.f; }, "zip into a slice");
    r = poisoned<float>(1, dev);
    count(101, r.slice(at, 1));
    expect_window(r.to_host(), at, 1, [](std::size_t, float v) { return v == 50.f; }, "generator into a slice");
    EXPECT_THROW(count(101, r.slice(at, 2)), rs::shape_mismatch);
    EXPECT_THROW(count(101, r.slice(at, 0)), rs::shape_mismatch);
    expect_window(r.to_host(), at, 1, [](std::size_t, float v) { return v == 50.f; }, "refused into a slice");
  }
  // A moved-from result array.
  rs::array<float> one(1, dev), gone = std::move(one);
  EXPECT_THROW(sum(x, one), rs::invalid_argument);
  EXPECT_THROW(count(10, one), rs::invalid_argument);
  EXPECT_THROW(dot(one), rs::invalid_argument);
}

TEST_P(pipeline_edges, mismatched_sizes_are_refused_and_write_nothing) {
  const auto a = rs::to_device(std::vector<float>(17, 1.f), dev);
  const auto b = rs::to_device(std::vector<double>(17, 2.0), dev);
  const auto c = rs::to_device(std::vector<std::int32_t>(16, 3), dev);
  EXPECT_THROW(rs::zip(a, c), rs::shape_mismatch);
  EXPECT_THROW(rs::zip(c, a), rs::shape_mismatch);
  EXPECT_THROW(rs::zip(a, b, c), rs::shape_mismatch);
  EXPECT_THROW(rs::zip(a, b, a, b, a, b, a, c), rs::shape_mismatch);
  EXPECT_THROW(rs::zip(a.slice(0, 16), b), rs::shape_mismatch);
  EXPECT_NO_THROW(rs::zip(a.slice(1, 16), c));
  auto y = rs::to_device(std::vector<float>(18, rs::test::poison<float>()), dev);
  rs::scoped_ledger l(dev);
  EXPECT_THROW(rs::map([] RESIDENT_HD(float v) { return v; })(a, y), rs::shape_mismatch);
  EXPECT_THROW(rs::map([] RESIDENT_HD(float v) { return v; })(a, y.slice(0, 16)), rs::shape_mismatch);
  EXPECT_THROW((rs::zip(a, b) | rs::map([] RESIDENT_HD(float p, double q) { return p + q; }))(y), rs::shape_mismatch);
  EXPECT_THROW(rs::inclusive_scan(rs::plus{})(a, y), rs::shape_mismatch);
  EXPECT_THROW((rs::zip(a, b) | rs::map([] RESIDENT_HD(float p, double q) { return p + q; }) |
                rs::inclusive_scan(rs::plus{}))(y.slice(1, 16)),
               rs::shape_mismatch);
  EXPECT_EQ(l.delta().kernels, 0u);
  for (float v : y.to_host()) EXPECT_EQ(v, rs::test::poison<float>());
}

TEST_P(pipeline_edges, bad_launch_shapes_are_refused_before_work_at_every_length) {
  const std::vector<rs::launch_config> bad = {
      {rs::dims(1), rs::dims(0)}, {rs::dims(0), rs::dims(256)}, {rs::dims(2, 0), rs::dims(256)},
      {rs::dims(1), rs::dims(256, 1, 0)}, {rs::dims(1), rs::dims(4096)}};
  for (std::size_t n : {std::size_t(0), std::size_t(1), std::size_t(5), std::size_t(100003)}) {
    auto x = rs::to_device(std::vector<float>(n, 1.f), dev);
    auto y = rs::to_device(std::vector<float>(n, rs::test::poison<float>()), dev);
    auto r = rs::to_device(std::vector<float>(1, rs::test::poison<float>()), dev);
    const auto inc = rs::map([] RESIDENT_HD(float v) { return v + 1.f; });
    const auto sum = rs::reduce(rs::plus{}, 0.f);
    const auto gen = rs::generate([] RESIDENT_HD(std::size_t i) { return float(i); });
    for (const auto& cfg : bad) {
      SCOPED_TRACE("n " + std::to_string(n) + ", " + cfg.str());
      rs::scoped_ledger l(dev);
      EXPECT_THROW(inc.with_config(cfg)(x), rs::invalid_launch);
      EXPECT_THROW(inc.with_config(cfg)(x, y), rs::invalid_launch);
      EXPECT_THROW((inc.with_config(cfg) | inc)(x, y), rs::invalid_launch) << "a config survives composition";
      EXPECT_THROW((inc | sum.with_config(cfg))(x), rs::invalid_launch);
      EXPECT_THROW(sum.with_config(cfg)(x, r), rs::invalid_launch);
      EXPECT_THROW(gen.with_config(cfg)(y), rs::invalid_launch);
      EXPECT_THROW((gen | sum).with_config(cfg)(n), rs::invalid_launch);
      EXPECT_THROW((rs::zip(x, x) | rs::map([] RESIDENT_HD(float p, float q) { return p + q; })).with_config(cfg)(y),
                   rs::invalid_launch);
      EXPECT_EQ(l.delta().kernels, 0u);
    }
    // A reduction's blocks are told apart by their x index: a grid in y or z is refused too.
    for (const auto& cfg : {rs::launch_config{rs::dims(4, 2), rs::dims(256)}, rs::launch_config{rs::dims(1, 1, 3), rs::dims(256)}}) {
      SCOPED_TRACE("reduction, n " + std::to_string(n) + ", " + cfg.str());
      rs::scoped_ledger l(dev);
      EXPECT_THROW(sum.with_config(cfg)(x), rs::invalid_launch);
      EXPECT_THROW(sum.with_config(cfg)(x, r), rs::invalid_launch);
      EXPECT_THROW((gen | sum).with_config(cfg)(n), rs::invalid_launch);
      EXPECT_EQ(l.delta().kernels, 0u);
    }
    for (float v : y.to_host()) ASSERT_EQ(v, rs::test::poison<float>()) << "written although refused";
    for (float v : x.to_host()) ASSERT_EQ(v, 1.f) << "written in place although refused";
    EXPECT_EQ(r.to_host()[0], rs::test::poison<float>());
    // Good shapes: a map under any, a reduction under blocks of 256 in x.
    inc.with_config({rs::dims(3), rs::dims(7)})(x, y);
    for (float v : y.to_host()) ASSERT_EQ(v, 2.f);
    EXPECT_EQ(sum.with_config({rs::dims(3), rs::dims(256)})(x), float(n));
  }
}

TEST_P(pipeline_edges, empty_generators_and_empty_arrays_do_nothing) {
  rs::array<float> none(0, dev);
  auto gen = rs::generate([] RESIDENT_HD(std::size_t i) { return double(i) + 1.0; });
  rs::scoped_ledger l(dev);
  gen(none);
  (gen | rs::map([] RESIDENT_HD(double v) { return v * 2; }))(none);
  (gen | rs::inclusive_scan(rs::plus{}))(none);
  EXPECT_EQ((gen | rs::reduce(rs::plus{}, 4.5))(0), 4.5);
  EXPECT_EQ((gen | rs::reduce(rs::maximum{}, -4.5))(std::size_t(0), rs::default_stream(dev)), -4.5);
  rs::map([] RESIDENT_HD(float v) { return v; })(none);
  (rs::zip(none, none) | rs::map([] RESIDENT_HD(float p, float q) { return p + q; }))(none);
  EXPECT_EQ((rs::zip(none, none) | rs::map([] RESIDENT_HD(float p, float q) { return p + q; }) |
             rs::reduce(rs::plus{}, 2.f))(),
            2.f);
  EXPECT_EQ(l.delta().kernels, 0u);
  rs::array<double> r(1, dev);
  (gen | rs::reduce(rs::plus{}, 4.5))(0, r);
  EXPECT_EQ(r.to_host()[0], 4.5);
  // One element, and two.
  EXPECT_EQ((gen | rs::reduce(rs::plus{}, 0.0))(1), 1.0);
  EXPECT_EQ((gen | rs::reduce(rs::plus{}, 0.0))(2), 3.0);
  EXPECT_EQ((gen | rs::reduce(rs::plus{}, 0.0))(17), 153.0);
}

// Expects call() to be refused with invalid_argument saying `says`, before any kernel, leaving x as h.
template <class F>
void expect_refused_untouched(F&& call, const char* says, const rs::array<float>& x, const std::vector<float>& h,
                              rs::device dev) {
  rs::scoped_ledger l(dev);
  rs::test::expect_invalid(call, says);
  EXPECT_EQ(l.delta().kernels, 0u) << "work ran although the call was refused";
  ASSERT_EQ(x.to_host(), h) << "written although refused";
}

TEST_P(pipeline_edges, outputs_partly_over_an_input_are_refused_before_work) {
  // A map from x into x shifted by a few elements would read elements the call already wrote (or not
  // yet, on another thread): the result would depend on the order. Exactly in place runs.
  std::vector<float> h(300);
  for (std::size_t i = 0; i < h.size(); ++i) h[i] = float(i % 17) - 8.f;
  auto x = rs::to_device(h, dev);
  const auto b = rs::to_device(h, dev);
  const auto neg = rs::map([] RESIDENT_HD(float v) { return -v; });
  const auto add = rs::map([] RESIDENT_HD(float p, float q) { return p + q; });
  const auto scan = rs::inclusive_scan(rs::plus{});
  const char* says = "overlaps the input";
  for (std::size_t n : {std::size_t(1), std::size_t(5), std::size_t(290)})
    for (std::size_t shift : {std::size_t(1), std::size_t(2), std::size_t(3), std::size_t(4), std::size_t(9)}) {
      if (shift >= n && n > 1) continue;
      SCOPED_TRACE("n " + std::to_string(n) + " shift " + std::to_string(shift));
      const auto lo = x.slice(0, n), hi = x.slice(shift, n);
      if (shift < n) {
        expect_refused_untouched([&] { neg(lo, hi); }, says, x, h, dev);
        expect_refused_untouched([&] { neg(hi, lo); }, says, x, h, dev);
        expect_refused_untouched([&] { scan(lo, hi); }, says, x, h, dev);
        expect_refused_untouched([&] { scan(hi, lo); }, says, x, h, dev);
        expect_refused_untouched([&] { (neg | scan)(lo, hi); }, says, x, h, dev);
        // Either zipped array, the other apart.
        expect_refused_untouched([&] { (rs::zip(lo, b.slice(0, n)) | add)(hi); }, "overlaps the input array 0", x, h, dev);
        expect_refused_untouched([&] { (rs::zip(b.slice(0, n), hi) | add)(lo); }, "overlaps the input array 1", x, h, dev);
        expect_refused_untouched([&] { (rs::zip(lo, b.slice(0, n)) | add | scan)(hi); }, says, x, h, dev);
      }
    }
  // The same first element read as float and written as double: 4 bytes against 8, partly the same memory.
  rs::array_ref<double> wide(reinterpret_cast<double*>(x.data()), 100, x.stream());
  expect_refused_untouched([&] { rs::map([] RESIDENT_HD(float v) { return double(v); })(x.slice(0, 100), wide); },
                           says, x, h, dev);
  // Apart (neighbouring slices), exactly in place, and empty windows at any place run.
  neg(x.slice(0, 100), x.slice(100, 100));
  neg(x.slice(200, 100));
  neg(x.slice(0, 0), x.slice(0, 0));
  scan(x.slice(3, 0), x.slice(2, 0));
  const auto got = x.to_host();
  for (std::size_t i = 0; i < 300; ++i) ASSERT_EQ(got[i], i < 100 ? h[i] : -h[i < 200 ? i - 100 : i]) << "at " << i;
}

TEST_P(pipeline_edges, a_reductions_result_inside_its_input_is_written_after_every_read) {
  // Not a partial overlap that matters: both backends write the one-element result after every element
  // is read (the CPU after its loop, a GPU from the last block to finish), so it may lie in the input.
  for (std::size_t n : {std::size_t(1), std::size_t(2), std::size_t(17), std::size_t(4097), std::size_t(300001)})
    for (std::size_t at : {std::size_t(0), n / 2, n - 1}) {
      SCOPED_TRACE("n " + std::to_string(n) + " result at " + std::to_string(at));
      std::vector<float> h(n);
      float sum = 0;
      for (std::size_t i = 0; i < n; ++i) sum += h[i] = float(i % 7);
      auto x = rs::to_device(h, dev);
      rs::reduce(rs::plus{}, 0.f)(x, x.slice(at, 1));
      auto got = x.to_host();
      for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(got[i], i == at ? sum : h[i]) << "at " << i;
      x = rs::to_device(h, dev);
      (rs::zip(x, x) | rs::map([] RESIDENT_HD(float p, float q) { return p * q; }) | rs::reduce(rs::maximum{}, -1.f))(
          x.slice(at, 1));
      EXPECT_EQ(x.to_host()[at], 36.f * (n > 6) + float((n - 1) * (n - 1)) * (n <= 6));
    }
}

TEST_P(pipeline_edges, generated_counts_whose_bytes_overflow_are_refused_before_work) {
  // A generator's values span count * sizeof(value) bytes as an array's would: beyond PTRDIFF_MAX the
  // executors' index sums wrap (and the loop would never end), so such counts are refused at once.
  const auto gen = rs::generate([] RESIDENT_HD(std::size_t i) { return double(i & 3); });
  const auto sum = gen | rs::reduce(rs::plus{}, 0.0);
  const std::size_t most = std::size_t(std::numeric_limits<std::ptrdiff_t>::max()) / sizeof(double);
  auto r = rs::to_device(std::vector<double>(1, rs::test::poison<double>()), dev);
  rs::scoped_ledger l(dev);
  for (std::size_t n : {most + 1, most * 2, std::numeric_limits<std::size_t>::max()}) {
    SCOPED_TRACE("n " + std::to_string(n));
    rs::test::expect_invalid([&] { (void)sum(n); }, "overflow the byte count");
    rs::test::expect_invalid([&] { sum(n, r); }, "overflow the byte count");
    rs::test::expect_invalid([&] { (void)(sum(n, rs::default_stream(dev))); }, "overflow the byte count");
  }
  EXPECT_EQ(l.delta().kernels, 0u);
  EXPECT_EQ(r.to_host()[0], rs::test::poison<double>());
  // Byte-sized values may count further, and a count that fits runs.
  const auto bytes = rs::generate([] RESIDENT_HD(std::size_t i) { return std::uint8_t(i); }) |
                     rs::reduce(rs::plus{}, std::uint8_t(0));
  rs::test::expect_invalid([&] { (void)bytes(std::numeric_limits<std::size_t>::max()); }, "overflow the byte count");
  EXPECT_EQ(sum(10), 13.0);
}

TEST_P(pipeline_edges, composing_two_different_launch_configurations_is_refused) {
  // The composition runs as one kernel: with two configurations one would be dropped unseen.
  const auto inc = rs::map([] RESIDENT_HD(float v) { return v + 1.f; });
  const rs::launch_config c1{rs::dims(3), rs::dims(64)}, c2{rs::dims(4), rs::dims(64)};
  const rs::launch_config r1{rs::dims(2), rs::dims(256)}, r2{rs::dims(5), rs::dims(256)};
  EXPECT_THROW((void)(inc.with_config(c1) | inc.with_config(c2)), rs::invalid_launch);
  EXPECT_THROW((void)(inc.with_config(r1) | rs::reduce(rs::plus{}, 0.f).with_config(r2)), rs::invalid_launch);
  EXPECT_THROW((void)(rs::generate([] RESIDENT_HD(std::size_t i) { return float(i); }).with_config(c1) |
                      inc.with_config(c2)),
               rs::invalid_launch);
  // One configuration, on either side, or the same on both, is kept.
  auto x = rs::to_device(std::vector<float>(1000, 1.f), dev);
  auto y = rs::to_device(std::vector<float>(1000, rs::test::poison<float>()), dev);
  (inc.with_config(c1) | inc.with_config(c1))(x, y);
  (inc | inc.with_config(c2))(y);
  for (float v : y.to_host()) ASSERT_EQ(v, 5.f);
  EXPECT_EQ((inc | rs::reduce(rs::plus{}, 0.f).with_config(r1))(x), 2000.f);
  EXPECT_EQ((inc.with_config(r2) | rs::reduce(rs::plus{}, 0.f).with_config(r2))(x), 2000.f);
}

RESIDENT_BACKENDS(pipeline_edges);

}  // namespace
