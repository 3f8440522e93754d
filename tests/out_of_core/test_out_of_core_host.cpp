// Compiled by nvcc when the CUDA backend is in the build.
// Out-of-core pipelines and the host memory they are given: null, device memory passed as host memory,
// pageable at every chunk depth and thread count, mixed with pinned; and a stage that throws mid-stream.
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

using rs::test::f1, rs::test::f2, rs::test::f3, rs::test::seed_ref;
using namespace rs::test::streamed;
using out_of_core = backend;

// An output of another element type of the same size over the input's memory is exactly in place:
// every element is converted to the output's type, not left in the input's.
TEST_P(out_of_core, null_host_memory_is_refused_before_any_work) {
  const std::size_t n = 100;
  const auto in = rs::test::random_vector<float>(n, rs::test::fresh_seed());
  std::vector<float> out(n, rs::test::poison<float>());
  const std::span<const float> no_input(static_cast<const float*>(nullptr), n);
  const std::span<float> no_output(static_cast<float*>(nullptr), n);
  const auto p = rs::map<f1>();
  rs::scoped_ledger l(dev);
  rs::test::expect_invalid([&] { rs::out_of_core(p, no_input, out, {.target = dev}); },
                           "host input 0 is a null pointer with 100 elements");
  rs::test::expect_invalid([&] { rs::out_of_core(p, in, no_output, {.target = dev}); },
                           "the host output is a null pointer with 100 elements");
  const std::span<const double> no_doubles(static_cast<const double*>(nullptr), n);
  const std::vector<int> ints(n, 3);
  rs::test::expect_invalid(
      [&] { rs::out_of_core(rs::map<combine>(), rs::host_zip(in, no_doubles, ints), out, {.target = dev}); },
      "host input 1 is a null pointer");
  rs::test::expect_invalid([&] { (void)rs::out_of_core(p | rs::reduce(rs::plus{}, 0.0), no_input, {.target = dev}); },
                           "host input 0 is a null pointer");
  const auto d = l.delta();
  EXPECT_EQ(d.h2d_bytes + d.d2h_bytes + d.kernels + d.allocations, 0u);
  EXPECT_EQ(out[0], rs::test::poison<float>());
  // No elements: nothing is read or written, and a null pointer is fine.
  rs::out_of_core(p, std::span<const float>(), std::span<float>(), {.target = dev});
}

// A span over device memory given where host memory is expected is refused before any work (the
// copies and the host threads would read it as host memory). The CPU device's arrays are host memory.
using out_of_core_cuda = backend;  // GPU-only cases: the `.gpu` CTest entry

TEST_P(out_of_core_cuda, device_memory_given_as_host_memory_is_refused) {
  const std::size_t n = 3 * chunk;
  rs::array<float> a(n, dev);
  std::vector<float> h(n, rs::test::poison<float>());
  const std::span<const float> dev_in(a.data(), n);
  const std::span<float> dev_out(a.data(), n);
  rs::scoped_ledger l(dev);
  EXPECT_THROW(rs::out_of_core(rs::map<f1>(), dev_in, h, {.chunk_elements = chunk, .target = dev}),
               rs::invalid_argument);
  EXPECT_THROW(rs::out_of_core(rs::map<f1>(), h, dev_out, {.chunk_elements = chunk, .target = dev}),
               rs::invalid_argument);
  EXPECT_THROW((void)rs::out_of_core(rs::map<add2>() | rs::reduce(rs::plus{}, 0.f), rs::host_zip(h, dev_in), {.target = dev}),
               rs::invalid_argument);
  const auto d = l.delta();
  EXPECT_EQ(d.h2d_bytes + d.d2h_bytes + d.kernels + d.stream_chunks, 0u);
  EXPECT_EQ(std::count(h.begin(), h.end(), rs::test::poison<float>()), std::ptrdiff_t(n));
}

// Pageable host memory: on a GPU each chunk is staged through depth pinned slots by host_threads
// workers (in pieces, gated on the slot's events); on the CPU the loop reads the arrays in place.
// Every chunk size, depth and thread count gives the FP64 values and the exact ledger.
TEST_P(out_of_core, pageable_host_memory_for_every_chunk_depth_and_thread_count) {
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
        const auto s = rs::out_of_core(p, in, out, {.chunk_elements = ch, .depth = depth, .target = dev,
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
  const auto s = rs::out_of_core(p, x, x, {.chunk_elements = 16381, .depth = 2, .target = dev, .host_threads = 2});
  expect_close(x, ref);
  EXPECT_EQ(s.chunks, (n + 16380) / 16381);
  // The depth chosen for pageable memory is deeper than for pinned memory, never past the chunks.
  std::fill(out.begin(), out.end(), rs::test::poison<float>());
  const auto chosen = rs::out_of_core(p, in, out, {.chunk_elements = 262144, .target = dev});
  expect_close(out, ref);
  EXPECT_EQ(chosen.depth, dev.is_cuda() ? 4 : 3);
}

// A zip of pageable and page-locked host arrays into a pageable output: the pageable ones are staged,
// the pinned one is copied directly, all in step.
TEST_P(out_of_core, zip_of_pageable_and_pinned_host_arrays) {
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
      const auto s = rs::out_of_core(rs::map<combine>() | rs::map<square>(), rs::host_zip(a, b, c), out,
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
TEST_P(out_of_core, reduction_over_pageable_input) {
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
      rs::out_of_core_summary s;
      const double sum = rs::out_of_core(rs::map<f1>() | rs::map<f2>() | rs::map<f3>() | rs::reduce(rs::plus{}, -2.0), in,
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

struct stage_failed : rs::error {
  using rs::error::error;
};

using resident::test::threads_after_joins;
using resident::test::threads_now;

// A stage that throws in the middle of the stream (a kernel launch that fails, a host stage that
// throws): the caller gets that error, no worker thread is left running, no staging or pool memory
// is left taken, and nothing writes the host output after the call has returned. Every element of
// the output is then either its poison or its value.
TEST_P(out_of_core, a_stage_that_throws_mid_stream_leaves_no_thread_and_no_late_write) {
  const std::size_t n = 12 * chunk * 16 + 5, ch = 16 * chunk;  // 13 chunks
  const auto seed = rs::test::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const auto in = rs::test::random_vector<float>(n, seed);
  std::vector<float> out(n);
  for (int depth : {1, 3, 4})
    for (std::size_t throw_at : {std::size_t(0), std::size_t(5), std::size_t(12)}) {
      SCOPED_TRACE("depth " + std::to_string(depth) + ", throws at chunk " + std::to_string(throw_at));
      const rs::out_of_core_options o{.chunk_elements = ch, .depth = depth, .target = dev, .host_threads = 3};
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

RESIDENT_CUDA_ONLY(out_of_core_cuda);  // the CPU device's arrays are host memory

}  // namespace
