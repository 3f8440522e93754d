// The transfer ledger and policies (scopes, threads, the environment) and timed regions.
#include <cstring>

#include <algorithm>
#include <chrono>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <numeric>
#include <sstream>
#include <thread>
#include <tuple>

#include "support.hpp"

namespace rs = resident;
using rs::test::backend;

namespace {

using ledger = backend;

TEST_P(ledger, counts_exactly) {
  const std::size_t n = 3 << 20;
  auto h = rs::test::random_vector<float>(n, rs::test::fresh_seed());
  rs::scoped_ledger l(dev);
  auto a = rs::to_device(h, dev);
  rs::array<float> b(n, dev);
  rs::copy(a, b);
  auto back = b.to_host();
  auto d = l.delta();
  EXPECT_EQ(d.h2d_copies, 1u);
  EXPECT_EQ(d.h2d_bytes, n * sizeof(float));
  EXPECT_EQ(d.d2h_copies, 1u);
  EXPECT_EQ(d.d2h_bytes, n * sizeof(float));
  EXPECT_EQ(d.d2d_copies, 1u);
  EXPECT_EQ(d.d2d_bytes, n * sizeof(float));
  EXPECT_EQ(d.kernels, 0u);
  EXPECT_EQ(d.allocations, 2u);
  EXPECT_GE(d.peak_bytes, 2 * n * sizeof(float));
  EXPECT_NE(d.summary().find("H2D 1 copy 12.0 MiB"), std::string::npos) << d.summary();
  EXPECT_NE(rs::ledger().json().find("\"" + dev.name() + "\""), std::string::npos);
}

TEST_P(ledger, forbid_throws_and_names_the_transfer) {
  auto h = rs::test::random_vector<float>(256, rs::test::fresh_seed());
  auto a = rs::to_device(h, dev);
  rs::array<float> b(h.size(), dev);
  {
    rs::scoped_transfer_policy p(rs::transfer_policy::forbid);
    rs::copy(a, b);  // device-to-device: allowed
    try {
      auto back = a.to_host();
      FAIL() << "a download passed under forbid";
    } catch (const rs::transfer_forbidden& e) {
      EXPECT_NE(std::string(e.what()).find("device-to-host transfer of 1.0 KiB"), std::string::npos) << e.what();
    }
    EXPECT_THROW(rs::to_device(h, dev), rs::transfer_forbidden);
  }
  EXPECT_EQ(rs::current_transfer_policy(), rs::transfer_policy::allow);
  EXPECT_EQ(b.to_host(), h);
}

// Copies of nothing, and copies of an array onto itself, move nothing and count nothing.
TEST_P(ledger, empty_and_self_copies_count_nothing) {
  auto h = rs::test::random_vector<float>(1000, rs::test::fresh_seed());
  auto a = rs::to_device(h, dev);
  rs::array<float> e(0, dev);
  rs::pinned_buffer<float> none;
  rs::scoped_ledger l(dev);
  auto empty = rs::to_device(std::vector<float>{}, dev);
  EXPECT_TRUE(empty.to_host().empty());
  rs::copy(a, a);
  rs::copy(e, empty);
  rs::copy(std::span<const float>(), e);
  e.to_host_async(none);
  rs::copy_async(std::span<const float>(), a.slice(10, 0));
  rs::copy_async(a.slice(1000, 0), std::span<float>());
  auto d = l.delta();
  EXPECT_EQ(d.h2d_copies, 0u);
  EXPECT_EQ(d.h2d_bytes, 0u);
  EXPECT_EQ(d.d2h_copies, 0u);
  EXPECT_EQ(d.d2h_bytes, 0u);
  EXPECT_EQ(d.d2d_copies, 0u);
  EXPECT_EQ(d.d2d_bytes, 0u);
  EXPECT_EQ(a.to_host(), h);
  {
    rs::scoped_transfer_policy p(rs::transfer_policy::forbid);  // nothing crosses the bus
    EXPECT_NO_THROW(rs::to_device(std::vector<float>{}, dev));
  }
}

TEST(per_device, indices_beyond_the_table_are_refused) {
  // The ledger and the pools keep one slot per device: an index past the table is an error, never a
  // write past it.
  for (int i : {64, 65, 1 << 20}) {
    EXPECT_THROW(rs::ledger(rs::device::cuda(i)), rs::invalid_argument) << i;
    try {
      rs::ledger(rs::device::cuda(i));
    } catch (const rs::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("beyond the 64 devices"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("per_device.hpp:"), std::string::npos) << e.what();  // the raising site
    }
  }
  EXPECT_NO_THROW(rs::ledger(rs::device::cpu()));
}

TEST(ledger_print, ends_with_a_newline) {
  auto a = rs::to_device(std::vector<float>{1.f, 2.f}, rs::device::cpu());
  std::ostringstream os;
  os << rs::ledger();
  const std::string s = os.str();
  ASSERT_FALSE(s.empty());
  EXPECT_EQ(s.back(), '\n') << s;
  std::ostringstream one;
  one << rs::ledger(rs::device::cpu());
  ASSERT_FALSE(one.str().empty());
  EXPECT_EQ(one.str().back(), '\n') << one.str();
  EXPECT_NE(one.str().find("H2D "), std::string::npos) << one.str();
}

// The policy a scope sets is its thread's: scopes opened and closed on two threads in an interleaved
// order leave each thread, and the process, as they were.
TEST(transfer_policy, scopes_belong_to_their_thread) {
  ASSERT_EQ(rs::current_transfer_policy(), rs::transfer_policy::allow);
  std::mutex m;
  std::condition_variable cv;
  int step = 0;
  auto wait_for = [&](int k) {
    std::unique_lock lock(m);
    cv.wait(lock, [&] { return step >= k; });
  };
  auto advance = [&] {
    {
      std::lock_guard lock(m);
      ++step;
    }
    cv.notify_all();
  };
  rs::transfer_policy a_inside = rs::transfer_policy::allow, b_inside = rs::transfer_policy::forbid;
  rs::transfer_policy b_after_a_closed = rs::transfer_policy::forbid, b_after = rs::transfer_policy::forbid;
  bool b_upload_passed = false;
  std::thread a([&] {
    {
      rs::scoped_transfer_policy p(rs::transfer_policy::forbid);
      advance();  // 1: A's scope is open
      wait_for(2);
      a_inside = rs::current_transfer_policy();
    }
    advance();  // 3: A's scope is closed
  });
  std::thread b([&] {
    wait_for(1);
    {
      rs::scoped_transfer_policy p(rs::transfer_policy::allow);
      b_inside = rs::current_transfer_policy();
      advance();  // 2: B's scope is open
      wait_for(3);
      b_after_a_closed = rs::current_transfer_policy();
      b_upload_passed = rs::to_device(std::vector<float>{1.f}, rs::device::cpu()).size() == 1;
    }
    b_after = rs::current_transfer_policy();
  });
  a.join();
  b.join();
  EXPECT_EQ(a_inside, rs::transfer_policy::forbid);
  EXPECT_EQ(b_inside, rs::transfer_policy::allow);
  EXPECT_EQ(b_after_a_closed, rs::transfer_policy::allow);
  EXPECT_TRUE(b_upload_passed);
  EXPECT_EQ(b_after, rs::transfer_policy::allow);
  EXPECT_EQ(rs::current_transfer_policy(), rs::transfer_policy::allow);

  // Another thread's open forbid scope does not reach this one.
  std::atomic<bool> open{false}, done{false};
  std::thread c([&] {
    rs::scoped_transfer_policy p(rs::transfer_policy::forbid);
    open = true;
    while (!done) std::this_thread::yield();
  });
  while (!open) std::this_thread::yield();
  EXPECT_EQ(rs::current_transfer_policy(), rs::transfer_policy::allow);
  EXPECT_NO_THROW(rs::to_device(std::vector<float>{1.f, 2.f}, rs::device::cpu()));
  done = true;
  c.join();
}

// RESIDENT_TRANSFER_POLICY sets the process default; a scope overrides it on its thread.
TEST(transfer_policy, environment_sets_the_process_default) {
  struct env_guard {
    explicit env_guard(const char* v) {
      if (v) setenv("RESIDENT_TRANSFER_POLICY", v, 1);
      else unsetenv("RESIDENT_TRANSFER_POLICY");
    }
    ~env_guard() { unsetenv("RESIDENT_TRANSFER_POLICY"); }
  };
  const std::vector<float> h{1.f, 2.f, 3.f};
  {
    env_guard g("forbid");
    EXPECT_EQ(rs::default_transfer_policy(), rs::transfer_policy::forbid);
    EXPECT_EQ(rs::current_transfer_policy(), rs::transfer_policy::forbid);
    EXPECT_THROW(rs::to_device(h, rs::device::cpu()), rs::transfer_forbidden);
    {
      rs::scoped_transfer_policy p(rs::transfer_policy::allow);
      EXPECT_EQ(rs::to_device(h, rs::device::cpu()).to_host(), h);
    }
    EXPECT_EQ(rs::current_transfer_policy(), rs::transfer_policy::forbid);
  }
  {
    env_guard g("log");
    EXPECT_EQ(rs::current_transfer_policy(), rs::transfer_policy::log);
  }
  {
    env_guard g("allow");
    EXPECT_EQ(rs::current_transfer_policy(), rs::transfer_policy::allow);
  }
  {
    env_guard g("sometimes");
    try {
      (void)rs::current_transfer_policy();
      FAIL() << "a bad RESIDENT_TRANSFER_POLICY was accepted";
    } catch (const rs::invalid_argument& e) {
      const std::string w = e.what();
      EXPECT_NE(w.find("RESIDENT_TRANSFER_POLICY"), std::string::npos) << w;
      EXPECT_NE(w.find("'sometimes'"), std::string::npos) << w;
      EXPECT_NE(w.find("allow, log or forbid"), std::string::npos) << w;
    }
    EXPECT_THROW(rs::to_device(h, rs::device::cpu()), rs::invalid_argument);
    rs::scoped_transfer_policy p(rs::transfer_policy::allow);  // a scope does not need the default
    EXPECT_EQ(rs::to_device(h, rs::device::cpu()).to_host(), h);
  }
  EXPECT_EQ(rs::current_transfer_policy(), rs::transfer_policy::allow);
}

TEST_P(ledger, log_policy_reports_and_lets_the_transfer_through) {
  auto h = rs::test::random_vector<float>(300, rs::test::fresh_seed());
  ::testing::internal::CaptureStderr();
  rs::array<float> a(h.size(), dev);
  {
    rs::scoped_transfer_policy p(rs::transfer_policy::log);
    rs::copy(std::span<const float>(h), a);
  }
  const std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(said.find("host-to-device transfer of 1.2 KiB on " + dev.name()), std::string::npos) << said;
  EXPECT_EQ(a.to_host(), h);
}

using timings = backend;

TEST_P(timings, regions_are_timed_sorted_and_positive) {
  rs::stream s(dev);
  {
    auto a = rs::to_device(rs::test::random_vector<float>(1 << 20, rs::test::fresh_seed()), s.ref());
    rs::array<float> b(a.size(), s.ref());
    int calls = 0;
    auto t = rs::time_region(s.ref(), 7, 2, [&] {
      ++calls;
      rs::copy(a, b);
    });
    EXPECT_EQ(calls, 9) << "2 warm-up calls and 7 timed ones";
    ASSERT_EQ(t.ms.size(), 7u);
    EXPECT_TRUE(std::is_sorted(t.ms.begin(), t.ms.end()));
    EXPECT_GT(t.min(), 0.0);
    EXPECT_LE(t.min(), t.median());
    EXPECT_LE(t.median(), t.max());
    calls = 0;
    auto per_call = rs::time_batched(s.ref(), 3, 1, 5, [&] {
      ++calls;
      rs::copy(a, b);
    });
    EXPECT_EQ(calls, (1 + 3) * 5);
    ASSERT_EQ(per_call.ms.size(), 3u);
    EXPECT_GT(per_call.median(), 0.0);
  }
  s.synchronize();
}

// A transfer policy that is none of allow, log, forbid (a value cast from an int) is refused when the
// scope is opened rather than letting every transfer through.
TEST(transfer_policy, a_policy_outside_the_enumeration_is_refused) {
  try {
    rs::scoped_transfer_policy p(static_cast<rs::transfer_policy>(7));
    FAIL() << "a scope of policy 7 was opened";
  } catch (const rs::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("allow, log or forbid"), std::string::npos) << e.what();
  }
  // The refused scope left nothing open.
  rs::scoped_transfer_policy outer(rs::transfer_policy::forbid);
  EXPECT_EQ(rs::current_transfer_policy(), rs::transfer_policy::forbid);
}

// Many threads moving bytes at once: every copy counted exactly once, and each thread's scope of
// forbid refuses its own transfers only.
TEST_P(ledger, many_threads_count_exactly_and_keep_their_own_policy) {
  const int threads = 8, each = 50;
  const std::size_t n = 1000;
  rs::scoped_ledger l(dev);
  std::atomic<int> refused{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      std::vector<float> h(n, float(t));
      rs::stream s(dev);
      rs::array<float> a(n, s.ref());
      for (int i = 0; i < each; ++i) {
        if (t % 2) {
          rs::scoped_transfer_policy forbid(rs::transfer_policy::forbid);
          try {
            rs::copy(std::span<const float>(h), a);
          } catch (const rs::transfer_forbidden&) {
            ++refused;
          }
        } else {
          rs::copy(std::span<const float>(h), a);
          h = a.to_host();
        }
      }
      // Each thread moved its own values (t): another thread's would show here.
      if (t % 2 == 0) {
        const std::vector<float> back = a.to_host();
        EXPECT_EQ(std::count(back.begin(), back.end(), float(t)), std::ptrdiff_t(n)) << "thread " << t;
      }
    });
  for (auto& th : pool) th.join();
  rs::synchronize(dev);
  const auto d = l.delta();
  EXPECT_EQ(refused.load(), threads / 2 * each);
  EXPECT_EQ(d.h2d_copies, std::uint64_t(threads / 2 * each));
  EXPECT_EQ(d.d2h_copies, std::uint64_t(threads / 2 * (each + 1)));  // each + the check's download
  EXPECT_EQ(d.h2d_bytes, std::uint64_t(threads / 2 * each) * n * sizeof(float));
}

// Scopes closed out of order on their thread (held in unique_ptrs, optionals): each takes its own
// policy away and the innermost still open rules; none leaves the thread stuck in a closed one's.
TEST(transfer_policy, scopes_closed_out_of_order_leave_the_innermost_open_one_in_force) {
  ASSERT_EQ(rs::current_transfer_policy(), rs::transfer_policy::allow);
  auto outer = std::make_unique<rs::scoped_transfer_policy>(rs::transfer_policy::forbid);
  auto inner = std::make_unique<rs::scoped_transfer_policy>(rs::transfer_policy::log);
  outer.reset();  // the outer one first: the inner one still rules
  EXPECT_EQ(rs::current_transfer_policy(), rs::transfer_policy::log);
  inner.reset();
  EXPECT_EQ(rs::current_transfer_policy(), rs::transfer_policy::allow);  // not the closed forbid
  EXPECT_NO_THROW(rs::to_device(std::vector<float>{1.f}, rs::device::cpu()));

  auto a = std::make_unique<rs::scoped_transfer_policy>(rs::transfer_policy::log);
  auto b = std::make_unique<rs::scoped_transfer_policy>(rs::transfer_policy::forbid);
  auto c = std::make_unique<rs::scoped_transfer_policy>(rs::transfer_policy::allow);
  b.reset();  // from the middle
  EXPECT_EQ(rs::current_transfer_policy(), rs::transfer_policy::allow);
  c.reset();
  EXPECT_EQ(rs::current_transfer_policy(), rs::transfer_policy::log);
  a.reset();
  EXPECT_EQ(rs::current_transfer_policy(), rs::transfer_policy::allow);
  // A scope closed on another thread (Python may collect its object anywhere): its own thread is
  // back to its outer policy on the next look, and the closing thread is untouched.
  std::unique_ptr<rs::scoped_transfer_policy> theirs;
  std::atomic<int> step{0};
  rs::transfer_policy before_close{}, after_close{};
  std::thread t([&] {
    rs::scoped_transfer_policy own(rs::transfer_policy::log);
    theirs = std::make_unique<rs::scoped_transfer_policy>(rs::transfer_policy::forbid);
    before_close = rs::current_transfer_policy();
    step = 1;
    while (step != 2) std::this_thread::yield();
    after_close = rs::current_transfer_policy();
  });
  while (step != 1) std::this_thread::yield();
  rs::scoped_transfer_policy mine(rs::transfer_policy::allow);
  theirs.reset();
  EXPECT_EQ(rs::current_transfer_policy(), rs::transfer_policy::allow);
  step = 2;
  t.join();
  EXPECT_EQ(before_close, rs::transfer_policy::forbid);
  EXPECT_EQ(after_close, rs::transfer_policy::log);
}

// Reading a device's counts is not using it: the snapshot of every device lists only devices that
// moved, launched or allocated something.
TEST(ledger_snapshot, reading_a_device_does_not_list_it) {
  const rs::device unused = rs::device::cuda(63);  // the last the table holds, on no machine here
  // A device the machine lacks is a typed error, not zeros (docs/security.md), and is not listed after.
  EXPECT_THROW((void)rs::ledger(unused), rs::device_unavailable);
  EXPECT_THROW(rs::scoped_ledger{unused}, rs::device_unavailable);
  for (const auto& [d, c] : rs::ledger().devices) EXPECT_FALSE(d == unused) << d.name();
  EXPECT_EQ(rs::ledger().json().find(unused.name()), std::string::npos) << rs::ledger().json();
}

RESIDENT_BACKENDS(timings);

RESIDENT_BACKENDS(ledger);

// Each count under its own key in the JSON.
TEST(ledger_print, the_json_writes_each_count_under_its_own_key) {
  rs::ledger_counts c;
  c.h2d_bytes = 11; c.h2d_copies = 1; c.d2h_bytes = 22; c.d2h_copies = 2; c.d2d_bytes = 33; c.d2d_copies = 3;
  c.kernels = 4; c.allocations = 5; c.pool_hits = 6; c.peak_bytes = 77;
  const std::string j = c.json();
  for (const char* kv : {"\"h2d_bytes\":11,", "\"h2d_copies\":1,", "\"d2h_bytes\":22,", "\"d2h_copies\":2,",
                         "\"d2d_bytes\":33,", "\"d2d_copies\":3,", "\"kernels\":4,", "\"allocations\":5,",
                         "\"pool_hits\":6,", "\"peak_bytes\":77,"})
    EXPECT_NE(j.find(kv), std::string::npos) << kv << " in " << j;
}

}  // namespace
