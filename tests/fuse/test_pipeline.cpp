// Compiled by nvcc when the CUDA backend is in the build.
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

using rs::test::f1;
using rs::test::f2;
using rs::test::f3;
using rs::test::r1;
using rs::test::r2;
using rs::test::r3;

struct scale {
  float a;
  RESIDENT_HD float operator()(float v) const { return a * v; }
};

using pipelines = backend;

// Element types less aligned than their size: a store of one of them must not assume more.
struct xy {
  float x, y;  // 8 bytes, aligned to 4
};

struct xyzw {
  float x, y, z, w;  // 16 bytes, aligned to 4
};

struct halves {
  std::int16_t lo, hi;  // 4 bytes, aligned to 2
};

struct to_xy {
  RESIDENT_HD xy operator()(float v) const { return {2 * v, v - 1}; }
};

struct to_xyzw {
  RESIDENT_HD xyzw operator()(float v) const { return {v, 2 * v, 3 * v, 4 * v}; }
};

struct to_halves {
  RESIDENT_HD halves operator()(float v) const { return {std::int16_t(v * 100), std::int16_t(-v * 100)}; }
};

TEST_P(pipelines, seed_pipeline_in_place_is_one_kernel_and_no_transfer) {
  for (std::size_t n : {std::size_t(1), std::size_t(5), std::size_t(1000), std::size_t(1 << 20) + 3}) {
    auto seed = rs::test::fresh_seed();
    SCOPED_TRACE("n = " + std::to_string(n) + ", seed = " + std::to_string(seed));
    auto h = rs::test::random_vector<float>(n, seed, 0.0, 1.0);
    auto x = rs::to_device(h, dev);
    auto master = rs::map<f1>() | rs::map<f2>() | rs::map<f3>();
    rs::scoped_ledger l(dev);
    {
      rs::scoped_transfer_policy forbid(rs::transfer_policy::forbid);
      master(x);
    }
    auto d = l.delta();
    EXPECT_EQ(d.kernels, 1u);
    EXPECT_EQ(d.h2d_copies + d.d2h_copies + d.d2d_copies, 0u);
    EXPECT_EQ(d.allocations, 0u);
    std::vector<double> ref(n);
    for (std::size_t i = 0; i < n; ++i) ref[i] = r3(r2(r1(h[i])));
    EXPECT_LT(rs::test::rel_error(x.to_host(), ref), 1e-6);
  }
}

TEST_P(pipelines, stage_forms_functor_lambda_and_type_change) {
  const std::size_t n = 4099;
  auto h = rs::test::random_vector<float>(n, rs::test::fresh_seed());
  auto x = rs::to_device(h, dev);
  std::vector<double> poison(n, rs::test::poison<double>());
  auto y = rs::to_device(poison, dev);
  auto p = rs::map(scale{3.f}) | rs::map<f3>() | rs::map([] RESIDENT_HD(float v) { return double(v) * 0.25; });
  p(x, y);  // float in, double out
  std::vector<double> ref(n);
  for (std::size_t i = 0; i < n; ++i) ref[i] = 0.25 * r3(3.0 * h[i]);
  EXPECT_LT(rs::test::rel_error(y.to_host(), ref), 1e-6);
  auto to_double = rs::map([] RESIDENT_HD(float v) { return double(v) / 3.0; });
  to_double(x, y);
  auto hy = y.to_host();
  for (std::size_t i = 0; i < n; ++i) ASSERT_DOUBLE_EQ(hy[i], double(h[i]) / 3.0);
}

TEST_P(pipelines, zip_of_three_types) {
  const std::size_t n = 10007;
  auto seed = rs::test::fresh_seed();
  auto ha = rs::test::random_vector<float>(n, seed);
  auto hb = rs::test::random_vector<double>(n, seed + 1);
  std::vector<std::int32_t> hc(n);
  for (std::size_t i = 0; i < n; ++i) hc[i] = std::int32_t(i % 97) - 48;
  auto a = rs::to_device(ha, dev);
  auto b = rs::to_device(hb, dev);
  auto c = rs::to_device(hc, dev);
  rs::array<double> out(n, dev);
  auto p = rs::zip(a, b, c) | rs::map([] RESIDENT_HD(float x, double y, std::int32_t k) { return x * y + k; }) |
           rs::map([] RESIDENT_HD(double v) { return v * 2.0; });
  rs::scoped_ledger l(dev);
  p(out);
  EXPECT_EQ(l.delta().kernels, 1u);
  std::vector<double> ref(n);
  for (std::size_t i = 0; i < n; ++i) ref[i] = (double(ha[i]) * hb[i] + hc[i]) * 2.0;
  EXPECT_LT(rs::test::rel_error(out.to_host(), ref), 1e-12);
  rs::array<double> wrong(n - 1, dev);
  EXPECT_THROW(p(wrong), rs::shape_mismatch);
  rs::array<float> short_a(n - 1, dev);
  EXPECT_THROW(rs::zip(short_a, b), rs::shape_mismatch);
}

TEST_P(pipelines, generate_source) {
  const std::size_t n = 12345;
  rs::array<std::int64_t> out(n, dev);
  auto p = rs::generate([] RESIDENT_HD(std::size_t i) { return std::int64_t(i) * 3; }) |
           rs::map([] RESIDENT_HD(std::int64_t v) { return v - 7; });
  p(out);
  auto h = out.to_host();
  for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(h[i], std::int64_t(i) * 3 - 7);
}

TEST_P(pipelines, long_maps_match_the_reference_in_every_form) {
  // Long enough that a GPU map takes its vectors from a counter instead of striding over them: out of
  // place into doubles from a misaligned slice, in place, from a zip of two types, two at once on two
  // streams, and captured into a graph that replays on another stream while the capture stream runs a
  // map of its own. Each is one kernel and allocates nothing. (The CPU runs the same at a smaller n.)
  const std::size_t n = (std::size_t(1) << (dev.is_cuda() ? 24 : 16)) + 3;
  auto h = rs::test::random_vector<float>(n + 1, rs::test::fresh_seed(), 0.0, 1.0);
  auto ref = [&](std::size_t i) { return r3(r2(r1(double(h[i])))); };
  auto expect_seed = [&](const std::vector<float>& got, std::size_t from) {
    for (std::size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], ref(i + from), 2e-6) << "element " << i;
  };
  auto master = rs::map<f1>() | rs::map<f2>() | rs::map<f3>();
  auto x = rs::to_device(h, dev);
  rs::array<double> y(n, dev);
  (master | rs::map([] RESIDENT_HD(float v) { return double(v); }))(x.slice(1, n), y);
  auto hy = y.to_host();
  for (std::size_t i = 0; i < n; ++i) ASSERT_NEAR(hy[i], ref(i + 1), 2e-6) << "element " << i;
  {
    rs::scoped_ledger l(dev);
    master(x);
    EXPECT_EQ(l.delta().kernels, 1u);
    EXPECT_EQ(l.delta().allocations, 0u);
  }
  expect_seed(x.to_host(), 0);

  std::vector<std::int32_t> hk(n);
  for (std::size_t i = 0; i < n; ++i) hk[i] = std::int32_t(i % 7) - 3;
  auto a = rs::to_device(std::vector<float>(h.begin(), h.begin() + std::ptrdiff_t(n)), dev);
  auto k = rs::to_device(hk, dev);
  rs::array<float> z(n, dev);
  (rs::zip(a, k) | rs::map([] RESIDENT_HD(float v, std::int32_t m) { return v * float(m); }))(z);
  auto hz = z.to_host();
  for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(hz[i], h[i] * float(hk[i])) << "element " << i;

  rs::stream s1(dev), s2(dev);
  auto p = rs::to_device(std::span<const float>(h), s1.ref());
  auto q = rs::to_device(std::span<const float>(h), s2.ref());
  master(p);
  master(q);
  expect_seed(p.to_host(), 0);
  expect_seed(q.to_host(), 0);

  rs::stream capture_on(dev), replay_on(dev);
  auto g_in = rs::to_device(std::span<const float>(h), capture_on.ref());
  rs::array<float> g_out(n + 1, capture_on.ref());
  rs::graph g = rs::graph::capture(capture_on, [&] { master(g_in, g_out); });
  auto eager = rs::to_device(std::span<const float>(h), capture_on.ref());
  capture_on.synchronize();
  g.replay(replay_on);
  master(eager);
  replay_on.synchronize();
  expect_seed(g_out.to_host(), 0);
  expect_seed(eager.to_host(), 0);
}

// GPU-only cases: registered for the CUDA backend alone (the `.gpu` CTest entry).
using pipelines_cuda = backend;

TEST_P(pipelines_cuda, long_maps_on_the_per_thread_default_stream_from_two_threads) {
  // cudaStreamPerThread is one handle naming a different stream in each host thread: the two threads'
  // long maps run at once and must not share the counters they take their work from.
  const auto per_thread = reinterpret_cast<rs::cuda_stream_t>(std::uintptr_t{2});  // cudaStreamPerThread
  const std::size_t n = (std::size_t(1) << 24) + 3;
  // Each thread its own input (its own seed): results swapped between the threads show.
  const auto seed = rs::test::fresh_seed();
  const std::vector<float> h[2] = {rs::test::random_vector<float>(n, seed, 0.0, 1.0),
                                   rs::test::random_vector<float>(n, seed + 1, -1.0, 0.0)};
  auto master = rs::map<f1>() | rs::map<f2>() | rs::map<f3>();
  auto poison = rs::generate([] RESIDENT_HD(std::size_t) { return NAN; });
  std::vector<float> got[2][4];
  auto work = [&](int t) {
    const rs::stream_ref s(dev, per_thread);
    auto x = rs::to_device(std::span<const float>(h[t]), s);
    rs::array<float> y(n, s);
    for (auto& g : got[t]) {  // a vector skipped in any call stays NaN
      poison(y);
      master(x, y);
      g = y.to_host();
    }
  };
  std::thread other(work, 1);
  work(0);
  other.join();
  for (int t = 0; t < 2; ++t)
    for (const auto& g : got[t])
      for (std::size_t i = 0; i < n; ++i)
        ASSERT_NEAR(g[i], r3(r2(r1(double(h[t][i])))), 2e-6) << "thread " << t << ", element " << i;
}

TEST_P(pipelines, outputs_of_struct_types_less_aligned_than_their_size) {
  // Every offset of the output slice, so element addresses are aligned to 4 (or 2) bytes only.
  const std::size_t n = 5003;
  auto h = rs::test::random_vector<float>(n, rs::test::fresh_seed(), 0.0, 1.0);
  auto x = rs::to_device(h, dev);
  auto check = [&](auto stage, auto poison, auto ref, auto same) {
    using T = decltype(poison);
    std::vector<T> fill(n + 4, poison);
    for (std::size_t off : {0, 1, 2, 3}) {
      auto y = rs::to_device(fill, dev);
      rs::map(stage)(x, y.slice(off, n));
      auto got = y.to_host();
      for (std::size_t i = 0; i < n; ++i) ASSERT_TRUE(same(got[off + i], ref(h[i]))) << "offset " << off << " i " << i;
      ASSERT_TRUE(same(got[off + n], poison)) << "wrote past the slice at offset " << off;
      if (off) {
        ASSERT_TRUE(same(got[off - 1], poison)) << "wrote before the slice at offset " << off;
      }
    }
  };
  check(to_xy{}, xy{-7, -7}, [](float v) { return xy{2 * v, v - 1}; },
        [](xy a, xy b) { return a.x == b.x && a.y == b.y; });
  check(to_xyzw{}, xyzw{-7, -7, -7, -7}, [](float v) { return xyzw{v, 2 * v, 3 * v, 4 * v}; },
        [](xyzw a, xyzw b) { return a.x == b.x && a.y == b.y && a.z == b.z && a.w == b.w; });
  check(to_halves{}, halves{-7, -7}, [](float v) { return halves{std::int16_t(v * 100), std::int16_t(-v * 100)}; },
        [](halves a, halves b) { return a.lo == b.lo && a.hi == b.hi; });
}

TEST_P(pipelines, misaligned_views_use_head_and_tail) {
  // Slices starting one element in break 16-byte alignment: the head and tail paths must cover the rest.
  const std::size_t n = 1 << 16;
  auto h = rs::test::random_vector<float>(n + 8, rs::test::fresh_seed(), 0.0, 1.0);
  auto x = rs::to_device(h, dev);
  std::vector<double> poison(n + 8, rs::test::poison<double>());
  auto p = rs::map<f1>() | rs::map<f2>();
  for (std::size_t in_off : {0, 1, 2, 3}) {
    for (std::size_t out_off : {0, 1, 3}) {
      for (std::size_t len : {std::size_t(1), std::size_t(3), std::size_t(17), n - 1}) {
        auto y = rs::to_device(poison, dev);
        p(x.slice(in_off, len), y.slice(out_off, len));
        auto got = y.to_host();
        std::vector<double> ref(len);
        std::vector<double> out(len);
        for (std::size_t i = 0; i < len; ++i) {
          ref[i] = r2(r1(h[in_off + i]));
          out[i] = got[out_off + i];
        }
        EXPECT_LT(rs::test::rel_error(out, ref), 1e-6) << "in " << in_off << " out " << out_off << " len " << len;
        EXPECT_EQ(got[out_off + len], rs::test::poison<double>()) << "wrote past the slice";
        if (out_off) {
          EXPECT_EQ(got[out_off - 1], rs::test::poison<double>()) << "wrote before the slice";
        }
      }
    }
  }
  // In place on a misaligned slice, and a reduction over one.
  auto z = rs::to_device(h, dev);
  p(z.slice(1, n));
  auto hz = z.to_host();
  EXPECT_EQ(hz[0], h[0]);
  EXPECT_NEAR(hz[1], r2(r1(h[1])), 1e-6);
  EXPECT_NEAR(hz[n], r2(r1(h[n])), 1e-6);
  EXPECT_EQ(hz[n + 1], h[n + 1]);
  double s = (rs::map([] RESIDENT_HD(float v) { return double(v); }) | rs::reduce(rs::plus{}, 0.0))(x.slice(3, n));
  double ref = 0;
  for (std::size_t i = 3; i < n + 3; ++i) ref += h[i];
  EXPECT_NEAR(s, ref, 1e-9 * ref);
  EXPECT_THROW(x.slice(n, 9), rs::invalid_argument);
}

TEST_P(pipelines, plan_splits_head_vectors_tail) {
  alignas(64) float buf[64];
  auto p = rs::detail::plan_vectors(50, 4, {{buf + 1, sizeof(float)}});
  EXPECT_TRUE(p.vectorized);
  EXPECT_EQ(p.head, 3u);
  EXPECT_EQ(p.vectors, 11u);  // 47 after the head: 11 vectors and a tail of 3
  auto q = rs::detail::plan_vectors(50, 4, {{buf + 1, sizeof(float)}, {buf + 2, sizeof(float)}});
  EXPECT_FALSE(q.vectorized) << "different misalignments must fall back to scalar";
  auto r = rs::detail::plan_vectors(50, 2, {{buf, sizeof(float)}, {reinterpret_cast<double*>(buf + 4), sizeof(double)}});
  EXPECT_TRUE(r.vectorized);
  EXPECT_EQ(r.head, 0u);
}

TEST_P(pipelines, mismatched_arrays_fail_before_work) {
  auto x = rs::to_device(std::vector<float>(10, 1.f), dev);
  rs::array<float> y(11, dev);
  rs::scoped_ledger l(dev);
  auto p = rs::map<f1>();
  EXPECT_THROW(p(x, y), rs::shape_mismatch);
  if (dev.is_cuda()) {
    rs::array<float> on_cpu(10, rs::device::cpu());
    EXPECT_THROW(p(x, on_cpu), rs::device_mismatch);
  }
  rs::array<double> two(2, dev);
  EXPECT_THROW((rs::map([] RESIDENT_HD(float v) { return double(v); }) | rs::reduce(rs::plus{}, 0.0))(x, two),
               rs::shape_mismatch);
  EXPECT_EQ(l.delta().kernels, 0u);
  auto fixed = p.with_config({rs::dims(2), rs::dims(2048)});
  EXPECT_THROW(fixed(x), rs::invalid_launch);
  auto ok = p.with_config({rs::dims(3), rs::dims(64)});
  ok(x);
  for (float v : x.to_host()) EXPECT_EQ(v, 2.f);
}

TEST_P(pipelines, the_scalar_head_and_tail_are_written_under_every_launch_shape) {
  // Slices that begin and end off a vector boundary, and ones shorter than a vector: the elements around
  // the vectors are the last block's, which must reach them whatever the grid and block (one thread of
  // one block included); nothing outside the slice is written.
  const std::size_t n = 1031;
  const auto seed = rs::test::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const auto h = rs::test::random_vector<float>(n, seed, 0.0, 1.0);
  const auto x = rs::to_device(h, dev);
  const auto master = rs::map<f1>() | rs::map<f2>() | rs::map<f3>();
  const std::vector<std::optional<rs::launch_config>> shapes = {
      std::nullopt, rs::launch_config{rs::dims(1), rs::dims(1)}, rs::launch_config{rs::dims(1), rs::dims(3)},
      rs::launch_config{rs::dims(2), rs::dims(32)}, rs::launch_config{rs::dims(7), rs::dims(64)}};
  for (const auto& shape : shapes)
    for (std::size_t first : {0, 1, 2, 3, 5})
      for (std::size_t last : {n, n - 1, n - 2, n - 3, first + 1, first + 3, first + 6}) {
        SCOPED_TRACE((shape ? shape->str() : std::string("default shape")) + ", [" + std::to_string(first) + ", " +
                     std::to_string(last) + ")");
        auto y = rs::to_device(std::vector<float>(n, rs::test::poison<float>()), dev);
        if (shape)
          master.with_config(*shape)(x.slice(first, last - first), y.slice(first, last - first));
        else
          master(x.slice(first, last - first), y.slice(first, last - first));
        const auto got = y.to_host();
        for (std::size_t i = 0; i < n; ++i) {
          if (i < first || i >= last) {
            ASSERT_EQ(got[i], rs::test::poison<float>()) << "written outside the slice at " << i;
          } else {
            const double ref = rs::test::seed_ref(h[i]);
            ASSERT_NEAR(got[i], ref, 1e-5 * (1 + std::abs(ref))) << "at " << i;
          }
        }
      }
}

TEST_P(pipelines, dependent_chains_see_each_predecessor_with_and_without_dependent_launch) {
  // Each step reads what the one before wrote, small (launch-bound) and large (several blocks per SM),
  // ending in a reduction: with dependent launch the next kernel may start early and must still wait.
  const bool was = rs::programmatic_launch();
  for (bool pdl : {true, false}) {
    rs::set_programmatic_launch(pdl);
    for (std::size_t n : {std::size_t(1000), std::size_t(1 << 22) + 1}) {
      SCOPED_TRACE("dependent launch " + std::to_string(pdl) + ", n = " + std::to_string(n));
      rs::array<float> x(n, dev);
      rs::random::fill_uniform(x, 5);
      const int steps = 20;
      for (int i = 0; i < steps; ++i) rs::map([] RESIDENT_HD(float v) { return v + 1.f; })(x);
      const double sum = (rs::map([] RESIDENT_HD(float v) { return double(v); }) | rs::reduce(rs::plus{}, 0.0))(x);
      rs::array<float> u(n, dev);
      rs::random::fill_uniform(u, 5);
      double expect = 0;
      for (float v : u.to_host()) {
        float w = v;
        for (int i = 0; i < steps; ++i) w += 1.f;
        expect += double(w);
      }
      // Terms >= 20 in float, folded in double: a term read before its 20 steps ended, missed or
      // doubled moves the sum past the bound.
      EXPECT_TRUE(rs::test::sum_matches(sum, expect, rs::test::sum_tolerance<double>(n, expect), 1.0));
    }
  }
  rs::set_programmatic_launch(was);
}

RESIDENT_BACKENDS(pipelines);

RESIDENT_CUDA_ONLY(pipelines_cuda);  // the per-thread default stream, 64 GiB arrays, configured grids

}  // namespace
