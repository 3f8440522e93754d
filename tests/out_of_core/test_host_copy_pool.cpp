// The worker threads that stage pageable host memory for out-of-core pipelines on a GPU. They are plain
// host code: tested here on every build, with or without a GPU. Host compiler only.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <future>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "../threads.hpp"
#include "resident/error.hpp"
#include "resident/out_of_core/detail/host_copy_pool.hpp"

namespace rd = resident::detail;

namespace {

std::vector<unsigned char> random_bytes(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 g(seed);
  std::vector<unsigned char> v(n);
  for (auto& b : v) b = static_cast<unsigned char>(g());
  return v;
}

std::uint64_t fresh_seed() { return std::random_device{}(); }

using resident::test::threads_after_joins;
using resident::test::threads_now;

constexpr unsigned char guard = 0xA5;

// Every alignment of source and destination within a line, every size up to a few lines, and large
// copies at every offset of one side: byte for byte as the source, nothing written outside.
TEST(copy_nontemporal, matches_the_source_at_every_alignment_and_size_and_writes_nothing_else) {
  const auto seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  constexpr std::size_t large = (std::size_t(1) << 20) + 17, pad = 128;
  const auto src = random_bytes(large + pad, seed);
  std::vector<unsigned char> dst(large + 2 * pad);
  const std::vector<unsigned char> guards(2 * pad, guard);
  auto check = [&](rd::nontemporal_stores how, std::size_t n, std::size_t so, std::size_t dof) {
    std::fill(dst.begin(), dst.begin() + std::ptrdiff_t(n + 2 * pad), guard);
    rd::copy_nontemporal(dst.data() + pad + dof, src.data() + so, n, how);
    ASSERT_EQ(std::memcmp(dst.data() + pad + dof, src.data() + so, n), 0)
        << n << " bytes, offsets " << so << " / " << dof << ", stores " << int(how);
    ASSERT_EQ(std::memcmp(dst.data(), guards.data(), pad + dof), 0) << "written before a copy of " << n;
    ASSERT_EQ(std::memcmp(dst.data() + pad + dof + n, guards.data(), pad - dof), 0) << "written after a copy of " << n;
  };
  for (auto how : {rd::nontemporal_stores::best, rd::nontemporal_stores::bytes16, rd::nontemporal_stores::bytes32}) {
    if (!rd::has_nontemporal_stores(how)) continue;
    for (std::size_t so = 0; so < 64; ++so)
      for (std::size_t dof = 0; dof < 64; ++dof)
        for (std::size_t n = 0; n <= 300; ++n) ASSERT_NO_FATAL_FAILURE(check(how, n, so, dof));
    for (std::size_t n : {std::size_t(4095), std::size_t(64) << 10, (std::size_t(64) << 10) + 1, large})
      for (std::size_t off = 0; off < 64; ++off)
        for (std::size_t other : {0, 7, 32}) {
          ASSERT_NO_FATAL_FAILURE(check(how, n, other, off));
          ASSERT_NO_FATAL_FAILURE(check(how, n, off, other));
        }
  }
  rd::copy_nontemporal(nullptr, nullptr, 0);  // nothing to copy: nothing touched
}

// Pieces cover the copy exactly, in order, cut only at the destination's page boundaries, as many as
// asked (or pages there are), their page counts within one of each other.
TEST(split_in_pages, cuts_whole_pages_of_the_destination_evenly) {
  constexpr std::size_t page = rd::copy_page_bytes;
  std::vector<unsigned char> buf(64 * page + 2 * page);
  const std::size_t lead = (page - reinterpret_cast<std::uintptr_t>(buf.data()) % page) % page;
  unsigned char* base = buf.data() + lead;  // page-aligned, 64 pages and more after it
  std::mt19937_64 g(fresh_seed());
  EXPECT_TRUE(rd::split_in_pages({base, base, 0}, 4).empty());
  for (int trial = 0; trial < 2000; ++trial) {
    const std::size_t dof = trial < 64 ? std::size_t(trial) * 64 : g() % page;
    const std::size_t n = trial % 7 == 0 ? g() % (2 * page) : g() % (62 * page) + 1;
    const std::size_t want = g() % 40;  // 0 counts as 1
    const rd::host_copy c{base + dof, buf.data() + g() % page, n, trial % 2 == 1};
    const auto pieces = rd::split_in_pages(c, want);
    if (n == 0) {
      EXPECT_TRUE(pieces.empty());
      continue;
    }
    const std::size_t head = std::min(n, (page - dof) % page);
    const std::size_t pages = (n - head + page - 1) / page;
    ASSERT_EQ(pieces.size(), std::clamp<std::size_t>(want, 1, std::max<std::size_t>(pages, 1)))
        << n << " bytes at " << dof << ", " << want << " asked";
    std::size_t at = 0, fewest = SIZE_MAX, most = 0;
    for (std::size_t i = 0; i < pieces.size(); ++i) {
      const auto& p = pieces[i];
      ASSERT_EQ(static_cast<unsigned char*>(p.dst), static_cast<unsigned char*>(c.dst) + at);
      ASSERT_EQ(static_cast<const unsigned char*>(p.src), static_cast<const unsigned char*>(c.src) + at);
      ASSERT_GT(p.bytes, 0u);
      ASSERT_EQ(p.plain, c.plain) << "a piece keeps its copy's stores";
      at += p.bytes;
      if (i + 1 < pieces.size()) {
        ASSERT_EQ(reinterpret_cast<std::uintptr_t>(base + dof + at) % page, 0u) << "cut inside a page";
      }
      // Pages from dst's first boundary: the first piece's head and the last's partial page aside.
      const std::size_t begin = i == 0 ? head : at - p.bytes;
      const std::size_t its = (at - begin + page - 1) / page;
      fewest = std::min(fewest, its);
      most = std::max(most, its);
    }
    ASSERT_EQ(at, n);
    if (pieces.size() > 1) {
      ASSERT_LE(most - fewest, 1u) << n << " bytes at " << dof << " in " << pieces.size();
    }
  }
}

TEST(copy_streaming, matches_memcpy_at_every_size_and_alignment_and_writes_nothing_else) {
  const auto seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const std::size_t sizes[] = {0, 1, 63, 64, 65, 4095, (64u << 10) - 1, 64u << 10, (64u << 10) + 1, (1u << 20) + 17};
  const auto src = random_bytes((1u << 20) + 17 + 256, seed);
  for (std::size_t n : sizes)
    for (std::size_t src_off : {0, 1, 16, 63})
      for (std::size_t dst_off : {0, 3, 32, 64}) {
        std::vector<unsigned char> dst(n + 256, guard);
        rd::copy_streaming(dst.data() + dst_off, src.data() + src_off, n);
        ASSERT_EQ(std::memcmp(dst.data() + dst_off, src.data() + src_off, n), 0)
            << n << " bytes, offsets " << src_off << " / " << dst_off;
        for (std::size_t i = 0; i < dst.size(); ++i) {
          const bool outside = i < dst_off || i >= dst_off + n;
          ASSERT_TRUE(!outside || dst[i] == guard) << "byte " << i << " of a copy of " << n;
        }
      }
}

TEST(host_copy_pool, copies_many_jobs_in_pieces_exactly) {
  const auto seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  for (int threads : {1, 2, 3, 8}) {
    SCOPED_TRACE(std::to_string(threads) + " threads");
    rd::host_copy_pool pool(threads, 4096, 2);
    EXPECT_EQ(pool.threads(), threads);
    // Jobs of one to three copies each, sizes not multiples of a piece, some empty.
    const std::size_t sizes[] = {0, 1, 4095, 4096, 4097, 3 * 4096 + 5, 100000, 1 << 20};
    std::vector<std::vector<unsigned char>> src, dst;
    std::vector<rd::host_copy_pool::job> jobs;
    std::uint64_t s = seed;
    for (int round = 0; round < 3; ++round)
      for (std::size_t a : sizes) {
        std::vector<rd::host_copy> copies;
        for (std::size_t b : {a, a / 3 + 7}) {
          src.push_back(random_bytes(b, s++));
          dst.emplace_back(b + 64, guard);
        }
        // Plain and streaming stores alike (staging in uses plain ones, draining out streaming ones).
        for (std::size_t i = src.size() - 2; i < src.size(); ++i)
          copies.push_back({dst[i].data() + 32, src[i].data(), src[i].size(), (i + std::size_t(round)) % 2 == 0});
        jobs.push_back(pool.submit(copies));
      }
    for (auto& j : jobs) pool.wait(j);
    for (std::size_t i = 0; i < src.size(); ++i) {
      ASSERT_TRUE(std::equal(src[i].begin(), src[i].end(), dst[i].begin() + 32)) << "copy " << i;
      for (std::size_t k = 0; k < 32; ++k) {
        ASSERT_EQ(dst[i][k], guard) << "copy " << i << " wrote before its destination";
        ASSERT_EQ(dst[i][32 + src[i].size() + k], guard) << "copy " << i << " wrote past its destination";
      }
    }
    pool.wait(rd::host_copy_pool::job{});  // a default job is done
  }
}

// The gate runs once per job, on a worker, before any piece: here it writes the source the pieces read.
TEST(host_copy_pool, a_gate_runs_once_before_its_pieces) {
  rd::host_copy_pool pool(4, 4096, 2);
  constexpr std::size_t n = 1 << 20;
  const auto seed = fresh_seed();
  const auto want = random_bytes(n, seed);
  std::vector<std::vector<unsigned char>> src(6, std::vector<unsigned char>(n, 0)), dst(6, std::vector<unsigned char>(n, guard));
  std::atomic<int> gates{0};
  const auto caller = std::this_thread::get_id();
  std::atomic<bool> on_caller{false};
  std::vector<rd::host_copy_pool::job> jobs;
  for (std::size_t j = 0; j < src.size(); ++j) {
    const rd::host_copy c{dst[j].data(), src[j].data(), n};
    jobs.push_back(pool.submit(std::span(&c, 1), [&, j] {
      on_caller = on_caller || std::this_thread::get_id() == caller;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      std::memcpy(src[j].data(), want.data(), n);
      ++gates;
    }));
  }
  for (auto& j : jobs) pool.wait(j);
  EXPECT_EQ(gates.load(), int(src.size()));
  EXPECT_FALSE(on_caller.load());
  for (const auto& d : dst) ASSERT_EQ(d, want) << "a piece ran before its gate, seed " << seed;
  // A gated job without copies ends once its gate has run.
  std::atomic<bool> ran{false};
  pool.wait(pool.submit({}, [&] { ran = true; }));
  EXPECT_TRUE(ran.load());
}

// A gate that throws (a failed wait for the device) fails its job with the same typed error, copies
// none of its pieces, and leaves the pool working.
TEST(host_copy_pool, a_throwing_gate_fails_its_job_only) {
  rd::host_copy_pool pool(3, 4096, 2);
  constexpr std::size_t n = 256 << 10;
  const auto src = random_bytes(n, fresh_seed());
  std::vector<unsigned char> failed(n, guard), fine(n, guard), later(n, guard);
  const rd::host_copy cf{failed.data(), src.data(), n}, cg{fine.data(), src.data(), n}, cl{later.data(), src.data(), n};
  auto bad = pool.submit(std::span(&cf, 1), [] { throw resident::device_lost(999, "cudaErrorFellOff", "the device fell off the bus"); });
  auto good = pool.submit(std::span(&cg, 1));
  try {
    pool.wait(bad);
    FAIL() << "the gate's error was lost";
  } catch (const resident::device_lost& e) {
    EXPECT_NE(std::string(e.what()).find("fell off"), std::string::npos);
  }
  EXPECT_THROW(pool.wait(bad), resident::device_lost);  // again: the same error
  pool.wait(good);
  EXPECT_EQ(std::memcmp(fine.data(), src.data(), n), 0);
  EXPECT_EQ(std::count(failed.begin(), failed.end(), guard), std::ptrdiff_t(n)) << "a failed job copied";
  pool.wait(pool.submit(std::span(&cl, 1)));
  EXPECT_EQ(std::memcmp(later.data(), src.data(), n), 0);
}

// cancel() waits for what runs and drops the rest: once it returns, nothing writes any job's memory.
TEST(host_copy_pool, cancel_drops_queued_jobs_and_waits_for_running_ones) {
  rd::host_copy_pool pool(2, 4096, 2);
  constexpr std::size_t n = 1 << 20;
  const auto src = random_bytes(n, fresh_seed());
  std::promise<void> open;
  std::shared_future<void> opened = open.get_future().share();
  std::atomic<int> gates_started{0};
  std::vector<std::vector<unsigned char>> dst(8, std::vector<unsigned char>(n, guard));
  std::vector<rd::host_copy_pool::job> jobs;
  for (auto& d : dst) {  // every job waits behind a gate until `open`
    const rd::host_copy c{d.data(), src.data(), n};
    jobs.push_back(pool.submit(std::span(&c, 1), [&] {
      ++gates_started;
      opened.wait();
    }));
  }
  while (gates_started < 2) std::this_thread::yield();  // both threads hold a gate
  std::thread opener([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    open.set_value();
  });
  pool.cancel();  // returns after the two gates, without copying anything
  opener.join();
  const auto snapshot = dst;
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(dst, snapshot) << "memory was written after cancel() returned";
  for (const auto& d : dst) EXPECT_EQ(std::count(d.begin(), d.end(), guard), std::ptrdiff_t(n));
  EXPECT_EQ(gates_started.load(), 2);
  for (auto& j : jobs) EXPECT_THROW(pool.wait(j), resident::error);
  const rd::host_copy c{dst[0].data(), src.data(), n};
  EXPECT_THROW(pool.submit(std::span(&c, 1)), resident::invalid_argument);
}

// ended() says without blocking whether a job is over; wait_any() returns once one of several is.
TEST(host_copy_pool, ended_and_wait_any_follow_each_job) {
  rd::host_copy_pool pool(2, 4096, 2);
  constexpr std::size_t n = 512 << 10;
  const auto src = random_bytes(n, fresh_seed());
  std::vector<unsigned char> held(n, guard), free(n, guard);
  std::promise<void> open;
  std::shared_future<void> opened = open.get_future().share();
  const rd::host_copy ch{held.data(), src.data(), n}, cf{free.data(), src.data(), n};
  auto a = pool.submit(std::span(&ch, 1), [&] { opened.wait(); });
  auto b = pool.submit(std::span(&cf, 1));
  const rd::host_copy_pool::job* both[] = {&a, &b};
  pool.wait_any(both);
  EXPECT_TRUE(pool.ended(b));
  EXPECT_FALSE(pool.ended(a));
  EXPECT_EQ(std::memcmp(free.data(), src.data(), n), 0);
  EXPECT_EQ(std::count(held.begin(), held.end(), guard), std::ptrdiff_t(n)) << "a piece ran before its gate";
  open.set_value();
  const rd::host_copy_pool::job* first[] = {&a};
  pool.wait_any(first);
  EXPECT_TRUE(pool.ended(a));
  EXPECT_EQ(std::memcmp(held.data(), src.data(), n), 0);
  EXPECT_TRUE(pool.ended(rd::host_copy_pool::job{}));
  pool.wait_any({});  // nothing to wait for
}

TEST(host_copy_pool, destruction_with_work_queued_joins_every_thread) {
  const std::size_t before = threads_now();
  constexpr std::size_t n = 4 << 20;
  const auto src = random_bytes(n, fresh_seed());
  std::vector<unsigned char> dst(n);
  {
    rd::host_copy_pool pool(6, 4096, 2);
    EXPECT_EQ(threads_now(), before + 6);
    const rd::host_copy c{dst.data(), src.data(), n};
    for (int i = 0; i < 20; ++i) pool.submit(std::span(&c, 1));
  }  // neither waited for nor cancelled
  EXPECT_EQ(threads_after_joins(before), before);
}

TEST(host_copy_pool, refuses_bad_sizes) {
  EXPECT_THROW(rd::host_copy_pool(0, 4096, 2), resident::invalid_argument);
  EXPECT_THROW(rd::host_copy_pool(-3, 4096, 2), resident::invalid_argument);
  EXPECT_THROW(rd::host_copy_pool(2, 0, 2), resident::invalid_argument);
  EXPECT_THROW(rd::host_copy_pool(2, 4096, 0), resident::invalid_argument);
}

}  // namespace
