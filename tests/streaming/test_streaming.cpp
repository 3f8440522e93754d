// Compiled by nvcc when the CUDA backend is in the build.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>
#include <limits>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "../threads.hpp"
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
    const auto terms = rs::test::seed_terms_on(dev, in);
    const double ref = terms.sum + 5.0;  // init 5 must count once, whatever the number of chunks
    const double tol = rs::test::sum_tolerance<double>(n + 1, terms.abs_sum + 5.0, terms.term_error());
    double lo = 0.75, hi = -0.75;
    for (float v : in) {
      lo = std::min(lo, double(v));
      hi = std::max(hi, double(v));
    }
    const rs::stream_options o{.chunk_elements = chunk, .target = dev};
    rs::scoped_ledger l(dev);
    rs::stream_summary s;
    const double sum =
        rs::stream_pipeline(rs::map<f1>() | rs::map<f2>() | rs::map<f3>() | rs::reduce(rs::plus{}, 5.0), in, o, &s);
    const auto d = l.delta();
    EXPECT_TRUE(rs::test::sum_matches(sum, ref, tol, std::min(terms.smallest, 5.0)));
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
  const rs::test::scoped_pool_limit lifted(dev, cap);
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
  EXPECT_THROW(rs::stream_pipeline(p, in, out, {.target = dev, .host_threads = -1}), rs::invalid_argument);
  EXPECT_THROW(rs::stream_pipeline(p, in, out, {.target = dev, .host_threads = 257}), rs::invalid_argument);
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

RESIDENT_HD std::int32_t times_four(float v) { return std::int32_t(v * 4.f); }
RESIDENT_HD double halved(std::int32_t v) { return double(v) * 0.5; }
RESIDENT_HD float add2(float a, float b) { return a + b; }

// An output of another element type of the same size over the input's memory is exactly in place:
// every element is converted to the output's type, not left in the input's.
TEST_P(streaming, null_host_memory_is_refused_before_any_work) {
  const std::size_t n = 100;
  const auto in = rs::test::random_vector<float>(n, rs::test::fresh_seed());
  std::vector<float> out(n, rs::test::poison<float>());
  const std::span<const float> no_input(static_cast<const float*>(nullptr), n);
  const std::span<float> no_output(static_cast<float*>(nullptr), n);
  const auto p = rs::map<f1>();
  rs::scoped_ledger l(dev);
  rs::test::expect_invalid([&] { rs::stream_pipeline(p, no_input, out, {.target = dev}); },
                           "host input 0 is a null pointer with 100 elements");
  rs::test::expect_invalid([&] { rs::stream_pipeline(p, in, no_output, {.target = dev}); },
                           "the host output is a null pointer with 100 elements");
  const std::span<const double> no_doubles(static_cast<const double*>(nullptr), n);
  const std::vector<int> ints(n, 3);
  rs::test::expect_invalid(
      [&] { rs::stream_pipeline(rs::map<combine>(), rs::host_zip(in, no_doubles, ints), out, {.target = dev}); },
      "host input 1 is a null pointer");
  rs::test::expect_invalid([&] { (void)rs::stream_pipeline(p | rs::reduce(rs::plus{}, 0.0), no_input, {.target = dev}); },
                           "host input 0 is a null pointer");
  const auto d = l.delta();
  EXPECT_EQ(d.h2d_bytes + d.d2h_bytes + d.kernels + d.allocations, 0u);
  EXPECT_EQ(out[0], rs::test::poison<float>());
  // No elements: nothing is read or written, and a null pointer is fine.
  rs::stream_pipeline(p, std::span<const float>(), std::span<float>(), {.target = dev});
}

TEST_P(streaming, in_place_in_another_type_of_the_same_size_converts) {
  for (std::size_t n : sizes_around_a_chunk()) {
    SCOPED_TRACE("n = " + std::to_string(n));
    std::vector<std::uint32_t> buf(n);  // 4-byte words, seen as float and as int32
    auto word = [&](std::size_t i, auto v) { std::memcpy(&buf[i], &v, 4); };
    auto read = [&]<class T>(std::size_t i, T) { T v; std::memcpy(&v, &buf[i], 4); return v; };
    for (std::size_t i = 0; i < n; ++i) word(i, float(int(i % 2001) - 1000) * 0.25f);
    std::span<const float> as_float(reinterpret_cast<const float*>(buf.data()), n);
    std::span<std::int32_t> as_int(reinterpret_cast<std::int32_t*>(buf.data()), n);
    rs::stream_pipeline(rs::map<times_four>(), as_float, as_int, {.chunk_elements = chunk, .target = dev});
    for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(read(i, std::int32_t{}), int(i % 2001) - 1000) << "element " << i;
    // Back again: int32 in, float out (through a double stage) in the same words.
    rs::stream_pipeline(rs::map<halved>(), std::span<const std::int32_t>(as_int),
                        std::span<float>(reinterpret_cast<float*>(buf.data()), n), {.chunk_elements = chunk, .target = dev});
    for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(read(i, float{}), float((int(i % 2001) - 1000) * 0.5)) << "element " << i;
  }
}

// host_generate takes any size: the chunk count of the largest does not wrap (to no chunk at all,
// which ran nothing and returned init).
TEST_P(streaming, chunk_counts_of_the_largest_generated_sizes_do_not_wrap) {
  const std::size_t n = std::numeric_limits<std::size_t>::max();
  const std::pair<std::size_t, std::size_t> cases[] = {{std::size_t(1) << 58, 64}, {n / 32, 33}, {n / 64, 65}};
  for (auto [ch, chunks] : cases) {
    SCOPED_TRACE("chunk " + std::to_string(ch));
    rs::detail::chunk_loop loop(n, {}, {}, false, 16, {.chunk_elements = ch, .target = dev});
    EXPECT_EQ(loop.summary().chunks, chunks);
    EXPECT_EQ(loop.summary().chunk_elements, ch);
  }
}

// A reduction keeps one partial per chunk: chunks too many for them to be held are refused with a
// typed error that says to give a larger chunk, before any chunk runs.
TEST_P(streaming, partials_of_too_many_chunks_are_refused_before_any_work) {
  const auto sum = rs::reduce(rs::plus{}, 0.0);
  rs::scoped_ledger l(dev);
  try {  // 2^62 partials of 16 bytes: the byte count overflows
    (void)rs::stream_pipeline(sum, rs::host_generate(ramp{}, std::size_t(1) << 62), {.chunk_elements = 1, .target = dev});
    FAIL() << "2^62 partials were accepted";
  } catch (const rs::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("chunk_elements"), std::string::npos) << e.what();
  }
  try {  // 2^58 partials: 4 EiB of host memory
    (void)rs::stream_pipeline(sum, rs::host_generate(ramp{}, std::size_t(1) << 58), {.chunk_elements = 1, .target = dev});
    FAIL() << "2^58 partials were accepted";
  } catch (const rs::out_of_memory& e) {
    EXPECT_NE(std::string(e.what()).find("chunk_elements"), std::string::npos) << e.what();
    EXPECT_EQ(e.requested(), (std::size_t(1) << 58) * sizeof(rs::detail::partial<double>));
  }
  const auto d = l.delta();
  EXPECT_EQ(d.kernels + d.stream_chunks + d.h2d_bytes + d.d2h_bytes, 0u);
}

// A pool limit smaller than one chunk: on a GPU the staging cannot fit, chosen or given, and the call
// is refused before any data moves, saying what to change (a chosen chunk: the least staging the call
// needs and more room, not a smaller chunk_elements); the CPU streams the host arrays in place (no
// staging, so the refusal and its message are CUDA's alone) and gives the exact values.
TEST_P(streaming, pool_limit_smaller_than_one_chunk) {
  const std::size_t n = 20 * chunk + 3;
  const auto in = rs::test::random_vector<float>(n, rs::test::fresh_seed());
  std::vector<double> ref(n);
  for (std::size_t i = 0; i < n; ++i) ref[i] = seed_ref(in[i]);
  const auto p = rs::map<f1>() | rs::map<f2>() | rs::map<f3>();
  rs::synchronize(dev);
  const rs::test::scoped_pool_limit lifted(dev, rs::pool_stats(dev).bytes_in_use + 1024);
  for (std::size_t ch : {std::size_t(0), 4 * chunk}) {
    SCOPED_TRACE("chunk " + std::to_string(ch));
    std::vector<float> out(n, rs::test::poison<float>());
    rs::scoped_ledger l(dev);
    if (dev.is_cpu()) {
      const auto s = rs::stream_pipeline(p, in, out, {.chunk_elements = ch, .target = dev});
      expect_close(out, ref);
      EXPECT_EQ(s.device_bytes, 0u);
      continue;
    }
    try {
      rs::stream_pipeline(p, in, out, {.chunk_elements = ch, .target = dev});
      FAIL() << "the staging went past the pool's limit";
    } catch (const rs::out_of_memory& e) {
      const std::string w = e.what();
      EXPECT_TRUE(e.pool_limit().has_value()) << w;
      if (ch) {  // a given chunk can be made smaller
        EXPECT_NE(w.find("give a smaller chunk_elements"), std::string::npos) << w;
      } else {  // a chosen one is as small as the call takes it: the least bytes, and more room
        EXPECT_EQ(w.find("smaller chunk_elements"), std::string::npos) << w;
        EXPECT_NE(w.find("the device staging needs at least"), std::string::npos) << w;
        EXPECT_NE(w.find("raise the pool's limit (set_pool_limit or RESIDENT_POOL_LIMIT) or free arrays"),
                  std::string::npos) << w;
      }
      EXPECT_NE(w.find("in use"), std::string::npos) << w;
      EXPECT_NE(w.find("reserved"), std::string::npos) << w;
    }
    const auto d = l.delta();
    EXPECT_EQ(d.h2d_bytes + d.d2h_bytes + d.kernels + d.stream_chunks, 0u);
    EXPECT_EQ(std::count(out.begin(), out.end(), rs::test::poison<float>()), std::ptrdiff_t(n));
  }
}

// An explicit depth beyond the chunks took depth slots all the same (a GPU's staging, and on both
// backends a reduction's partial per slot): 16 for one chunk, past a pool limit with room for the one
// slot the stream uses. The call takes min(depth, chunks) slots, under a limit of two slots.
TEST_P(streaming, a_depth_beyond_the_chunks_takes_a_slot_per_chunk) {
  const std::size_t n = 1000;
  const auto in = rs::test::random_vector<float>(n, rs::test::fresh_seed());
  std::vector<double> ref(n);
  for (std::size_t i = 0; i < n; ++i) ref[i] = seed_ref(in[i]);
  const auto p = rs::map<f1>() | rs::map<f2>() | rs::map<f3>();
  // One slot from the pool: on a GPU the chunk of the input, and of the output (map) or a partial
  // (reduction); on the CPU, which stages nothing, the reduction's partial.
  const std::size_t chunk_bytes = (n * sizeof(float) + rs::pool_alignment - 1) / rs::pool_alignment * rs::pool_alignment;
  const std::size_t partial = sizeof(rs::detail::partial<double>);
  const std::size_t slot = dev.is_cuda() ? std::max(2 * chunk_bytes, chunk_bytes + partial) : partial;
  rs::synchronize(dev);
  const std::size_t cap = rs::pool_stats(dev).bytes_in_use + 2 * slot;
  const rs::test::scoped_pool_limit lifted(dev, cap);
  rs::reset_pool_peak(dev);
  const rs::stream_options o{.chunk_elements = n, .depth = 16, .target = dev};
  std::vector<float> out(n, rs::test::poison<float>());
  const auto s = rs::stream_pipeline(p, in, out, o);
  expect_close(out, ref);
  EXPECT_EQ(s.chunks, 1u);
  EXPECT_EQ(s.depth, 1);  // chunks in flight: never more than the chunks
  rs::stream_summary r;
  // The fold adds the very terms the map wrote (out), in double: one term of >= 0.39 more or less shows.
  const auto [out_sum, out_abs] = rs::test::sum_and_abs(out);
  const double tol = rs::test::sum_tolerance<double>(n, out_abs, rs::test::unit_roundoff<float>() * out_abs);
  EXPECT_TRUE(rs::test::sum_matches(rs::stream_pipeline(p | rs::reduce(rs::plus{}, 0.0), in, o, &r), out_sum, tol, 0.39));
  EXPECT_EQ(r.chunks, 1u);
  EXPECT_EQ(r.depth, 1);
  EXPECT_LE(rs::pool_stats(dev).peak_bytes, cap);
}

// A span over device memory given where host memory is expected is refused before any work (the
// copies and the host threads would read it as host memory). The CPU device's arrays are host memory.
using streaming_cuda = backend;  // GPU-only cases: the `.gpu` CTest entry

TEST_P(streaming_cuda, device_memory_given_as_host_memory_is_refused) {
  const std::size_t n = 3 * chunk;
  rs::array<float> a(n, dev);
  std::vector<float> h(n, rs::test::poison<float>());
  const std::span<const float> dev_in(a.data(), n);
  const std::span<float> dev_out(a.data(), n);
  rs::scoped_ledger l(dev);
  EXPECT_THROW(rs::stream_pipeline(rs::map<f1>(), dev_in, h, {.chunk_elements = chunk, .target = dev}),
               rs::invalid_argument);
  EXPECT_THROW(rs::stream_pipeline(rs::map<f1>(), h, dev_out, {.chunk_elements = chunk, .target = dev}),
               rs::invalid_argument);
  EXPECT_THROW((void)rs::stream_pipeline(rs::map<add2>() | rs::reduce(rs::plus{}, 0.f), rs::host_zip(h, dev_in), {.target = dev}),
               rs::invalid_argument);
  const auto d = l.delta();
  EXPECT_EQ(d.h2d_bytes + d.d2h_bytes + d.kernels + d.stream_chunks, 0u);
  EXPECT_EQ(std::count(h.begin(), h.end(), rs::test::poison<float>()), std::ptrdiff_t(n));
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

// Pageable host memory: on a GPU each chunk is staged through depth pinned slots by host_threads
// workers (in pieces, gated on the slot's events); on the CPU the loop reads the arrays in place.
// Every chunk size, depth and thread count gives the FP64 values and the exact ledger.
TEST_P(streaming, pageable_host_memory_for_every_chunk_depth_and_thread_count) {
  const auto p = rs::map<f1>() | rs::map<f2>() | rs::map<f3>();
  // A multiple of none of the chunks; chunks of 4 MiB are cut into several pieces per copy.
  const std::size_t n = (std::size_t(1) << 21) + 12345;
  const auto seed = rs::test::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const auto in = rs::test::random_vector<float>(n, seed);
  std::vector<double> ref(n);
  for (std::size_t i = 0; i < n; ++i) ref[i] = seed_ref(in[i]);
  std::vector<float> out(n);
  for (std::size_t ch : {std::size_t(16381), std::size_t(1) << 20})
    for (int depth : {1, 2, 3, 5})
      for (int threads : {0, 1, 3}) {
        SCOPED_TRACE("chunk " + std::to_string(ch) + ", depth " + std::to_string(depth) + ", " +
                     std::to_string(threads) + " host threads");
        std::fill(out.begin(), out.end(), rs::test::poison<float>());
        rs::scoped_ledger l(dev);
        const auto s = rs::stream_pipeline(p, in, out, {.chunk_elements = ch, .depth = depth, .target = dev,
                                                        .host_threads = threads});
        const auto d = l.delta();
        expect_close(out, ref);
        const std::size_t chunks = (n + ch - 1) / ch;
        EXPECT_EQ(s.chunks, chunks);
        EXPECT_EQ(s.depth, std::min<int>(depth, int(chunks)));  // never more slots than chunks
        EXPECT_EQ(d.stream_chunks, chunks);
        EXPECT_EQ(d.streamed_h2d_bytes, n * sizeof(float));
        EXPECT_EQ(d.streamed_d2h_bytes, n * sizeof(float));
        EXPECT_EQ(d.h2d_bytes, n * sizeof(float));
        EXPECT_EQ(d.d2h_bytes, n * sizeof(float));
        EXPECT_EQ(d.h2d_copies, chunks);
        EXPECT_EQ(d.d2h_copies, chunks);
        EXPECT_EQ(d.kernels, chunks);
        if (dev.is_cuda()) {
          EXPECT_FALSE(s.pinned_input);
          EXPECT_FALSE(s.pinned_output);
          EXPECT_EQ(s.host_threads >= 1 && (threads == 0 || s.host_threads == threads), true) << s.host_threads;
        } else {
          EXPECT_EQ(s.host_threads, 0);
        }
      }
  // In place in pageable memory: chunk c's input is staged in before its output is staged out.
  auto x = in;
  const auto s = rs::stream_pipeline(p, x, x, {.chunk_elements = 16381, .depth = 2, .target = dev, .host_threads = 2});
  expect_close(x, ref);
  EXPECT_EQ(s.chunks, (n + 16380) / 16381);
  // The depth chosen for pageable memory is deeper than for pinned memory, never past the chunks.
  std::fill(out.begin(), out.end(), rs::test::poison<float>());
  const auto chosen = rs::stream_pipeline(p, in, out, {.chunk_elements = 262144, .target = dev});
  expect_close(out, ref);
  EXPECT_EQ(chosen.depth, dev.is_cuda() ? 4 : 3);
}

// A zip of pageable and page-locked host arrays into a pageable output: the pageable ones are staged,
// the pinned one is copied directly, all in step.
TEST_P(streaming, zip_of_pageable_and_pinned_host_arrays) {
  const std::size_t n = 300000 + 17;
  const auto seed = rs::test::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const auto a = rs::test::random_vector<float>(n, seed);
  const auto bv = rs::test::random_vector<double>(n, seed + 1);
  rs::pinned_buffer<double> b(n);
  std::copy(bv.begin(), bv.end(), b.begin());
  std::vector<int> c(n);
  for (std::size_t i = 0; i < n; ++i) c[i] = int(i % 23) - 11;
  std::vector<double> out(n);
  for (int depth : {2, 4})
    for (std::size_t ch : {std::size_t(4093), std::size_t(65536)}) {
      SCOPED_TRACE("chunk " + std::to_string(ch) + ", depth " + std::to_string(depth));
      std::fill(out.begin(), out.end(), rs::test::poison<double>());
      rs::scoped_ledger l(dev);
      const auto s = rs::stream_pipeline(rs::map<combine>() | rs::map<square>(), rs::host_zip(a, b, c), out,
                                         {.chunk_elements = ch, .depth = depth, .target = dev, .host_threads = 3});
      for (std::size_t i = 0; i < n; ++i) {
        const double r = double(a[i]) * bv[i] + double(c[i]);
        ASSERT_NEAR(out[i], r * r, 1e-12 * (1 + r * r)) << i;
      }
      const std::size_t chunks = (n + ch - 1) / ch;
      const auto d = l.delta();
      EXPECT_EQ(d.streamed_h2d_bytes, n * (sizeof(float) + sizeof(double) + sizeof(int)));
      EXPECT_EQ(d.streamed_d2h_bytes, n * sizeof(double));
      EXPECT_EQ(d.h2d_copies, 3 * chunks);
      EXPECT_EQ(d.d2h_copies, chunks);
      EXPECT_EQ(d.stream_chunks, chunks);
      EXPECT_EQ(s.host_threads, dev.is_cuda() ? 3 : 0);
    }
}

// A reduction over pageable input: the staged chunks fold to the FP64 value, one partial per chunk.
TEST_P(streaming, reduction_over_pageable_input) {
  const std::size_t n = 700001;
  const auto seed = rs::test::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const auto in = rs::test::random_vector<float>(n, seed);
  // The terms (>= 0.39 each) as dev computes them: the fold in double must add each exactly once.
  const auto terms = rs::test::seed_terms_on(dev, in);
  const double ref = terms.sum - 2.0;
  const double tol = rs::test::sum_tolerance<double>(n + 1, terms.abs_sum + 2.0, terms.term_error());
  for (int depth : {1, 3, 4})
    for (int threads : {0, 2}) {
      SCOPED_TRACE("depth " + std::to_string(depth) + ", " + std::to_string(threads) + " host threads");
      rs::scoped_ledger l(dev);
      rs::stream_summary s;
      const double sum = rs::stream_pipeline(rs::map<f1>() | rs::map<f2>() | rs::map<f3>() | rs::reduce(rs::plus{}, -2.0), in,
                                             {.chunk_elements = 65536, .depth = depth, .target = dev, .host_threads = threads}, &s);
      EXPECT_TRUE(rs::test::sum_matches(sum, ref, tol, terms.smallest));
      const std::size_t chunks = (n + 65535) / 65536;
      const auto d = l.delta();
      EXPECT_EQ(s.chunks, chunks);
      EXPECT_EQ(d.streamed_h2d_bytes, n * sizeof(float));
      EXPECT_EQ(d.h2d_copies, chunks);
      EXPECT_EQ(d.d2h_copies, chunks);
      EXPECT_EQ(d.streamed_d2h_bytes, 0u);
      if (dev.is_cuda()) {
        EXPECT_FALSE(s.pinned_input);
      }
    }
}

// The streamed sum's check can fail: the reference with one term dropped or doubled, at a chunk's
// border or inside one, is refused, while the true one is accepted.
TEST_P(streaming, the_streamed_sum_check_sees_one_term_dropped_or_doubled) {
  const std::size_t n = 300007;
  const auto seed = rs::test::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const auto in = rs::test::random_vector<float>(n, seed);
  const auto terms = rs::test::seed_terms_on(dev, in);
  const double tol = rs::test::sum_tolerance<double>(n, terms.abs_sum, terms.term_error());
  const double sum = rs::stream_pipeline(rs::map<f1>() | rs::map<f2>() | rs::map<f3>() | rs::reduce(rs::plus{}, 0.0), in,
                                         {.chunk_elements = 65536, .target = dev});
  EXPECT_TRUE(rs::test::sum_matches(sum, terms.sum, tol, terms.smallest));
  for (std::size_t k : {std::size_t(0), std::size_t(65535), std::size_t(65536), std::size_t(150000), n - 1})
    for (double times : {0.0, 2.0})
      EXPECT_FALSE(rs::test::sum_matches(sum, terms.sum_with(k, times), tol, terms.smallest))
          << "term " << k << " times " << times << " passed";
}

struct stage_failed : rs::error {
  using rs::error::error;
};

using resident::test::threads_after_joins;
using resident::test::threads_now;

// A stage that throws in the middle of the stream (a kernel launch that fails, a host stage that
// throws): the caller gets that error, no worker thread is left running, no staging or pool memory
// is left taken, and nothing writes the host output after the call has returned. Every element of
// the output is then either its poison or its value.
TEST_P(streaming, a_stage_that_throws_mid_stream_leaves_no_thread_and_no_late_write) {
  const std::size_t n = 12 * chunk * 16 + 5, ch = 16 * chunk;  // 13 chunks
  const auto seed = rs::test::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const auto in = rs::test::random_vector<float>(n, seed);
  std::vector<float> out(n);
  for (int depth : {1, 3, 4})
    for (std::size_t throw_at : {std::size_t(0), std::size_t(5), std::size_t(12)}) {
      SCOPED_TRACE("depth " + std::to_string(depth) + ", throws at chunk " + std::to_string(throw_at));
      const rs::stream_options o{.chunk_elements = ch, .depth = depth, .target = dev, .host_threads = 3};
      auto run = [&](bool fail) {
        rs::detail::chunk_loop loop(n, {{in.data(), sizeof(float)}}, {out.data(), sizeof(float)}, false, 0, o);
        const rs::stream_ref s = loop.kernel_stream();
        loop.run(
            [&](const rs::detail::chunk_view& v) {
              if (fail && v.index == throw_at) throw stage_failed("stage failed at chunk " + std::to_string(v.index));
              rs::array_ref<float> x(static_cast<float*>((*v.inputs)[0]), v.count, s);
              rs::array_ref<float> y(static_cast<float*>(v.output), v.count, s);
              (rs::map<f1>() | rs::map<f2>() | rs::map<f3>())(x, y);
            },
            {});
      };
      run(false);  // every thread the runtimes start lazily is there now, and this run's workers gone
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      const std::size_t threads_before = threads_now();
      const auto outstanding = rs::pool_stats(dev).outstanding;
      std::fill(out.begin(), out.end(), rs::test::poison<float>());
      try {
        run(true);
        FAIL() << "the stage's error did not reach the caller";
      } catch (const stage_failed& e) {
        EXPECT_NE(std::string(e.what()).find("chunk " + std::to_string(throw_at)), std::string::npos);
      }
      EXPECT_EQ(threads_after_joins(threads_before), threads_before) << "a worker thread outlived the call";
      EXPECT_EQ(rs::pool_stats(dev).outstanding, outstanding) << "the staging was not released";
      const auto snapshot = out;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      ASSERT_EQ(out, snapshot) << "the host output was written after the call returned";
      for (std::size_t i = 0; i < n; ++i) {
        if (out[i] == rs::test::poison<float>()) continue;
        ASSERT_NEAR(out[i], seed_ref(in[i]), 2e-6 * (1.0 + std::abs(seed_ref(in[i])))) << "element " << i;
        ASSERT_LT(i / ch, throw_at) << "a chunk at or after the failed one was written";
      }
    }
}

// RESIDENT_POOL_LIMIT that is not a byte count (run with the variable set so, e.g. "lots"): a streamed
// pipeline refuses it before any work on every backend, the CPU's map too, which takes no staging.
TEST(streaming_environment, a_bad_pool_limit_is_refused_before_any_work) {
  const char* v = std::getenv("RESIDENT_POOL_LIMIT");
  if (!v || !*v || std::string(v) == "none" || rs::detail::parse_bytes(v).value_or(0) > 0)
    GTEST_SKIP() << "RESIDENT_POOL_LIMIT is unset or a byte count";
  const rs::device d = rs::device::cpu();
  const std::vector<float> in(10, 1.f);
  std::vector<float> out(10, rs::test::poison<float>());
  for (std::size_t n : {std::size_t(0), in.size()}) {
    try {
      rs::stream_pipeline(rs::map<f1>(), std::span<const float>(in.data(), n), std::span<float>(out.data(), n),
                          {.target = d});
      FAIL() << "a bad RESIDENT_POOL_LIMIT was accepted";
    } catch (const rs::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("RESIDENT_POOL_LIMIT"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW((void)rs::stream_pipeline(rs::reduce(rs::plus{}, 0.f), in, {.target = d}), rs::invalid_argument);
  EXPECT_EQ(std::count(out.begin(), out.end(), rs::test::poison<float>()), 10);
}

RESIDENT_BACKENDS(streaming);
RESIDENT_CUDA_ONLY(streaming_cuda);  // the CPU device's arrays are host memory

}  // namespace
