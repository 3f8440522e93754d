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
#include "resident/out_of_core/out_of_core.hpp"
#include "seed.hpp"
#include "out_of_core/out_of_core_support.hpp"
#include "support.hpp"

namespace rs = resident;
using rs::test::backend;

namespace {

using rs::test::f1;
using rs::test::f2;
using rs::test::f3;
using rs::test::seed_ref;
using namespace rs::test::streamed;
using out_of_core = backend;

TEST_P(out_of_core, map_matches_fp64_for_sizes_around_the_chunk) {
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
      const auto s = rs::out_of_core(seed_pipeline, in, out, {.chunk_elements = chunk, .depth = depth, .target = dev});
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

TEST_P(out_of_core, in_place_converting_and_pinned_host_memory) {
  const std::size_t n = 3 * chunk + 5;
  const auto in = rs::test::random_vector<float>(n, rs::test::fresh_seed());
  std::vector<double> ref(n);
  for (std::size_t i = 0; i < n; ++i) ref[i] = seed_ref(in[i]);
  const auto p = rs::map<f1>() | rs::map<f2>() | rs::map<f3>();
  const rs::out_of_core_options o{.chunk_elements = chunk, .target = dev};
  {  // in place in host memory
    auto x = in;
    rs::out_of_core(p, x, x, o);
    expect_close(x, ref);
  }
  {  // float in, double out
    std::vector<double> y(n, rs::test::poison<double>());
    rs::out_of_core(p, in, y, o);
    for (std::size_t i = 0; i < n; ++i) ASSERT_NEAR(y[i], ref[i], 2e-6) << i;
  }
  {  // page-locked input and output: copied without staging
    rs::pinned_buffer<float> x(n), y(n);
    std::copy(in.begin(), in.end(), x.begin());
    std::fill(y.begin(), y.end(), rs::test::poison<float>());
    const auto s = rs::out_of_core(p, x, y, o);
    EXPECT_EQ(s.pinned_input, x.page_locked() || dev.is_cpu());
    expect_close(std::vector<float>(y.begin(), y.end()), ref);
  }
  {  // chosen chunk and depth
    std::vector<float> y(n, rs::test::poison<float>());
    const auto s = rs::out_of_core(p, in, y, {.target = dev});
    EXPECT_GE(s.chunk_elements, 1u);
    EXPECT_GE(s.depth, 1);
    expect_close(y, ref);
  }
}

TEST_P(out_of_core, zip_of_three_host_arrays) {
  for (std::size_t n : sizes_around_a_chunk()) {
    const auto seed = rs::test::fresh_seed();
    SCOPED_TRACE("n = " + std::to_string(n) + ", seed " + std::to_string(seed));
    const auto a = rs::test::random_vector<float>(n, seed);
    const auto b = rs::test::random_vector<double>(n, seed + 1);
    std::vector<int> c(n);
    for (std::size_t i = 0; i < n; ++i) c[i] = int(i % 17) - 8;
    std::vector<double> out(n, rs::test::poison<double>());
    rs::scoped_ledger l(dev);
    rs::out_of_core(rs::map<combine>() | rs::map<square>(), rs::host_zip(a, b, c), out,
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

TEST_P(out_of_core, generated_source_uploads_nothing) {
  for (std::size_t n : sizes_around_a_chunk()) {
    SCOPED_TRACE("n = " + std::to_string(n));
    std::vector<float> out(n, rs::test::poison<float>());
    rs::scoped_ledger l(dev);
    rs::out_of_core(rs::map<f1>() | rs::map<f2>() | rs::map<f3>(), rs::host_generate(ramp{}, n), out,
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

TEST_P(out_of_core, reductions_fold_init_once) {
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
    const rs::out_of_core_options o{.chunk_elements = chunk, .target = dev};
    rs::scoped_ledger l(dev);
    rs::out_of_core_summary s;
    const double sum =
        rs::out_of_core(rs::map<f1>() | rs::map<f2>() | rs::map<f3>() | rs::reduce(rs::plus{}, 5.0), in, o, &s);
    const auto d = l.delta();
    EXPECT_TRUE(rs::test::sum_matches(sum, ref, tol, std::min(terms.smallest, 5.0)));
    EXPECT_EQ(s.chunks, chunks_of(n));
    EXPECT_EQ(d.streamed_h2d_bytes, n * sizeof(float));
    EXPECT_EQ(d.streamed_d2h_bytes, 0u);
    EXPECT_EQ(d.d2h_copies, chunks_of(n));  // one partial per chunk
    EXPECT_EQ(d.stream_chunks, chunks_of(n));
    EXPECT_EQ(rs::out_of_core(rs::reduce(rs::minimum{}, 0.75f), in, o), float(lo));
    EXPECT_EQ(rs::out_of_core(rs::reduce(rs::maximum{}, -0.75f), in, o), float(hi));
  }
}

TEST_P(out_of_core, zip_and_generated_reductions) {
  const std::size_t n = 4 * chunk + 3;
  const auto a = rs::test::random_vector<float>(n, rs::test::fresh_seed());
  const auto b = rs::test::random_vector<double>(n, rs::test::fresh_seed());
  const std::vector<int> c(n, 2);
  const rs::out_of_core_options o{.chunk_elements = chunk, .target = dev};
  double ref = 0;
  for (std::size_t i = 0; i < n; ++i) ref += square(double(a[i]) * b[i] + 2.0);
  EXPECT_NEAR(rs::out_of_core(rs::map<combine>() | rs::map<square>() | rs::reduce(rs::plus{}, 0.0),
                                  rs::host_zip(a, b, c), o),
              ref, 1e-9 * ref);
  double gref = 1.0;
  for (std::size_t i = 0; i < n; ++i) gref += ramp_ref(i);
  EXPECT_NEAR(rs::out_of_core(rs::map([] RESIDENT_HD(float v) { return double(v); }) | rs::reduce(rs::plus{}, 1.0),
                                  rs::host_generate(ramp{}, n), o),
              gref, 1e-9 * n);
  rs::out_of_core_summary empty;
  EXPECT_EQ(rs::out_of_core(rs::reduce(rs::plus{}, 7.0), std::vector<double>{}, o, &empty), 7.0);  // empty: init
  EXPECT_EQ(empty.chunks, 0u);
  EXPECT_EQ(empty.depth, 0) << "no chunk, so no slot in flight";
}

// The pool capped at 1/8 of the data: the chosen chunks fit under the cap, the values are the
// unstreamed pipeline's, and the peak stays under the cap.
TEST_P(out_of_core, pool_capped_at_an_eighth_of_the_data) {
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
  const auto s = rs::out_of_core(p, in, out, {.target = dev});
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
    EXPECT_THROW(rs::out_of_core(p, in, out, {.chunk_elements = n / 4, .depth = 3, .target = dev}),
                 rs::out_of_memory);
    EXPECT_EQ(l2.delta().h2d_bytes, 0u);
    EXPECT_EQ(out[0], rs::test::poison<float>());
  }
}

TEST_P(out_of_core, forbid_policy_refuses_before_any_work) {
  const std::size_t n = 2 * chunk + 1;
  const auto in = rs::test::random_vector<float>(n, rs::test::fresh_seed());
  std::vector<float> out(n, rs::test::poison<float>());
  rs::scoped_ledger l(dev);
  {
    rs::scoped_transfer_policy forbid(rs::transfer_policy::forbid);
    try {
      rs::out_of_core(rs::map<f1>(), in, out, {.chunk_elements = chunk, .target = dev});
      FAIL() << "an out-of-core pipeline ran under forbid";
    } catch (const rs::transfer_forbidden& e) {
      EXPECT_NE(std::string(e.what()).find("forbid"), std::string::npos) << e.what();
    }
    EXPECT_THROW(rs::out_of_core(rs::reduce(rs::plus{}, 0.f), in, {.target = dev}), rs::transfer_forbidden);
    EXPECT_NO_THROW(rs::out_of_core(rs::map<f1>(), std::vector<float>{}, std::span<float>(out.data(), 0), {.target = dev}));
  }
  const auto d = l.delta();
  EXPECT_EQ(d.h2d_bytes + d.d2h_bytes + d.kernels + d.stream_chunks, 0u);
  EXPECT_EQ(std::count(out.begin(), out.end(), rs::test::poison<float>()), std::ptrdiff_t(n));
}

TEST_P(out_of_core, bad_input_is_refused_before_any_work) {
  const std::size_t n = 100;
  const auto in = rs::test::random_vector<float>(n, rs::test::fresh_seed());
  std::vector<float> out(n, rs::test::poison<float>());
  const auto p = rs::map<f1>();
  rs::scoped_ledger l(dev);
  EXPECT_THROW(rs::out_of_core(p, in, out, {.depth = -1, .target = dev}), rs::invalid_argument);
  EXPECT_THROW(rs::out_of_core(p, in, out, {.depth = 17, .target = dev}), rs::invalid_argument);
  EXPECT_THROW(rs::out_of_core(p, in, out, {.target = dev, .host_threads = -1}), rs::invalid_argument);
  EXPECT_THROW(rs::out_of_core(p, in, out, {.target = dev, .host_threads = 257}), rs::invalid_argument);
  EXPECT_THROW(rs::out_of_core(p, in, out, {.chunk_elements = std::size_t(-1) / 2, .target = dev}),
               rs::invalid_argument);
  std::vector<float> short_out(n - 1);
  EXPECT_THROW(rs::out_of_core(p, in, short_out, {.target = dev}), rs::shape_mismatch);
  std::vector<double> other(n + 1);
  EXPECT_THROW(rs::host_zip(in, other), rs::shape_mismatch);
  std::vector<float> buf(2 * n);
  EXPECT_THROW(rs::out_of_core(p, std::span<const float>(buf.data(), n), std::span<float>(buf.data() + 1, n),
                                   {.target = dev}),
               rs::invalid_argument);
  const auto d = l.delta();
  EXPECT_EQ(d.h2d_bytes + d.d2h_bytes + d.kernels + d.allocations, 0u);
  EXPECT_EQ(out[0], rs::test::poison<float>());
}

TEST_P(out_of_core, in_place_in_another_type_of_the_same_size_converts) {
  for (std::size_t n : sizes_around_a_chunk()) {
    SCOPED_TRACE("n = " + std::to_string(n));
    std::vector<std::uint32_t> buf(n);  // 4-byte words, seen as float and as int32
    auto word = [&](std::size_t i, auto v) { std::memcpy(&buf[i], &v, 4); };
    auto read = [&]<class T>(std::size_t i, T) { T v; std::memcpy(&v, &buf[i], 4); return v; };
    for (std::size_t i = 0; i < n; ++i) word(i, float(int(i % 2001) - 1000) * 0.25f);
    std::span<const float> as_float(reinterpret_cast<const float*>(buf.data()), n);
    std::span<std::int32_t> as_int(reinterpret_cast<std::int32_t*>(buf.data()), n);
    rs::out_of_core(rs::map<times_four>(), as_float, as_int, {.chunk_elements = chunk, .target = dev});
    for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(read(i, std::int32_t{}), int(i % 2001) - 1000) << "element " << i;
    // Back again: int32 in, float out (through a double stage) in the same words.
    rs::out_of_core(rs::map<halved>(), std::span<const std::int32_t>(as_int),
                        std::span<float>(reinterpret_cast<float*>(buf.data()), n), {.chunk_elements = chunk, .target = dev});
    for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(read(i, float{}), float((int(i % 2001) - 1000) * 0.5)) << "element " << i;
  }
}

// host_generate takes any size: the chunk count of the largest does not wrap (to no chunk at all,
// which ran nothing and returned init).
TEST_P(out_of_core, chunk_counts_of_the_largest_generated_sizes_do_not_wrap) {
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
TEST_P(out_of_core, partials_of_too_many_chunks_are_refused_before_any_work) {
  const auto sum = rs::reduce(rs::plus{}, 0.0);
  rs::scoped_ledger l(dev);
  try {  // 2^62 partials of 16 bytes: the byte count overflows
    (void)rs::out_of_core(sum, rs::host_generate(ramp{}, std::size_t(1) << 62), {.chunk_elements = 1, .target = dev});
    FAIL() << "2^62 partials were accepted";
  } catch (const rs::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("chunk_elements"), std::string::npos) << e.what();
  }
  try {  // 2^58 partials: 4 EiB of host memory
    (void)rs::out_of_core(sum, rs::host_generate(ramp{}, std::size_t(1) << 58), {.chunk_elements = 1, .target = dev});
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
TEST_P(out_of_core, pool_limit_smaller_than_one_chunk) {
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
      const auto s = rs::out_of_core(p, in, out, {.chunk_elements = ch, .target = dev});
      expect_close(out, ref);
      EXPECT_EQ(s.device_bytes, 0u);
      continue;
    }
    try {
      rs::out_of_core(p, in, out, {.chunk_elements = ch, .target = dev});
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
TEST_P(out_of_core, a_depth_beyond_the_chunks_takes_a_slot_per_chunk) {
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
  const rs::out_of_core_options o{.chunk_elements = n, .depth = 16, .target = dev};
  std::vector<float> out(n, rs::test::poison<float>());
  const auto s = rs::out_of_core(p, in, out, o);
  expect_close(out, ref);
  EXPECT_EQ(s.chunks, 1u);
  EXPECT_EQ(s.depth, 1);  // chunks in flight: never more than the chunks
  rs::out_of_core_summary r;
  // The fold adds the very terms the map wrote (out), in double: one term of >= 0.39 more or less shows.
  const auto [out_sum, out_abs] = rs::test::sum_and_abs(out);
  const double tol = rs::test::sum_tolerance<double>(n, out_abs, rs::test::unit_roundoff<float>() * out_abs);
  EXPECT_TRUE(rs::test::sum_matches(rs::out_of_core(p | rs::reduce(rs::plus{}, 0.0), in, o, &r), out_sum, tol, 0.39));
  EXPECT_EQ(r.chunks, 1u);
  EXPECT_EQ(r.depth, 1);
  EXPECT_LE(rs::pool_stats(dev).peak_bytes, cap);
}

TEST_P(out_of_core, timeline_has_every_chunk_in_order) {
  const std::size_t n = 6 * chunk + 1;
  const auto in = rs::test::random_vector<float>(n, rs::test::fresh_seed());
  std::vector<float> out(n);
  std::vector<rs::chunk_timing> t;
  rs::out_of_core(rs::map<f1>() | rs::map<f2>(), in, out, {.chunk_elements = chunk, .target = dev, .timeline = &t});
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

// The streamed sum's check can fail: the reference with one term dropped or doubled, at a chunk's
// border or inside one, is refused, while the true one is accepted.
TEST_P(out_of_core, the_streamed_sum_check_sees_one_term_dropped_or_doubled) {
  const std::size_t n = 300007;
  const auto seed = rs::test::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const auto in = rs::test::random_vector<float>(n, seed);
  const auto terms = rs::test::seed_terms_on(dev, in);
  const double tol = rs::test::sum_tolerance<double>(n, terms.abs_sum, terms.term_error());
  const double sum = rs::out_of_core(rs::map<f1>() | rs::map<f2>() | rs::map<f3>() | rs::reduce(rs::plus{}, 0.0), in,
                                         {.chunk_elements = 65536, .target = dev});
  EXPECT_TRUE(rs::test::sum_matches(sum, terms.sum, tol, terms.smallest));
  for (std::size_t k : {std::size_t(0), std::size_t(65535), std::size_t(65536), std::size_t(150000), n - 1})
    for (double times : {0.0, 2.0})
      EXPECT_FALSE(rs::test::sum_matches(sum, terms.sum_with(k, times), tol, terms.smallest))
          << "term " << k << " times " << times << " passed";
}

// RESIDENT_POOL_LIMIT that is not a byte count (run with the variable set so, e.g. "lots"): a streamed
// pipeline refuses it before any work on every backend, the CPU's map too, which takes no staging.
TEST(out_of_core_environment, a_bad_pool_limit_is_refused_before_any_work) {
  const char* v = std::getenv("RESIDENT_POOL_LIMIT");
  if (!v || !*v || std::string(v) == "none" || rs::detail::parse_bytes(v).value_or(0) > 0)
    GTEST_SKIP() << "RESIDENT_POOL_LIMIT is unset or a byte count";
  const rs::device d = rs::device::cpu();
  const std::vector<float> in(10, 1.f);
  std::vector<float> out(10, rs::test::poison<float>());
  for (std::size_t n : {std::size_t(0), in.size()}) {
    try {
      rs::out_of_core(rs::map<f1>(), std::span<const float>(in.data(), n), std::span<float>(out.data(), n),
                          {.target = d});
      FAIL() << "a bad RESIDENT_POOL_LIMIT was accepted";
    } catch (const rs::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("RESIDENT_POOL_LIMIT"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW((void)rs::out_of_core(rs::reduce(rs::plus{}, 0.f), in, {.target = d}), rs::invalid_argument);
  EXPECT_EQ(std::count(out.begin(), out.end(), rs::test::poison<float>()), 10);
}

RESIDENT_BACKENDS(out_of_core);

}  // namespace
