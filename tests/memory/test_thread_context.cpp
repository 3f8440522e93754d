// The calling thread's context on other threads: a CPU loop's team threads act for the caller (its
// transfer policy), and a ledger of one thread is read on that thread only.
#include <omp.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "support.hpp"

namespace rs = resident;

namespace {

// A CPU loop's team threads work for the thread that started the loop: its forbid holds there too
// (a transfer inside a for_each_index body went through on the team threads before).
TEST(thread_context, a_loops_team_threads_keep_the_callers_policy) {
  if (omp_get_max_threads() < 2) GTEST_SKIP() << "needs two OpenMP threads";
  const rs::device cpu = rs::device::cpu();
  std::atomic<int> on_team{0}, refused{0};
  {
    rs::scoped_transfer_policy p(rs::transfer_policy::forbid);
    rs::for_each_index(rs::default_stream(cpu), std::size_t(1) << 20, [&](std::size_t i) {
      if (omp_get_thread_num() == 0 && i == 0) {  // holds the first piece until a team thread has tried
        const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        while (on_team.load() == 0 && std::chrono::steady_clock::now() < end) std::this_thread::yield();
      }
      if (omp_get_thread_num() == 0 || on_team.load() > 0) return;
      EXPECT_EQ(rs::current_transfer_policy(), rs::transfer_policy::forbid);
      try {
        (void)rs::to_device(std::vector<float>{1.f}, cpu);
      } catch (const rs::transfer_forbidden&) {
        ++refused;
      }
      ++on_team;
    });
  }
  if (on_team.load() == 0) GTEST_SKIP() << "the loop ran on the calling thread alone";
  EXPECT_EQ(refused.load(), 1) << "an upload on a team thread passed under the caller's forbid";
  // The team threads went back to their own (none) after the loop.
  std::atomic<int> allowed{0};
  rs::for_each_index(rs::default_stream(cpu), std::size_t(1) << 20, [&](std::size_t) {
    if (rs::current_transfer_policy() != rs::transfer_policy::allow) ++allowed;
  });
  EXPECT_EQ(allowed.load(), 0);
}

// A this_thread ledger read on another thread was that thread's counts less the maker's (a wrapped
// 2^64 - 1, or 0): refused; a process ledger may be read anywhere.
TEST(thread_context, a_this_thread_ledger_is_read_on_the_thread_that_made_it) {
  const rs::device cpu = rs::device::cpu();
  rs::scoped_ledger mine(cpu, rs::ledger_scope::this_thread);
  rs::scoped_ledger all(cpu);
  (void)rs::to_device(std::vector<float>(4, 1.f), cpu);
  bool refused = false, process_read = false;
  std::thread([&] {
    try {
      (void)mine.delta();
    } catch (const rs::invalid_argument& e) {
      refused = std::string(e.what()).find("on that thread") != std::string::npos;
    }
    process_read = all.delta().h2d_bytes >= 16;
  }).join();
  EXPECT_TRUE(refused);
  EXPECT_TRUE(process_read);
  EXPECT_EQ(mine.delta().h2d_bytes, 16u);
}

}  // namespace
