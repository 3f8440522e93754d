// Run-time chains and programs streamed over host data (resident/jit/out_of_core.hpp): values against an
// FP64 reference, the ledger's counts per chunk, the pool's limit and the typed errors, per backend.
// Host compiler only: the kernels are the chains' own.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "resident/jit/out_of_core.hpp"
#include "resident/jit/stream.hpp"  // the deprecated names, called once below
#include "resident/out_of_core/out_of_core.hpp"
#include "resident/streaming/options.hpp"
#include "resident/streaming/streaming.hpp"
#include "seed.hpp"
#include "support.hpp"

namespace rs = resident;
namespace jit = resident::jit;
using rs::test::backend;
using rs::test::seed_ref;

namespace {

constexpr std::size_t chunk = 1024;
std::size_t chunks_of(std::size_t n) { return (n + chunk - 1) / chunk; }

jit::pipeline seed_chain() {
  return jit::map("float f1(float v) { return 1.5f * v + 0.5f; }") |
         jit::map("float f2(float v) { return sqrtf(v * v + 1.0f); }") |
         jit::map("float f3(float v) { return 0.5f * sinf(v); }");
}

using jit_out_of_core = backend;

TEST_P(jit_out_of_core, a_chain_matches_fp64_with_one_kernel_and_one_copy_each_way_per_chunk) {
  const jit::pipeline chain = seed_chain();
  for (int depth : {1, 3}) {
    for (std::size_t n : {std::size_t(0), std::size_t(1), chunk, 5 * chunk + 7}) {
      const auto seed = rs::test::fresh_seed();
      SCOPED_TRACE("n = " + std::to_string(n) + ", depth " + std::to_string(depth) + ", seed " + std::to_string(seed));
      const auto in = rs::test::random_vector<float>(n, seed);
      std::vector<float> out(n, rs::test::poison<float>());
      (void)jit::out_of_core(chain, {jit::host_operand_of(in)}, jit::host_operand_of(out), {.chunk_elements = chunk, .target = dev});
      rs::scoped_ledger l(dev);
      const auto s = jit::out_of_core(chain, {jit::host_operand_of(in)}, jit::host_operand_of(out),
                                 {.chunk_elements = chunk, .depth = depth, .target = dev});
      const auto d = l.delta();
      for (std::size_t i = 0; i < n; ++i) ASSERT_NEAR(out[i], seed_ref(in[i]), 2e-6 * (1 + std::abs(seed_ref(in[i])))) << i;
      EXPECT_EQ(s.chunks, chunks_of(n));
      EXPECT_EQ(d.stream_chunks, chunks_of(n));
      EXPECT_EQ(d.h2d_bytes, n * sizeof(float));
      EXPECT_EQ(d.d2h_bytes, n * sizeof(float));
      EXPECT_EQ(d.h2d_copies, chunks_of(n));
      EXPECT_EQ(d.kernels, chunks_of(n));
    }
  }
}

TEST_P(jit_out_of_core, in_place_zip_and_progress) {
  const std::size_t n = 3 * chunk + 5;
  const auto seed = rs::test::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  auto a = rs::test::random_vector<float>(n, seed);
  const auto b = rs::test::random_vector<double>(n, seed + 1);
  std::vector<double> out(n, rs::test::poison<double>());
  const auto diff = jit::map("double d(float a, double b) { return double(a) - 2.0 * b; }");
  std::vector<std::size_t> seen;
  (void)jit::out_of_core(diff, {jit::host_operand_of(a), jit::host_operand_of(b)}, jit::host_operand_of(out),
                    {.chunk_elements = chunk, .target = dev}, [&](std::size_t done, std::size_t total) {
                      EXPECT_EQ(total, n);
                      seen.push_back(done);
                    });
  for (std::size_t i = 0; i < n; ++i) ASSERT_DOUBLE_EQ(out[i], double(a[i]) - 2.0 * b[i]) << i;
  EXPECT_EQ(seen, (std::vector<std::size_t>{chunk, 2 * chunk, 3 * chunk, n}));
  const std::vector<float> before = a;
  (void)jit::out_of_core(seed_chain(), {jit::host_operand_of(a)}, jit::host_operand_of(a), {.chunk_elements = chunk, .target = dev});
  for (std::size_t i = 0; i < n; ++i) ASSERT_NEAR(a[i], seed_ref(before[i]), 2e-6 * (1 + std::abs(seed_ref(before[i])))) << i;
}

TEST_P(jit_out_of_core, sum_min_max_combine_the_chunks_partials) {
  for (std::size_t n : {std::size_t(0), std::size_t(1), 7 * chunk + 3}) {
    const auto seed = rs::test::fresh_seed();
    SCOPED_TRACE("n = " + std::to_string(n) + ", seed " + std::to_string(seed));
    const auto in = rs::test::random_vector<double>(n, seed);
    double ref_sum = 0, ref_min = INFINITY, ref_max = -INFINITY;
    for (double v : in) {
      const double w = v * v;
      ref_sum += w;
      ref_min = std::min(ref_min, w);
      ref_max = std::max(ref_max, w);
    }
    const auto sq = jit::map("double sq(double v) { return v * v; }");
    double sum = -1, lo = -1, hi = -1;
    rs::scoped_ledger l(dev);
    const auto s = jit::out_of_core_reduce(sq | jit::sum(), {jit::host_operand_of(in)}, jit::element::f64, &sum,
                                      {.chunk_elements = chunk, .target = dev});
    const auto d = l.delta();
    (void)jit::out_of_core_reduce(sq | jit::min(), {jit::host_operand_of(in)}, jit::element::f64, &lo, {.chunk_elements = chunk, .target = dev});
    (void)jit::out_of_core_reduce(sq | jit::max(), {jit::host_operand_of(in)}, jit::element::f64, &hi, {.chunk_elements = chunk, .target = dev});
    EXPECT_NEAR(sum, ref_sum, 1e-12 * (1 + ref_sum));
    EXPECT_EQ(lo, ref_min);
    EXPECT_EQ(hi, ref_max);
    EXPECT_EQ(s.chunks, chunks_of(n));
    EXPECT_EQ(d.h2d_bytes, n * sizeof(double));
    EXPECT_EQ(d.d2h_bytes, chunks_of(n) * sizeof(double));  // one partial per chunk
    EXPECT_EQ(d.kernels, chunks_of(n));
  }
}

TEST_P(jit_out_of_core, a_float_sum_joins_its_chunks_unrounded) {
  // Chunks of 8 summing to 2^24 + 1 (no float32: it would round to 2^24) and -2^24 + 1, each value
  // exact where a thread adds it: rounded to float32 a chunk, the partials would sum to 1 per pair of
  // chunks; their double accumulators join exactly, 2 per pair.
  std::vector<float> in(64, 0.f);
  for (std::size_t i = 0; i < in.size(); i += 16) in[i] = 16777216.f, in[i + 4] = 1.f, in[i + 8] = -16777216.f, in[i + 12] = 1.f;
  float sum = -1;
  rs::scoped_ledger l(dev);
  (void)jit::out_of_core_reduce(jit::map("float same(float v) { return v; }") | jit::sum(), {jit::host_operand_of(in)},
                                jit::element::f32, &sum, {.chunk_elements = 8, .target = dev});
  EXPECT_EQ(sum, 8.f);
  EXPECT_EQ(l.delta().d2h_bytes, 8 * sizeof(double));  // a double partial per chunk
}

TEST_P(jit_out_of_core, a_program_streams_as_its_kernel_does) {
  const auto p = rs::program{} | rs::op::affine(1.5, 0.5) | rs::op::square() | rs::op::add(1) | rs::op::sqrt() |
                 rs::op::sin() | rs::op::mul(0.5);
  const std::size_t n = 4 * chunk + 1;
  const auto seed = rs::test::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const auto in = rs::test::random_vector<float>(n, seed);
  std::vector<float> out(n, rs::test::poison<float>());
  rs::scoped_ledger l(dev);
  const auto s = jit::out_of_core(p, jit::host_operand_of(in), jit::host_operand_of(out), {.chunk_elements = chunk, .target = dev});
  EXPECT_EQ(s.chunks, chunks_of(n));
  EXPECT_EQ(l.delta().kernels, chunks_of(n));
  for (std::size_t i = 0; i < n; ++i) ASSERT_NEAR(out[i], seed_ref(in[i]), 2e-6 * (1 + std::abs(seed_ref(in[i])))) << i;
}

TEST_P(jit_out_of_core, bad_calls_are_refused_before_any_data_moves) {
  std::vector<float> in(100, 1.f), out(99, 0.f), same(100, 0.f);
  std::vector<int> ints(100, 1);
  auto call = [&](auto&& f) {
    rs::scoped_ledger l(dev);
    f();
    EXPECT_EQ(l.delta().h2d_bytes, 0u);
  };
  const rs::out_of_core_options o{.target = dev};
  EXPECT_THROW(call([&] { jit::out_of_core(seed_chain(), {jit::host_operand_of(in)}, jit::host_operand_of(out), o); }),
               rs::shape_mismatch);
  rs::test::expect_invalid([&] { jit::out_of_core(seed_chain(), {jit::host_operand_of(ints)}, jit::host_operand_of(same), o); },
                           "int");
  rs::test::expect_invalid([&] { jit::out_of_core(seed_chain() | jit::sum(), {jit::host_operand_of(in)}, jit::host_operand_of(same), o); },
                           "out_of_core_reduce");
  float r = 0;
  rs::test::expect_invalid([&] { jit::out_of_core_reduce(seed_chain(), {jit::host_operand_of(in)}, jit::element::f32, &r, o); },
                           "no reduction");
  rs::test::expect_invalid(
      [&] { jit::out_of_core_reduce(jit::reduce("float add(float a, float b) { return a + b; }", 1.0), {jit::host_operand_of(in)},
                               jit::element::f32, &r, o); },
      "init");
  rs::test::expect_invalid([&] { jit::out_of_core(jit::uniform<float>(1), {jit::host_operand_of(in)}, jit::host_operand_of(same), o); },
                           "generator");
  rs::test::expect_invalid([&] { jit::out_of_core(seed_chain(), {jit::host_operand_of(in)}, jit::host_operand_of(same),
                                             {.depth = 99, .target = dev}); }, "depth");
  {
    rs::scoped_transfer_policy forbid(rs::transfer_policy::forbid);
    EXPECT_THROW(jit::out_of_core(seed_chain(), {jit::host_operand_of(in)}, jit::host_operand_of(same), o), rs::transfer_forbidden);
  }
  EXPECT_THROW(jit::out_of_core(rs::program{} | rs::op::sqrt(), jit::host_operand_of(ints), jit::host_operand_of(ints), o),
               rs::invalid_argument);
}

TEST_P(jit_out_of_core, data_beyond_the_pool_limit_streams_under_it) {
  const std::size_t n = 64 * chunk;  // 256 KiB of float each way, through a 64 KiB pool
  const auto seed = rs::test::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const auto in = rs::test::random_vector<float>(n, seed);
  std::vector<float> out(n, rs::test::poison<float>());
  const std::size_t limit_bytes = rs::pool_stats(dev).bytes_in_use + (64 << 10);
  rs::test::scoped_pool_limit limit(dev, limit_bytes);
  rs::reset_pool_peak(dev);
  const auto s = jit::out_of_core(seed_chain(), {jit::host_operand_of(in)}, jit::host_operand_of(out), {.target = dev});
  if (dev.is_cuda()) {
    EXPECT_GT(s.chunks, 1u);  // the CPU streams the host arrays in place
  }
  EXPECT_LE(rs::pool_stats(dev).peak_bytes, limit_bytes);
  for (std::size_t i = 0; i < n; ++i) ASSERT_NEAR(out[i], seed_ref(in[i]), 2e-6 * (1 + std::abs(seed_ref(in[i])))) << i;
}

// The names of earlier releases still compile and call the out-of-core ones (on the CPU, which a
// file built by the host compiler runs compile-time pipelines on).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
TEST(out_of_core_deprecated, the_old_names_call_the_new_ones) {
  const rs::device cpu = rs::device::cpu();
  const rs::stream_options o{.chunk_elements = chunk, .target = cpu};
  std::vector<float> in(3 * chunk + 5, 4.f), out(in.size());
  auto half = [](float v) { return 0.5f * v; };
  const rs::stream_summary s = rs::stream_pipeline(rs::map(half), in, out, o);
  EXPECT_EQ(s.elements, in.size());
  EXPECT_EQ(out.back(), 2.f);
  rs::stream_summary r;
  EXPECT_EQ(rs::stream_pipeline(rs::map(half) | rs::reduce(rs::plus{}, 1.0), in, o, &r), 1.0 + 2.0 * double(in.size()));
  EXPECT_EQ(r.elements, in.size());
  std::size_t reported = 0;
  const jit::stream_progress progress = [&](std::size_t done, std::size_t) { reported = done; };
  std::fill(out.begin(), out.end(), 0.f);
  (void)jit::stream(seed_chain(), {jit::host_operand_of(in)}, jit::host_operand_of(out), o, progress);
  EXPECT_EQ(reported, in.size());
  EXPECT_NEAR(out.back(), seed_ref(4.f), 1e-6);
  double sum = 0;
  (void)jit::stream_reduce(jit::map("double f(float v) { return v; }") | jit::sum(), {jit::host_operand_of(in)},
                           jit::element::f64, &sum, o);
  EXPECT_EQ(sum, 4.0 * double(in.size()));
  (void)jit::stream(rs::program{} | rs::op::sqrt(), jit::host_operand_of(in), jit::host_operand_of(out), o);
  EXPECT_EQ(out.front(), 2.f);
}
#pragma GCC diagnostic pop

}  // namespace

RESIDENT_BACKENDS(jit_out_of_core);
