#include <cstring>
#include <algorithm>
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

using arrays = backend;

TEST_P(arrays, round_trip_sizes) {
  for (std::size_t n : {std::size_t(0), std::size_t(1), std::size_t(7), std::size_t(1000003),
                        std::size_t(5) << 20}) {
    std::uint64_t seed = rs::test::fresh_seed();
    SCOPED_TRACE("n = " + std::to_string(n) + ", seed = " + std::to_string(seed));
    auto host = rs::test::random_vector<float>(n, seed);
    rs::array<float> a = rs::to_device(host, dev);
    EXPECT_EQ(a.size(), n);
    EXPECT_EQ(a.device(), dev);
    std::vector<float> back(n, rs::test::poison<float>());
    a.to_host(std::span<float>(back));
    EXPECT_EQ(back, host);
  }
}

TEST_P(arrays, other_types_and_copies) {
  auto seed = rs::test::fresh_seed();
  auto h = rs::test::random_vector<double>(4097, seed, -1e6, 1e6);
  auto a = rs::to_device(h, dev);
  rs::array<double> b(h.size(), dev);
  rs::copy(a, b);
  EXPECT_EQ(b.to_host(), h);
  auto c = rs::copy_to(a, rs::device::cpu());
  EXPECT_EQ(c.to_host(), h);
  auto d = rs::copy_to(c, dev);
  EXPECT_EQ(d.to_host(), h);

  std::vector<std::int32_t> ints(999);
  std::iota(ints.begin(), ints.end(), -500);
  EXPECT_EQ(rs::to_device(ints, dev).to_host(), ints);
}

TEST_P(arrays, pinned_async_download) {
  auto h = rs::test::random_vector<float>(3 << 20, rs::test::fresh_seed());
  rs::pinned_buffer<float> up(h.size());
  std::copy(h.begin(), h.end(), up.begin());
  rs::stream s(dev);
  {
    auto a = rs::to_device(up, s.ref());
    rs::pinned_buffer<float> down(h.size());
    std::fill(down.begin(), down.end(), rs::test::poison<float>());
    a.to_host_async(down);
    s.synchronize();
    EXPECT_TRUE(std::equal(h.begin(), h.end(), down.begin()));
    EXPECT_EQ(down.page_locked(), dev.is_cuda() || rs::cuda_device_count() > 0);
  }
  s.synchronize();
}

TEST_P(arrays, two_dimensional_with_leading_dimension) {
  const std::size_t rows = 37, cols = 53;
  auto h = rs::test::random_vector<float>(rows * cols, rs::test::fresh_seed());
  auto a = rs::to_device(std::span<const float>(h), rows, cols, dev);
  EXPECT_EQ(a.rows(), rows);
  EXPECT_EQ(a.cols(), cols);
  EXPECT_EQ(a.ld(), cols);
  EXPECT_EQ(a.to_host(), h);

  rs::array2d<float> p(rows, cols, dev, 64);
  EXPECT_EQ(p.ld(), 64u);
  EXPECT_EQ(p.storage().size(), rows * 64);
  auto view = p.view();
  EXPECT_EQ(view.rows(), rows);
  EXPECT_EQ(view.ld(), 64u);
  EXPECT_THROW(rs::array2d<float>(3, 10, dev, 9), rs::invalid_argument);
  EXPECT_THROW(rs::to_device(std::span<const float>(h), rows + 1, cols, dev), rs::shape_mismatch);
}

TEST_P(arrays, moved_from_and_bad_sizes_throw) {
  auto a = rs::to_device(std::vector<float>{1.f, 2.f, 3.f}, dev);
  rs::array<float> b = std::move(a);
  EXPECT_THROW(a.view(), rs::invalid_argument);
  EXPECT_THROW(a.to_host(), rs::invalid_argument);
  std::vector<float> small(2);
  EXPECT_THROW(b.to_host(std::span<float>(small)), rs::shape_mismatch);
  rs::array<float> c(4, dev);
  EXPECT_THROW(rs::copy(b, c), rs::shape_mismatch);
  EXPECT_THROW(rs::array<double>(rs::array<double>::max_size() + 1, dev), rs::invalid_argument);
  try {
    std::vector<float> wrong(5);
    b.to_host(std::span<float>(wrong));
  } catch (const rs::shape_mismatch& e) {
    EXPECT_NE(std::string(e.what()).find("holds 5 elements, array 3"), std::string::npos) << e.what();
  }
}

// Host memory given as a null pointer with elements would be read or written at address 0: every
// transfer between a span and an array refuses it before any work (nothing allocated, nothing moved).
TEST_P(arrays, null_host_memory_is_refused_before_any_work) {
  const std::size_t n = 1000;
  auto x = rs::to_device(rs::test::random_vector<float>(n, rs::test::fresh_seed()), dev);
  const auto before = x.to_host();
  const std::span<float> none(static_cast<float*>(nullptr), n);
  const std::span<const float> none_in(static_cast<const float*>(nullptr), n);
  const char* says = "null pointer with 1000 elements";
  const auto pool = rs::pool_stats(dev);
  rs::test::expect_invalid([&] { rs::to_device(none_in, dev); }, says);
  rs::test::expect_invalid([&] { rs::to_device(none_in, 10, 100, dev); }, says);
  rs::test::expect_invalid([&] { x.to_host(none); }, says);
  rs::test::expect_invalid([&] { rs::copy(none_in, x); }, says);
  rs::test::expect_invalid([&] { rs::copy_async(none_in, x); }, says);
  rs::test::expect_invalid([&] { rs::copy_async(x, none); }, says);
  EXPECT_EQ(rs::pool_stats(dev).bytes_in_use, pool.bytes_in_use);
  EXPECT_EQ(x.to_host(), before);
  // No elements: nothing to read or write, at any address.
  rs::copy_async(std::span<const float>(), x.slice(0, 0));
  EXPECT_EQ(rs::to_device(std::span<const float>(), dev).size(), 0u);
}

// Sizes whose byte counts wrap or cannot exist are refused before anything is allocated: a wrapped
// count once reached the pool as a tiny block that the array then overran.
TEST_P(arrays, sizes_that_cannot_be_allocated_are_refused_before_allocating) {
  const auto before = rs::pool_stats(dev);
  auto expect_oom = [&](auto make, std::size_t bytes) {
    try {
      make();
      ADD_FAILURE() << "allocated " << bytes << " bytes";
    } catch (const rs::out_of_memory& e) {
      EXPECT_EQ(e.requested(), bytes);
      EXPECT_NE(std::string(e.what()).find(std::to_string(bytes) + " bytes"), std::string::npos) << e.what();
    }
  };
  const std::size_t all = std::size_t(-1);
  expect_oom([&] { rs::array<std::uint8_t> a(all, dev); }, all);
  expect_oom([&] { rs::array<float> a(all / 4, dev); }, all / 4 * 4);
  expect_oom([&] { rs::array<double> a(all / 8 - 1, dev); }, (all / 8 - 1) * 8);
  expect_oom([&] { rs::array2d<std::uint8_t> a(std::size_t(1) << 32, (std::size_t(1) << 32) - 1, dev); },
             (std::size_t(1) << 32) * ((std::size_t(1) << 32) - 1));
  rs::stream s(dev);
  expect_oom([&] { rs::array<char> a(all - 100, s.ref()); }, all - 100);
  EXPECT_THROW(rs::array<float>(all / 2, dev), rs::invalid_argument);
  EXPECT_THROW(rs::array2d<float>(std::size_t(1) << 40, std::size_t(1) << 40, dev), rs::invalid_argument);
  EXPECT_THROW(rs::array2d<float>(3, 4, dev, all), rs::invalid_argument);
  // rows * cols wraps to 0, which an empty host buffer would match.
  EXPECT_THROW(rs::to_device(std::span<const float>(), std::size_t(1) << 32, std::size_t(1) << 32, dev),
               rs::invalid_argument);
  const auto after = rs::pool_stats(dev);
  EXPECT_EQ(after.outstanding, before.outstanding);
  EXPECT_EQ(after.bytes_in_use, before.bytes_in_use);
  auto h = rs::test::random_vector<float>(1000, rs::test::fresh_seed());
  EXPECT_EQ(rs::to_device(h, dev).to_host(), h);
}

// A moved-from owner of any kind throws on use; its figures read 0; destroying it and assigning onto
// it stay safe.
TEST_P(arrays, moved_from_two_dimensional_arrays_and_pinned_buffers_throw) {
  rs::array2d<float> m(3, 4, dev, 6);
  rs::array2d<float> n = std::move(m);
  EXPECT_EQ(n.rows(), 3u);
  EXPECT_EQ(n.ld(), 6u);
  EXPECT_EQ(m.rows(), 0u);
  EXPECT_EQ(m.cols(), 0u);
  EXPECT_EQ(m.ld(), 0u);
  EXPECT_EQ(m.size(), 0u);
  EXPECT_EQ(m.data(), nullptr);
  EXPECT_THROW(m.view(), rs::invalid_argument);
  EXPECT_THROW(m.to_host(), rs::invalid_argument);
  rs::array2d<float> o;
  o = std::move(n);
  EXPECT_EQ(n.rows(), 0u);
  EXPECT_THROW(n.view(), rs::invalid_argument);
  m = std::move(o);  // assigning onto a moved-from array makes it usable again
  EXPECT_EQ(m.rows(), 3u);
  EXPECT_NO_THROW(m.view());

  rs::pinned_buffer<float> p(8);
  rs::pinned_buffer<float> q = std::move(p);
  EXPECT_EQ(p.size(), 0u);
  EXPECT_EQ(p.data(), nullptr);
  try {
    (void)p.span();
    ADD_FAILURE() << "span() of a moved-from pinned buffer";
  } catch (const rs::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("moved-from pinned_buffer"), std::string::npos) << e.what();
  }
  rs::stream s(dev);
  EXPECT_THROW(rs::to_device(p, s.ref()), rs::invalid_argument);
  rs::array<float> empty(0, dev);
  EXPECT_THROW(empty.to_host_async(p), rs::invalid_argument);
  p = std::move(q);
  EXPECT_EQ(p.size(), 8u);
  EXPECT_NO_THROW(p.span());
}

TEST_P(arrays, two_dimensional_upload_from_a_vector) {
  const std::size_t rows = 5, cols = 7;
  auto h = rs::test::random_vector<float>(rows * cols, rs::test::fresh_seed());
  auto a = rs::to_device(h, rows, cols, dev);
  EXPECT_EQ(a.rows(), rows);
  EXPECT_EQ(a.cols(), cols);
  EXPECT_EQ(a.device(), dev);
  EXPECT_EQ(a.to_host(), h);
  rs::stream s(dev);
  {
    auto b = rs::to_device(h, rows, cols, s.ref());
    EXPECT_EQ(b.stream().native(), s.ref().native());
    EXPECT_EQ(b.to_host(), h);
  }
  s.synchronize();
  EXPECT_THROW(rs::to_device(h, rows, cols + 1, dev), rs::shape_mismatch);
}

TEST(pinned, sizes_whose_bytes_wrap_are_refused) {
  // n * 8 wraps to 8 bytes; n * 4 wraps to 0 (which gave a null buffer of 2^62 elements).
  try {
    rs::pinned_buffer<double> p((std::size_t(1) << 61) + 1);
    FAIL() << "a pinned buffer of 2^61 + 1 doubles";
  } catch (const rs::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("overflows the byte count"), std::string::npos) << e.what();
  }
  EXPECT_THROW(rs::pinned_buffer<float>(std::size_t(1) << 62), rs::invalid_argument);
  // Representable, but rounding it up to the alignment wraps.
  try {
    rs::pinned_buffer<char> p(std::size_t(-1));
    FAIL() << "a pinned buffer of 2^64 - 1 bytes";
  } catch (const rs::out_of_memory& e) {
    EXPECT_EQ(e.requested(), std::size_t(-1));
  }
  rs::pinned_buffer<double> ok(100);
  ASSERT_NE(ok.data(), nullptr);
  for (std::size_t i = 0; i < ok.size(); ++i) ok[i] = double(i);
  EXPECT_EQ(ok[99], 99.0);
}

TEST_P(arrays, zero_size_does_no_device_work) {
  rs::scoped_ledger l(dev);
  rs::array<float> a(0, dev);
  EXPECT_TRUE(a.empty());
  EXPECT_EQ(a.data(), nullptr);
  EXPECT_TRUE(a.to_host().empty());
  auto d = l.delta();
  EXPECT_EQ(d.allocations, 0u);
  EXPECT_EQ(d.kernels, 0u);
  EXPECT_EQ(d.h2d_bytes + d.d2h_bytes, 0u);
}

using pool = backend;

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

TEST(array_view, out_of_bounds_stops_in_debug_builds) {
  if constexpr (!rs::debug_checks) {
    GTEST_SKIP() << "bounds checks are on in builds with RESIDENT_DEBUG (the debug preset)";
  } else {
    std::vector<int> v(4, 1);
    rs::array_view<int> view(v.data(), v.size());
    EXPECT_EQ(view[3], 1);
    EXPECT_DEATH(view[4], "index 4 out of bounds for extent 4");
    EXPECT_EQ(view.subview(4, 0).size(), 0u);
    // offset + count wraps to 1: still refused.
    EXPECT_DEATH((void)view.subview(2, std::size_t(-1)), "out of bounds for extent 4");
    rs::array2d_view<int> m(v.data(), 2, 2, 2);
    EXPECT_DEATH(m(0, 2), "index 2 out of bounds for extent 2");
  }
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

// A slice of a slice is checked against the slice (not the array) and lands on the array's elements.
TEST_P(arrays, slices_of_slices_are_checked_against_their_parent) {
  std::vector<int> h(100);
  std::iota(h.begin(), h.end(), 0);
  auto a = rs::to_device(h, dev);
  auto outer = a.slice(10, 50);
  auto inner = outer.slice(5, 20);
  EXPECT_EQ(inner.data(), a.data() + 15);
  EXPECT_EQ(inner.size(), 20u);
  EXPECT_EQ(inner.stream().native(), a.stream().native());
  auto innermost = inner.slice(19, 1);
  std::vector<int> one(1);
  rs::copy_async(innermost, std::span<int>(one));
  rs::synchronize(dev);
  EXPECT_EQ(one[0], 34);
  EXPECT_EQ(outer.slice(50, 0).size(), 0u);  // empty at the end
  // Inside the array but outside the slice.
  rs::test::expect_invalid([&] { (void)outer.slice(45, 10); }, "is outside a slice of 50 elements");
  rs::test::expect_invalid([&] { (void)outer.slice(51, 0); }, "outside a slice of 50");
  rs::test::expect_invalid([&] { (void)outer.slice(std::size_t(-1), 2); }, "outside a slice of 50");
  rs::test::expect_invalid([&] { (void)a.slice(101, 0); }, "outside an array of 100");
  rs::test::expect_invalid([&] { (void)a.slice(2, std::size_t(-1)); }, "outside an array of 100");
}

// Host memory that partly overlaps the array it is copied to or from (on the CPU, where host memory
// can be an array's own) is refused before anything moves; the same memory is no copy at all.
TEST(arrays_cpu, host_memory_overlapping_the_array_is_refused) {
  const rs::device cpu = rs::device::cpu();
  std::vector<float> h(64);
  std::iota(h.begin(), h.end(), 0.f);
  auto a = rs::to_device(h, cpu);
  rs::scoped_ledger l(cpu);
  std::span<float> shifted(a.data() + 1, 63);
  EXPECT_THROW(rs::copy_async(std::span<const float>(shifted), a.slice(0, 63)), rs::invalid_argument);
  EXPECT_THROW(rs::copy_async(a.slice(0, 63), shifted), rs::invalid_argument);
  EXPECT_THROW(rs::copy_async(a.slice(3, 61), std::span<float>(a.data(), 61)), rs::invalid_argument);
  try {
    rs::copy_async(std::span<const float>(a.data() + 2, 62), a.slice(0, 62));
    ADD_FAILURE() << "an overlapping upload ran";
  } catch (const rs::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("overlap"), std::string::npos) << e.what();
  }
  EXPECT_EQ(l.delta().h2d_copies + l.delta().d2h_copies, 0u);  // refused before it was counted
  std::vector<float> back(64);
  std::copy_n(a.data(), 64, back.begin());
  EXPECT_EQ(back, h);
  rs::copy(std::span<const float>(a.data(), 64), a);  // the same memory: nothing moves
  EXPECT_EQ(a.to_host(), h);
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

// Zero rows or columns, with or without padding: nothing allocated that is not needed, every call
// works and gives nothing; a padded array's elements come back without the padding.
TEST_P(arrays, two_dimensional_arrays_of_nothing_and_padded_ones) {
  for (auto [rows, cols, ld] : {std::tuple<std::size_t, std::size_t, std::size_t>{0, 5, 0}, {0, 5, 8}, {4, 0, 0},
                                {4, 0, 3}, {0, 0, 0}}) {
    SCOPED_TRACE(std::to_string(rows) + " x " + std::to_string(cols) + " ld " + std::to_string(ld));
    rs::array2d<float> m(rows, cols, dev, ld);
    EXPECT_EQ(m.size(), 0u);
    EXPECT_EQ(m.rows(), rows);
    EXPECT_EQ(m.cols(), cols);
    EXPECT_EQ(m.storage().size(), rows * (ld ? ld : cols));
    EXPECT_TRUE(m.to_host().empty());
    EXPECT_EQ(m.view().rows(), rows);
  }
  EXPECT_EQ(rs::to_device(std::span<const float>(), 0, 7, dev).rows(), 0u);
  EXPECT_EQ(rs::to_device(std::span<const float>(), 7, 0, dev).cols(), 0u);
  EXPECT_THROW(rs::to_device(std::span<const float>(), 1, 1, dev), rs::shape_mismatch);
  // A padded array: to_host drops the padding.
  rs::array2d<int> p(3, 2, dev, 5);
  std::vector<int> all(15);
  std::iota(all.begin(), all.end(), 0);
  rs::copy(std::span<const int>(all), p.storage());
  EXPECT_EQ(p.to_host(), (std::vector<int>{0, 1, 5, 6, 10, 11}));
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
RESIDENT_BACKENDS(arrays);
RESIDENT_BACKENDS(pool);
RESIDENT_BACKENDS(ledger);
RESIDENT_CUDA_ONLY(peer);  // peer copies join two GPUs; the CPU case is slices_copy_and_overlap

}  // namespace
