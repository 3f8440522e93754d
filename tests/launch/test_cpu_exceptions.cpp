// The CPU backend's loop driver: an exception thrown by user code inside its parallel loops reaches the
// caller, through every entry point that runs user code, instead of terminating the process; a team
// that started late hands the next loops to the calling thread. Compiled by the host compiler even in
// CUDA builds: the functors throw or ask OpenMP where they run, which device code cannot.
#include <atomic>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include <omp.h>

#include "resident/flow/flow.hpp"
#include "resident/fuse/pipeline.hpp"
#include "resident/random/random.hpp"
#include "resident/out_of_core/out_of_core.hpp"
#include "support.hpp"

namespace rs = resident;
using rs::test::backend;

namespace {

/// What the functors throw: the index they were asked to fail at.
struct planted : std::runtime_error {
  explicit planted(std::size_t i) : std::runtime_error("planted at " + std::to_string(i)), at(i) {}
  std::size_t at;
};

/// Runs call(), which must throw planted(at) (or, when any == true, planted at some index).
template <class Call>
void expect_planted(Call&& call, std::size_t at, const std::string& what) {
  SCOPED_TRACE(what + ", failing at " + std::to_string(at));
  try {
    call();
    ADD_FAILURE() << "no exception";
  } catch (const planted& e) {
    EXPECT_EQ(e.at, at) << e.what();
  }
}

/// x[i] = i, exactly representable in float below 2^24.
rs::array<float> indices(std::size_t n, rs::device d) {
  std::vector<float> h(n);
  for (std::size_t i = 0; i < n; ++i) h[i] = float(i);
  return rs::to_device(h, d);
}

// The sizes: one element, a serial loop, and a parallel one with a scalar head and tail around the
// vectors (a slice one element in), and the indices to fail at: first, middle, last.
const std::size_t sizes[] = {1, 1000, (std::size_t(1) << 20) + 7};
std::vector<std::size_t> failing_indices(std::size_t n) { return {0, n / 2, n - 1}; }

using cpu_exceptions = backend;

TEST_P(cpu_exceptions, maps_rethrow_what_a_stage_throws) {
  for (std::size_t n : sizes) {
    rs::array<double> y(n + 1, dev);
    rs::array<float> z(n + 1, dev);
    for (std::size_t at : failing_indices(n)) {
      auto stage = [at](float v) {
        if (v == float(at + 1)) throw planted(at);
        return v * 2.f;
      };
      // A fresh input for each call: the elements done before the exception stay written.
      auto x = indices(n + 1, dev);
      auto in = [&] {
        x = indices(n + 1, dev);
        return x.slice(1, n);  // element i is i + 1
      };
      expect_planted([&] { rs::map(stage)(in()); }, at, "in place, n " + std::to_string(n));
      expect_planted([&] { (rs::map([](float v) { return v; }) | rs::map(stage))(in(), y.slice(0, n)); }, at,
                     "out of place into double, n " + std::to_string(n));
      // In and out misaligned against each other: the scalar loop.
      expect_planted([&] { rs::map(stage)(in(), z.slice(0, n)); }, at, "scalar, n " + std::to_string(n));
    }
  }
  // Every element throws: one exception comes out, whichever was first.
  auto x = indices(sizes[2], dev);
  EXPECT_THROW(rs::map([](float v) -> float { throw planted(std::size_t(v)); })(x), planted);
  // Not derived from std::exception, and after all that the pipelines still work.
  EXPECT_THROW(rs::map([](float v) -> float { throw int(v); })(x), int);
  rs::map([](float v) { return v + 1.f; })(x);
  EXPECT_EQ(x.to_host()[12345], 12346.f);
}

TEST_P(cpu_exceptions, scans_rethrow_what_a_stage_throws) {
  for (std::size_t n : sizes) {
    rs::array<double> y(n, dev);
    for (std::size_t at : failing_indices(n)) {
      auto stage = [at](float v) {
        if (v == float(at)) throw planted(at);
        return double(v);
      };
      auto x = indices(n, dev);
      expect_planted([&] { (rs::map(stage) | rs::inclusive_scan(rs::plus{}))(x, y); }, at,
                     "scan, n " + std::to_string(n));
    }
    // After that the scan still works: running sums of 0, 1, 2, ...
    auto x = indices(n, dev);
    (rs::map([](float v) { return double(v); }) | rs::inclusive_scan(rs::plus{}))(x, y);
    const double last = double(n - 1) * double(n) / 2;
    EXPECT_EQ(y.to_host().back(), last);
  }
}

TEST_P(cpu_exceptions, zipped_and_generated_maps_rethrow) {
  for (std::size_t n : sizes) {
    auto a = indices(n, dev);
    std::vector<int> hb(n, 3);
    auto b = rs::to_device(hb, dev);
    rs::array<float> y(n, dev);
    for (std::size_t at : failing_indices(n)) {
      const std::string size = ", n " + std::to_string(n);
      expect_planted(
          [&] {
            (rs::zip(a, b) | rs::map([at](float u, int v) {
               if (u == float(at)) throw planted(at);
               return u + float(v);
             }))(y);
          },
          at, "zip" + size);
      expect_planted(
          [&] {
            rs::generate([at](std::size_t i) {
              if (i == at) throw planted(at);
              return float(i);
            })(y);
          },
          at, "generate" + size);
      // A random source makes its values four at a time.
      std::atomic<std::size_t> seen{0};
      expect_planted(
          [&] {
            (rs::random::uniform<float>(7) | rs::map([&seen, at](float v) {
               if (seen.fetch_add(1) == at) throw planted(at);
               return v;
             }))(y);
          },
          at, "random source" + size);
    }
  }
}

TEST_P(cpu_exceptions, reductions_rethrow_and_leave_the_result_alone) {
  for (std::size_t n : sizes) {
    auto x = indices(n, dev);
    std::vector<int> hb(n, 3);
    auto b = rs::to_device(hb, dev);
    for (std::size_t at : failing_indices(n)) {
      const std::string size = ", n " + std::to_string(n);
      auto stage = [at](float v) {
        if (v == float(at)) throw planted(at);
        return double(v);
      };
      expect_planted([&] { (rs::map(stage) | rs::reduce(rs::plus{}, 0.0))(x); }, at, "reduce" + size);
      expect_planted([&] { (rs::map(stage) | rs::reduce(rs::maximum{}, 0.0))(x.slice(0, n)); }, at,
                     "reduce a slice" + size);
      std::vector<double> poison{rs::test::poison<double>()};
      auto out = rs::to_device(poison, dev);
      expect_planted([&] { (rs::map(stage) | rs::reduce(rs::plus{}, 0.0))(x, out); }, at, "reduce into" + size);
      EXPECT_EQ(out.to_host()[0], poison[0]) << "the result array was written";
      auto zipped = rs::zip(x, b) | rs::map([at](float u, int v) {
                      if (u == float(at)) throw planted(at);
                      return double(u) + v;
                    }) |
                    rs::reduce(rs::plus{}, 0.0);
      expect_planted([&] { zipped(); }, at, "zip reduce" + size);
      expect_planted([&] { zipped(out); }, at, "zip reduce into" + size);
      auto generated = rs::generate([at](std::size_t i) {
                         if (i == at) throw planted(at);
                         return double(i);
                       }) |
                       rs::reduce(rs::plus{}, 0.0);
      expect_planted([&] { generated(n, rs::default_stream(dev)); }, at, "generate reduce" + size);
      expect_planted([&] { generated(n, out); }, at, "generate reduce into" + size);
      EXPECT_EQ(out.to_host()[0], poison[0]) << "the result array was written";
    }
  }
}

TEST_P(cpu_exceptions, launches_rethrow_what_a_thread_throws) {
  const auto s = rs::default_stream(dev);
  for (unsigned grid : {1u, 3u, 4096u}) {
    const unsigned block = 64;
    const std::size_t n = std::size_t(grid) * block;
    for (std::size_t at : failing_indices(n)) {
      const std::string shape = ", grid " + std::to_string(grid);
      expect_planted(
          [&] {
            rs::launch(s, {rs::dims(grid), rs::dims(block)}, [at](rs::thread_index t) {
              if (t.global_x() == at) throw planted(at);
            });
          },
          at, "launch" + shape);
      auto keep = [](rs::thread_index t, rs::block_shared sh) { sh.as<std::size_t>()[t.thread.x] = t.global_x(); };
      auto check = [at, block](rs::thread_index t, rs::block_shared sh) {
        const std::size_t mine = sh.as<std::size_t>()[block - 1 - t.thread.x];
        if (mine == at) throw planted(at);
      };
      expect_planted([&] { rs::launch_phases(s, {rs::dims(grid), rs::dims(block), block * sizeof(std::size_t)}, keep, check); },
                     at, "launch_phases" + shape);
      expect_planted(
          [&] {
            rs::for_each_index(s, n, [at](std::size_t i) {
              if (i == at) throw planted(at);
            });
          },
          at, "for_each_index" + shape);
    }
  }
}

TEST_P(cpu_exceptions, a_stage_whose_loop_throws_is_a_stage_error) {
  const std::size_t n = (std::size_t(1) << 20) + 7;
  auto x = indices(n, dev);
  for (std::size_t at : failing_indices(n)) {
    rs::flow f(dev);
    f.add("fine", [](rs::stream_ref) {});
    f.add("throwing map", [&](rs::stream_ref) {
      rs::map([at](float v) {
        if (v == float(at)) throw planted(at);
        return v;
      })(x);
    }, rs::access{}.writes(x));
    try {
      f.run();
      ADD_FAILURE() << "no exception";
    } catch (const rs::stage_error& e) {
      EXPECT_EQ(e.stage(), "throwing map");
      EXPECT_NE(std::string(e.what()).find("planted at " + std::to_string(at)), std::string::npos) << e.what();
      try {
        std::rethrow_if_nested(e);
        ADD_FAILURE() << "nothing nested";
      } catch (const planted& p) {
        EXPECT_EQ(p.at, at);
      }
    }
  }
}

using cpu_loops = backend;

TEST_P(cpu_loops, after_a_team_came_too_late_the_calling_thread_runs_the_same_pieces) {
  if (omp_get_max_threads() < 2) GTEST_SKIP() << "needs two OpenMP threads";
  const auto s = rs::default_stream(dev);
  const std::size_t n = std::size_t(1) << 20;
  auto ran_in_a_team = [&](std::size_t count) {
    std::atomic<bool> team{false};
    rs::for_each_index(s, count, [&](std::size_t) {
      if (omp_in_parallel()) team.store(true, std::memory_order_relaxed);
    });
    return team.load();
  };
  auto seed = rs::test::fresh_seed();
  auto x = rs::to_device(rs::test::random_vector<float>(n, seed), dev);
  auto sum = rs::reduce(rs::plus{}, 0.f);
  rs::detail::cpu_late_at.store(0);
  EXPECT_TRUE(ran_in_a_team(n));
  const float in_team = sum(x);
  // The team of a loop of n / 2 items came too late: loops of up to n items run on the calling thread
  // (the same pieces, so the same sum), larger ones still on the team.
  rs::detail::cpu_team_came_late(n / 2);
  EXPECT_FALSE(ran_in_a_team(n));
  EXPECT_EQ(sum(x), in_team) << "seed " << seed;
  EXPECT_TRUE(ran_in_a_team(4 * n));
  rs::detail::cpu_late_at.store(0);
}

// Functors that throw run on the CPU backend only.
INSTANTIATE_TEST_SUITE_P(backends, cpu_exceptions, ::testing::Values("cpu"), ::resident::test::backend_name);
INSTANTIATE_TEST_SUITE_P(backends, cpu_loops, ::testing::Values("cpu"), ::resident::test::backend_name);

// A stage that throws inside an out-of-core pipeline reaches the caller; its buffers are released.
TEST(cpu_exceptions, streamed_pipelines_rethrow_and_release_their_buffers) {
  const std::size_t n = 3 * 1024;
  std::vector<float> in(n, 1.f), out(n);
  in[2 * 1024 + 5] = 42.f;
  auto throws_at_42 = [](float v) {
    if (v == 42.f) throw planted(42);
    return v;
  };
  const rs::device cpu = rs::device::cpu();
  const auto before = rs::pool_stats(cpu).outstanding;
  const rs::out_of_core_options o{.chunk_elements = 1024, .target = cpu};
  EXPECT_THROW(rs::out_of_core(rs::map(throws_at_42), in, out, o), planted);
  EXPECT_THROW(rs::out_of_core(rs::map(throws_at_42) | rs::reduce(rs::plus{}, 0.f), in, o), planted);
  EXPECT_EQ(rs::pool_stats(cpu).outstanding, before);
}

}  // namespace

// Lengths near SIZE_MAX: the loop's cut into pieces does not wrap (a piece of 0 units divided by
// zero), so the first index's exception comes back instead of a crash; launches whose units times
// items wrap likewise.
TEST(cpu_loops, lengths_near_the_largest_size_are_cut_without_wrapping) {
  const int threads = omp_get_max_threads();
  for (int t : {1, 2, 3, 8}) {
    omp_set_num_threads(t);
    for (std::size_t n : {std::size_t(-1), std::size_t(-1) - 1, std::size_t(-1) / 2 + 3}) {
      const rs::detail::cpu_loop loop(n, 1);
      EXPECT_GE(loop.pieces(), 1u) << n << " on " << t << " threads";
      EXPECT_LE(loop.pieces(), std::size_t(t) * 64) << n << " on " << t << " threads";
      std::size_t covered = 0, last_end = 0;
      bool contiguous = true;
      // The pieces' bounds without running them: each starts where the previous ended, the last ends at n.
      for (std::size_t p = 0; p < loop.pieces(); ++p) {
        const auto b = loop.bounds(p);
        contiguous &= b.first == last_end && b.last > b.first;
        covered += b.last - b.first;
        last_end = b.last;
      }
      EXPECT_TRUE(contiguous) << n << " on " << t << " threads";
      EXPECT_EQ(covered, n) << n << " on " << t << " threads";
      EXPECT_EQ(last_end, n);
      try {
        rs::for_each_index(rs::default_stream(rs::device::cpu()), n, [](std::size_t i) { throw planted(i); });
        ADD_FAILURE() << "no exception at n = " << n;
      } catch (const planted& e) {
        EXPECT_EQ(e.at % loop.bounds(0).last, 0u) << "a piece's first index: " << e.what();
      }
    }
    // A grid of 2^31 - 1 by 65535 by 65535 blocks of 1024 threads: 2^73 threads, more than a size_t.
    const rs::launch_config huge{rs::dims(2147483647u, 65535u, 65535u), rs::dims(1024)};
    try {
      rs::launch(rs::default_stream(rs::device::cpu()), huge, [](rs::thread_index i) { throw planted(i.global_x()); });
      ADD_FAILURE() << "no exception";
    } catch (const planted&) {
    }
  }
  omp_set_num_threads(threads);
}
