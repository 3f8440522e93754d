// Compiled by nvcc when the CUDA backend is in the build.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "resident/streaming/streaming.hpp"
#include "seed.hpp"
#include "support.hpp"

namespace rs = resident;
using rs::test::backend;

namespace {

using rs::test::f1;
using rs::test::f2;
using rs::test::f3;
using rs::test::seed_ref;

RESIDENT_HD double combine(float a, double b, int c) { return double(a) * b + double(c); }
RESIDENT_HD double square(double v) { return v * v; }

struct ramp {  // element i of a generated source
  RESIDENT_HD float operator()(std::size_t i) const { return float(i % 1000) * 0.001f - 0.25f; }
};
double ramp_ref(std::size_t i) { return double(float(i % 1000) * 0.001f - 0.25f); }

constexpr std::size_t chunk = 1024;

std::vector<std::size_t> sizes_around_a_chunk() {
  return {0, 1, chunk - 1, chunk, chunk + 1, 5 * chunk + 7};
}

std::size_t chunks_of(std::size_t n) { return (n + chunk - 1) / chunk; }

void expect_close(const std::vector<float>& out, const std::vector<double>& ref) {
  ASSERT_EQ(out.size(), ref.size());
  for (std::size_t i = 0; i < ref.size(); ++i)
    ASSERT_NEAR(out[i], ref[i], 2e-6 * (1.0 + std::abs(ref[i]))) << "element " << i;
}

using streaming = backend;

TEST_P(streaming, map_matches_fp64_for_sizes_around_the_chunk) {
  const auto seed_pipeline = rs::map<f1>() | rs::map<f2>() | rs::map<f3>();
  for (int depth : {1, 2, 3}) {
    for (std::size_t n : sizes_around_a_chunk()) {
      const auto seed = rs::test::fresh_seed();
      SCOPED_TRACE("n = " + std::to_string(n) + ", depth " + std::to_string(depth) + ", seed " + std::to_string(seed));
      const auto in = rs::test::random_vector<float>(n, seed);
      std::vector<float> out(n, rs::test::poison<float>());
      std::vector<double> ref(n);
      for (std::size_t i = 0; i < n; ++i) ref[i] = seed_ref(in[i]);
      rs::scoped_ledger l(dev);
      const auto s = rs::stream_pipeline(seed_pipeline, in, out, {.chunk_elements = chunk, .depth = depth, .target = dev});
      const auto d = l.delta();
      expect_close(out, ref);
      EXPECT_EQ(s.chunks, chunks_of(n));
      EXPECT_EQ(s.elements, n);
      EXPECT_EQ(d.stream_chunks, chunks_of(n));
      EXPECT_EQ(d.streamed_h2d_bytes, n * sizeof(float));
      EXPECT_EQ(d.streamed_d2h_bytes, n * sizeof(float));
      EXPECT_EQ(d.h2d_bytes, n * sizeof(float));
      EXPECT_EQ(d.d2h_bytes, n * sizeof(float));
      EXPECT_EQ(d.h2d_copies, chunks_of(n));
      EXPECT_EQ(d.d2h_copies, chunks_of(n));
      EXPECT_EQ(d.kernels, chunks_of(n));
      EXPECT_EQ(s.h2d_bytes, n * sizeof(float));
    }
  }
}

TEST_P(streaming, in_place_converting_and_pinned_host_memory) {
  const std::size_t n = 3 * chunk + 5;
  const auto in = rs::test::random_vector<float>(n, rs::test::fresh_seed());
  std::vector<double> ref(n);
  for (std::size_t i = 0; i < n; ++i) ref[i] = seed_ref(in[i]);
  const auto p = rs::map<f1>() | rs::map<f2>() | rs::map<f3>();
  const rs::stream_options o{.chunk_elements = chunk, .target = dev};
  {  // in place in host memory
    auto x = in;
    rs::stream_pipeline(p, x, x, o);
    expect_close(x, ref);
  }
  {  // float in, double out
    std::vector<double> y(n, rs::test::poison<double>());
    rs::stream_pipeline(p, in, y, o);
    for (std::size_t i = 0; i < n; ++i) ASSERT_NEAR(y[i], ref[i], 2e-6) << i;
  }
  {  // page-locked input and output: copied without staging
    rs::pinned_buffer<float> x(n), y(n);
    std::copy(in.begin(), in.end(), x.begin());
    std::fill(y.begin(), y.end(), rs::test::poison<float>());
    const auto s = rs::stream_pipeline(p, x, y, o);
    EXPECT_EQ(s.pinned_input, x.page_locked() || dev.is_cpu());
    expect_close(std::vector<float>(y.begin(), y.end()), ref);
  }
  {  // chosen chunk and depth
    std::vector<float> y(n, rs::test::poison<float>());
    const auto s = rs::stream_pipeline(p, in, y, {.target = dev});
    EXPECT_GE(s.chunk_elements, 1u);
    EXPECT_GE(s.depth, 1);
    expect_close(y, ref);
  }
}

TEST_P(streaming, zip_of_three_host_arrays) {
  for (std::size_t n : sizes_around_a_chunk()) {
    const auto seed = rs::test::fresh_seed();
    SCOPED_TRACE("n = " + std::to_string(n) + ", seed " + std::to_string(seed));
    const auto a = rs::test::random_vector<float>(n, seed);
    const auto b = rs::test::random_vector<double>(n, seed + 1);
    std::vector<int> c(n);
    for (std::size_t i = 0; i < n; ++i) c[i] = int(i % 17) - 8;
    std::vector<double> out(n, rs::test::poison<double>());
    rs::scoped_ledger l(dev);
    rs::stream_pipeline(rs::map<combine>() | rs::map<square>(), rs::host_zip(a, b, c), out,
                        {.chunk_elements = chunk, .target = dev});
    for (std::size_t i = 0; i < n; ++i) {
      const double r = double(a[i]) * b[i] + double(c[i]);
      ASSERT_NEAR(out[i], r * r, 1e-12 * (1 + r * r)) << i;
    }
    const auto d = l.delta();
    EXPECT_EQ(d.streamed_h2d_bytes, n * (sizeof(float) + sizeof(double) + sizeof(int)));
    EXPECT_EQ(d.streamed_d2h_bytes, n * sizeof(double));
    EXPECT_EQ(d.h2d_copies, 3 * chunks_of(n));
    EXPECT_EQ(d.stream_chunks, chunks_of(n));
  }
}

TEST_P(streaming, generated_source_uploads_nothing) {
  for (std::size_t n : sizes_around_a_chunk()) {
    SCOPED_TRACE("n = " + std::to_string(n));
    std::vector<float> out(n, rs::test::poison<float>());
    rs::scoped_ledger l(dev);
    rs::stream_pipeline(rs::map<f1>() | rs::map<f2>() | rs::map<f3>(), rs::host_generate(ramp{}, n), out,
                        {.chunk_elements = chunk, .target = dev});
    std::vector<double> ref(n);
    for (std::size_t i = 0; i < n; ++i) ref[i] = seed_ref(ramp_ref(i));
    expect_close(out, ref);
    const auto d = l.delta();
    EXPECT_EQ(d.h2d_bytes, 0u);
    EXPECT_EQ(d.streamed_d2h_bytes, n * sizeof(float));
    EXPECT_EQ(d.stream_chunks, chunks_of(n));
  }
}

TEST_P(streaming, reductions_fold_init_once) {
  for (std::size_t n : sizes_around_a_chunk()) {
    const auto seed = rs::test::fresh_seed();
    SCOPED_TRACE("n = " + std::to_string(n) + ", seed " + std::to_string(seed));
    const auto in = rs::test::random_vector<float>(n, seed);
    double ref = 5.0, lo = 0.75, hi = -0.75;  // init 5 must count once, whatever the number of chunks
    for (float v : in) {
      ref += seed_ref(v);
      lo = std::min(lo, double(v));
      hi = std::max(hi, double(v));
    }
    const rs::stream_options o{.chunk_elements = chunk, .target = dev};
    rs::scoped_ledger l(dev);
    rs::stream_summary s;
    const double sum =
        rs::stream_pipeline(rs::map<f1>() | rs::map<f2>() | rs::map<f3>() | rs::reduce(rs::plus{}, 5.0), in, o, &s);
    const auto d = l.delta();
    EXPECT_NEAR(sum, ref, 1e-5 * (1.0 + double(n)));
    EXPECT_EQ(s.chunks, chunks_of(n));
    EXPECT_EQ(d.streamed_h2d_bytes, n * sizeof(float));
    EXPECT_EQ(d.streamed_d2h_bytes, 0u);
    EXPECT_EQ(d.d2h_copies, chunks_of(n));  // one partial per chunk
    EXPECT_EQ(d.stream_chunks, chunks_of(n));
    EXPECT_EQ(rs::stream_pipeline(rs::reduce(rs::minimum{}, 0.75f), in, o), float(lo));
    EXPECT_EQ(rs::stream_pipeline(rs::reduce(rs::maximum{}, -0.75f), in, o), float(hi));
  }
}

TEST_P(streaming, zip_and_generated_reductions) {
  const std::size_t n = 4 * chunk + 3;
  const auto a = rs::test::random_vector<float>(n, rs::test::fresh_seed());
  const auto b = rs::test::random_vector<double>(n, rs::test::fresh_seed());
  const std::vector<int> c(n, 2);
  const rs::stream_options o{.chunk_elements = chunk, .target = dev};
  double ref = 0;
  for (std::size_t i = 0; i < n; ++i) ref += square(double(a[i]) * b[i] + 2.0);
  EXPECT_NEAR(rs::stream_pipeline(rs::map<combine>() | rs::map<square>() | rs::reduce(rs::plus{}, 0.0),
                                  rs::host_zip(a, b, c), o),
              ref, 1e-9 * ref);
  double gref = 1.0;
  for (std::size_t i = 0; i < n; ++i) gref += ramp_ref(i);
  EXPECT_NEAR(rs::stream_pipeline(rs::map([] RESIDENT_HD(float v) { return double(v); }) | rs::reduce(rs::plus{}, 1.0),
                                  rs::host_generate(ramp{}, n), o),
              gref, 1e-9 * n);
  EXPECT_EQ(rs::stream_pipeline(rs::reduce(rs::plus{}, 7.0), std::vector<double>{}, o), 7.0);  // empty: init
}

// The pool capped at 1/8 of the data: the chosen chunks fit under the cap, the values are the
// unstreamed pipeline's, and the peak stays under the cap.
TEST_P(streaming, pool_capped_at_an_eighth_of_the_data) {
  const std::size_t n = std::size_t(4) << 20;  // 16 MiB of floats in, 16 MiB out
  const auto in = rs::test::random_vector<float>(n, rs::test::fresh_seed());
  const auto p = rs::map<f1>() | rs::map<f2>() | rs::map<f3>();
  auto x = rs::to_device(in, dev);  // the unstreamed pipeline, before the cap
  p(x);
  const auto unstreamed = x.to_host();
  x = rs::array<float>();
  rs::synchronize(dev);
  const std::size_t used = rs::pool_stats(dev).bytes_in_use;
  const std::size_t cap = used + n * sizeof(float) / 8;
  rs::set_pool_limit(dev, cap);
  struct lift {
    rs::device d;
    ~lift() { rs::clear_pool_limit(d); }
  } lifted{dev};
  rs::reset_pool_peak(dev);
  std::vector<float> out(n, rs::test::poison<float>());
  rs::scoped_ledger l(dev);
  const auto s = rs::stream_pipeline(p, in, out, {.target = dev});
  EXPECT_EQ(out, unstreamed);  // the same kernels, element by element
  EXPECT_LE(rs::pool_stats(dev).peak_bytes, cap);
  EXPECT_LE(l.delta().peak_bytes, cap);
  EXPECT_LE(s.device_bytes, cap - used);
  if (dev.is_cuda()) {
    EXPECT_GT(s.chunks, 8u) << "the chunks were not sized to the limit";
  }
  EXPECT_EQ(l.delta().streamed_h2d_bytes, n * sizeof(float));
  if (dev.is_cuda()) {  // a chunk given that does not fit under the cap is refused before any work
    std::fill(out.begin(), out.end(), rs::test::poison<float>());
    rs::scoped_ledger l2(dev);
    EXPECT_THROW(rs::stream_pipeline(p, in, out, {.chunk_elements = n / 4, .depth = 3, .target = dev}),
                 rs::out_of_memory);
    EXPECT_EQ(l2.delta().h2d_bytes, 0u);
    EXPECT_EQ(out[0], rs::test::poison<float>());
  }
}

TEST_P(streaming, forbid_policy_refuses_before_any_work) {
  const std::size_t n = 2 * chunk + 1;
  const auto in = rs::test::random_vector<float>(n, rs::test::fresh_seed());
  std::vector<float> out(n, rs::test::poison<float>());
  rs::scoped_ledger l(dev);
  {
    rs::scoped_transfer_policy forbid(rs::transfer_policy::forbid);
    try {
      rs::stream_pipeline(rs::map<f1>(), in, out, {.chunk_elements = chunk, .target = dev});
      FAIL() << "a streamed pipeline ran under forbid";
    } catch (const rs::transfer_forbidden& e) {
      EXPECT_NE(std::string(e.what()).find("forbid"), std::string::npos) << e.what();
    }
    EXPECT_THROW(rs::stream_pipeline(rs::reduce(rs::plus{}, 0.f), in, {.target = dev}), rs::transfer_forbidden);
    EXPECT_NO_THROW(rs::stream_pipeline(rs::map<f1>(), std::vector<float>{}, std::span<float>(out.data(), 0), {.target = dev}));
  }
  const auto d = l.delta();
  EXPECT_EQ(d.h2d_bytes + d.d2h_bytes + d.kernels + d.stream_chunks, 0u);
  EXPECT_EQ(std::count(out.begin(), out.end(), rs::test::poison<float>()), std::ptrdiff_t(n));
}

TEST_P(streaming, bad_input_is_refused_before_any_work) {
  const std::size_t n = 100;
  const auto in = rs::test::random_vector<float>(n, rs::test::fresh_seed());
  std::vector<float> out(n, rs::test::poison<float>());
  const auto p = rs::map<f1>();
  rs::scoped_ledger l(dev);
  EXPECT_THROW(rs::stream_pipeline(p, in, out, {.depth = -1, .target = dev}), rs::invalid_argument);
  EXPECT_THROW(rs::stream_pipeline(p, in, out, {.depth = 17, .target = dev}), rs::invalid_argument);
  EXPECT_THROW(rs::stream_pipeline(p, in, out, {.chunk_elements = std::size_t(-1) / 2, .target = dev}),
               rs::invalid_argument);
  std::vector<float> short_out(n - 1);
  EXPECT_THROW(rs::stream_pipeline(p, in, short_out, {.target = dev}), rs::shape_mismatch);
  std::vector<double> other(n + 1);
  EXPECT_THROW(rs::host_zip(in, other), rs::shape_mismatch);
  std::vector<float> buf(2 * n);
  EXPECT_THROW(rs::stream_pipeline(p, std::span<const float>(buf.data(), n), std::span<float>(buf.data() + 1, n),
                                   {.target = dev}),
               rs::invalid_argument);
  const auto d = l.delta();
  EXPECT_EQ(d.h2d_bytes + d.d2h_bytes + d.kernels + d.allocations, 0u);
  EXPECT_EQ(out[0], rs::test::poison<float>());
}

TEST_P(streaming, timeline_has_every_chunk_in_order) {
  const std::size_t n = 6 * chunk + 1;
  const auto in = rs::test::random_vector<float>(n, rs::test::fresh_seed());
  std::vector<float> out(n);
  std::vector<rs::chunk_timing> t;
  rs::stream_pipeline(rs::map<f1>() | rs::map<f2>(), in, out, {.chunk_elements = chunk, .target = dev, .timeline = &t});
  ASSERT_EQ(t.size(), 7u);
  for (std::size_t c = 0; c < t.size(); ++c) {
    EXPECT_EQ(t[c].index, c);
    EXPECT_EQ(t[c].first, c * chunk);
    EXPECT_EQ(t[c].count, c + 1 < t.size() ? chunk : 1u);
    EXPECT_LE(t[c].upload_begin_ms, t[c].upload_end_ms);
    EXPECT_LE(t[c].upload_end_ms, t[c].kernel_begin_ms + 1e-3);  // the kernel waits for its upload
    EXPECT_LE(t[c].kernel_end_ms, t[c].download_begin_ms + 1e-3);
    EXPECT_LE(t[c].download_begin_ms, t[c].download_end_ms);
  }
}

RESIDENT_BACKENDS(streaming);

}  // namespace
