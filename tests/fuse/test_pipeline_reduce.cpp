// Compiled by nvcc when the CUDA backend is in the build.
// Fused reductions and scans: every kind against FP64 references within their error bounds, NaN,
// partials handed over under every grid and stream, indices past 32 bits.
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <algorithm>
#include <span>
#include <thread>

#include "resident/detail/cuda_runtime.hpp"
#include "resident/device/graph.hpp"
#include "resident/fuse/pipeline.hpp"
#include "resident/random/random.hpp"
#include "seed.hpp"
#include "support.hpp"

namespace rs = resident;
using rs::test::backend;

namespace {

using rs::test::f1, rs::test::f2, rs::test::f3, rs::test::r1, rs::test::r2, rs::test::r3;
using pipelines = backend;

TEST_P(pipelines, reductions_for_small_and_odd_sizes) {
  for (std::size_t n : {std::size_t(0), std::size_t(1), std::size_t(2), std::size_t(3), std::size_t(255),
                        std::size_t(1000001)}) {
    auto seed = rs::test::fresh_seed();
    SCOPED_TRACE("n = " + std::to_string(n) + ", seed = " + std::to_string(seed));
    auto h = rs::test::random_vector<float>(n, seed, -2.0, 2.0);
    auto x = rs::to_device(h, dev);
    // The terms f1 makes in float (a kernel may fuse 1.5 v + 0.5 into one rounding: two roundings
    // of its parts' size apart), folded in double: one term of |t| >= 1 missing or doubled shows.
    long double ref_sum = 0, abs_sum = 0, parts = 0;
    double ref_min = INFINITY, ref_max = -INFINITY;
    for (float v : h) {
      ref_sum += f1(v);
      abs_sum += std::fabs(f1(v));
      parts += std::fabs(1.5 * double(v)) + 0.5;
      ref_min = std::min(ref_min, double(v));
      ref_max = std::max(ref_max, double(v));
    }
    const double tol = rs::test::sum_tolerance<double>(n, double(abs_sum), 2 * rs::test::unit_roundoff<float>() * double(parts));
    rs::scoped_ledger l(dev);
    double s = (rs::map<f1>() | rs::map([] RESIDENT_HD(float v) { return double(v); }) | rs::reduce(rs::plus{}, 0.0))(x);
    EXPECT_EQ(l.delta().kernels, n ? 1u : 0u);
    EXPECT_TRUE(rs::test::sum_matches(s, double(ref_sum), tol, 1.0));
    // The checks can fail: the first term of |t| >= 1 from the middle on dropped or doubled in the
    // reference is refused; so is a least or greatest value the reference lacks.
    for (std::size_t k = n / 2; k < n; ++k)
      if (std::fabs(f1(h[k])) >= 1) {
        for (double times : {0.0, 2.0})
          EXPECT_FALSE(rs::test::sum_matches(s, double(ref_sum) + (times - 1) * f1(h[k]), tol, 1.0)) << "term " << k;
        break;
      }
    if (n > 1 && std::count(h.begin(), h.end(), float(ref_min)) == 1 && std::count(h.begin(), h.end(), float(ref_max)) == 1) {
      std::vector<float> planted = h;
      planted.erase(std::min_element(planted.begin(), planted.end()));
      EXPECT_NE(double(*std::min_element(planted.begin(), planted.end())), ref_min) << "the least value dropped";
      planted = h;
      planted.erase(std::max_element(planted.begin(), planted.end()));
      EXPECT_NE(double(*std::max_element(planted.begin(), planted.end())), ref_max) << "the greatest value dropped";
    }
    float mn = rs::reduce(rs::minimum{}, INFINITY)(x);
    float mx = rs::reduce(rs::maximum{}, -INFINITY)(x);
    EXPECT_EQ(double(mn), ref_min);
    EXPECT_EQ(double(mx), ref_max);
    double with_init = rs::reduce(rs::plus{}, 10.0)(rs::array<double>(0, dev));
    EXPECT_EQ(with_init, 10.0);
  }
}

TEST_P(pipelines, reduce_with_init_counts_it_once) {
  std::vector<std::int64_t> h(100000, 1);
  auto x = rs::to_device(h, dev);
  EXPECT_EQ(rs::reduce(rs::plus{}, std::int64_t(5))(x), 100005);
  auto count = rs::generate([] RESIDENT_HD(std::size_t i) { return std::int64_t(i % 3 == 0); }) |
               rs::reduce(rs::plus{}, std::int64_t(0));
  EXPECT_EQ(count(3000, rs::default_stream(dev)), 1000);
  auto a = rs::to_device(std::vector<float>{1, 2, 3, 4, 5}, dev);
  auto b = rs::to_device(std::vector<float>{5, 4, 3, 2, 1}, dev);
  float dot = (rs::zip(a, b) | rs::map([] RESIDENT_HD(float p, float q) { return p * q; }) |
               rs::reduce(rs::plus{}, 0.f))();
  EXPECT_EQ(dot, 35.f);
}

// An integer sum past its type's range wraps (two's complement) on both backends, as a GPU's adder and
// NumPy do; C++'s signed overflow was undefined behaviour on the CPU (UBSan's report in the debug build).
TEST_P(pipelines, an_integer_sum_past_its_range_wraps_on_both_backends) {
  const std::vector<std::int32_t> h(1000, std::numeric_limits<std::int32_t>::max() / 100);
  const std::int64_t exact = std::int64_t(h.size()) * h[0];
  const auto wrapped = std::int32_t(std::uint32_t(exact));
  EXPECT_EQ(rs::reduce(rs::plus{}, std::int32_t(0))(rs::to_device(h, dev)), wrapped);
  EXPECT_EQ(rs::plus{}(std::numeric_limits<std::int64_t>::max(), std::int64_t(1)), std::numeric_limits<std::int64_t>::min());
}

// One NaN rule on both backends: plus, minimum and maximum all propagate NaN, wherever it sits (the
// scalar head, the vectors, the tail; the first, a middle, the last element) and as init.
TEST_P(pipelines, every_reduction_propagates_nan) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (std::size_t n : {std::size_t(1), std::size_t(3), std::size_t(1000), std::size_t(1000003)}) {
    auto seed = rs::test::fresh_seed();
    auto h = rs::test::random_vector<float>(n + 1, seed, -2.0, 2.0);
    // In the slice [1, n + 1) of an aligned array, elements 0-2 are the scalar head; the tail follows
    // the last whole vector.
    std::vector<std::size_t> where{0, n / 2, n - 1};
    if (n > 8) where.insert(where.end(), {1, 2, 3, n - 2});
    for (std::size_t at : where) {
      SCOPED_TRACE("n = " + std::to_string(n) + ", NaN at " + std::to_string(at) + ", seed = " + std::to_string(seed));
      auto hn = h;
      hn[at + 1] = nan;
      auto whole = rs::to_device(hn, dev);
      for (int aligned = 0; aligned < 2; ++aligned) {
        auto x = aligned ? rs::to_device(std::vector<float>(hn.begin() + 1, hn.end()), dev) : rs::array<float>{};
        auto in = aligned ? x.slice(0, n) : whole.slice(1, n);
        EXPECT_TRUE(std::isnan(rs::reduce(rs::plus{}, 0.f)(in))) << "plus";
        EXPECT_TRUE(std::isnan(rs::reduce(rs::minimum{}, INFINITY)(in))) << "minimum";
        EXPECT_TRUE(std::isnan(rs::reduce(rs::maximum{}, -INFINITY)(in))) << "maximum";
        auto wide = rs::map([] RESIDENT_HD(float v) { return double(v); });
        EXPECT_TRUE(std::isnan((wide | rs::reduce(rs::maximum{}, 0.0))(in))) << "maximum in double";
        EXPECT_TRUE(std::isnan((wide | rs::reduce(rs::minimum{}, 0.0))(in))) << "minimum in double";
        std::vector<float> poison{rs::test::poison<float>()};
        auto out = rs::to_device(poison, dev);
        rs::reduce(rs::maximum{}, -INFINITY)(in, out);
        EXPECT_TRUE(std::isnan(out.to_host()[0])) << "maximum into an array";
        rs::reduce(rs::minimum{}, INFINITY)(in, out);
        EXPECT_TRUE(std::isnan(out.to_host()[0])) << "minimum into an array";
      }
    }
    // NaN as init, over values without one; and without any NaN, the exact extremes.
    auto clean = rs::to_device(std::vector<float>(h.begin() + 1, h.end()), dev);
    EXPECT_TRUE(std::isnan(rs::reduce(rs::maximum{}, nan)(clean)));
    EXPECT_TRUE(std::isnan(rs::reduce(rs::minimum{}, nan)(clean)));
    EXPECT_TRUE(std::isnan(rs::reduce(rs::plus{}, nan)(clean)));
    EXPECT_EQ(rs::reduce(rs::maximum{}, -INFINITY)(clean), *std::max_element(h.begin() + 1, h.end()));
    EXPECT_EQ(rs::reduce(rs::minimum{}, INFINITY)(clean), *std::min_element(h.begin() + 1, h.end()));
  }
  // From a generator (the block path) and a zip.
  auto gen = rs::generate([] RESIDENT_HD(std::size_t i) { return i == 777 ? std::numeric_limits<double>::quiet_NaN() : double(i); });
  EXPECT_TRUE(std::isnan((gen | rs::reduce(rs::maximum{}, 0.0))(100000, rs::default_stream(dev))));
  EXPECT_TRUE(std::isnan((gen | rs::reduce(rs::minimum{}, 0.0))(100000, rs::default_stream(dev))));
  std::vector<float> ha(5000, 1.f);
  ha[4999] = nan;
  auto a = rs::to_device(ha, dev), b = rs::to_device(std::vector<float>(5000, 2.f), dev);
  EXPECT_TRUE(std::isnan((rs::zip(a, b) | rs::map([] RESIDENT_HD(float p, float q) { return p * q; }) |
                          rs::reduce(rs::maximum{}, 0.f))()));
  // The operators themselves, as both backends call them.
  EXPECT_TRUE(std::isnan(rs::maximum{}(1.f, nan)) && std::isnan(rs::maximum{}(nan, 1.f)));
  EXPECT_TRUE(std::isnan(rs::minimum{}(1.f, nan)) && std::isnan(rs::minimum{}(nan, 1.f)));
  EXPECT_EQ(rs::maximum{}(1, 2), 2);
  EXPECT_EQ(rs::minimum{}(1, 2), 1);
}

TEST_P(pipelines, generated_and_zipped_reductions_into_a_result_array_stay_on_the_device) {
  // The overloads taking a one-element result array: one kernel each, nothing downloaded until asked.
  rs::stream s(dev);  // made first: the arrays that move onto it below must not outlive it
  const std::size_t n = 100003;
  auto count = rs::generate([] RESIDENT_HD(std::size_t i) { return std::int64_t(i % 3 == 0); }) |
               rs::reduce(rs::plus{}, std::int64_t(7));
  auto h = rs::test::random_vector<float>(n, rs::test::fresh_seed(), -1.0, 1.0);
  auto a = rs::to_device(h, dev), b = rs::to_device(h, dev);
  auto dot = rs::zip(a, b) | rs::map([] RESIDENT_HD(float p, float q) { return double(p) * q; }) |
             rs::reduce(rs::plus{}, 0.0);
  rs::array<std::int64_t> c(1, dev);
  rs::array<double> d(1, dev);
  {
    rs::scoped_ledger l(dev);
    count(n, c);
    dot(d);
    EXPECT_EQ(l.delta().kernels, 2u);
    EXPECT_EQ(l.delta().d2h_copies, 0u);
  }
  double ref = 0;
  for (float v : h) ref += double(v) * v;
  EXPECT_EQ(c.to_host()[0], std::int64_t((n + 2) / 3 + 7));
  EXPECT_NEAR(d.to_host()[0], ref, 1e-9 * ref);
  rs::array<std::int64_t> two(2, dev);
  EXPECT_THROW(count(n, two), rs::shape_mismatch);
  if (dev.is_cuda()) {
    rs::array<double> on_cpu(1, rs::device::cpu());
    EXPECT_THROW(dot(on_cpu), rs::device_mismatch);
  }
  // Captured into a graph (their scratch then belongs to the graph) and replayed. A zip runs on its
  // arrays' stream as they were when it was made: make it again after moving them.
  a.set_stream(s);
  b.set_stream(s);
  c.set_stream(s);
  d.set_stream(s);
  auto dot_on_s = rs::zip(a, b) | rs::map([] RESIDENT_HD(float p, float q) { return double(p) * q; }) |
                  rs::reduce(rs::plus{}, 0.0);
  rs::graph g = rs::graph::capture(s, [&] {
    count(n, c);
    dot_on_s(d);
  });
  for (int replay = 0; replay < 2; ++replay) {
    g.replay(s);
    EXPECT_EQ(c.to_host()[0], std::int64_t((n + 2) / 3 + 7));
    EXPECT_NEAR(d.to_host()[0], ref, 1e-9 * ref);
  }
  for (auto* x : {&a, &b}) x->set_stream(rs::default_stream(dev));
  c.set_stream(rs::default_stream(dev));
  d.set_stream(rs::default_stream(dev));
}

// GPU-only cases: registered for the CUDA backend alone (the `.gpu` CTest entry).
using pipelines_cuda = backend;

TEST_P(pipelines, long_reductions_match_the_reference_in_every_form) {
  // A GPU reduction counts its finished blocks in the stream's counters, which long maps use too and
  // every kernel must leave zero (a count left behind would leave the result unwritten): repeated calls
  // into poisoned results, between long maps on the same stream, on two streams at once, and captured
  // into a graph replayed on another stream beside eager reductions on the capture stream. Exact folds
  // (max, an integer count) show a skipped or doubled vector; the sums are checked against FP64.
  rs::stream s1(dev), s2(dev), capture_on(dev), replay_on(dev);  // made first: arrays move onto them
  const std::size_t n = (std::size_t(1) << (dev.is_cuda() ? 24 : 16)) + 3;
  auto h = rs::test::random_vector<float>(n + 1, rs::test::fresh_seed(), 0.0, 1.0);
  double ref_sum = 0;
  std::int64_t ref_count = 0;
  float ref_max = -1;
  for (std::size_t i = 1; i <= n; ++i) {
    ref_sum += h[i];
    ref_count += h[i] < 0.25f;
    ref_max = std::max(ref_max, h[i]);
  }
  auto sum = rs::map([] RESIDENT_HD(float v) { return double(v); }) | rs::reduce(rs::plus{}, 0.0);
  auto count = rs::map([] RESIDENT_HD(float v) { return std::int64_t(v < 0.25f); }) |
               rs::reduce(rs::plus{}, std::int64_t(0));
  auto max = rs::reduce(rs::maximum{}, -1.f);
  auto x = rs::to_device(h, dev);
  auto body = x.slice(1, n);  // misaligned: a scalar head and tail around the vectors
  rs::array<std::int64_t> c(1, dev);
  auto poison = rs::generate([] RESIDENT_HD(std::size_t) { return std::int64_t(-1); });
  for (int call = 0; call < 3; ++call) {
    SCOPED_TRACE("call " + std::to_string(call));
    EXPECT_NEAR(sum(body), ref_sum, 1e-12 * ref_sum);
    poison(c);
    count(body, c);
    EXPECT_EQ(c.to_host()[0], ref_count);
    EXPECT_EQ(max(body), ref_max);
  }
  // One kernel each, between long maps that take their work from the same counters.
  auto copy = rs::to_device(h, dev);
  auto twice = rs::map([] RESIDENT_HD(float v) { return 2.f * v; });
  poison(c);
  {
    rs::scoped_ledger l(dev);
    twice(copy);
    count(copy.slice(1, n), c);
    twice(copy);
    EXPECT_EQ(l.delta().kernels, 3u);
    EXPECT_EQ(l.delta().d2h_copies, 0u);
  }
  std::int64_t doubled_count = 0;
  for (std::size_t i = 1; i <= n; ++i) doubled_count += 2.f * h[i] < 0.25f;
  EXPECT_EQ(c.to_host()[0], doubled_count);
  EXPECT_EQ(max(copy.slice(1, n)), 4.f * ref_max);

  // Each stream its own data (the second halved: about twice the count), so swapped counters show.
  std::vector<float> halved(h.size());
  std::int64_t ref_count_halved = 0;
  for (std::size_t i = 0; i < h.size(); ++i) halved[i] = 0.5f * h[i];
  for (std::size_t i = 1; i <= n; ++i) ref_count_halved += halved[i] < 0.25f;
  auto p = rs::to_device(std::span<const float>(h), s1.ref());
  auto q = rs::to_device(std::span<const float>(halved), s2.ref());
  rs::array<std::int64_t> cp(1, s1.ref()), cq(1, s2.ref());
  count(p.slice(1, n), cp);
  count(q.slice(1, n), cq);
  EXPECT_EQ(cp.to_host()[0], ref_count);
  EXPECT_EQ(cq.to_host()[0], ref_count_halved);

  auto g_in = rs::to_device(std::span<const float>(h), capture_on.ref());
  rs::array<std::int64_t> g_count(1, capture_on.ref()), e_count(1, capture_on.ref());
  rs::array<double> g_sum(1, capture_on.ref());
  rs::graph g = rs::graph::capture(capture_on, [&] {
    count(g_in.slice(1, n), g_count);
    sum(g_in.slice(1, n), g_sum);
  });
  capture_on.synchronize();
  for (int replay = 0; replay < 2; ++replay) {
    g.replay(replay_on);
    count(g_in.slice(1, n), e_count);
    replay_on.synchronize();
    EXPECT_EQ(g_count.to_host()[0], ref_count);
    EXPECT_NEAR(g_sum.to_host()[0], ref_sum, 1e-12 * ref_sum);
    EXPECT_EQ(e_count.to_host()[0], ref_count);
  }
}

TEST_P(pipelines, four_byte_reductions_hand_over_their_partials_under_every_grid_and_stream) {
  // A GPU reduction of 4-byte values hands its blocks' partials to its last block in slots each kernel
  // leaves zero (in the stream's slot, or its own when the grid outgrows it or the call is captured),
  // wider ones count in the stream's counters: both forms interleaved on one stream, repeated, under
  // grids of one block to more blocks than the stream's slots hold, captured and replayed on another
  // stream beside eager calls. Unsigned sums wrap, so they are exact in any order: one of two inputs
  // in turn, so a partial left behind by the previous call, lost or doubled, changes the result. The
  // integer minimum and unsigned maximum are exact too; so are the float sums: each value is 0.5 or 1
  // (at random), every partial sum a multiple of 0.5 no larger than n (< 2^23), which float holds in
  // any order, so one value lost or doubled changes the sum.
  rs::stream capture_on(dev), replay_on(dev);
  const std::size_t n = (std::size_t(1) << (dev.is_cuda() ? 22 : 16)) + 5;
  auto h = rs::test::random_vector<float>(n, rs::test::fresh_seed(), 0.0, 1.0);
  for (float& v : h) v = v < 0.5f ? 0.5f : 1.f;
  std::vector<std::int32_t> hi(n);
  std::vector<std::uint32_t> hu(n), hv(n);
  double ref_sum = 0;
  std::uint32_t ref_u = 0, ref_v = 0;  // wrapping sums
  for (std::size_t i = 0; i < n; ++i) {
    ref_sum += h[i];
    hi[i] = std::int32_t(h[i] * 2e9f) - 1000000000;
    hu[i] = std::uint32_t(h[i] * 4e9f);
  }
  // The extremes sit once each, far from the ends, so every block's partial matters.
  hi[n / 3] = -2000000000;
  hu[2 * n / 3] = 4100000000u;
  for (std::size_t i = 0; i < n; ++i) {
    hv[i] = hu[i] ^ 0x5555u;
    ref_u += hu[i];
    ref_v += hv[i];
  }
  auto x = rs::to_device(h, dev);
  auto xi = rs::to_device(hi, dev);
  auto xu = rs::to_device(hu, dev);
  auto xv = rs::to_device(hv, dev);
  auto fsum = rs::reduce(rs::plus{}, 0.f);
  auto usum = rs::reduce(rs::plus{}, 0u);
  auto dsum = rs::map([] RESIDENT_HD(float v) { return double(v); }) | rs::reduce(rs::plus{}, 0.0);
  auto imin = rs::reduce(rs::minimum{}, std::int32_t(0x7fffffff));
  auto umax = rs::reduce(rs::maximum{}, std::uint32_t(0));
  auto check = [&](const std::string& how, float f, double d, std::int32_t mn, std::uint32_t mx) {
    SCOPED_TRACE(how);
    EXPECT_EQ(double(f), ref_sum);
    EXPECT_EQ(d, ref_sum);
    EXPECT_EQ(mn, -2000000000);
    EXPECT_EQ(mx, 4100000000u);
  };
  for (int call = 0; call < 3; ++call) {
    check("call " + std::to_string(call), fsum(x), dsum(x), imin(xi), umax(xu));
    EXPECT_EQ(usum(xu), ref_u);
    EXPECT_EQ(usum(xv), ref_v);
  }
  if (dev.is_cuda()) {
    for (unsigned blocks : {1u, 7u, 1056u, 5000u}) {
      const rs::launch_config cfg{rs::dims(blocks), rs::dims(256)};
      for (int call = 0; call < 2; ++call) {
        check(std::to_string(blocks) + " blocks, call " + std::to_string(call), fsum.with_config(cfg)(x), dsum(x),
              imin.with_config(cfg)(xi), umax.with_config(cfg)(xu));
        EXPECT_EQ(usum.with_config(cfg)(call ? xv : xu), call ? ref_v : ref_u) << blocks << " blocks";
      }
    }
    // Blocks are told apart by their x index alone: a grid of more dimensions is refused before work.
    EXPECT_THROW(usum.with_config({rs::dims(4, 2), rs::dims(256)})(xu), rs::invalid_launch);
    EXPECT_EQ(usum(xv), ref_v);
  }
  auto g_in = rs::to_device(std::span<const float>(h), capture_on.ref());
  auto g_u = rs::to_device(std::span<const std::uint32_t>(hu), capture_on.ref());
  auto g_v = rs::to_device(std::span<const std::uint32_t>(hv), capture_on.ref());
  rs::array<float> g_sum(1, capture_on.ref()), e_sum(1, capture_on.ref());
  rs::array<double> g_dsum(1, capture_on.ref());
  rs::array<std::uint32_t> g_usum(1, capture_on.ref()), g_vsum(1, capture_on.ref());
  rs::graph g = rs::graph::capture(capture_on, [&] {
    fsum(g_in, g_sum);
    usum(g_u, g_usum);
    dsum(g_in, g_dsum);
    usum(g_v, g_vsum);
    fsum(g_in, g_sum);
  });
  capture_on.synchronize();
  for (int replay = 0; replay < 2; ++replay) {
    g.replay(replay_on);
    fsum(g_in, e_sum);
    replay_on.synchronize();
    capture_on.synchronize();
    check("replay " + std::to_string(replay), g_sum.to_host()[0], g_dsum.to_host()[0], imin(xi), umax(xu));
    EXPECT_EQ(g_usum.to_host()[0], ref_u);
    EXPECT_EQ(g_vsum.to_host()[0], ref_v);
    EXPECT_EQ(double(e_sum.to_host()[0]), ref_sum);
  }
}

TEST_P(pipelines, default_reductions_read_every_vector_once_at_every_length_and_offset) {
  // A reduction's threads stride over the vectors in trips of several, unchecked while a trip lies
  // wholly inside the data and checked on the one it cuts: lengths from one vector to several trips of
  // the whole grid, growing by about a third, and on a GPU lengths at and around each place a trip of
  // a full-occupancy grid can be cut (2048 threads per SM, four 16-byte vectors a trip, below and
  // above the length where the blocks of 1024 take over), at an aligned and a misaligned start.
  // Wrapping unsigned sums of random words are exact in any order: a vector skipped or read twice
  // changes them. Checked against prefix sums on the host.
  const std::size_t most = dev.is_cuda() ? (std::size_t(3) << 24) + 17 : (std::size_t(1) << 20) + 17;
  std::vector<std::size_t> lengths;
  for (double len = 1; len < double(most); len = len * 1.31 + 3) lengths.push_back(std::size_t(len));
  if (dev.is_cuda()) {
    const std::size_t stride = std::size_t(2048) * std::size_t(rs::properties(dev).multiprocessors);
    const std::size_t step = 4 * stride, reach = 3 * stride;  // in vectors of four
    for (std::size_t k = 0; k < 4; ++k)
      for (std::size_t at : {std::size_t(1), stride - 1, stride, reach - 1, reach, reach + 1, step - 1, step})
        for (std::size_t extra : {std::size_t(0), std::size_t(3)})
          if (const std::size_t n = 4 * (k * step + at) + extra; n < most) lengths.push_back(n);
  }
  std::vector<std::uint32_t> h(most + 1);
  std::mt19937 g(static_cast<std::uint32_t>(rs::test::fresh_seed()));
  for (auto& v : h) v = static_cast<std::uint32_t>(g());
  std::vector<std::uint32_t> prefix(h.size() + 1, 0);  // wrapping
  for (std::size_t i = 0; i < h.size(); ++i) prefix[i + 1] = prefix[i] + h[i];
  auto x = rs::to_device(h, dev);
  auto usum = rs::reduce(rs::plus{}, 0u);
  auto doubled = rs::map([] RESIDENT_HD(std::uint32_t v) { return 2u * v; }) | rs::reduce(rs::plus{}, 7u);
  rs::array<std::uint32_t> into(1, dev);
  for (const std::size_t n : lengths) {
    for (std::size_t off : {std::size_t(0), std::size_t(1)}) {
      SCOPED_TRACE("n = " + std::to_string(n) + ", offset " + std::to_string(off));
      const std::uint32_t ref = prefix[off + n] - prefix[off];
      EXPECT_EQ(usum(x.slice(off, n)), ref);
      doubled(x.slice(off, n), into);
      EXPECT_EQ(into.to_host()[0], 7u + 2u * ref);
    }
  }
}

TEST_P(pipelines_cuda, maps_and_sums_beyond_32_bit_vector_indices_reach_every_element) {
  // Past 2^32 16-byte vectors (64 GiB) no vector index fits 32 bits: 2^34 + 4101 floats, off the vector
  // size at the end, mapped in place; samples at the start, around vector 2^32 and at the end against
  // FP64.
  const std::size_t n = (std::size_t(1) << 34) + 4101;
  std::size_t free_bytes = 0, total = 0;
  rs::detail::cuda::mem_info(dev.index(), &free_bytes, &total);
  if (free_bytes < n * sizeof(float) + (std::size_t(4) << 30)) GTEST_SKIP() << "needs 68 GiB of free device memory";
  rs::array<float> x(n, dev);
  rs::generate([] RESIDENT_HD(std::size_t i) { return float(i % 1009); })(x);
  rs::map([] RESIDENT_HD(float v) { return 2.f * v + 1.f; })(x);
  const std::size_t edge = (std::size_t(1) << 32) * 4;  // element of vector 2^32
  rs::array<float> part(4096, dev);
  for (std::size_t first : {std::size_t(0), edge - 2048, n - 4096}) {
    rs::map([] RESIDENT_HD(float v) { return v; })(x.slice(first, 4096), part);
    const auto got = part.to_host();
    for (std::size_t k = 0; k < got.size(); ++k)
      ASSERT_EQ(double(got[k]), 2.0 * double((first + k) % 1009) + 1.0) << "at " << first + k;
  }
  // Sums of 4-byte values index their vectors in 32 bits while every index a thread forms (below the
  // vectors + 5 x the grid's threads) does, in 64 bits past that: sums of 2^32 - 2^26 - 1 vectors (32-bit
  // for a wave on up to 6000 SMs), of 2^32 - 1 vectors and a scalar tail (64-bit on any GPU), and the
  // whole array, against the exact sums (sum over i < m of 2 (i mod 1009) + 1 = q 1009^2 + r^2, m =
  // 1009 q + r).
  const std::size_t last32 = (std::size_t(1) << 32) - (std::size_t(1) << 26) - 1;
  // The 4-byte values fold in double: every partial sum is an integer below 2^53, exact in any order,
  // so one vector missed or counted twice (4 elements, at least 4) changes the result.
  rs::array<double> sum(1, dev);
  for (std::size_t m : {4 * last32, 4 * ((std::size_t(1) << 32) - 1) + 3, n}) {
    const double q = double(m / 1009), r = double(m % 1009), expect = q * 1009.0 * 1009.0 + r * r;
    (rs::map([] RESIDENT_HD(float v) { return double(v); }) | rs::reduce(rs::plus{}, 0.0))(x.slice(0, m), sum);
    EXPECT_EQ(sum.to_host()[0], expect) << "sum of " << m << " elements";
  }
}

TEST_P(pipelines_cuda, configured_sums_beyond_32_bit_thread_indices_count_each_element_once) {
  // A configured grid of 2^23 blocks of 256 (2^31 threads): a thread's second vector lies 2^31 past
  // its first, its fourth 3 x 2^31, which 32-bit indices would wrap onto the first. Such sums index
  // in 64 bits; a smaller grid in 32.
  const std::size_t n = (std::size_t(1) << 20) + 3;
  rs::array<std::uint32_t> x(n, dev);
  rs::generate([] RESIDENT_HD(std::size_t i) { return std::uint32_t(i % 1009); })(x);
  const std::uint64_t q = n / 1009, r = n % 1009, expect = q * (1008 * 1009 / 2) + r * (r - 1) / 2;
  auto sum = rs::reduce(rs::plus{}, 0u);
  for (unsigned blocks : {1u << 23, 1u << 20}) {
    const rs::launch_config cfg{rs::dims(blocks), rs::dims(256)};
    EXPECT_EQ(sum.with_config(cfg)(x), std::uint32_t(expect)) << blocks << " blocks";
    rs::array<std::uint32_t> total(1, dev);
    sum.with_config(cfg)(x, total);
    EXPECT_EQ(total.to_host()[0], std::uint32_t(expect)) << blocks << " blocks, into a device array";
  }
}

TEST_P(pipelines, inclusive_scans_after_maps_zips_and_generators_match_the_reference) {
  const std::uint64_t kernels = dev.is_cuda() ? 2 : 1;  // CUB's look-back set-up, then the scan
  for (std::size_t n : {std::size_t(1), std::size_t(5), std::size_t(1000), std::size_t(1 << 20) + 3}) {
    auto seed = rs::test::fresh_seed();
    SCOPED_TRACE("n = " + std::to_string(n) + ", seed = " + std::to_string(seed));
    auto h = rs::test::random_vector<float>(n, seed, 0.0, 1.0);
    auto x = rs::to_device(h, dev);
    // Out of place into doubles: y[i] = sum of f1(x[0..i]), against an FP64 prefix sum.
    rs::array<double> y = rs::to_device(std::vector<double>(n, rs::test::poison<double>()), dev);
    {
      rs::scoped_ledger l(dev);
      rs::scoped_transfer_policy forbid(rs::transfer_policy::forbid);
      (rs::map<f1>() | rs::map([] RESIDENT_HD(float v) { return double(v); }) | rs::inclusive_scan(rs::plus{}))(x, y);
      EXPECT_EQ(l.delta().kernels, kernels);
      EXPECT_EQ(l.delta().h2d_copies + l.delta().d2h_copies, 0u);
    }
    std::vector<double> ref(n), abs_prefix(n);
    long double acc = 0;
    // The stage in float (a kernel may fuse 1.5 v + 0.5 into one rounding: terms of 0.5 to 2, two
    // roundings apart), the sums in FP64: every prefix within its own bound, which one term (>= 0.5)
    // missing, doubled or moved to another prefix exceeds.
    for (std::size_t i = 0; i < n; ++i) abs_prefix[i] = ref[i] = double(acc += f1(h[i]));
    const auto got = y.to_host();
    const double term_error = 4 * rs::test::unit_roundoff<float>();
    EXPECT_EQ(rs::test::first_scan_mismatch<double>(got, ref, abs_prefix, term_error), n);
    if (n > 1) {  // the check can fail: a reference with a term dropped (the last, a middle one) or doubled
      for (std::size_t k : {n / 2, n - 1})
        for (double times : {0.0, 2.0}) {
          std::vector<double> planted = ref;
          for (std::size_t i = k; i < n; ++i) planted[i] += (times - 1) * double(f1(h[k]));
          EXPECT_EQ(rs::test::first_scan_mismatch<double>(got, planted, abs_prefix, term_error), k)
              << "term " << k << " times " << times;
        }
    }
    // In place, a running maximum: exact, whatever the order of combination.
    rs::inclusive_scan(rs::maximum{})(x);
    auto m = x.to_host();
    float run = h[0];
    for (std::size_t i = 0; i < n; ++i) {
      run = std::max(run, h[i]);
      ASSERT_EQ(m[i], run) << "at " << i;
    }
    // A zip, then a generator: exact integer sums.
    auto a = rs::to_device(std::vector<std::int32_t>(n, 3), dev), b = rs::to_device(std::vector<std::int32_t>(n, 4), dev);
    rs::array<std::int64_t> z(n, dev);
    (rs::zip(a, b) | rs::map([] RESIDENT_HD(std::int32_t p, std::int32_t q) { return std::int64_t(p) * q; }) |
     rs::inclusive_scan(rs::plus{}))(z);
    auto zh = z.to_host();
    for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(zh[i], std::int64_t(12) * std::int64_t(i + 1)) << "at " << i;
    (rs::generate([] RESIDENT_HD(std::size_t i) { return std::int64_t(i % 5); }) | rs::inclusive_scan(rs::plus{}))(z);
    zh = z.to_host();
    std::int64_t want = 0;
    for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(zh[i], want += std::int64_t(i % 5)) << "at " << i;
  }
}

TEST_P(pipelines, scans_refuse_bad_calls_before_work_and_do_nothing_when_empty) {
  rs::array<float> x(10, dev), y(11, dev), none(0, dev);
  auto scan = rs::inclusive_scan(rs::plus{});
  EXPECT_THROW(scan(x, y), rs::shape_mismatch);
  EXPECT_THROW(scan.with_config({rs::dims(1), rs::dims(32)})(x), rs::invalid_launch);
  rs::scoped_ledger l(dev);
  scan(none);
  EXPECT_EQ(l.delta().kernels, 0u);
  rs::array<float> moved = std::move(x);
  EXPECT_THROW(scan(x), rs::invalid_argument);
}

}  // namespace
