// The pools: reuse and statistics, limits (set, from the environment, between threads), and peer copies
// between GPUs.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstring>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <numeric>
#include <sstream>
#include <thread>
#include <tuple>

#include "fork_child.hpp"
#include "support.hpp"

namespace rs = resident;
using rs::test::backend;

namespace {

using pool = backend;

// A fork() while another thread allocates and frees host memory under an open profile: the child used
// to wait for good whenever the fork came while that thread held the pool's or the profile's lock.
TEST(pool_fork, a_fork_while_another_thread_allocates_leaves_the_child_able_to_allocate) {
  if (rs::test::fork_untestable) GTEST_SKIP() << rs::test::fork_untestable;
  const rs::device cpu = rs::device::cpu();
  rs::profile counting(rs::profile_output::quiet);  // allocations then take the profile's lock too
  std::atomic<bool> stop{false}, started{false};
  std::thread churn([&] {
    while (!stop.load()) {
      rs::array<float> a(1000, cpu), b(5000, cpu);
      started = true;
    }
  });
  // The library's one-time set-up (function-local statics) is done by then: a fork() during another
  // thread's first call is outside what this checks (docs/threads.md).
  while (!started.load()) std::this_thread::yield();
  int hung = 0, failed = 0;
  std::string report;
  for (int i = 0; i < 100 && hung == 0; ++i) {
    const pid_t pid = ::fork();
    if (pid < 0) {
      ADD_FAILURE() << "fork() failed: " << std::strerror(errno);
      break;
    }
    if (pid == 0) {
      rs::array<float> a = rs::to_device(std::vector<float>(1000, 1.f), cpu), b(5000, cpu);
      ::_exit(a.to_host()[999] == 1.f ? 0 : 1);
    }
    const rs::test::child_end end = rs::test::wait_for_child(pid, std::chrono::seconds(20));
    if (end.hung) {
      ++hung;
      report = end.report;
    } else if (!end.succeeded()) {
      ++failed;
    }
  }
  stop = true;
  churn.join();
  EXPECT_EQ(hung, 0) << "a fork child hung on a lock another thread held at the fork: " << report;
  EXPECT_EQ(failed, 0);
}

TEST_P(pool, statistics_and_reuse) {
  auto before = rs::pool_stats(dev);
  {
    rs::array<char> a(1 << 20, dev);
    auto during = rs::pool_stats(dev);
    EXPECT_EQ(during.bytes_in_use, before.bytes_in_use + (1u << 20));
    EXPECT_EQ(during.outstanding, before.outstanding + 1);
    EXPECT_GE(during.bytes_reserved, during.bytes_in_use);
    EXPECT_GE(during.peak_bytes, during.bytes_in_use);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a.data()) % rs::pool_alignment, 0u);
  }
  rs::synchronize(dev);
  {
    rs::array<char> again(1 << 20, dev);  // the freed block comes back from the pool
  }
  auto after = rs::pool_stats(dev);
  EXPECT_EQ(after.bytes_in_use, before.bytes_in_use);
  EXPECT_EQ(after.allocations, before.allocations + 2);
  if (rs::pool_caching(dev)) {
    EXPECT_GE(after.pool_hits, before.pool_hits + 1);
  }
  rs::trim_pool(dev);
  EXPECT_LE(rs::pool_stats(dev).bytes_reserved, after.bytes_reserved);
}

TEST_P(pool, out_of_memory_carries_figures_and_pool_recovers) {
  const std::size_t huge = std::size_t(1) << 60;  // 1 EiB: beyond any device
  try {
    rs::array<char> a(huge, dev);
    FAIL() << "allocated 1 EiB";
  } catch (const rs::out_of_memory& e) {
    EXPECT_EQ(e.requested(), huge);
    EXPECT_NE(std::string(e.what()).find("retried once"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("[src/memory/pool.cpp:"), std::string::npos)
        << "an error with figures keeps the file:line that made it: " << e.what();
    EXPECT_GT(e.free_bytes(), 0u) << "the message must give the memory that is free";
  }
  auto h = rs::test::random_vector<float>(1000, rs::test::fresh_seed());
  EXPECT_EQ(rs::to_device(h, dev).to_host(), h);  // the pool and the context still work
}

TEST_P(pool, caching_can_be_turned_off) {
  const bool was = rs::pool_caching(dev);
  rs::set_pool_caching(dev, false);
  EXPECT_FALSE(rs::pool_caching(dev));
  {
    rs::array<char> a(1 << 16, dev);
  }
  rs::synchronize(dev);
  if (dev.is_cpu()) {
    EXPECT_EQ(rs::pool_stats(dev).bytes_reserved, rs::pool_stats(dev).bytes_in_use);
  }
  rs::set_pool_caching(dev, was);
}

// A limit caps the bytes in use: the peak stays at or below it, a request past it is a typed error
// with the figures, nothing leaks, and the pool works again once the limit is lifted.
TEST_P(pool, limit_caps_the_bytes_in_use) {
  rs::synchronize(dev);
  const std::size_t base = rs::pool_stats(dev).bytes_in_use;
  const std::size_t cap = base + (std::size_t(8) << 20);
  const rs::test::scoped_pool_limit lifted(dev, cap);
  ASSERT_EQ(rs::pool_limit(dev), cap);
  EXPECT_EQ(rs::pool_stats(dev).limit, cap);
  rs::reset_pool_peak(dev);
  rs::scoped_ledger l(dev);
  {
    std::vector<rs::array<float>> held;
    for (int i = 0; i < 3; ++i) held.emplace_back(std::size_t(2) << 18, dev);  // 3 x 2 MiB
    auto h = rs::test::random_vector<float>(std::size_t(1) << 18, rs::test::fresh_seed());
    auto x = rs::to_device(h, dev);  // 1 MiB: 7 MiB in use
    try {
      rs::array<float> y(std::size_t(1) << 19, dev);  // 2 MiB more: past the cap
      FAIL() << "the pool went past its limit";
    } catch (const rs::out_of_memory& e) {
      const std::string w = e.what();
      EXPECT_EQ(e.requested(), std::size_t(2) << 20);
      EXPECT_EQ(e.pool_limit(), cap);
      EXPECT_EQ(e.pool_in_use(), base + (std::size_t(7) << 20));
      EXPECT_GE(e.pool_reserved(), e.pool_in_use());
      EXPECT_NE(w.find("past its limit of"), std::string::npos) << w;
      EXPECT_NE(w.find(std::to_string(cap) + " bytes"), std::string::npos) << w;
      EXPECT_NE(w.find("in use"), std::string::npos) << w;
      EXPECT_NE(w.find("reserved"), std::string::npos) << w;
      EXPECT_NE(w.find("largest free block"), std::string::npos) << w;
      EXPECT_EQ(e.largest_free_block().has_value(), dev.is_cpu()) << w;
    }
    EXPECT_EQ(x.to_host(), h);  // what was allocated is intact
    held.pop_back();
    rs::array<float> y(std::size_t(1) << 19, dev);  // fits again once 2 MiB are freed
  }
  rs::synchronize(dev);
  EXPECT_LE(rs::pool_stats(dev).peak_bytes, cap);
  EXPECT_LE(l.delta().peak_bytes, cap);
  EXPECT_GE(l.delta().peak_bytes, base + (std::size_t(7) << 20));
  EXPECT_EQ(rs::pool_stats(dev).bytes_in_use, base);
  if (dev.is_cpu()) {
    EXPECT_LE(rs::pool_stats(dev).bytes_reserved, cap);  // the cache went back before growing past it
  }
}

TEST_P(pool, limits_that_cannot_hold_are_refused) {
  rs::synchronize(dev);
  const auto before = rs::pool_limit(dev);
  rs::array<char> a(std::size_t(1) << 20, dev);
  const std::size_t used = rs::pool_stats(dev).bytes_in_use;
  try {
    rs::set_pool_limit(dev, used - 1);
    FAIL() << "a limit below the bytes in use was accepted";
  } catch (const rs::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("in use"), std::string::npos) << e.what();
  }
  EXPECT_EQ(rs::pool_limit(dev), before);  // unchanged
  EXPECT_THROW(rs::set_pool_limit(dev, 0), rs::invalid_argument);
  rs::set_pool_limit(dev, used);  // exactly the bytes in use: nothing more can be allocated
  EXPECT_THROW(rs::array<char>(1, dev), rs::out_of_memory);
  rs::clear_pool_limit(dev);
  EXPECT_FALSE(rs::pool_limit(dev).has_value());
  EXPECT_NO_THROW(rs::array<char>(1, dev));
}

// A request beyond any allocation under a limit: its error names the limit in force, as the others do
// (not "no limit").
TEST_P(pool, a_request_beyond_any_allocation_names_the_limit_in_force) {
  rs::synchronize(dev);
  const std::size_t cap = rs::pool_stats(dev).bytes_in_use + (std::size_t(1) << 20);
  const rs::test::scoped_pool_limit lifted(dev, cap);
  try {
    rs::array<char> a(std::size_t(-1) - 100, dev);
    FAIL() << "allocated " << a.size() << " bytes";
  } catch (const rs::out_of_memory& e) {
    const std::string w = e.what();
    EXPECT_EQ(e.pool_limit(), cap) << w;
    EXPECT_NE(w.find("limit " + rs::detail::format_bytes(double(cap))), std::string::npos) << w;
    EXPECT_EQ(w.find("no limit"), std::string::npos) << w;
  }
}

// Two threads allocating against one limit never pass it together.
TEST_P(pool, limit_holds_between_threads) {
  rs::synchronize(dev);
  const std::size_t base = rs::pool_stats(dev).bytes_in_use;
  const std::size_t cap = base + (std::size_t(4) << 20);
  rs::set_pool_limit(dev, cap);
  rs::reset_pool_peak(dev);
  std::atomic<int> refused{0};
  auto work = [&] {
    for (int i = 0; i < 200; ++i) {
      try {
        rs::array<char> a(std::size_t(3) << 20, dev);
      } catch (const rs::out_of_memory&) {
        ++refused;
      }
    }
  };
  std::thread t1(work), t2(work);
  t1.join();
  t2.join();
  rs::synchronize(dev);
  rs::clear_pool_limit(dev);
  EXPECT_LE(rs::pool_stats(dev).peak_bytes, cap);
  EXPECT_EQ(rs::pool_stats(dev).bytes_in_use, base);
}

TEST(pool_limit, byte_counts_parse) {
  using rs::detail::parse_bytes;
  EXPECT_EQ(parse_bytes("2GiB"), std::size_t(2) << 30);
  EXPECT_EQ(parse_bytes("512 MiB"), std::size_t(512) << 20);
  EXPECT_EQ(parse_bytes("1000000"), 1000000u);
  EXPECT_EQ(parse_bytes("3GB"), 3000000000u);
  EXPECT_EQ(parse_bytes("1PiB"), std::size_t(1) << 50);  // the CLI's --size range ends there
  EXPECT_EQ(parse_bytes("2PB"), std::size_t(2000000000000000ull));
  EXPECT_EQ(parse_bytes("7B"), 7u);
  EXPECT_FALSE(parse_bytes(""));
  EXPECT_FALSE(parse_bytes("lots"));
  EXPECT_FALSE(parse_bytes("-1GiB"));
  EXPECT_FALSE(parse_bytes("2 GiBs"));
  EXPECT_FALSE(parse_bytes("1.5GiB"));
  EXPECT_FALSE(parse_bytes("99999999999999999999"));
  EXPECT_FALSE(parse_bytes("20000000TiB"));
}

// RESIDENT_POOL_LIMIT, read once: CTest runs this case with the variable unset, valid and bad.
TEST(pool_limit, environment_sets_every_pools_starting_limit) {
  const char* v = std::getenv("RESIDENT_POOL_LIMIT");
  const rs::device d = rs::device::cpu();
  if (!v || !*v || std::string(v) == "none") {  // unset, empty or "none": no limit
    EXPECT_FALSE(rs::pool_limit(d).has_value());
    return;
  }
  const auto bytes = rs::detail::parse_bytes(v);
  if (bytes && *bytes > 0) {
    EXPECT_EQ(rs::pool_limit(d), *bytes);
    EXPECT_THROW(rs::array<char>(*bytes + 1, d), rs::out_of_memory);
    rs::set_pool_limit(d, *bytes + 4096);  // the call overrides the variable
    EXPECT_EQ(rs::pool_limit(d), *bytes + 4096);
    rs::clear_pool_limit(d);
    EXPECT_NO_THROW(rs::array<char>(*bytes + 1, d));
    return;
  }
  try {
    (void)rs::pool_limit(d);
    FAIL() << "a bad RESIDENT_POOL_LIMIT was accepted";
  } catch (const rs::invalid_argument& e) {
    const std::string w = e.what();
    EXPECT_NE(w.find("RESIDENT_POOL_LIMIT"), std::string::npos) << w;
    EXPECT_NE(w.find(std::string("'") + v + "'"), std::string::npos) << w;
  }
  EXPECT_THROW(rs::array<char>(16, d), rs::invalid_argument);
  rs::set_pool_limit(d, std::size_t(1) << 30);  // an explicit limit does not need the variable
  EXPECT_NO_THROW(rs::array<char>(16, d));
  rs::clear_pool_limit(d);
}

// Copies between two GPUs: peer copies on the destination's stream, ordered by events, counted as
// peer bytes on the receiving device, allowed where host transfers are forbidden. The CPU instance
// checks the same rules on slices of one device (ordering, overlap refused).
using peer = backend;

TEST_P(peer, copies_between_two_gpus_are_peer_copies_ordered_by_events) {
  if (rs::cuda_device_count() < 2)
    GTEST_SKIP() << "needs two GPUs, " << rs::cuda_device_count() << " answer";
  const rs::device d0 = rs::device::cuda(0), d1 = rs::device::cuda(1);
  const std::size_t n = (std::size_t(48) << 20) + 3;  // 192 MiB and a tail: long enough to race
  auto h = rs::test::random_vector<float>(n, rs::test::fresh_seed());
  rs::stream s0(d0), s1(d1), s2(d0);
  auto a = rs::to_device(h, s0.ref());
  rs::array<float> b(n, s1.ref()), c(n, s2.ref());
  rs::copy(std::vector<float>(n, rs::test::poison<float>()), b);
  rs::copy(std::vector<float>(n, rs::test::poison<float>()), c);
  rs::scoped_ledger l0(d0), l1(d1);
  {
    rs::scoped_transfer_policy forbid(rs::transfer_policy::forbid);
    rs::copy(a, b);  // on s1 after s0's upload
    rs::copy(b, c);  // back on s2 (cuda:0) after the copy on s1: no host synchronization between
  }
  const auto t0 = l0.delta(), t1 = l1.delta();
  EXPECT_EQ(t1.peer_copies, 1u);
  EXPECT_EQ(t1.peer_bytes, n * sizeof(float));
  EXPECT_EQ(t0.peer_copies, 1u);
  EXPECT_EQ(t0.peer_bytes, n * sizeof(float));
  EXPECT_EQ(t0.h2d_copies + t0.d2h_copies + t0.d2d_copies + t1.h2d_copies + t1.d2h_copies + t1.d2d_copies, 0u);
  EXPECT_NE(t1.summary().find("peer 1 copy 192.0 MiB"), std::string::npos) << t1.summary();
  EXPECT_NE(t1.json().find("\"peer_copies\":1"), std::string::npos) << t1.json();
  EXPECT_EQ(c.to_host(), h);
  EXPECT_EQ(b.to_host(), h);
}

TEST_P(peer, source_may_be_freed_and_reused_right_after_a_peer_copy) {
  if (rs::cuda_device_count() < 2)
    GTEST_SKIP() << "needs two GPUs, " << rs::cuda_device_count() << " answer";
  const std::size_t n = std::size_t(32) << 20;
  auto h = rs::test::random_vector<float>(n, rs::test::fresh_seed());
  rs::stream s0(rs::device::cuda(0)), s1(rs::device::cuda(1));
  rs::array<float> b(n, s1.ref());
  {
    auto a = rs::to_device(h, s0.ref());
    rs::copy(a, b);
  }  // a is freed on s0, which waits for the copy on s1
  rs::array<float> reuse(n, s0.ref());  // likely a's memory again
  rs::copy(std::vector<float>(n, rs::test::poison<float>()), reuse);
  EXPECT_EQ(b.to_host(), h);
  // Slices of arrays on two GPUs copy the same way.
  auto whole = rs::to_device(h, s0.ref());
  rs::array<float> part(1000, s1.ref());
  rs::copy(whole.slice(n - 1000, 1000), part);
  EXPECT_EQ(part.to_host(), std::vector<float>(h.end() - 1000, h.end()));
}

TEST_P(peer, slices_copy_and_overlap) {
  auto h = rs::test::random_vector<float>(4096, rs::test::fresh_seed());
  auto a = rs::to_device(h, dev);
  rs::array<float> b(1024, dev);
  rs::copy(a.slice(1000, 1024), b);
  EXPECT_EQ(b.to_host(), std::vector<float>(h.begin() + 1000, h.begin() + 2024));
  rs::copy(b, a.slice(0, 1024));  // into a slice
  auto back = a.to_host();
  EXPECT_TRUE(std::equal(back.begin(), back.begin() + 1024, h.begin() + 1000));
  EXPECT_THROW(rs::copy(a.slice(0, 1024), a.slice(512, 1024)), rs::invalid_argument);
  EXPECT_THROW(rs::copy(a.slice(0, 1024), a.slice(0, 1000)), rs::shape_mismatch);
  rs::copy(a.slice(7, 100), a.slice(7, 100));  // onto itself: nothing
}

// Settings of the pool of a device that cannot be used are refused before they change anything: a
// limit or a caching switch half-set before its trim failed used to stay behind.
TEST(pool_settings, a_device_that_cannot_be_used_is_refused_before_anything_changes) {
  const rs::device gone = rs::device::cuda(rs::cuda_device_count());
  const auto limit = rs::pool_limit(gone);
  const bool caching = rs::pool_caching(gone);
  EXPECT_THROW(rs::set_pool_limit(gone, std::size_t(1) << 20), rs::device_unavailable);
  EXPECT_EQ(rs::pool_limit(gone), limit);
  EXPECT_THROW(rs::set_pool_caching(gone, !caching), rs::device_unavailable);
  EXPECT_EQ(rs::pool_caching(gone), caching);
  EXPECT_THROW(rs::trim_pool(gone), rs::device_unavailable);
  EXPECT_THROW((void)rs::pool_stats(gone), rs::device_unavailable);
}

// Under a limit of the bytes in use plus one allocation's bytes, that allocation is made.
TEST_P(pool, an_allocation_that_fills_the_limit_exactly_is_made) {
  rs::synchronize(dev);
  const std::size_t used = rs::pool_stats(dev).bytes_in_use;
  std::size_t one = 0;
  {
    rs::array<char> probe(std::size_t(1) << 20, dev);
    one = rs::pool_stats(dev).bytes_in_use - used;  // what the pool counts for it
  }
  rs::synchronize(dev);
  ASSERT_EQ(rs::pool_stats(dev).bytes_in_use, used);
  const auto before = rs::pool_limit(dev);
  rs::set_pool_limit(dev, used + one);
  EXPECT_NO_THROW(rs::array<char>(std::size_t(1) << 20, dev)) << "it fills the limit exactly";
  EXPECT_THROW(rs::array<char>(std::size_t(2) << 20, dev), rs::out_of_memory);
  if (before) rs::set_pool_limit(dev, *before);
  else rs::clear_pool_limit(dev);
}

RESIDENT_BACKENDS(pool);

RESIDENT_CUDA_ONLY(peer);  // peer copies join two GPUs; the CPU case is slices_copy_and_overlap

}  // namespace
