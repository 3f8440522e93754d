// The ledger under several host threads: each thread's own counts (ledger_scope::this_thread) hold its
// work alone, the process's counts are their sum, and what attributes counts to one piece of work (a
// graph's kernels, a flow stage's report) is not given the kernels other threads launch meanwhile.
#include <atomic>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "support.hpp"

namespace rs = resident;

namespace {

class ledger_threads : public rs::test::backend {};

RESIDENT_HD float plus_one(float v) { return v + 1.f; }
RESIDENT_HD float times_two(float v) { return 2.f * v; }

// Another thread with a stream of its own that launches one kernel each time it is asked, and the
// asker waits until it has: that kernel then lands inside the asker's region (a capture, a replay, a
// flow stage), on another thread, whatever the scheduling.
struct neighbour {
  std::atomic<bool> stop{false}, failed{false};
  std::atomic<std::uint64_t> asked{0}, launched{0};
  std::string error;
  std::thread th;
  explicit neighbour(rs::device d) {
    th = std::thread([this, d] {
      try {
        rs::stream s(d);
        rs::array<float> a(4096, s.ref());
        rs::random::fill_uniform(a, 7);
        launched = 1;
        asked = 1;
        while (!stop.load()) {
          if (launched.load() == asked.load()) {
            std::this_thread::yield();
            continue;
          }
          rs::map<plus_one>()(a);
          ++launched;
        }
        s.synchronize();
      } catch (const std::exception& e) {
        error = e.what();
        failed = true;
      }
    });
    while (launched.load() < 1 && !failed.load()) std::this_thread::yield();
  }
  // One kernel launched by the other thread before this returns.
  void launch_one() {
    const std::uint64_t want = ++asked;
    while (launched.load() < want && !failed.load()) std::this_thread::yield();
  }
  std::uint64_t finish() {
    stop = true;
    if (th.joinable()) th.join();
    return launched.load();
  }
  ~neighbour() { finish(); }
};

}  // namespace

TEST_P(ledger_threads, the_process_counts_are_the_sum_of_each_threads_own) {
  const int threads = 4;
  const rs::ledger_counts before = rs::ledger(dev);
  std::vector<rs::ledger_counts> own(threads);
  std::vector<std::uint64_t> moved(threads);
  std::vector<std::string> error(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      try {
        rs::scoped_ledger mine(dev, rs::ledger_scope::this_thread);
        rs::stream s(dev);
        for (int r = 0; r < 20; ++r) {
          const std::size_t n = std::size_t(1000 * (t + 1) + r);
          std::vector<float> h(n, float(t));
          rs::array<float> a = rs::to_device(std::span<const float>(h), s.ref());
          rs::map<times_two>()(a);
          a.to_host(std::span<float>(h));
          moved[std::size_t(t)] += n * sizeof(float);
        }
        own[std::size_t(t)] = mine.delta();
      } catch (const std::exception& e) {
        error[std::size_t(t)] = e.what();
      }
    });
  for (auto& th : pool) th.join();
  const rs::ledger_counts all = rs::ledger(dev) - before;
  rs::ledger_counts sum;
  for (int t = 0; t < threads; ++t) {
    ASSERT_EQ(error[std::size_t(t)], "");
    const rs::ledger_counts& o = own[std::size_t(t)];
    EXPECT_EQ(o.h2d_bytes, moved[std::size_t(t)]) << "thread " << t << " was given another thread's bytes";
    EXPECT_EQ(o.d2h_bytes, moved[std::size_t(t)]) << "thread " << t;
    EXPECT_EQ(o.h2d_copies, 20u);
    EXPECT_EQ(o.kernels, 20u) << "thread " << t;
    EXPECT_EQ(o.allocations, 20u) << "thread " << t;
    sum.h2d_bytes += o.h2d_bytes;
    sum.d2h_bytes += o.d2h_bytes;
    sum.kernels += o.kernels;
    sum.allocations += o.allocations;
  }
  EXPECT_EQ(all.h2d_bytes, sum.h2d_bytes);
  EXPECT_EQ(all.d2h_bytes, sum.d2h_bytes);
  EXPECT_EQ(all.kernels, sum.kernels);
  EXPECT_EQ(all.allocations, sum.allocations);
}

// A graph's kernels are those its own work launched: another thread's launches during the capture (or,
// on the CPU, during a replay) ran, stay counted, and are not replayed.
TEST_P(ledger_threads, a_graph_counts_only_its_own_kernels) {
  rs::stream s(dev);
  rs::array<float> x(1 << 12, s.ref());
  rs::random::fill_uniform(x, 3);
  const rs::ledger_counts before = rs::ledger(dev);
  neighbour other(dev);
  rs::graph g = rs::graph::capture(s.ref(), [&] {
    rs::map<plus_one>()(x);
    other.launch_one();
    rs::map<times_two>()(x);
  });
  for (int r = 0; r < 3; ++r) g.replay(s.ref());
  s.synchronize();
  const std::uint64_t theirs = other.finish();
  ASSERT_EQ(other.error, "");
  EXPECT_EQ(g.kernels(), 2u);
  EXPECT_EQ((rs::ledger(dev) - before).kernels, theirs + 6) << "3 replays of 2 kernels, and the other thread's";
}

// A flow stage's report counts its own work, not the kernels of a thread running beside the flow.
TEST_P(ledger_threads, a_flow_stage_reports_only_its_own_work) {
  rs::flow f(dev, 2);
  rs::array<float> x(1 << 12, f.stream()), y(1 << 12, f.stream());
  rs::random::fill_uniform(x, 5);
  rs::random::fill_uniform(y, 6);
  neighbour other(dev);
  f.add("x + 1", [&](rs::stream_ref s) {
    x.set_stream(s);
    other.launch_one();
    rs::map<plus_one>()(x);
  }, rs::access{}.writes(x));
  f.add("2y", [&](rs::stream_ref s) {
    y.set_stream(s);
    rs::map<times_two>()(y);
    other.launch_one();
  }, rs::access{}.writes(y));
  for (int r = 0; r < 5; ++r) {
    f.run();
    for (const auto& row : f.report()) EXPECT_EQ(row.issued.kernels, 1u) << row.name;
  }
  other.finish();
  ASSERT_EQ(other.error, "");
  x.set_stream(f.stream());
  y.set_stream(f.stream());
  f.stream().synchronize();
}

INSTANTIATE_TEST_SUITE_P(backends, ledger_threads, ::testing::Values("cpu", "cuda"), rs::test::backend_name);
