#include <cstring>
#include <algorithm>
#include <numeric>

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
    rs::array2d_view<int> m(v.data(), 2, 2, 2);
    EXPECT_DEATH(m(0, 2), "index 2 out of bounds for extent 2");
  }
}

RESIDENT_BACKENDS(timings);
RESIDENT_BACKENDS(arrays);
RESIDENT_BACKENDS(pool);
RESIDENT_BACKENDS(ledger);

}  // namespace
